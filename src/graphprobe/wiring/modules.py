"""L0 wiring: module inputs and outputs.

Every submodule whose ``{path}.{ClassName}`` contains a ``statistics.list``
keyword gets a forward pre-hook (positional and keyword inputs) and a forward
hook (outputs). Records are named ``Module.{path}.{ClassName}.forward.{n}``;
the root model is not listed. Hooks are added before compile or capture, so
dynamo traces them inline and the probe ops become part of the graph.

Each record also carries the module's own parameters (not its children's)
in msprobe's ``parameters`` part, probed with the inputs: a changed weight
then explains a changed output in compare, as it does for msprobe's dumps.

Keyword inputs are recorded in the order of the module's ``forward``
signature (extra ``**kwargs`` keys after them, sorted by name), because
dynamo may hand a hook the keywords in another order than eager mode does.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch.utils.hooks import RemovableHandle

from graphprobe.wiring import backward, own_calls
from graphprobe.wiring.dynamo_frames import with_own_code
from graphprobe.wiring.probe import matches, probe_inputs, probe_output, safe_text
from graphprobe.wiring.symbolic import concrete_numbers

__all__ = ["ModuleWiring"]


class ModuleWiring:
    """Hooks on the selected submodules of one model; :meth:`remove` undoes them."""

    def __init__(self, model: torch.nn.Module, keywords: tuple[str, ...], grads: bool = False) -> None:
        self._handles: list[RemovableHandle] = []
        self.entries: list[str] = []
        self.hooked: list[torch.nn.Module] = []  # the modules that carry hooks, in entries' order
        # grads: backward records and parameter gradients (wiring/backward.py)
        self.param_grads: backward.ParamGradRecorder | None = None
        selected: list[tuple[str, torch.nn.Module]] = []
        for path, module in model.named_modules():
            if not path:
                continue  # msprobe does not list the root model
            cls = type(module).__name__
            if not matches(f"{path}.{cls}", keywords):
                continue
            entry = safe_text(f"Module.{path}.{cls}.forward.{{n}}")
            self.entries.append(entry)
            selected.append((safe_text(f"Module.{path}.{cls}"), module))
            self.hooked.append(module)
            grad_entry = backward.backward_entry(entry) if grads else None
            # Each module's hooks get their own code object (dynamo_frames.py).
            pre_hook = with_own_code(_pre_hook(entry, _keyword_order(module), grad_entry))
            post_hook = with_own_code(_post_hook(entry, grad_entry))
            self._handles.append(module.register_forward_pre_hook(pre_hook, with_kwargs=True))
            self._handles.append(module.register_forward_hook(post_hook, with_kwargs=True))
        if grads:
            self.param_grads = backward.ParamGradRecorder(selected)

    def remove(self) -> None:
        """Removes every hook this wiring added."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        if self.param_grads is not None:
            self.param_grads.remove()


def _keyword_order(module: torch.nn.Module) -> tuple[str, ...]:
    """The parameter names of ``module.forward``, in signature order."""
    try:
        return tuple(inspect.signature(module.forward).parameters)
    except (TypeError, ValueError):
        return ()


def _pre_hook(entry: str, names: tuple[str, ...], grad_entry: str | None) -> Any:
    def hook(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        own_calls.enter()  # the probes' own torch calls are not the user's (tensor.custom_api)
        try:
            return _inputs(module, args, kwargs)
        finally:
            own_calls.leave()

    def _inputs(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if backward.in_recomputation():
            return None  # activation checkpointing's recomputation: not a call of the program
        original_args, original_kwargs = args, kwargs
        if len(kwargs) > 1:
            ordered = {name: kwargs[name] for name in names if name in kwargs}
            for name in sorted(k for k in kwargs if k not in ordered):
                ordered[name] = kwargs[name]
            kwargs = ordered
        parameters = {name: p for name, p in module._parameters.items() if p is not None}
        if torch.compiler.is_compiling():  # dynamic=True: sizes and number attributes may be symbolic
            args, kwargs = concrete_numbers(args), concrete_numbers(kwargs)
        site = probe_inputs(entry, args, kwargs, parameters)
        if grad_entry is not None and torch.is_grad_enabled():
            # Linked to this forward call: the backward record takes its {n}.
            wrapped = backward.wrap_inputs(grad_entry, original_args, site)
            if wrapped is not None:
                return wrapped, original_kwargs
        return None

    return hook


def _post_hook(entry: str, grad_entry: str | None) -> Any:
    def hook(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> Any:
        own_calls.enter()
        try:
            return _output(output)
        finally:
            own_calls.leave()

    def _output(output: Any) -> Any:
        if backward.in_recomputation():
            return None
        probe_output(entry, concrete_numbers(output) if torch.compiler.is_compiling() else output)
        if grad_entry is not None and torch.is_grad_enabled():
            return backward.wrap_output(grad_entry, output)
        return None

    return hook

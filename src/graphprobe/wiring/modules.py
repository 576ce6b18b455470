"""L0 wiring: module inputs and outputs.

Every submodule whose ``{path}.{ClassName}`` contains a ``statistics.list``
keyword gets a forward pre-hook (positional and keyword inputs) and a forward
hook (outputs). Records are named ``Module.{path}.{ClassName}.forward.{n}``;
the root model is not listed. Hooks are added before compile or capture, so
dynamo traces them inline and the probe ops become part of the graph.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.hooks import RemovableHandle

from graphprobe.wiring.probe import matches, probe_inputs, probe_output

__all__ = ["ModuleWiring"]


class ModuleWiring:
    """Hooks on the selected submodules of one model; :meth:`remove` undoes them."""

    def __init__(self, model: torch.nn.Module, keywords: tuple[str, ...]) -> None:
        self._handles: list[RemovableHandle] = []
        self.entries: list[str] = []
        for path, module in model.named_modules():
            if not path:
                continue  # msprobe does not list the root model
            cls = type(module).__name__
            if not matches(f"{path}.{cls}", keywords):
                continue
            entry = f"Module.{path}.{cls}.forward.{{n}}"
            self.entries.append(entry)
            self._handles.append(module.register_forward_pre_hook(_pre_hook(entry), with_kwargs=True))
            self._handles.append(module.register_forward_hook(_post_hook(entry), with_kwargs=True))

    def remove(self) -> None:
        """Removes every hook this wiring added."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()


def _pre_hook(entry: str) -> Any:
    def hook(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        probe_inputs(entry, args, kwargs)

    return hook


def _post_hook(entry: str) -> Any:
    def hook(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
        probe_output(entry, output)

    return hook

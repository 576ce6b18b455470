"""What ``torch.compile`` already holds for a model when it is wired.

Dynamo keeps compiled code on the code objects it compiled (for a module:
its class's ``forward``) and, by default, does not guard that code on module
hooks. Code compiled before ``start()`` therefore has no probes and is reused
after wiring (when the model is called through the same ``torch.compile``
wrapper): every step would record nothing. ``start()`` turns hook guards on
(:func:`guard_module_hooks`) so that code compiled from then on is recompiled
for wired models, and drops the code compiled before for the model's classes
(:func:`drop_unguarded_compiled_forwards`), so that the next call recompiles
with the probes.
"""

from __future__ import annotations

import torch

__all__ = ["RecompileBudget", "drop_unguarded_compiled_forwards", "guard_module_hooks", "hooked_instances_per_class"]


def guard_module_hooks() -> bool:
    """Turns on dynamo's guards on module hooks, process-wide
    (``torch._dynamo.config.skip_nnmodule_hook_guards = False``): code
    compiled for an unwired instance is then not reused for a wired one.

    Returns whether they were off until now, i.e. whether code compiled so far
    can have been compiled without them.
    """
    config = torch._dynamo.config
    # getattr with a default: a torch without this option (or with it hidden)
    # has nothing to turn on here.
    was_off = bool(getattr(config, "skip_nnmodule_hook_guards", False))
    if was_off:
        config.skip_nnmodule_hook_guards = False
    return was_off


def _cache_entries(code: object) -> int:
    # A private dynamo function (torch 2.1+); without it nothing is detected
    # and the step-time warning is the only signal.
    try:
        from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list
    except ImportError:
        return 0
    try:
        return len(_debug_get_cache_entry_list(code))
    except (TypeError, RuntimeError):
        return 0


def drop_unguarded_compiled_forwards(model: torch.nn.Module) -> tuple[list[str], bool]:
    """Finds the module classes of ``model`` (the root included) whose
    ``forward`` dynamo holds compiled code for, and drops that code.

    Call it only when :func:`guard_module_hooks` returned True: the code was
    then compiled without hook guards and would run without probes. Other
    instances of those classes recompile once, on their next compiled call.

    Returns the ``Class.forward`` names found and whether they were dropped
    (False when this torch has no ``reset_code``).
    """
    reset_code = getattr(torch._dynamo.eval_frame, "reset_code", None)
    found: list[str] = []
    seen: set[type] = set()
    for module in model.modules():
        cls = type(module)
        if cls in seen:
            continue
        seen.add(cls)
        code = getattr(getattr(cls, "forward", None), "__code__", None)
        if code is not None and _cache_entries(code):
            found.append(f"{cls.__qualname__}.forward")
            if reset_code is not None:
                reset_code(code)
    return found, reset_code is not None


def hooked_instances_per_class(model: torch.nn.Module, wired: list[torch.nn.Module]) -> int:
    """The largest number of instances of one module class in ``model`` whose
    ``forward`` calls a wired module (``wired``: the modules that carry hooks).

    Such a ``forward``, compiled as a frame of its own (called from code that
    runs eagerly between graphs, e.g. an MoE's loop over experts), inlines its
    children's hooks, and those differ per instance: dynamo compiles a variant
    per instance where an unwired model needs one (:class:`RecompileBudget`).
    """
    wired_ids = {id(m) for m in wired}
    counts: dict[type, int] = {}
    for module in model.modules():
        if any(id(child) in wired_ids for child in module.modules() if child is not module):
            counts[type(module)] = counts.get(type(module), 0) + 1
    return max(counts.values(), default=0)


class RecompileBudget:
    """Raises dynamo's recompile limits so that wired instances compile as the
    unwired model does; :meth:`remove` puts the user's limits back.

    Dynamo stops compiling a code object after
    ``torch._dynamo.config.recompile_limit`` (8) variants and runs later calls
    uncompiled. Wired, each instance of a class whose ``forward`` is compiled
    as its own frame needs a variant of its own (its children's hooks record
    under its own names): an MoE with more than 8 experts called from eager
    code ran the 9th expert on in eager mode, so a fault of the compiled
    code vanished there. Each instance gets the user's limit for itself: the
    limits are multiplied by the number of instances, process-wide, while the
    model is wired. Nothing changes where no class has more than one
    instance above a wired module.
    """

    def __init__(self, instances: int) -> None:
        self._set: dict[str, tuple[int, int]] = {}  # option -> (user's value, ours)
        config = torch._dynamo.config
        if instances < 2:
            return
        for option in ("recompile_limit", "accumulated_recompile_limit"):
            user = getattr(config, option, None)  # absent in an older torch: nothing to raise
            if isinstance(user, int) and user > 0:
                ours = user * instances
                setattr(config, option, ours)
                self._set[option] = (user, ours)

    def remove(self) -> None:
        """Puts back each limit this budget raised, unless someone changed it since."""
        config = torch._dynamo.config
        for option, (user, ours) in self._set.items():
            if getattr(config, option, None) == ours:
                setattr(config, option, user)
        self._set.clear()

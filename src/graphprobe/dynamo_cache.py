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

__all__ = ["drop_unguarded_compiled_forwards", "guard_module_hooks"]


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

"""What ``torch.compile`` already holds for a model when it is wired.

Dynamo keeps compiled code on the code objects it compiled (for a module:
its class's ``forward``) and, by default, does not guard that code on module
hooks. Code compiled before ``start()`` therefore has no probes and is reused
after wiring: every step would record nothing. ``start()`` turns hook guards
on (:func:`guard_module_hooks`) so that code compiled from then on is
recompiled for wired models, and warns about code compiled before
(:func:`unguarded_compiled_forwards`).
"""

from __future__ import annotations

import torch

__all__ = ["guard_module_hooks", "unguarded_compiled_forwards"]


def guard_module_hooks() -> bool:
    """Turns on dynamo's guards on module hooks, process-wide
    (``torch._dynamo.config.skip_nnmodule_hook_guards = False``): code
    compiled for an unwired instance is then not reused for a wired one.

    Returns whether they were off until now, i.e. whether code compiled so far
    can have been compiled without them.
    """
    config = torch._dynamo.config
    was_off = bool(config.skip_nnmodule_hook_guards)
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


def unguarded_compiled_forwards(model: torch.nn.Module) -> list[str]:
    """``Class.forward`` of each module class in ``model`` (the root
    included) for which dynamo holds compiled code. Call it only when
    :func:`guard_module_hooks` returned True: that code was then compiled
    without hook guards and would run without probes."""
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
    return found

"""How dynamo treats the frames of graphprobe's own hooks when they run as
frames of their own: called from code that runs eagerly between graphs (after
a graph break), not inlined into a trace."""
from __future__ import annotations

import types
from typing import Any, Callable, TypeVar

__all__ = ["run_eagerly_from_eager_code", "with_own_code"]

F = TypeVar("F", bound=Callable[..., Any])


def with_own_code(fn: F) -> F:
    """A copy of ``fn`` (same closure, globals and defaults) with a code
    object of its own.

    Dynamo keeps its compiled variants per code object and stops compiling
    one after ``torch._dynamo.config.recompile_limit`` (8) variants. A hook
    made by one factory for every module shares one code object, and its
    variants differ per module (dynamo guards on the entry name in its
    closure). Hooks run as frames of their own when the module is called
    from code that runs eagerly (after a graph break: an MoE's loop over
    experts); a model with more than 8 such modules then ran the rest of
    its hooks uncompiled, and their backward probes reached the call
    assembly out of the compiled order (duplicate backward entries, records
    under the wrong call). One code object per module gives each its own
    budget."""
    code = fn.__code__.replace(co_name=fn.__code__.co_name)
    copy = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__ = fn.__qualname__
    copy.__doc__ = fn.__doc__
    copy.__dict__.update(fn.__dict__)
    return copy  # type: ignore[return-value]


def run_eagerly_from_eager_code(fn: Callable[..., Any]) -> None:
    """Dynamo runs ``fn``'s frames, and everything they call, without
    compiling them when eager code calls it; traced code still inlines it.

    For the API mode's ``__torch_function__``: a torch call made by code that
    runs eagerly between graphs (a loop over experts) reached it as a frame
    of its own, which dynamo compiled per function and argument types, up to
    its recompile limit, and then ran uncompiled. The compiled variants were
    reused for later calls with their sites fixed at trace time (backward
    records of 8 calls under one name), and one failed to trace
    (``IndexError`` in dynamo's run of ``tensor[rows, None]``). Eager code's
    torch calls run eagerly, as in eager mode, and so do their probes.
    Without the dynamo API (another torch), nothing changes."""
    try:
        from torch._dynamo.eval_frame import FrameAction, FrameExecStrategy, set_code_exec_strategy
    except ImportError:
        return
    set_code_exec_strategy(fn.__code__, FrameExecStrategy(FrameAction.SKIP, FrameAction.SKIP))

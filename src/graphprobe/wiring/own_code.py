"""Hooks with a code object of their own, so that dynamo compiles each
module's hooks within its own budget."""
from __future__ import annotations

import types
from typing import Any, Callable, TypeVar

__all__ = ["with_own_code"]

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

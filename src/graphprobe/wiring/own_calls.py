"""Whether graphprobe's own code runs on this thread (its hooks, probes and
gradient probes), so that a ``tensor.custom_api`` wrapper records only the
user's calls: the probes call torch themselves (``torch.compiler.is_compiling``,
``torch.empty``, ``Tensor.values``), and docs/formats.md promises that those
calls are not recorded.

A thread-local depth, entered and left with ``try``/``finally`` by each entry
point of graphprobe's code: dynamo traces the attribute reads and writes of
a ``threading.local`` without a graph break, so traced hooks set it at trace
time as eager ones do at run time, and a wrapper traced inside a hook runs
the original API without probes.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

__all__ = ["enter", "inside", "leave", "outside"]

class _State(threading.local):
    """The depth, 0 on every thread until entered. Set when each thread first
    touches the state rather than on the first ``enter()``: dynamo guards on
    whether the attribute is in the instance's dict, so code traced before the
    first ``enter()`` was recompiled after it."""

    def __init__(self) -> None:
        self.depth = 0


_state = _State()


def inside() -> bool:
    """Whether graphprobe's own code is running on this thread."""
    return getattr(_state, "depth", 0) > 0


def enter() -> None:
    """Marks the start of graphprobe's own code (pair with :func:`leave` in a ``finally``)."""
    _state.depth = getattr(_state, "depth", 0) + 1


def leave() -> None:
    """Marks the end of what :func:`enter` started."""
    _state.depth = getattr(_state, "depth", 1) - 1


def outside(function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Calls the user's ``function`` from inside graphprobe's code as the
    user's own call (an API that a probe wraps: its inner calls are the
    user's)."""
    depth = getattr(_state, "depth", 0)
    _state.depth = 0
    try:
        return function(*args, **kwargs)
    finally:
        _state.depth = depth

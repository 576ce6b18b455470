"""TorchScript functions called by a wired model, recorded as eager mode records them.

Eager mode runs a ``@torch.jit.script`` function in the TorchScript
interpreter, which never calls a torch-function mode: the API calls inside it
are not recorded (msprobe's eager dumper, which patches the Python-level
APIs, records none of them either). Dynamo instead inlines the function's
Python source (its ``_torchdynamo_inline`` attribute), where the L1 mode would
record every call: the compiled record list then held calls that eager's
lacks, and every later call of the same API was numbered differently, so
compare paired unrelated calls (DeBERTa-v2's relative-position helpers).

While an L1 wiring is installed, each scripted function reachable from the
modules that define the model's classes is inlined with API recording
paused (:func:`paused`), so compiled code records what eager code records:
the function's call is not an API, and its inner calls are not recorded.
"""

from __future__ import annotations

import functools
import sys
import threading
import types
from typing import Any, Callable

import torch

__all__ = ["ScriptInlining", "paused"]


class _State(threading.local):
    """How deep this thread is inside inlined scripted functions. A
    ``threading.local`` because dynamo traces its reads and writes without a
    graph break (as own_calls.py's state)."""

    def __init__(self) -> None:
        self.depth = 0


_state = _State()

# id(scripted function) -> (the function, held so that its id stays its
# own; its own _torchdynamo_inline; wirings using the replacement).
# Process-wide because the attribute patched is process-wide:
# two dumpers wiring models of one modeling file share each replacement, and
# the last one removed puts the original back.
_patched: dict[int, tuple[Any, Callable[..., Any], int]] = {}


def paused() -> bool:
    """Whether API recording is paused: traced code inside a scripted function."""
    return _state.depth > 0


def _paused_inline(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def inline(*args: Any, **kwargs: Any) -> Any:
        _state.depth += 1
        try:
            return original(*args, **kwargs)
        finally:
            _state.depth -= 1

    return inline


def _scripted_functions(model: torch.nn.Module) -> list[Any]:
    """The scripted functions among the globals of the Python modules that
    define the model's module classes (and their bases), and of the modules
    whose source those functions come from."""
    names = {cls.__module__ for m in model.modules() for cls in type(m).__mro__}
    spaces = [vars(sys.modules[n]) for n in sorted(names) if n in sys.modules and not n.startswith("torch.")]
    found: dict[int, Any] = {}
    seen: set[int] = set()
    while spaces:
        space = spaces.pop()
        if id(space) in seen:
            continue
        seen.add(id(space))
        for value in list(space.values()):
            if isinstance(value, torch.jit.ScriptFunction) and id(value) not in found:
                inline = getattr(value, "_torchdynamo_inline", None)
                if isinstance(inline, types.FunctionType):
                    found[id(value)] = value
                    spaces.append(inline.__globals__)
    return list(found.values())


class ScriptInlining:
    """Replaces, until :meth:`remove`, the ``_torchdynamo_inline`` of the
    scripted functions that ``model``'s modeling code can call by a version
    that pauses API recording while it runs."""

    def __init__(self, model: torch.nn.Module) -> None:
        self._functions: list[Any] = []
        for fn in _scripted_functions(model):
            key = id(fn)
            if key in _patched:
                held, original, users = _patched[key]
                _patched[key] = (held, original, users + 1)
            else:
                original = fn._torchdynamo_inline
                fn._torchdynamo_inline = _paused_inline(original)
                _patched[key] = (fn, original, 1)
            self._functions.append(fn)

    def remove(self) -> None:
        """Puts each function's own ``_torchdynamo_inline`` back when no other wiring uses the replacement."""
        functions, self._functions = self._functions, []
        for fn in functions:
            held, original, users = _patched[id(fn)]
            if users > 1:
                _patched[id(fn)] = (held, original, users - 1)
            else:
                del _patched[id(fn)]
                fn._torchdynamo_inline = original

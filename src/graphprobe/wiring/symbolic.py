"""Symbolic numbers in the values a probe describes.

Under ``torch.compile(dynamic=True)`` a size (``x.shape[1]``) or a number
attribute of a module (``nn.Embedding.norm_type``) reaches a hook or the L1
mode as a symbolic number. The probe describes a call's non-tensor values
at trace time, in a constant of the graph (its site), so it cannot take one:
dynamo broke the graph inside graphprobe's code, hit its recompile limit on
the probe functions and split the calls into several records.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import guard_scalar

from graphprobe.wiring.probe import MAX_DEPTH

try:  # dynamo evaluates both without guarding on a data-dependent value
    from torch.fx.experimental.symbolic_shapes import guard_or_false, guard_or_true
except ImportError:  # an older torch: every symbolic number is guarded on
    guard_or_false = guard_or_true = None  # type: ignore[assignment]

__all__ = ["concrete_numbers"]

_NUMBERS = (bool, int, float)


class _Unknown:
    """A data-dependent number (``x.sum().item()`` with
    ``capture_scalar_outputs``): it has no value while tracing and none to
    guard on, so the probe records its type only."""

    __slots__ = ()


# Named as the symbolic types whose values they stand for: dump.json shows
# {"type": "SymInt"} (docs/formats.md).
_UNKNOWN = {kind: type(f"Sym{kind.__name__.capitalize()}", (_Unknown,), {"__slots__": ()})() for kind in _NUMBERS}


def _data_dependent(value: bool | int | float) -> bool:
    """Whether ``value`` is symbolic without a value to guard on (unbacked).
    Plain numbers and sizes with a hint are not. Traced only."""
    if guard_or_false is None or guard_or_true is None:
        return False
    known = value if type(value) is bool else value == 0
    # Decidable (a constant, or a size with a hint: guarded) -> both agree.
    return guard_or_false(known) != guard_or_true(known)


def concrete_numbers(value: Any, depth: int = 0) -> Any:
    """``value`` with its numbers as plain Python numbers; call it only
    while dynamo traces.

    ``guard_scalar`` is dynamo's own rule for a symbolic number that the
    program needs as a value: it becomes a constant of the graph and dynamo
    guards on it. The record then holds the value that eager mode records; a
    size passed as a call's argument recompiles when it changes, sizes that
    only shape tensors stay symbolic. A data-dependent number cannot be
    guarded on (dynamo would fail the trace) and is recorded by its type.
    Tensors are left alone; tuples come back as tuples, lists as lists and
    dicts as dicts (the probe's walk treats tuple subclasses as tuples).
    """
    if isinstance(value, torch.Tensor) or depth >= MAX_DEPTH:
        return value
    # By exact type: dynamo reports a symbolic number as a plain int or float,
    # and guard_scalar asserts on subclasses (an IntEnum is constant anyway).
    kind = type(value)
    if kind in _NUMBERS:
        if _data_dependent(value):
            return _UNKNOWN[kind]
        return guard_scalar(value)
    if isinstance(value, tuple):
        return tuple(concrete_numbers(item, depth + 1) for item in value)
    if isinstance(value, list):
        return [concrete_numbers(item, depth + 1) for item in value]
    if isinstance(value, dict):
        return {key: concrete_numbers(item, depth + 1) for key, item in value.items()}
    return value

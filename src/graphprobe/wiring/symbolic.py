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

__all__ = ["concrete_numbers"]

_NUMBERS = (bool, int, float)


def concrete_numbers(value: Any, depth: int = 0) -> Any:
    """``value`` with its numbers as plain Python numbers; call it only
    while dynamo traces.

    ``guard_scalar`` is dynamo's own rule for a symbolic number that the
    program needs as a value: it becomes a constant of the graph and dynamo
    guards on it. The record then holds the value that eager mode records; a
    size passed as a call's argument recompiles when it changes, sizes that
    only shape tensors stay symbolic. Tensors are left alone; tuples come
    back as tuples, lists as lists and dicts as dicts (the probe's walk
    treats tuple subclasses as tuples).
    """
    if isinstance(value, torch.Tensor) or depth >= MAX_DEPTH:
        return value
    # By exact type: dynamo reports a symbolic number as a plain int or float,
    # and guard_scalar asserts on subclasses (an IntEnum is constant anyway).
    if type(value) in _NUMBERS:
        return guard_scalar(value)
    if isinstance(value, tuple):
        return tuple(concrete_numbers(item, depth + 1) for item in value)
    if isinstance(value, list):
        return [concrete_numbers(item, depth + 1) for item in value]
    if isinstance(value, dict):
        return {key: concrete_numbers(item, depth + 1) for key, item in value.items()}
    return value

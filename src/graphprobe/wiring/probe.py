"""Turns one part of a call (its positional inputs, keyword inputs or output)
into probe ops, one per tensor.

This code runs in eager mode on every call, and under ``torch.compile`` or
CUDA graph capture once, while tracing or capturing: it only *inserts*
``graphprobe::record_stats``; the op itself then runs on every execution.
It is written for dynamo to trace without graph breaks: plain recursion over
tuples, lists and dicts, and string building from constants.
"""

from __future__ import annotations

from typing import Any

import torch

from graphprobe._ops import record_stats

# Non-tensor leaves whose values are written into dump.json.
_VALUE_TYPES = (bool, int, float, str, type(None))
_RECORD_SEP = "\x1e"
_FIELD_SEP = "\x1f"


def _walk(value: Any, path: str, tensors: list[tuple[str, torch.Tensor]], extras: list[str]) -> None:
    if isinstance(value, torch.Tensor):
        tensors.append((path, value))
    elif isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            _walk(item, f"{path}.{i}", tensors, extras)
    elif isinstance(value, dict):
        for key, item in value.items():
            _walk(item, f"{path}.{key}", tensors, extras)
    elif isinstance(value, _VALUE_TYPES):
        extras.append(f"{path}{_FIELD_SEP}{type(value).__name__}{_FIELD_SEP}{value}")
    else:
        extras.append(f"{path}{_FIELD_SEP}{type(value).__name__}{_FIELD_SEP}")


def probe_parts(entry: str, parts: tuple[tuple[str, Any], ...]) -> None:
    """Inserts a probe for every tensor of the given parts of one call.

    ``entry`` is the record name template with ``{n}`` for the call index;
    ``parts`` pairs ``input_args``/``input_kwargs``/``output`` with a tuple,
    list or dict. The non-tensor leaves of all the parts travel with the first
    probe, so a part without any tensor (``x.sum(dim=0)``'s kwargs) keeps them.
    """
    tensors: list[tuple[str, torch.Tensor]] = []
    extras: list[str] = []
    for part, value in parts:
        if isinstance(value, dict):
            for key, item in value.items():
                _walk(item, f"{part}.{key}", tensors, extras)
        else:
            for i, item in enumerate(value):
                _walk(item, f"{part}.{i}", tensors, extras)
    first = True
    for place, tensor in tensors:
        record_stats(tensor, entry, place, tensor.requires_grad, _RECORD_SEP.join(extras) if first else "")
        first = False


def probe_inputs(entry: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Probes a call's positional and keyword inputs."""
    probe_parts(entry, (("input_args", args), ("input_kwargs", kwargs)))


def probe_output(entry: str, output: Any) -> None:
    """Probes a call's output (a single value is listed as a one-element list)."""
    probe_parts(entry, (("output", as_output_tuple(output)),))


def as_output_tuple(output: Any) -> Any:
    """msprobe lists a call's output as a list even when it is one value."""
    return output if isinstance(output, (tuple, list)) else (output,)


def matches(name: str, keywords: tuple[str, ...]) -> bool:
    """``statistics.list`` filtering: case-insensitive substring of the name."""
    if not keywords:
        return True
    lowered = name.lower()
    return any(k in lowered for k in keywords)

"""``statistics.summary_mode``: msprobe's key; ``"md5"`` adds a per-tensor
checksum of the tensor's bits to every record (docs/formats.md, "Checksums").

msprobe's eager dumper writes a CRC-32 of the bytes under ``"md5"``;
graphprobe computes its own 64-bit checksum inside the graph, on the device,
and writes it under the same key (16 hex digits, so the two never compare
equal by accident).
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["SUMMARY_MODES", "parse_summary_mode"]

#: The values graphprobe accepts: ``"statistics"`` (the default: Max, Min,
#: Mean, Norm) and ``"md5"`` (those and the checksum). msprobe's ``"xor"``
#: is not supported.
SUMMARY_MODES = ("statistics", "md5")

_Factory = Callable[[str, Any, str], Exception]


def parse_summary_mode(value: Any, where: str, errors: tuple[_Factory, _Factory]) -> str:
    """The validated mode; ``errors`` are the config's (type error, value
    error) factories, called with (where, value, allowed)."""
    type_error, value_error = errors
    if not isinstance(value, str):
        raise type_error(where, value, f"one of {list(SUMMARY_MODES)}")
    if value not in SUMMARY_MODES:
        raise value_error(where, value, f"one of {list(SUMMARY_MODES)}")
    return value

"""dump.json -> history rows: one row per tensor record (docs/history.md, "Rows").

A row's ``record`` is the entry name and the place of the tensor in it,
joined by dots: ``Module.fc1.Linear.forward.0.input_args.0``,
``Module.fc1.Linear.parameters_grad.0.weight.0``. ``ord`` is the tensor's
position in the step's program order (the order of dump.json's ``data``),
which is what "first" means within one step.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["COLUMNS", "STATS", "StepRows", "checksum_to_int", "read_dump_json", "rows_from_dump"]

#: The statistics a row holds, as dump.json names them.
STATS = ("Max", "Min", "Mean", "Norm")

#: The history's columns, in file order.
COLUMNS = ("step", "rank", "ord", "record", "dtype", "Max", "Min", "Mean", "Norm", "checksum")


@dataclass
class StepRows:
    """One step's rows of one rank, column by column."""

    step: int
    rank: int
    record: list[str] = field(default_factory=list)
    dtype: list[str | None] = field(default_factory=list)
    stats: dict[str, list[float | None]] = field(default_factory=lambda: {s: [] for s in STATS})
    checksum: list[int | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.record)


def checksum_to_int(value: Any) -> int | None:
    """dump.json's ``md5`` (16 hex digits, docs/formats.md "Checksums") as a
    signed 64-bit integer (8 bytes in the file), or None where absent."""
    if value is None:
        return None
    if not isinstance(value, str) or not re.fullmatch(r"[0-9a-f]{16}", value):
        raise ValueError(f"md5 {value!r}: expected 16 lowercase hex digits (graphprobe's 64-bit checksum)")
    n = int(value, 16)
    return n - (1 << 64) if n >= 1 << 63 else n


def _number(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):  # a bool tensor's Max/Min (True/False), as 1.0/0.0
        return float(value)
    if not isinstance(value, (int, float)):
        raise ValueError(f"{where}: expected a number or null, got {value!r}")
    return float(value)


def _walk(node: Any, path: str, out: StepRows) -> None:
    if isinstance(node, dict):
        if "Max" in node or node.get("type") == "torch.Tensor":
            out.record.append(path)
            out.dtype.append(node.get("dtype"))
            for s in STATS:
                out.stats[s].append(_number(node.get(s), f"{path}.{s}"))
            out.checksum.append(checksum_to_int(node.get("md5")))
            return
        for key, value in node.items():
            _walk(value, f"{path}.{key}", out)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _walk(value, f"{path}.{i}", out)


def rows_from_dump(doc: dict[str, Any], step: int, rank: int, where: str = "dump.json") -> StepRows:
    """The rows of one parsed dump.json document (its ``data`` object)."""
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, dict):
        raise ValueError(f"{where}: no 'data' object (a graphprobe/msprobe statistics dump.json has one)")
    out = StepRows(step=step, rank=rank)
    for name, entry in data.items():
        _walk(entry, name, out)
    return out


def read_dump_json(path: str | os.PathLike[str], step: int, rank: int) -> StepRows:
    """The rows of the dump.json at ``path`` (NaN and Infinity as Python reads them)."""
    with open(path, encoding="utf-8-sig") as f:
        doc = json.load(f)
    return rows_from_dump(doc, step, rank, where=os.fspath(path))


def is_finite(value: float | None) -> bool:
    """True for a number that is neither NaN nor infinite (None counts as finite: no value)."""
    return value is None or math.isfinite(value)

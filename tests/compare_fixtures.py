"""Hand-written dump.json builders for the compare tests (no torch)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any, Callable

NAN = math.nan
INF = math.inf


def tensor(
    norm: float | None = 1.0,
    *,
    mx: float | None = 1.0,
    mn: float | None = -1.0,
    mean: float | None = 0.0,
    dtype: str = "torch.float32",
    shape: list[int] | None = None,
    requires_grad: bool | None = False,
) -> dict[str, Any]:
    rec: dict[str, Any] = {"type": "torch.Tensor", "dtype": dtype, "shape": shape if shape is not None else [2, 3]}
    rec.update({"Max": mx, "Min": mn, "Mean": mean, "Norm": norm})
    if requires_grad is not None:
        rec["requires_grad"] = requires_grad
    return rec


def entry(inputs: list[Any] | None = None, outputs: list[Any] | None = None, kwargs: dict[str, Any] | None = None):
    return {"input_args": inputs or [], "input_kwargs": kwargs or {}, "output": outputs or []}


def dump_doc(data: dict[str, Any]) -> dict[str, Any]:
    return {"task": "statistics", "level": "L0", "framework": "pytorch", "dump_data_dir": None, "data": data}


def write_dump(path: Path, data: dict[str, Any]) -> Path:
    """Writes dump.json the way Python's json does (NaN/Infinity literals)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dump_doc(data), indent=1))
    return path


def simple_model_dump(scale: float = 1.0, diverge_at: int | None = None) -> dict[str, Any]:
    """Three chained entries; from ``diverge_at`` on, norms are multiplied by ``scale``."""
    data = {}
    norm = 2.0
    for i in range(3):
        n_in = norm
        n_out = norm + 1.0
        s_in = scale if diverge_at is not None and i > diverge_at else 1.0
        s_out = scale if diverge_at is not None and i >= diverge_at else 1.0
        data[f"Module.layers.{i}.Linear.forward.0"] = entry([tensor(n_in * s_in)], [tensor(n_out * s_out)])
        norm = n_out
    return data


def csv_disagreements(
    ours: list[dict[str, str]], theirs: list[dict[str, str]], same: dict[str, Callable[[str, str], bool]]
) -> list[str]:
    """Every way in which our compare CSV rows differ from msprobe's rows,
    one line each: a row of theirs that ours lack, and every cell of a column
    in ``same`` that its judge finds different. (Rows only ours have are the
    caller's to judge: ours list bench-only tensors, msprobe's may not.)"""
    by_name = {r["NPU Name"]: r for r in ours}
    out: list[str] = []
    for ref in theirs:
        name = ref["NPU Name"]
        row = by_name.get(name)
        if row is None:
            out.append(f"{name}: missing from our CSV")
            continue
        out += [f"{name} {c}: {row[c]!r} vs msprobe {ref[c]!r}" for c, judge in same.items() if not judge(row[c], ref[c])]
    return out


def cli(capsys: Any, *args: str) -> tuple[int, str, str]:
    """Runs ``graphprobe ARGS`` in this process: (exit code, stdout, stderr)."""
    from graphprobe.cli import main

    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def read_csv(path: Path) -> list[dict[str, str]]:
    """A compare CSV as one dict per row."""
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))

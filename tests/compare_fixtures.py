"""Hand-written dump.json builders for the compare tests (no torch)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

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

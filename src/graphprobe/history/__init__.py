"""graphprobe's history of a long run (docs/history.md).

Every step's statistics, per rank, in Parquet files that DuckDB (embedded)
or Dask read selectively by rank and step:

* :mod:`~graphprobe.history.records` -- dump.json -> rows (one per tensor record).
* :mod:`~graphprobe.history.writer` -- :class:`HistoryWriter` (rows -> Parquet,
  every N steps) and :func:`build_history` (existing ``step*/rank*/dump.json``
  folders -> a history).
* :mod:`~graphprobe.history.rules` -- the anomaly rule (NaN/Inf, msprobe
  monitor's deviation from the running mean).
* :mod:`~graphprobe.history.query` -- the questions of a long run, with DuckDB.
* :mod:`~graphprobe.history.dask_query` -- the same questions with Dask.
* :mod:`~graphprobe.history.report` -- a self-contained HTML report.
* :mod:`~graphprobe.history.recorder` -- :class:`FlightRecorder`: the history
  written during training, full dumps kept around a trigger.
* :mod:`~graphprobe.history.replicas` -- :class:`ReplicaChecker`: the rank
  whose data-parallel replica disagrees, by checksum, every step.

Attributes are imported on first use (pyarrow, duckdb and dask are optional:
``pip install 'graphprobe[history]'``; from a source checkout ``bash scripts/setup_env.sh --tools``).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "AnomalyRule",
    "FlightRecorder",
    "HistoryWriter",
    "ReplicaChecker",
    "ReplicaMismatch",
    "build_history",
    "tensor_checksum",
]

_LAZY = {
    "AnomalyRule": "graphprobe.history.rules",
    "FlightRecorder": "graphprobe.history.recorder",
    "HistoryWriter": "graphprobe.history.writer",
    "build_history": "graphprobe.history.writer",
    "ReplicaChecker": "graphprobe.history.replicas",
    "ReplicaMismatch": "graphprobe.history.replicas",
    "tensor_checksum": "graphprobe.history.replicas",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'graphprobe.history' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

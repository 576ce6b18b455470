"""Independent references for the history tests: synthetic histories and
the anomaly rule, movers and per-step statistics by brute force in float64
(plain Python loops, no DuckDB, no pandas)."""

from __future__ import annotations

import math
import random
from pathlib import Path

from graphprobe.history.records import STATS, StepRows
from graphprobe.history.writer import HistoryWriter


def synthetic(path: Path, ranks: int, steps: int, records: int, seed: int = 0, every: int = 7,
              plant: dict[tuple[int, int, int], float] | None = None) -> dict[tuple[int, str], list[tuple[int, int, float]]]:
    """Writes a history of random-walk records; ``plant[(step, rank, i)] = v``
    sets record i's statistics to v there. Returns {(rank, record): [(step, ord, Norm)]}."""
    rng = random.Random(seed)
    plant = plant or {}
    truth: dict[tuple[int, str], list[tuple[int, int, float]]] = {}
    for rank in range(ranks):
        w = HistoryWriter(path, rank, every=every)
        level = [1.0 + rng.random() * 10 for _ in range(records)]
        for step in range(steps):
            r = StepRows(step, rank)
            for i in range(records):
                level[i] *= 1 + rng.gauss(0, 0.01)
                v = plant.get((step, rank, i), level[i])
                name = f"Module.m{i}.Linear.forward.0.output.0"
                r.record.append(name)
                r.dtype.append("torch.float32")
                for s in STATS:
                    r.stats[s].append(v)
                r.checksum.append(None)
                truth.setdefault((rank, name), []).append((step, i, v))
            w.append(r)
        w.close()
    return truth


def first_anomaly_ref(truth: dict[tuple[int, str], list[tuple[int, int, float]]], k: float, window: int,
                      min_history: int, rtol: float) -> tuple[int, int, str, str] | None:
    """(step, rank, record, kind) of the first flagged value, ordered by (step, ord, rank)."""
    flagged = []
    for (rank, record), series in truth.items():
        for i, (step, ord_, x) in enumerate(series):
            if not math.isfinite(x):
                flagged.append((step, ord_, rank, record, "nonfinite"))
                continue
            prev = [v for _, _, v in series[max(0, i - window):i] if math.isfinite(v)]
            if len(prev) < min_history:
                continue
            mean = math.fsum(prev) / len(prev)
            std = math.sqrt(math.fsum((v - mean) ** 2 for v in prev) / (len(prev) - 1))
            if abs(x - mean) > max(k * std, rtol * abs(mean)):
                flagged.append((step, ord_, rank, record, "deviation"))
    if not flagged:
        return None
    step, _, rank, record, kind = min(flagged)
    return step, rank, record, kind

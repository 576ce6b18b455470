"""The anomaly rule of the history (docs/history.md, "The anomaly rule").

A value leaves its record's history when

* any of its statistics (Max, Min, Mean, Norm) is NaN or infinite
  (``kind = "nonfinite"``), or
* with ``n_prev >= min_history`` finite values among the record's previous
  ``window`` values (same rank), ``|x - mean_prev| > max(k * std_prev,
  rtol * |mean_prev|)`` (``kind = "deviation"``): msprobe monitor's
  deviation from the running mean, measured in standard deviations;
  ``std_prev`` is the sample standard deviation (n - 1). The ``rtol`` floor
  keeps a record that was constant (std 0) from firing on a rounding-level
  change.

The same rule runs in SQL (query.py), on Dask (dask_query.py) and online
during training (recorder.py, :class:`RunningWindow`).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from graphprobe.history.records import STATS

__all__ = ["AnomalyRule", "RunningWindow"]


@dataclass(frozen=True)
class AnomalyRule:
    """Parameters of the rule; ``stat`` is the statistic judged by the deviation rule."""

    k: float = 6.0
    window: int = 20
    min_history: int = 5
    rtol: float = 1e-3
    stat: str = "Norm"

    def __post_init__(self) -> None:
        if self.stat not in STATS:
            raise ValueError(f"anomaly rule: stat {self.stat!r} is not one of {list(STATS)}")
        for name, low in (("window", 2), ("min_history", 2)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"anomaly rule: {name} must be an int >= {low}, got {value!r}")
        if self.min_history > self.window:
            raise ValueError(f"anomaly rule: min_history ({self.min_history}) must be <= window ({self.window})")
        for name in ("k", "rtol"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or math.isinf(value):
                raise ValueError(f"anomaly rule: {name} must be a finite number >= 0, got {value!r}")


class RunningWindow:
    """One record's last ``window`` values (None for a non-finite or missing
    one, which counts as a row but not in the mean, as SQL's NULL), judged as
    each new one comes."""

    __slots__ = ("values",)

    def __init__(self, window: int) -> None:
        self.values: deque[float | None] = deque(maxlen=window)

    def judge(self, x: float | None, rule: AnomalyRule) -> bool:
        """True when ``x`` deviates (the deviation rule only); then adds it."""
        finite = x is not None and math.isfinite(x)
        fired = False
        if finite:
            prev = [v for v in self.values if v is not None]
            n = len(prev)
            if n >= rule.min_history:
                mean = math.fsum(prev) / n
                var = math.fsum((v - mean) ** 2 for v in prev) / (n - 1)
                fired = abs(x - mean) > max(rule.k * math.sqrt(var), rule.rtol * abs(mean))
        self.values.append(x if finite else None)
        return fired

"""The compare engine's native module, ``graphprobe._compare``, loaded on
first use, and the tables it owns: the noise floors and the threshold
defaults (both written once, in C++: csrc/compare/noise_floor.cpp and
csrc/compare/result.h)."""

from __future__ import annotations

import functools
from types import ModuleType

__all__ = ["native", "noise_floor_table", "threshold_defaults"]


def native() -> ModuleType:
    """``graphprobe._compare``, imported on use so that ``graphprobe --help``
    works on a broken install."""
    from graphprobe import _compare

    return _compare


def noise_floor_table() -> list[tuple[str, str, float, float]]:
    """The first-divergence rule's noise floors, one row per dtype class:
    (name, dtypes covered, floor of Mean and Norm, floor of Max and Min), as
    relative errors before ``floor_scale``. The table lives in C++
    (csrc/compare/noise_floor.cpp); docs/formats.md prints it."""
    return list(native().noise_floor_table())


@functools.cache
def _threshold_table() -> tuple[tuple[str, float], ...]:
    return tuple(native().threshold_defaults().items())


def threshold_defaults() -> dict[str, float]:
    """Every threshold's default by ``CompareOptions`` keyword (the nine of
    :class:`~graphprobe.compare.Thresholds`, ``floor_scale`` and
    ``divergence_ratio``), from the engine's one table (csrc/compare/result.h)."""
    return dict(_threshold_table())

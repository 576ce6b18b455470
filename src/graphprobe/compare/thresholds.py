"""The verdict thresholds of a compare, with the engine's defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graphprobe.compare.native import threshold_defaults

__all__ = ["Thresholds", "check_divergence_options", "default"]


def default(name: str) -> Any:
    """The engine's default for threshold ``name`` (csrc/compare/result.h)."""
    return threshold_defaults()[name]


def _engine_default(name: str) -> Any:
    # A factory, not a value: the engine is read when a Thresholds is made,
    # not when graphprobe.compare is imported.
    return field(default_factory=lambda: default(name))


@dataclass(frozen=True)
class Thresholds:
    """Verdict thresholds, in percent of NormRelativeErr (spec defaults).

    * error when every input is below ``input_error_pct`` and an output is
      above ``output_error_pct``;
    * warning when an output is above ``warning_ratio`` times the largest
      input, or above ``warning_pct`` when that is 0;
    * outputs at or below ``noise_pct`` never get the ratio warning: that is
      rounding noise (graphprobe's addition, applied only with
      ``graphprobe_verdicts=True``; msprobe flags it).

    Tensor dumps only (msprobe's real-data rules; values, not percentages):

    * error when every input's One Thousandth Err Ratio is above
      ``thousandth_input_min`` and an output's is below
      ``thousandth_output_max``;
    * warning when every input's Cosine is above ``cosine_input_min`` and an
      output's is lower than the lowest input's by more than ``cosine_drop``.

    With ``tensor_layout="msprobe"`` (the default) these replace the
    NormRelativeErr rules and, as in msprobe, the lowest output value decides
    and the entry's first output row takes the verdict; with
    ``"graphprobe"`` they are added to the statistics rules and each output
    row is judged by its own value.

    The defaults are the engine's (``threshold_defaults()``).
    """

    input_error_pct: float = _engine_default("input_error_pct")
    output_error_pct: float = _engine_default("output_error_pct")
    warning_ratio: float = _engine_default("warning_ratio")
    warning_pct: float = _engine_default("warning_pct")
    noise_pct: float = _engine_default("noise_pct")
    cosine_input_min: float = _engine_default("cosine_input_min")
    cosine_drop: float = _engine_default("cosine_drop")
    thousandth_input_min: float = _engine_default("thousandth_input_min")
    thousandth_output_max: float = _engine_default("thousandth_output_max")


def check_divergence_options(floor_scale: float, divergence_ratio: float) -> None:
    """Raises ValueError naming the option when ``floor_scale`` is not a
    finite number > 0 or ``divergence_ratio`` not a finite number >= 0."""
    if not (isinstance(floor_scale, (int, float)) and 0 < floor_scale < float("inf")):
        raise ValueError(f"floor_scale: got {floor_scale!r}; allowed: a finite number > 0")
    if not (isinstance(divergence_ratio, (int, float)) and 0 <= divergence_ratio < float("inf")):
        raise ValueError(f"divergence_ratio: got {divergence_ratio!r}; allowed: a finite number >= 0")

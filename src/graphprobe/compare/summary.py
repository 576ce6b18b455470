"""Terminal output of ``graphprobe compare``: the summary and a progress bar."""

from __future__ import annotations

import math
import sys
from typing import TextIO

from graphprobe._text import terminal_safe
from graphprobe.compare.outcome import CompareRun

__all__ = ["ProgressBar", "cross_rank_lines", "format_summary"]

_RESULTS = ("pass", "warning", "error", "unmatched")


def _pct(v: float | None) -> str:
    if v is None:
        return "N/A"
    if not math.isfinite(v):
        return "nan" if math.isnan(v) else "inf"
    return f"{v:.4g}%"


def format_summary(run: CompareRun, top: int) -> str:
    """Counts per verdict per pair, each pair's first divergence and its
    ``top`` worst rows, then what had no partner and what failed."""
    lines: list[str] = []
    width = max([len(o.pair.label) for o in run.outcomes] + [4])
    lines.append(f"{'pair':<{width}}  " + "  ".join(f"{r:>9}" for r in _RESULTS) + "  first divergence")
    for o in run.outcomes:
        if o.error is not None:
            lines.append(f"{o.pair.label:<{width}}  FAILED: {o.error}")
            continue
        counts = "  ".join(f"{o.counts.get(r, 0):>9}" for r in _RESULTS)
        lines.append(f"{o.pair.label:<{width}}  {counts}  {o.first_divergence or '-'}")
    lines.extend(cross_rank_lines(run))
    for o in run.outcomes:
        if o.error is not None or not o.worst or top <= 0:
            continue
        lines.append("")
        lines.append(f"{o.pair.label}: first divergence: {o.first_divergence or 'none'}")
        lines.append(f"{o.pair.label}: {len(o.worst)} worst rows:")
        for r in o.worst:
            reason = f"  ({r.reasons[0]})" if r.reasons else ""
            lines.append(f"  {r.result:<8} {_pct(r.norm_rel_err_pct):>10}  {r.name}{reason}")
        if o.csv_path:
            lines.append(f"  csv: {o.csv_path}")
        if o.report_path:
            lines.append(f"  report: {o.report_path}")
    if run.unpaired:
        lines.append("")
        lines.append("without a partner:")
        for u in run.unpaired:
            lines.append(f"  {u.side}: {u.what}  ({u.path})")
    return "\n".join(terminal_safe(line) for line in lines)  # names come from the dumps: no escapes reach the terminal


def cross_rank_lines(run: CompareRun) -> list[str]:
    """For each step compared on several ranks: which ranks diverge, the
    earliest first (by position in execution order), and where."""
    by_step: dict[int | None, list] = {}
    for o in run.outcomes:
        if o.error is None:
            by_step.setdefault(o.pair.step, []).append(o)
    lines: list[str] = []
    for step, outcomes in by_step.items():
        if len(outcomes) < 2:
            continue
        diverged = sorted((o for o in outcomes if o.first_divergence_index is not None),
                          key=lambda o: (o.first_divergence_index, o.pair.rank))
        where = f"step{step}" if step is not None else "all ranks"
        if not diverged:
            lines.append(f"{where}: no rank diverges ({len(outcomes)} ranks)")
            continue
        first = diverged[0]
        ranks = ", ".join(f"rank{o.pair.rank} (#{o.first_divergence_index})" for o in diverged)
        lines.append(f"{where}: {len(diverged)} of {len(outcomes)} ranks diverge; first: rank{first.pair.rank} at "
                     f"{first.first_divergence} (entry #{first.first_divergence_index}); by position: {ranks}")
    if lines:
        lines.insert(0, "")
        lines.insert(1, "across ranks:")
    return lines


class ProgressBar:
    """``[#####.....] 3/8 step0/rank2`` on one line of stderr; silent for a
    single item or when disabled."""

    def __init__(self, total: int, *, enabled: bool = True, stream: TextIO | None = None, width: int = 30) -> None:
        self.total = total
        self.done = 0
        self.enabled = enabled and total > 1
        self.stream = stream if stream is not None else sys.stderr
        self.width = width

    def advance(self, label: str = "") -> None:
        """Marks one more item done and redraws."""
        self.done += 1
        if not self.enabled:
            return
        filled = self.width * self.done // max(self.total, 1)
        label = terminal_safe(label)
        self.stream.write(f"\r[{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} {label:<30.30}")
        if self.done >= self.total:
            self.stream.write("\n")
        self.stream.flush()

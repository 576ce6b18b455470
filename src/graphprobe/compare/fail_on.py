"""``--fail-on``: which outcomes make ``graphprobe compare`` exit with 1, and why.

The levels nest, each failing on everything the previous one fails on:

* ``error``: a row with Result error (except, in a pair whose every row
  the first-divergence rule finds within rounding noise: cancellation
  residues and rows whose entry's inputs moved beyond --input-error-pct by
  their Sketch that msprobe's relative-error rule alone calls error -- a
  residue, such as the gradient of a key projection's bias, differs by tens
  of percent of its own tiny size between two clean runs -- and shapes that
  follow an integer record flipped by rounding); a first divergence of any kind
  (graphprobe's noise-aware rule: a parameter, an output or an input that
  differs beyond rounding noise and beyond what is upstream, see
  docs/formats.md); a pair in which nothing was compared (no row matched:
  two different models, or empty dumps); a side that recorded nothing or far
  fewer records than the other (fewer than half of the larger side's rows
  matched); a step or rank without a partner (a step that recorded nothing
  writes no folder, so a missing step is a side that recorded nothing in it);
* ``unmatched``: also any unmatched row;
* ``warning``: also any row with Result warning (everything but a clean pass).
"""

from __future__ import annotations

from graphprobe.compare.outcome import CompareRun

__all__ = ["FAIL_ON_LEVELS", "fail_on_reasons"]

FAIL_ON_LEVELS = ("error", "unmatched", "warning")


def fail_on_reasons(run: CompareRun, level: str) -> list[str]:
    """Why ``run`` fails ``--fail-on level``; empty when it passes."""
    if level not in FAIL_ON_LEVELS:
        raise ValueError(f"--fail-on: got {level!r}; allowed: {', '.join(FAIL_ON_LEVELS)}")
    strict = FAIL_ON_LEVELS.index(level)
    reasons: list[str] = []
    for o in run.outcomes:
        if o.error is not None:
            continue
        # Rows without a partner count as "unmatched" whatever their Result.
        if o.rows - o.counts.get("unmatched", 0) == 0:
            unmatched = o.counts.get("unmatched", 0)
            why = f"all {unmatched} rows are unmatched (different models? try --fuzzy)" if unmatched else "both dumps are empty"
            reasons.append(f"{o.pair.label}: nothing was compared: {why}")
            if o.coverage is not None and o.coverage.problem and unmatched:
                reasons.append(f"{o.pair.label}: {o.coverage.problem}")
        elif o.coverage is not None and o.coverage.problem:
            reasons.append(f"{o.pair.label}: {o.coverage.problem}")
        if o.divergence is not None:
            reasons.append(f"{o.pair.label}: first divergence at {o.divergence.entry}: {o.divergence.message}")
    checks = [("error", "error", 0), ("unmatched", "unmatched", 1), ("warning", "warning", 2)]
    for verdict, shown, needs in checks:
        total = run.total(verdict)
        if verdict == "error":
            total -= sum(o.errors_within_noise for o in run.outcomes if o.error is None)
        if strict >= needs and total:
            reasons.append(f"{total} row(s) with Result {shown}")
    if run.unpaired:
        reasons.append(f"{len(run.unpaired)} step(s)/rank(s)/pid(s) without a partner: "
                       + ", ".join(f"{u.side} {u.what}" for u in run.unpaired[:5])
                       + (" ..." if len(run.unpaired) > 5 else ""))
    return reasons

"""Picklable digests of one comparison, passed back from worker processes.

The engine's result stays in the worker (it can hold 100k+ rows); what the
summary and the caller need is reduced here in one pass over the rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphprobe.compare.pairing import Pair, Unpaired
from graphprobe.compare.unmatched import SameNameUnmatched
from graphprobe.compare.verdicts import Divergence, Verdict  # Divergence: re-exported, part of this module's interface

__all__ = [
    "CompareRun",
    "Coverage",
    "Divergence",
    "EntryPoint",
    "PLOT_POINTS",
    "Plot",
    "Noise",
    "PairOutcome",
    "RowDigest",
    "SEVERITY",
    "digest_divergence",
    "digest_rows",
    "report_rows",
]

# Order used to rank rows and entries; unmatched rows are not "worse" than an
# error, and an entry is unmatched only when all its rows are.
SEVERITY = {"unmatched": -1, "pass": 0, "warning": 1, "error": 2}
# The plot shows at most this many points: more entries are bucketed, each
# bucket shown by its marked or worst entry (csrc/compare/digest.h).
PLOT_POINTS = 4000


@dataclass(frozen=True, slots=True)
class RowDigest:
    """One row of the worst-rows table."""

    name: str
    entry: str
    role: str
    result: str
    norm_rel_err_pct: float | None
    target_norm: float | None
    bench_norm: float | None
    reasons: tuple[str, ...]
    # Tensor dumps only (None otherwise): Cosine and MaxAbsErr of the data.
    cosine: float | None = None
    max_abs_err: float | None = None


@dataclass(frozen=True, slots=True)
class EntryPoint:
    """One entry of the execution-order plot: its largest output
    NormRelativeErr (any row's when it has no output with one)."""

    index: int
    entry: str
    value: float | None
    result: str
    first_divergence: bool


@dataclass(frozen=True)
class Noise:
    """The noise a pair shows where it agrees: the largest scale-aware error
    (``max_e``) and z over ``rows`` matched rows, those before the first
    divergence (``upstream``) or all of them when there is none."""

    max_e: float = 0.0
    max_z: float = 0.0
    rows: int = 0
    upstream: bool = False


@dataclass(frozen=True)
class Coverage:
    """How much of each side was paired; ``problem`` says why a side counts
    as empty or short (never a pass), None when fine."""

    target_entries: int = 0
    bench_entries: int = 0
    target_rows: int = 0
    bench_rows: int = 0
    matched_rows: int = 0
    problem: str | None = None


@dataclass(frozen=True)
class PairOutcome:
    """What comparing one pair produced; ``error`` is set instead of the rest
    when a dump could not be read."""

    pair: Pair
    csv_path: Path | None = None
    report_path: Path | None = None
    counts: dict[str, int] = field(default_factory=dict)
    rows: int = 0
    first_divergence: str | None = None
    # Position of the first divergence in the target's execution order: what
    # makes "which rank went wrong first" comparable across ranks.
    first_divergence_index: int | None = None
    worst: tuple[RowDigest, ...] = ()
    error: str | None = None
    # What the reader had to decide about the dumps (duplicate keys ...).
    notes: tuple[str, ...] = ()
    # graphprobe's first divergence in full (None when there is none), the
    # noise where the pair agrees, how much of each side was paired, and the
    # noise floors used: (table row, Mean/Norm floor, Max/Min floor).
    divergence: Divergence | None = None
    noise: Noise | None = None
    coverage: Coverage | None = None
    floors_used: tuple[tuple[str, float, float], ...] = ()
    # With a float64 reference (compare(..., reference=)): the referee's
    # verdict, both sides' distances to it per row; it decides
    # first_divergence and divergence.
    referee: Verdict | None = None
    # The checksum compare's line (compare/checksums.py), made from the
    # engine's read of the pair: () when the dumps do not both carry
    # checksums, None when not made (an outcome made by hand).
    checksums: tuple[str, ...] | None = None
    # Unmatched rows whose name is on both sides, by kind (compare/unmatched.py:
    # None on one side and a tensor on the other ...): what the summary says
    # the unmatched count is made of.
    same_name_unmatched: tuple[SameNameUnmatched, ...] = ()
    # Of counts["error"]: in a pair the first-divergence rule found within
    # rounding noise, rows msprobe's rules call error that it explains
    # (cancellation residues, inputs moved beyond the rule's premise, shapes
    # after a rounding flip: docs/formats.md); --fail-on error reports them,
    # not fails.
    errors_within_noise: int = 0
    # Non-tensor arguments that differ in a call whose outputs are no further
    # apart than rounding and their inputs explain, each "ENTRY NAME: TARGET
    # vs BENCH" (the two programs call it differently to the same result): not
    # a divergence, said in the summary.
    arguments_without_effect: tuple[str, ...] = ()
    # (rows differing, rows) of the parameters when they were judged as an
    # first training step's update (step 1, a dump with a backward
    # pass) and some differ; None otherwise.
    parameters_after_update: tuple[int, int] | None = None
    # The parameters ("{module path}.{name}") whose parameter row or gradient
    # record is beyond its floor: what the next step carries on.
    differing_parameters: tuple[str, ...] = ()
    # (rows carried, the step they were carried from) when, from step 2 on,
    # parameters that differ beyond their floor were judged as carried by the
    # updates from an earlier step where they or their gradients already
    # differed (docs/formats.md, "Parameters after an update"); None otherwise.
    parameters_carried: tuple[int, int] | None = None
    # A training step's parameters for the first update's rule at the step
    # after it: (key, the bench's Sketch of the parameter, its gradients'
    # relative error) each (CompareResult.parameter_basis).
    parameter_basis: tuple[tuple[str, tuple[float, ...], float], ...] = ()
    # (beyond, judged) of that rule at step 1, when step 0's basis was given:
    # parameter rows further apart than their gradients' rounding at step 0
    # explains, of those it could judge; None when it did not run.
    update_rows: tuple[int, int] | None = None


@dataclass
class CompareRun:
    """Everything ``compare()`` did: one outcome per pair (in pairing order)
    and what had no partner."""

    outcomes: list[PairOutcome]
    unpaired: list[Unpaired]
    output_dir: Path
    # The index page over the reports (report_index.py), when one was written.
    index_path: Path | None = None

    @property
    def failures(self) -> list[PairOutcome]:
        """Pairs whose dumps could not be read."""
        return [o for o in self.outcomes if o.error is not None]

    def total(self, result: str) -> int:
        """Rows with Result ``result`` over all pairs."""
        return sum(o.counts.get(result, 0) for o in self.outcomes)


@dataclass(frozen=True)
class Plot:
    """The execution-order plot's series: ``points`` for the ``entries``
    target entries (one per bucket when there are more than
    :data:`PLOT_POINTS`), and the index of the first marked entry."""

    entries: int
    first_marked: int | None
    points: list[EntryPoint]


def digest_rows(result: Any, top: int, marked: int | None = None) -> tuple[list[RowDigest], Plot]:
    """The ``top`` worst matched rows (by Result, then NormRelativeErr, NaN
    counting as worst) and the plot series, from an engine result. ``marked``:
    the entry the plot marks (None: the engine's first divergence; -1: none).
    Both reductions, and the plot's bucketing, run in C++; only their results
    cross into Python (a few thousand points, not one object per entry)."""
    worst = [RowDigest(*t) for t in result.worst_row_digests(max(top, 0))]
    entries, first_marked, points = result.entry_points(EntryPoint, PLOT_POINTS, marked)
    return worst, Plot(entries, first_marked, points)


def digest_divergence(result: Any) -> tuple[Divergence | None, Noise, Coverage, tuple[tuple[str, float, float], ...]]:
    """The first divergence, the noise, the coverage and the floors used of an
    engine result, as picklable values."""
    d = result.divergence
    divergence = None
    if d is not None:
        e = d["error"]
        divergence = Divergence(
            entry=d["entry"], entry_index=d["entry_index"], kinds=tuple(d["kinds"]), row=d["row"],
            message=d["message"], z=e["z"], errors=tuple(e["errors"]), worst_stat=e["worst_stat"],
            floor_name=e["floor_name"], floor=e["floor"], hard=e["hard"], z_inputs=d["z_inputs"],
            z_parameters=d["z_parameters"], z_outputs=d["z_outputs"], last_agreeing=d["last_agreeing"],
            unmatched_between=tuple(d["unmatched_between"]), parameter_rows=d["parameter_rows"],
            parameter_rows_differing=d["parameter_rows_differing"], parameters_throughout=d["parameters_throughout"])
    noise = Noise(**result.noise)
    coverage = Coverage(**result.coverage)
    return divergence, noise, coverage, tuple(tuple(f) for f in result.floors_used)  # type: ignore[misc]


def report_rows(result: Any, limit: int) -> list[RowDigest]:
    """The rows the HTML report lists, worst first: every row (unmatched ones
    last) when there are at most ``limit``, else the ``limit`` worst matched
    rows (the CSV has them all)."""
    if len(result) > limit:
        return [RowDigest(*t) for t in result.worst_row_digests(limit)]
    # The engine's worst-first order for matched rows, then unmatched rows in CSV order.
    rank = {row.index: k for k, row in enumerate(result.worst_rows(len(result)))}
    order = sorted(range(len(result)), key=lambda i: (rank.get(i, len(rank)), i))
    return [RowDigest(*t) for t in result.row_digests(order)]

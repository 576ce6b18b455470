"""Terminal output of ``graphprobe compare``: the summary and a progress bar."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TextIO

from graphprobe._text import terminal_safe
from graphprobe.compare.explain import floors_text, noise_text
from graphprobe.compare.numbers import short_number, short_pct, shorten_numbers
from graphprobe.compare.outcome import CompareRun, PairOutcome
from graphprobe.compare.unmatched import KIND_WORDS, SameNameUnmatched

__all__ = ["ProgressBar", "cross_rank_lines", "divergence_lines", "format_summary", "headline_lines",
           "unmatched_lines"]

_RESULTS = ("pass", "warning", "error", "unmatched")
WORST_ORDER = "by verdict (error, warning, pass), then by NormRelativeErr, largest first"


_DIVERGENCE_PAIRS = 8  # pairs whose first divergence is explained in full; the rest are in the table


# Arguments without effect (docs/formats.md): one wording for the line of
# all pairs and the line of one.
_CALLED_OTHERWISE = "called with another argument to the same result"
_SAME_RESULT = "outputs no further apart than rounding and their inputs explain; not a divergence"


def divergence_lines(run: CompareRun) -> list[str]:
    """Per pair: the first divergence with its explanation and the noise
    upstream (or the noise seen when there is none), a side that is empty or
    short, the noise floors used, and for training runs the first step whose
    parameters differ."""
    # Outcomes made by the engine carry a noise digest; hand-made ones may not.
    read = [o for o in run.outcomes if o.error is None and o.noise is not None]
    if not read:
        return []
    lines: list[str] = [""]
    single = len(read) == 1
    shown = [o for o in read if o.divergence is not None or (o.coverage and o.coverage.problem)
             or (o.referee is not None and o.referee.bench_further_message is not None)]
    if not shown and not single:
        # Nothing diverges anywhere: one line for all pairs.
        worst = max(read, key=lambda o: (o.noise.max_z if o.noise else 0.0))
        n = worst.noise
        rows = sum(o.noise.rows for o in read if o.noise)
        lines.append(f"first divergence: none in {len(read)} pairs; noise seen: max {short_number(n.max_e if n else 0)} "
                     f"({short_number(n.max_z if n else 0)}x the floor, {worst.pair.label}) over {rows} rows")
        called = [o for o in read if o.arguments_without_effect]
        if called:
            o = called[0]
            lines.append(f"{_CALLED_OTHERWISE} in {len(called)} pair(s) ({_SAME_RESULT}), e.g. {o.pair.label}: "
                         f"{o.arguments_without_effect[0]}")
    explained = shown if shown or not single else read  # a single pair always gets its line
    for o in explained[:_DIVERGENCE_PAIRS]:
        who = "" if single else f"  {o.pair.label}: "
        if o.coverage is not None and o.coverage.problem:
            lines.append(f"{who}NOT A PASS: {o.coverage.problem}")
        if o.divergence is not None:
            d = o.divergence
            lines.append(f"{who}first divergence: {d.entry} ({d.message}{_origin_text(o, read)}); "
                         f"{noise_text(o.noise)}")
        elif o.referee is not None:
            r = o.referee
            why = (f"the target is nowhere further from float64 than the bench; {r.bench_further_entry}: "
                   f"{r.bench_further_message}" if r.bench_further_message is not None
                   else "neither side is further from float64 than the other beyond the margin")
            lines.append(f"{who}first divergence: none ({why})")
        else:
            lines.append(f"{who}first divergence: none; {noise_text(o.noise)}")
        if o.parameters_after_update:
            differing, total = o.parameters_after_update
            lines.append(f"{who}{differing} of {total} parameter rows differ beyond their floor, as the earlier "
                         f"steps' updates leave them (judged as given at step 1, not as a cause; an error in "
                         f"the optimizer's update shows only here: --parameters-as-causes)")
        if o.parameters_carried:
            rows, step = o.parameters_carried
            lines.append(f"{who}{rows} parameter row(s) differ beyond their floor as they (or their gradients) "
                         f"already did at step {step}: carried on by the updates, not a cause (a parameter that "
                         f"agreed there and differs now is one)")
        if o.arguments_without_effect:
            first, more = o.arguments_without_effect[0], len(o.arguments_without_effect) - 1
            lines.append(f"{who}{_CALLED_OTHERWISE} ({_SAME_RESULT}): {first}" + (f" and {more} more" if more else ""))
        if o.errors_within_noise:
            lines.append(f"{who}{o.errors_within_noise} row(s) under Result error are msprobe's rules on records "
                         "the first-divergence rule finds within rounding noise (cancellation residues; outputs whose "
                         "inputs moved beyond --input-error-pct by their Sketch; shapes that follow an integer record "
                         "flipped by rounding; non-tensor arguments of a call whose outputs agree, docs/formats.md): "
                         "--fail-on error does not fail on them")
        if o.referee is not None:
            lines.append(f"{who}referee: {o.referee.reference} (float64; the target is blamed only where it is "
                         "further from it than the bench, by torch's same() margin)")
    if len(shown) > _DIVERGENCE_PAIRS:
        lines.append(f"  ({len(shown) - _DIVERGENCE_PAIRS} more pairs diverge or are short: see the table and "
                     "their CSV)")
    floors = floors_text([f for o in read for f in o.floors_used])
    if floors:
        lines.append(floors)
    # Any parameter cause counts, not only one where most parameters differ:
    # a gradient fault in one layer updates that layer's parameters only.
    drifted = sorted((o for o in read if o.pair.step is not None and o.divergence is not None
                      and "parameter" in o.divergence.kinds), key=lambda o: (o.pair.step, o.pair.label))
    if drifted:
        first = drifted[0]
        d = first.divergence
        assert d is not None
        some = (f", {d.parameter_rows_differing} of {d.parameter_rows} parameter rows beyond the floor"
                if d.parameter_rows and not d.parameters_throughout else "")
        origin = _origin(first, read)
        if origin is not None and origin.divergence is not None:
            lines.append(f"parameters differ from step{first.pair.step} on ({first.pair.label} first{some}): they "
                         f"already differed after step{origin.pair.step}, whose first divergence is "
                         f"{origin.divergence.entry} ({origin.pair.label}): look there first")
        else:
            lines.append(f"parameters differ from step{first.pair.step} on ({first.pair.label} first{some}): the "
                         "divergence started in an earlier step's update, or in the weights loaded")
    return lines


def _origin(o: PairOutcome, read: list[PairOutcome]) -> PairOutcome | None:
    """For a pair whose first divergence is a parameter (nothing recorded in
    its step produced it): the earliest earlier step of the same process
    (of any process when that one has none) with a first divergence, the
    step whose update made the parameters differ; None when there is none."""
    if o.pair.step is None or o.divergence is None or "parameter" not in o.divergence.kinds:
        return None
    step = o.pair.step
    earlier = [p for p in read if p.pair.step is not None and p.pair.step < step and p.divergence is not None]
    same = [p for p in earlier if (p.pair.kind, p.pair.rank) == (o.pair.kind, o.pair.rank)]
    return min(same or earlier, key=lambda p: (p.pair.step, p.pair.label), default=None)


def _origin_text(o: PairOutcome, read: list[PairOutcome]) -> str:
    """The pointer back from a parameter divergence to the step that
    explains it (empty when there is none)."""
    origin = _origin(o, read)
    if origin is None or origin.divergence is None:
        return ""
    if "parameter" in origin.divergence.kinds:
        return f"; the parameters already differed in step{origin.pair.step} ({origin.pair.label})"
    return (f"; the parameters already differed after step{origin.pair.step}, whose first divergence is "
            f"{origin.divergence.entry}: look there first")


def format_summary(run: CompareRun, top: int, workbooks: dict[Path, Path | str] | None = None) -> str:
    """One table (counts per verdict and the first divergence of each pair),
    what each first divergence is and the noise around it, the ``top`` worst
    rows of the first pair that diverges (of the first pair when none does),
    where the files are (``workbooks``: CSV -> its .xlsx, from
    :func:`graphprobe.compare.workbook.write_workbooks`), and what had no
    partner."""
    lines: list[str] = headline_lines(run)
    width = max([len(o.pair.label) for o in run.outcomes] + [4])
    lines.append(f"{'pair':<{width}}  " + "  ".join(f"{r:>9}" for r in _RESULTS) + "  first divergence")
    overlapping = 0
    for o in run.outcomes:
        if o.error is not None:
            lines.append(f"{o.pair.label:<{width}}  FAILED: {o.error}")
            continue
        cells = [f"{o.counts.get(r, 0)}" for r in _RESULTS]
        if _unmatched_also_counted(o):
            cells[-1] = f"({cells[-1]})"  # already in pass/warning/error: set apart, so no one adds it up
            overlapping += 1
        counts = "  ".join(f"{c:>9}" for c in cells)
        lines.append(f"{o.pair.label:<{width}}  {counts}  {o.first_divergence or '-'}")
    if overlapping:
        lines.append("(N) under unmatched: rows without a partner, already counted under their Result (msprobe's "
                     "verdict, pass unless inf/NaN): pass + warning + error = all rows; with --graphprobe-verdicts "
                     "they are counted under unmatched only")
    lines.extend(unmatched_lines(run))
    lines.extend(divergence_lines(run))
    lines.extend(cross_rank_lines(run))
    lines.extend(_worst_lines(run, top))
    lines.extend(_file_lines(run, workbooks or {}))
    if run.unpaired:
        lines.append("")
        lines.append("without a partner:")
        for u in run.unpaired:
            lines.append(f"  {u.side}: {u.what}  ({u.path})")
    return "\n".join(terminal_safe(line) for line in lines)  # names come from the dumps: no escapes reach the terminal


def _unmatched_also_counted(o: PairOutcome) -> bool:
    """Whether a pair's unmatched rows are also counted under their Result
    (msprobe's verdicts, the default): then pass + warning + error already
    make up every row. With --graphprobe-verdicts the four counts partition
    the rows."""
    unmatched = o.counts.get("unmatched", 0)
    return unmatched > 0 and sum(o.counts.get(r, 0) for r in ("pass", "warning", "error")) == o.rows


def unmatched_lines(run: CompareRun) -> list[str]:
    """What the unmatched rows named alike on both sides are, per kind over
    all pairs (compare/unmatched.py): e.g. an argument that is None in one
    run and a tensor in the other, as transformers' ``attention_mask`` is
    eagerly and under torch.compile."""
    kinds: dict[str, list[SameNameUnmatched]] = {}
    pairs: dict[str, set[str]] = {}
    for o in run.outcomes:
        for g in o.same_name_unmatched:
            kinds.setdefault(g.kind, []).append(g)
            pairs.setdefault(g.kind, set()).add(o.pair.label)
    lines = []
    for kind, groups in kinds.items():
        rows, names, first = sum(g.rows for g in groups), sum(g.names for g in groups), groups[0]
        where = f" in {len(pairs[kind])} pairs" if len(run.outcomes) > 1 else ""
        what = (f"unmatched: {rows} rows{where} are {names} name{'s' if names != 1 else ''} on both sides, "
                f"{KIND_WORDS[kind]} (e.g. {first.example}: target {first.target_type}, bench {first.bench_type})")
        if kind == "none-vs-tensor":
            what += ("; an argument passed as None in one run and as a tensor in the other, as transformers' "
                     "attention_mask is eagerly and under torch.compile")
        lines.append(what + "; they are not compared")
    return lines


def _worst_lines(run: CompareRun, top: int) -> list[str]:
    read = [o for o in run.outcomes if o.error is None and o.worst]
    if not read or top <= 0:
        return []
    shown = next((o for o in read if o.first_divergence), read[0])
    lines = ["", f"worst rows of {shown.pair.label} ({WORST_ORDER}):"]
    for r in shown.worst[:top]:
        reason = f"  ({shorten_numbers(r.reasons[0])})" if r.reasons else ""
        lines.append(f"  {r.result:<9} {short_pct(r.norm_rel_err_pct):>10}  {r.name}{reason}")
    if len(read) > 1:
        lines.append(f"  (the other {len(read) - 1} pairs: in their CSV and HTML report)")
    return lines


def _file_lines(run: CompareRun, workbooks: dict[Path, Path | str]) -> list[str]:
    written = [o for o in run.outcomes if o.csv_path is not None]
    if not written:
        return []
    root = str(run.output_dir)

    def rel(path: os.PathLike[str] | None) -> str:
        return "-" if path is None else os.path.relpath(path, root)

    lines = ["", f"files (under {root}):"]
    width = max(len(o.pair.label) for o in written)
    for o in written:
        book = workbooks.get(o.csv_path) if o.csv_path is not None else None
        extra = f"  {rel(book)}" if isinstance(book, Path) else "  (xlsx not written)" if book else ""
        lines.append(f"  {o.pair.label:<{width}}  {rel(o.csv_path)}  {rel(o.report_path)}{extra}")
    if run.index_path is not None:
        lines.append(f"  index of the reports: {rel(run.index_path)}")
    return lines


def _processes(outcomes: list) -> str:
    """What the pairs of a step compare: "ranks", "pids" (single-process
    folders) or "processes" (both kinds)."""
    kinds = {o.pair.kind for o in outcomes}
    return "ranks" if kinds == {"rank"} else "pids" if kinds == {"pid"} else "processes"


def _rank_number(o: PairOutcome) -> int:
    return int(o.pair.rank) if o.pair.rank.isdigit() else -1


def headline_lines(run: CompareRun) -> list[str]:
    """Over several pairs (a thousand ranks, several steps), one line first:
    the first divergence of them all -- the earliest step, then the earliest
    position in execution order, then the lowest rank -- with the record
    that triggered it, and how many pairs diverge. Nothing for one pair."""
    read = [o for o in run.outcomes if o.error is None]
    if len(run.outcomes) < 2:
        return []
    diverged = [o for o in read if o.first_divergence is not None and o.first_divergence_index is not None]
    if not diverged:
        return [f"first divergence: none in {len(read)} pairs", ""]
    first = min(diverged, key=lambda o: (o.pair.step if o.pair.step is not None else -1, o.first_divergence_index,
                                         o.pair.kind, _rank_number(o), o.pair.label))
    d = first.divergence
    record = f", record {d.row}" if d is not None and d.entry == first.first_divergence else ""
    return [f"first divergence: {first.pair.label}, {first.first_divergence} (entry #{first.first_divergence_index}"
            f"{record}); {len(diverged)} of {len(run.outcomes)} pairs diverge", ""]


def cross_rank_lines(run: CompareRun) -> list[str]:
    """For each step compared on several ranks (or pids): which diverge, the
    earliest first (by position in execution order), and where."""
    by_step: dict[int | None, list] = {}
    for o in run.outcomes:
        if o.error is None:
            by_step.setdefault(o.pair.step, []).append(o)
    lines: list[str] = []
    for step, outcomes in by_step.items():
        if len(outcomes) < 2:
            continue
        what = _processes(outcomes)
        diverged = sorted((o for o in outcomes if o.first_divergence_index is not None),
                          key=lambda o: (o.first_divergence_index, o.pair.kind,
                                         int(o.pair.rank) if o.pair.rank.isdigit() else -1))
        where = f"step{step}" if step is not None else f"all {what}"
        if not diverged:
            lines.append(f"{where}: no {what[:-1]} diverges ({len(outcomes)} {what})")
            continue
        first = diverged[0]
        each = ", ".join(f"{o.pair.process} (#{o.first_divergence_index})" for o in diverged)
        lines.append(f"{where}: {len(diverged)} of {len(outcomes)} {what} diverge; first: {first.pair.process} at "
                     f"{first.first_divergence} (entry #{first.first_divergence_index}); by position: {each}")
    if lines:
        lines.insert(0, "")
        lines.insert(1, "across " + _processes([o for o in run.outcomes if o.error is None]) + ":")
    return lines


class ProgressBar:
    """``[#####.....] 3/8 step0/rank2`` redrawn on one line of a terminal.
    When the stream is not a terminal (a log file) it writes plain lines
    without carriage returns, ``2/8 step0/rank1 done``, in item order: an item
    that finishes early is reported once those before it are done. Silent
    for a single item or when disabled."""

    def __init__(self, total: int, *, enabled: bool = True, stream: TextIO | None = None, width: int = 30) -> None:
        self.total = total
        self.done = 0
        self.enabled = enabled and total > 1
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        isatty = getattr(self.stream, "isatty", None)
        self.interactive = bool(isatty and isatty())
        self._finished: dict[int, str] = {}
        self._reported = 0  # items reported as lines, in order

    def advance(self, label: str = "", index: int | None = None) -> None:
        """Marks item ``index`` (default: the next one in order), called
        ``label``, done and reports it."""
        label = terminal_safe(label)
        self._finished[self.done if index is None else index] = label
        self.done += 1
        if not self.enabled:
            return
        if self.interactive:
            filled = self.width * self.done // max(self.total, 1)
            self.stream.write(f"\r[{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} "
                              f"{label:<30.30}")
            if self.done >= self.total:
                self.stream.write("\n")
        else:
            while self._reported in self._finished:
                self._reported += 1
                self.stream.write(f"{self._reported}/{self.total} {self._finished[self._reported - 1]} done\n")
        self.stream.flush()

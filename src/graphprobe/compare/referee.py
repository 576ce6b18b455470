"""The float64 referee (``compare(..., reference=REF)``; docs/formats.md,
"Float64 referee"): which side of a pair is further from a float64 run of
the same model.

Each matched row of the pair is looked up in REF (by name, on each side) and
both sides get the scale-aware error of the first-divergence rule against
REF, per class of statistic (aggregate: Mean, Norm; extreme: Max, Min). The
rule is the accuracy minifier's (``torch._dynamo.utils.same`` with
``fp64_ref``: ``err(res, fp64) <= m * err(ref, fp64) + tol``), made local as
the first-divergence rule is: a row blames the target when

    d_t > m * d_b + R * D_t + f

with d_t, d_b the target's and the bench's distance to REF, D_t what the
target's own data upstream carries (outputs: the entry's inputs and
parameters; inputs: every earlier entry; parameters: 0), R the divergence
ratio and f the row's noise floor (the coarser of both sides' dtypes and of
the data so far). m is torch's: 3 when the target row is float16/bfloat16 or
has fewer than 1000 elements, else 2. The same test with the sides swapped
says where the bench is the one further from float64.
"""

from __future__ import annotations

import csv
import dataclasses
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from graphprobe.compare.numbers import short_number
from graphprobe.compare.verdicts import Divergence, RefereeRow, Verdict  # the last two: re-exported
from graphprobe.output_files import write_text_atomic

__all__ = ["REFERENCE_COLUMNS", "RefereeRow", "Verdict", "add_reference_columns", "distance", "multiplier", "referee",
           "referee_divergence", "row_distance_columns", "side_distances"]

_EXTREME = (0, 1)  # Max, Min (Mean, Norm: the aggregate class)
_LOW_PRECISION = {"torch.float16", "torch.bfloat16"}


def multiplier(target_dtype: str | None, numel: float) -> float:
    """m of torch's ``same()``: 3 for float16/bfloat16 results and for
    tensors of fewer than 1000 elements (noise dominates), else 2."""
    if target_dtype in _LOW_PRECISION or 0 <= numel < 1000:
        return 3.0
    return 2.0


def _numel(shape: Any) -> float:
    if not isinstance(shape, (list, tuple)) or not all(isinstance(d, int) for d in shape):
        return -1.0
    return float(math.prod(shape))


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    return None


def _error(t: float, r: float, scale: float) -> float:
    if math.isnan(t) or math.isnan(r):
        return 0.0 if math.isnan(t) and math.isnan(r) else math.inf
    if math.isinf(t) or math.isinf(r):
        return 0.0 if t == r else math.inf
    if t == r:
        return 0.0
    return abs(t - r) / scale if scale > 0 else math.inf


def distance(stats: Sequence[Any] | None, ref_stats: Sequence[Any] | None,
             ref_shape: Any) -> tuple[float, float] | None:
    """A side's scale-aware error against REF per class (aggregate, extreme),
    as the first-divergence rule measures it (Max/Min/Mean against
    max(|ref|, RMS of ref), Norm against |ref|); None without numbers."""
    if not stats or not ref_stats:
        return None
    n = _numel(ref_shape)
    norm = _num(ref_stats[3])
    rms = abs(norm) / math.sqrt(n) if norm is not None and math.isfinite(norm) and n > 0 else 0.0
    out = [0.0, 0.0]
    seen = False
    for s in range(4):
        t, r = _num(stats[s]), _num(ref_stats[s])
        if t is None or r is None:
            continue
        seen = True
        e = _error(t, r, abs(r) if s == 3 else max(abs(r), rms))
        c = 1 if s in _EXTREME else 0
        out[c] = max(out[c], e)
    return (out[0], out[1]) if seen else None


def side_distances(result: Any) -> dict[str, tuple[tuple[float, float] | None, str | None, float]]:
    """From an engine result comparing one side (as target) with REF (as
    bench): row name -> (distance per class, the side's dtype, numel)."""
    out: dict[str, tuple[tuple[float, float] | None, str | None, float]] = {}
    for row in result.rows:
        if row.match != "matched":
            continue
        out[row.target_name] = (distance(row.target_stats, row.bench_stats, row.bench_shape), row.target_dtype,
                                _numel(row.bench_shape))
    return out


def _floors(table: Iterable[tuple[str, str, float, float]]) -> tuple[dict[str, tuple[str, float, float]],
                                                                      tuple[str, float, float]]:
    by_dtype: dict[str, tuple[str, float, float]] = {}
    default = ("float32", 1e-4, 1e-4)
    for name, dtypes, aggregate, extreme in table:
        for d in dtypes.split(","):
            d = d.strip()
            if d.startswith("torch."):
                by_dtype[d] = (name, aggregate, extreme)
        if name == "float32":
            default = (name, aggregate, extreme)
    return by_dtype, default


def _floor_of(dtype: str | None, by_dtype: dict[str, tuple[str, float, float]],
              default: tuple[str, float, float]) -> tuple[str, float, float] | None:
    """The floating floor of a dtype; None for integer, bool and non-tensor values."""
    if dtype is None:
        return None
    if dtype in by_dtype:
        return by_dtype[dtype]
    if "float" in dtype or "complex" in dtype:
        return default
    return None


def _coarser(a: tuple[str, float, float] | None, b: tuple[str, float, float] | None) -> tuple[str, float, float] | None:
    if a is None:
        return b
    if b is None:
        return a
    return b if b[1] > a[1] else a


def _text(e: float) -> str:
    return short_number(e * 100) + " %"


def referee(result: Any, target_ref: Any, bench_ref: Any, table: Iterable[tuple[str, str, float, float]], *,
            ratio: float, floor_scale: float, reference: str) -> Verdict:
    """Walks the pair's target entries in dump order (the first-divergence
    rule's walk) and applies the referee's rule (module docstring).

    Args:
        result: the engine's result for TARGET against BENCH.
        target_ref, bench_ref: the engine's results for TARGET against REF and
            BENCH against REF.
        table: ``noise_floor_table()``.
        ratio: R, the divergence ratio.
        floor_scale: multiplies every floor.
        reference: REF's path, for the messages.
    """
    dt_rows, db_rows = side_distances(target_ref), side_distances(bench_ref)
    by_dtype, default = _floors(table)
    groups: dict[int, list[Any]] = {}
    for row in result.rows:
        if row.match == "matched" and row.entry_index >= 0:
            groups.setdefault(row.entry_index, []).append(row)
    rows_out: list[RefereeRow] = []
    upstream_t, upstream_b = [0.0, 0.0], [0.0, 0.0]
    data_floor: tuple[str, float, float] | None = None
    blamed: tuple[str, int, str, str, str] | None = None
    bench_further: tuple[str, str] | None = None
    for index in sorted(groups):
        rows = groups[index]
        entry = rows[0].entry
        measured = []
        for row in rows:
            t = dt_rows.get(row.target_name)
            b = db_rows.get(row.bench_name)
            rows_out.append(RefereeRow(row.name, t[0] if t else None, b[0] if b else None))
            param = row.role == "input" and row.name.startswith(entry + ".parameters.")
            own = _coarser(_floor_of(row.target_dtype, by_dtype, default),
                           _floor_of(row.bench_dtype, by_dtype, default))
            if own is not None and not param and row.role == "input":
                data_floor = _coarser(data_floor, own)
            if t is None or b is None or t[0] is None or b[0] is None or own is None:
                continue  # integers, booleans, non-tensors: a flip is not a distance
            measured.append((row, param, own, t[0], b[0], multiplier(row.target_dtype, t[2])))
        inputs = [(m[3], m[4]) for m in measured if m[0].role == "input"]
        explain_t = [max((d[0][c] for d in inputs), default=0.0) for c in (0, 1)]
        explain_b = [max((d[1][c] for d in inputs), default=0.0) for c in (0, 1)]
        found: tuple[float, str, str, str] | None = None
        for row, param, own, dt, db, m in measured:
            floor = own if param else _coarser(own, data_floor)
            assert floor is not None
            kind = "parameter" if param else "output" if row.role == "output" else "unrecorded-input"
            for c in (0, 1):
                f = (floor[1] if c == 0 else floor[2]) * floor_scale
                carried_t = 0.0 if param else explain_t[c] if row.role == "output" else upstream_t[c]
                carried_b = 0.0 if param else explain_b[c] if row.role == "output" else upstream_b[c]
                names = "Mean/Norm" if c == 0 else "Max/Min"
                if dt[c] > m * db[c] + ratio * carried_t + f and (found is None or dt[c] > found[0]):
                    found = (dt[c], row.name, kind,
                             f"{row.name}: the target is further from float64 than the bench "
                             f"({names}: target {_text(dt[c])}, bench {_text(db[c])} from the reference; allowed "
                             f"{short_number(m)}x the bench's + {short_number(ratio)}x what its inputs carry "
                             f"({_text(carried_t)}) + the {floor[0]} floor {short_number(f)})")
                if bench_further is None and db[c] > m * dt[c] + ratio * carried_b + f:
                    bench_further = (entry, f"{row.name}: the bench is further from float64 than the target here: "
                                            f"the target is closer to the true value ({names}: bench {_text(db[c])}, "
                                            f"target {_text(dt[c])} from the reference)")
        if found is not None:
            blamed = (entry, index, found[1], found[2], found[3])
            break
        for row, _param, own, dt, db, _m in measured:
            if row.role == "output":
                data_floor = _coarser(data_floor, own)
            for c in (0, 1):
                upstream_t[c] = max(upstream_t[c], dt[c])
                upstream_b[c] = max(upstream_b[c], db[c])
    return Verdict(
        blamed_entry=blamed[0] if blamed else None,
        blamed_index=blamed[1] if blamed else None,
        blamed_row=blamed[2] if blamed else None,
        blamed_kind=blamed[3] if blamed else None,
        message=blamed[4] if blamed else None,
        bench_further_entry=bench_further[0] if bench_further else None,
        bench_further_message=bench_further[1] if bench_further else None,
        rows=tuple(rows_out),
        reference=reference,
    )


def row_distance_columns(verdict: Verdict) -> dict[str, tuple[str, str]]:
    """Row name -> the two CSV cells (target's and bench's largest distance
    to REF over the statistics; empty where not measured)."""
    def cell(d: tuple[float, float] | None) -> str:
        return "" if d is None else repr(max(d))
    return {r.name: (cell(r.target), cell(r.bench)) for r in verdict.rows}



def _csv_field(s: str) -> str:
    """A cell as the engine's CSV writer quotes it (csv_writer.cpp: csv_field)."""
    if not any(ch in s for ch in ',"\r\n') and (not s or (s[0] != " " and s[-1] != " ")):
        return s
    return '"' + s.replace('"', '""') + '"'


def add_reference_columns(csv_path: Path, verdict: Verdict) -> None:
    """Rewrites a pair's CSV with the referee's verdict: ``First Divergence``
    marks the rows of the entry blamed on the target, and two columns are
    appended, ``Target Err vs Ref`` and ``Bench Err vs Ref`` (each side's
    largest scale-aware error against the float64 reference over the four
    statistics; empty where REF has no such floating row). Every other cell
    is written back as the engine wrote it."""
    columns = row_distance_columns(verdict)
    with open(csv_path, newline="", encoding="utf-8") as f:
        table = list(csv.reader(f))
    header = table[0]
    fd = header.index("First Divergence")
    blamed = verdict.blamed_entry
    out = [header + list(REFERENCE_COLUMNS)]
    for row in table[1:]:
        name = row[0] or row[1]
        cells = columns.get(name, ("", ""))
        # The rows of the blamed entry: its own records (the name continues
        # with ".input." or ".output." right after the entry's name).
        row[fd] = "yes" if blamed is not None and (name.startswith(blamed + ".")) else ""
        out.append(row + list(cells))
    write_text_atomic(csv_path, "".join(",".join(_csv_field(c) for c in r) + "\n" for r in out))


REFERENCE_COLUMNS = ("Target Err vs Ref", "Bench Err vs Ref")


# The engine's kinds that need no noise margin: a change no rounding makes
# (docs/formats.md). The referee's margin (torch's same(): 2-3x the bench's
# distance to float64) cannot see them: a bfloat16 MLP output rounded to 5
# mantissa bits is 1.5-2.2x the clean noise of the record.
_EXACT_KINDS = ("same-values", "bitwise-pair", "integer-output")


def kept_by_exact_rule(verdict: Verdict, divergence: Divergence | None) -> bool:
    """Whether the engine's divergence stands although the referee blames
    nothing: it was found by a rule that needs no margin (same values
    recorded again, a pair agreeing bit for bit, an integer output that
    changed), and the bench is nowhere found further from float64 first."""
    return (verdict.blamed_entry is None and verdict.bench_further_message is None and divergence is not None
            and any(k in _EXACT_KINDS for k in divergence.kinds))


def with_referee_note(divergence: Divergence) -> Divergence:
    """``divergence`` with the reason it stands under a referee."""
    return dataclasses.replace(divergence, message=divergence.message + (
        "; the float64 referee blames nothing beyond its margin, but this rule needs none"))


def referee_divergence(verdict: Verdict, divergence: Divergence | None) -> Divergence | None:
    """The pair's first divergence under the referee: the entry blamed on the
    target (None when nothing is), its message followed by the bench-further
    note when the bench was found further from float64 first."""
    if verdict.blamed_entry is None:
        return None
    message = verdict.message or ""
    if verdict.bench_further_message is not None:
        message += f"; before it, {verdict.bench_further_message}"
    return Divergence(entry=verdict.blamed_entry, entry_index=verdict.blamed_index or 0,
                      kinds=(verdict.blamed_kind or "output",), row=verdict.blamed_row or "", message=message,
                      z=math.inf if divergence is None else divergence.z)

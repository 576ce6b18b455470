"""The checksum compare: bit-identical or bit-different, per tensor.

Where both dump.json files of a pair carry checksums (``"md5"``, written
under ``statistics.summary_mode: "md5"``, docs/formats.md "Checksums"),
``graphprobe compare`` also compares them: each tensor record of the target
is paired with the bench's record of the same entry and place; it is
*bit-identical* when dtype, shape and checksum are equal, *bit-different*
otherwise. The first bit-different tensor in the target's execution order
names where two runs stopped being bit-exact — across processes, replays or
graph modes.

The comparison is the engine's (``csrc/compare/checksums.h``): the one read
of each dump.json that makes the compare rows also keeps every tensor
record's checksum, and ``graphprobe compare`` writes each pair's
``checksum_result_*.csv`` from it in the worker that compared the pair; a dump
without checksums costs nothing more.

Example::

    result = compare_checksums("run_a/step0/rank0/dump.json", "run_b/step0/rank0/dump.json")
    if result is not None and result.first_different:
        print("first bit-different:", result.first_different)
"""

from __future__ import annotations

import ast
import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphprobe.compare.native import native
from graphprobe.output_files import make_dirs

__all__ = ["ChecksumComparison", "ChecksumRow", "checksum_lines", "compare_checksums", "has_checksums",
           "pair_checksum_line"]

MD5 = "md5"  # msprobe's key (record/dump_keys.h kMd5)
IDENTICAL = "bit-identical"
DIFFERENT = "bit-different"
NO_CHECKSUM = "no checksum"  # one side's record has md5 null (empty tensor, no kernel for its type/device)
UNPAIRED = "unpaired"
#: graphprobe's checksums are 16 hex digits, msprobe's CRC-32 has 8.
GRAPHPROBE_DIGITS = 16
CRC32_DIGITS = 8


@dataclass(frozen=True, slots=True)
class ChecksumRow:
    """One tensor: its compare name (``{entry}.input.0``), both sides'
    dtype, shape and checksum (None where a side has no record or none), and
    the result (:data:`IDENTICAL`, :data:`DIFFERENT`, :data:`NO_CHECKSUM`,
    :data:`UNPAIRED`)."""

    name: str
    entry: str
    target: str | None
    bench: str | None
    target_dtype: str | None
    bench_dtype: str | None
    target_shape: tuple[Any, ...] | None
    bench_shape: tuple[Any, ...] | None
    result: str


@dataclass(frozen=True)
class ChecksumComparison:
    """The checksum compare of one pair: rows in the target's order (then
    the bench's tensors without a partner), counts, and the first
    bit-different tensor and its entry (None when every paired tensor is
    bit-identical)."""

    rows: tuple[ChecksumRow, ...]
    first_different: str | None
    first_different_entry: str | None

    def count(self, result: str) -> int:
        """Rows with ``result``."""
        return sum(1 for r in self.rows if r.result == result)


def _kind(digits: list[int]) -> str:
    return {CRC32_DIGITS: "msprobe's CRC-32 (8 hex digits)",
            GRAPHPROBE_DIGITS: "graphprobe's 64-bit checksum (16 hex digits)"}.get(
                min(digits), f"{sorted(digits)} hex digits")


def _native_comparison(result: Any) -> Any | None:
    """The engine's checksum comparison of a ``CompareResult``; None unless
    both dumps carry checksums. Raises ValueError naming both files when one
    carries msprobe's CRC-32 (8 hex digits) and the other graphprobe's
    checksum (16): the two algorithms never agree, so every tensor would
    read bit-different."""
    eng = native()
    digits = eng.checksum_digits(result)
    if digits is None:
        return None
    t_digits, b_digits = digits
    if t_digits and b_digits and t_digits != b_digits:
        raise ValueError(f"checksums not comparable: {result.target_path} holds {_kind(t_digits)}, "
                         f"{result.bench_path} holds {_kind(b_digits)}; dump both with the same tool")
    return eng.compare_checksums(result)


def _shape(value: Any) -> tuple[Any, ...] | None:
    if value is None or isinstance(value, tuple):
        return value
    try:  # a list of something other than integers, as Python printed it
        return tuple(ast.literal_eval(value))
    except (ValueError, SyntaxError):
        return (value,)


def has_checksums(dump_json: str | Path) -> bool:
    """Whether a dump.json holds checksums (a tensor record with ``md5``)."""
    path = Path(dump_json)
    if not path.is_file():
        return False
    return bool(native().dump_has_checksums(str(path)))


def compare_checksums(target: str | Path, bench: str | Path) -> ChecksumComparison | None:
    """Compares the checksums of two dump.json files; None unless both carry
    checksums. Raises ValueError naming both files when one carries
    msprobe's CRC-32 (8 hex digits) and the other graphprobe's checksum (16):
    the two algorithms never agree, so every tensor would read bit-different.
    A file the engine cannot read raises its DumpFormatError (a ValueError)
    or DumpReadError (an OSError)."""
    eng = native()
    comparison = _native_comparison(eng.compare_files(str(target), str(bench)))
    if comparison is None:
        return None
    rows = tuple(ChecksumRow(name, entry, tm, bm, td, bd, _shape(ts), _shape(bs), result)
                 for name, entry, tm, bm, td, bd, ts, bs, result in comparison.rows())
    return ChecksumComparison(rows, comparison.first_different, comparison.first_different_entry)


def write_checksum_csv(comparison: ChecksumComparison, path: Path) -> None:
    """One CSV row per tensor: name, both checksums, dtypes, shapes, result."""
    make_dirs(path.parent)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["Name", "NPU md5", "Bench md5", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape",
                    "Bench Tensor Shape", "Result"])
        for r in comparison.rows:
            w.writerow([r.name, r.target or "", r.bench or "", r.target_dtype or "", r.bench_dtype or "",
                        "" if r.target_shape is None else list(r.target_shape),
                        "" if r.bench_shape is None else list(r.bench_shape), r.result])


def checksum_csv_path(csv_path: Path | None, output_dir: Path, tag: str) -> Path:
    """``checksum_result_*.csv`` beside the pair's compare CSV."""
    if csv_path is None:
        return Path(output_dir) / f"checksum_result_{tag}.csv"
    return csv_path.parent / f"{csv_path.stem.replace('compare_result', 'checksum_result', 1)}.csv"


def pair_checksum_line(result: Any, label: str, csv_path: Path) -> str | None:
    """For one compared pair (its engine ``CompareResult``): None when its
    dumps do not both carry checksums; else the summary line, with the
    pair's rows written to ``csv_path``. Called where the pair was compared,
    before its result is dropped."""
    try:
        comparison = _native_comparison(result)
        if comparison is None:
            return None
        make_dirs(csv_path.parent)
        comparison.write_csv(str(csv_path))
    except (ValueError, OSError) as e:
        return f"checksums {label}: {e}"
    counts = comparison.counts
    same, diff = counts[IDENTICAL], counts[DIFFERENT]
    other = len(comparison) - same - diff
    tail = f", {other} without a checksum or partner" if other else ""
    if comparison.first_different:
        verdict = f"first bit-different: {comparison.first_different}"
    elif same:
        verdict = "every paired tensor bit-identical"
    else:  # md5 null on one side everywhere (e.g. an NPU dump): nothing was compared
        verdict = "no tensor has a checksum on both sides, nothing compared"
    return f"checksums {label}: {same} bit-identical, {diff} bit-different{tail}; {verdict} ({csv_path})"


def checksum_lines(run: Any) -> list[str]:
    """For ``graphprobe compare``: one line per pair of ``run`` (a
    ``CompareRun``) whose dumps both carry checksums, with the counts and the
    first bit-different tensor, each pair's rows written to
    ``checksum_result_{tag}.csv`` beside its compare CSV. Pairs without
    checksums give no line. Pairs compared by :func:`~graphprobe.compare.compare`
    carry their line already (``PairOutcome.checksums``, made from the
    engine's one read); others are read here, by the engine."""
    lines: list[str] = []
    for outcome in run.outcomes:
        pair = outcome.pair
        if outcome.error is not None:
            continue
        made = getattr(outcome, "checksums", None)
        if made is not None:
            lines.extend(made)
            continue
        if not (Path(pair.target).is_file() and Path(pair.bench).is_file()):
            continue
        try:
            result = native().compare_files(str(pair.target), str(pair.bench))
        except (ValueError, OSError) as e:
            lines.append(f"checksums {pair.label}: {e}")
            continue
        line = pair_checksum_line(result, pair.label, checksum_csv_path(outcome.csv_path, Path(run.output_dir),
                                                                        pair.tag))
        if line is not None:
            lines.append(line)
    return lines

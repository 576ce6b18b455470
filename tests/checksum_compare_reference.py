"""The checksum compare as graphprobe/compare/checksums.py did it before it
moved into the engine (commit 9b50c3b): both dump.json files parsed again
with Python's json and every record walked in Python. Kept as the
independent reference the engine's counts, first bit-different entry and
checksum_result_*.csv are checked against (tests/test_checksum_engine.py),
and as the slow pass tests/test_compare_speed_ratio.py must catch."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator


def make_dirs(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)


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
    target_shape: tuple[int, ...] | None
    bench_shape: tuple[int, ...] | None
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


def _is_tensor(value: Any) -> bool:
    return isinstance(value, dict) and "dtype" in value and "shape" in value


def _walk(value: Any, name: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Tensor records under ``value``, named as compare names them: list
    indices and dict keys joined with dots."""
    if _is_tensor(value):
        yield name, value
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk(item, f"{name}.{i}")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, f"{name}.{key}")


#: Within an entry: inputs, then the parameters the call reads, then outputs
#: (msprobe's compare lists a changed weight before the output it changes).
_PART_ORDER = {"input_args": 0, "input_kwargs": 1, "input": 1, "parameters": 2, "output": 3}


def _tensors(doc: Any) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(entry, compare name, record) for every tensor of a dump.json, entries
    in file (execution) order. ``input_args`` and ``input_kwargs`` are both
    ``input``, as msprobe's compare names them."""
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, dict):
        return
    for entry, parts in data.items():
        if not isinstance(parts, dict):
            continue
        for part, value in sorted(parts.items(), key=lambda kv: _PART_ORDER.get(kv[0], len(_PART_ORDER))):
            prefix = "input" if part in ("input_args", "input_kwargs") else part
            for name, record in _walk(value, f"{entry}.{prefix}"):
                yield entry, name, record


def _load(path: Path) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _carries(doc: Any) -> bool:
    return any(MD5 in record for _, _, record in _tensors(doc))


def has_checksums(dump_json: str | Path) -> bool:
    """Whether a dump.json holds checksums (a tensor record with ``md5``)."""
    path = Path(dump_json)
    if not path.is_file():
        return False
    return _carries(_load(path))


def _digits(doc: Any) -> set[int]:
    return {len(r[MD5]) for _, _, r in _tensors(doc) if isinstance(r.get(MD5), str)}


def _shape(record: dict[str, Any] | None) -> tuple[int, ...] | None:
    shape = None if record is None else record.get("shape")
    return tuple(shape) if isinstance(shape, list) else None


def _text(record: dict[str, Any] | None, key: str) -> str | None:
    value = None if record is None else record.get(key)
    return value if isinstance(value, str) else None


def _row(entry: str, name: str, t: dict[str, Any] | None, b: dict[str, Any] | None) -> ChecksumRow:
    tm, bm = _text(t, MD5), _text(b, MD5)
    td, bd = _text(t, "dtype"), _text(b, "dtype")
    ts, bs = _shape(t), _shape(b)
    if t is None or b is None:
        result = UNPAIRED
    elif tm is None or bm is None:
        result = NO_CHECKSUM
    else:
        result = IDENTICAL if (tm == bm and td == bd and ts == bs) else DIFFERENT
    return ChecksumRow(name, entry, tm, bm, td, bd, ts, bs, result)


def compare_checksums(target: str | Path, bench: str | Path) -> ChecksumComparison | None:
    """Compares the checksums of two dump.json files; None unless both carry
    checksums. Raises ValueError naming both files when one carries
    msprobe's CRC-32 (8 hex digits) and the other graphprobe's checksum (16):
    the two algorithms never agree, so every tensor would read bit-different."""
    t_doc, b_doc = _load(Path(target)), _load(Path(bench))
    if not (_carries(t_doc) and _carries(b_doc)):
        return None
    t_digits, b_digits = _digits(t_doc), _digits(b_doc)
    if t_digits and b_digits and t_digits != b_digits:
        def kind(d: set[int]) -> str:
            return {CRC32_DIGITS: "msprobe's CRC-32 (8 hex digits)",
                    GRAPHPROBE_DIGITS: "graphprobe's 64-bit checksum (16 hex digits)"}.get(
                        min(d), f"{sorted(d)} hex digits")
        raise ValueError(f"checksums not comparable: {target} holds {kind(t_digits)}, {bench} holds "
                         f"{kind(b_digits)}; dump both with the same tool")
    bench_records: dict[str, tuple[str, dict[str, Any]]] = {}
    for entry, name, record in _tensors(b_doc):
        bench_records.setdefault(name, (entry, record))
    rows: list[ChecksumRow] = []
    seen: set[str] = set()
    for entry, name, record in _tensors(t_doc):
        if name in seen:
            continue
        seen.add(name)
        partner = bench_records.get(name)
        rows.append(_row(entry, name, record, partner[1] if partner else None))
    rows.extend(_row(entry, name, None, record) for name, (entry, record) in bench_records.items() if name not in seen)
    first = next((r for r in rows if r.result == DIFFERENT), None)
    return ChecksumComparison(tuple(rows), first.name if first else None, first.entry if first else None)


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


def checksum_lines(run: Any) -> list[str]:
    """For ``graphprobe compare``: one line per pair of ``run`` (a
    ``CompareRun``) whose dumps both carry checksums, with the counts and the
    first bit-different tensor, each pair's rows written to
    ``checksum_result_{tag}.csv`` beside its compare CSV. Pairs without
    checksums give no line."""
    lines: list[str] = []
    for outcome in run.outcomes:
        pair = outcome.pair
        if outcome.error is not None or not (Path(pair.target).is_file() and Path(pair.bench).is_file()):
            continue
        try:
            comparison = compare_checksums(pair.target, pair.bench)
        except (ValueError, OSError) as e:
            lines.append(f"checksums {pair.label}: {e}")
            continue
        if comparison is None:
            continue
        folder = outcome.csv_path.parent if outcome.csv_path is not None else Path(run.output_dir)
        stem = outcome.csv_path.stem.replace("compare_result", "checksum_result", 1) if outcome.csv_path else (
            f"checksum_result_{pair.tag}")
        csv_path = folder / f"{stem}.csv"
        write_checksum_csv(comparison, csv_path)
        same, diff = comparison.count(IDENTICAL), comparison.count(DIFFERENT)
        other = len(comparison.rows) - same - diff
        tail = f", {other} without a checksum or partner" if other else ""
        if comparison.first_different:
            verdict = f"first bit-different: {comparison.first_different}"
        elif same:
            verdict = "every paired tensor bit-identical"
        else:  # md5 null on one side everywhere (e.g. an NPU dump): nothing was compared
            verdict = "no tensor has a checksum on both sides, nothing compared"
        lines.append(f"checksums {pair.label}: {same} bit-identical, {diff} bit-different{tail}; {verdict} "
                     f"({csv_path})")
    return lines

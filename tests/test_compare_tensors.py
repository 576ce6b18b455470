"""Tensor-mode compare in graphprobe's layout (``--tensor-layout graphprobe``:
the statistics CSV with the real-data columns appended, graphprobe's tensor
rules); msprobe's layout, the default, is tested in
test_compare_tensors_msprobe.py.

Dumps are written by hand here: dump.json with ``"task": "tensor"`` and
``data_name`` per record, the tensors with ``torch.save`` under
``dump_tensor_data/``. Expected metric values are worked out in each test
from the numbers chosen (or, for random data, recomputed with plain Python
arithmetic), not taken from the code under test.
"""

from __future__ import annotations

import csv
import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from graphprobe import _C, _compare
from graphprobe.cli import main
from graphprobe.compare import Pair, Thresholds, compare_pair
from graphprobe.compare.tensors import TENSOR_DATA_DIR

E = "Module.fc.Linear.forward.0"
F32_EPS = 2.0**-23
TENSOR_COLUMNS = [
    "Cosine",
    "EucDist",
    "MaxAbsErr",
    "Tensor MaxRelativeErr",
    "One Thousandth Err Ratio",
    "Five Thousandths Err Ratio",
]


# ---------------------------------------------------------------- builders


def record(t: torch.Tensor, name: str, *, dtype: str | None = None, shape: list[int] | None = None) -> dict[str, Any]:
    """A tensor record as the tensor dumper writes it (stats in float64)."""
    d = t.double()
    stats: dict[str, Any] = {"Max": None, "Min": None, "Mean": None, "Norm": None}
    if t.numel() and t.dtype != torch.bool:
        stats = {"Max": d.max().item(), "Min": d.min().item(), "Mean": d.mean().item(), "Norm": d.norm().item()}
    return {
        "type": "torch.Tensor",
        "dtype": dtype or str(t.dtype),
        "shape": shape if shape is not None else list(t.shape),
        **stats,
        "requires_grad": False,
        "data_name": f"{name}.pt",
    }


def write_tensor_dump(
    folder: Path,
    entries: dict[str, dict[str, list[torch.Tensor]]],
    *,
    skip_files: frozenset[str] = frozenset(),
    record_overrides: dict[str, dict[str, Any]] | None = None,
) -> Path:
    """``folder/dump.json`` + ``folder/dump_tensor_data/*.pt``. ``entries``
    maps an entry name to ``{"inputs": [...], "outputs": [...]}``; rows named
    in ``skip_files`` get no file; ``record_overrides`` patches records."""
    data_dir = folder / TENSOR_DATA_DIR
    data_dir.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {}
    for entry, parts in entries.items():
        doc: dict[str, Any] = {"input_args": [], "input_kwargs": {}, "output": []}
        for key, role in (("inputs", "input"), ("outputs", "output")):
            for i, t in enumerate(parts.get(key, [])):
                name = f"{entry}.{role}.{i}"
                rec = record(t, name)
                rec.update((record_overrides or {}).get(name, {}))
                doc["input_args" if role == "input" else "output"].append(rec)
                if name not in skip_files:
                    torch.save(t, data_dir / rec["data_name"])
        data[entry] = doc
    path = folder / "dump.json"
    path.write_text(json.dumps({"task": "tensor", "level": "L0", "framework": "pytorch",
                                "dump_data_dir": None, "data": data}, indent=1))
    return path


def compare_dirs(tmp_path: Path, target: Path, bench: Path, thresholds: Thresholds = Thresholds()) -> list[dict[str, str]]:
    """Compares two dump folders with compare_pair in graphprobe's tensor
    layout; returns the CSV rows."""
    out = tmp_path / "out"
    outcome = compare_pair(Pair(None, "0", target / "dump.json", bench / "dump.json"), out / "r.csv", out / "r.html",
                           thresholds=thresholds, tensor_layout="graphprobe")
    assert outcome.error is None, outcome.error
    with open(out / "r.csv", newline="") as f:
        return list(csv.DictReader(f))


def pair_rows(tmp_path: Path, t_out: torch.Tensor, b_out: torch.Tensor, **kw: Any) -> dict[str, dict[str, str]]:
    """One entry, an exact input and the given outputs; CSV rows by suffix."""
    x = torch.arange(1.0, 7.0).reshape(2, 3)
    t = write_tensor_dump(tmp_path / "t", {E: {"inputs": [x], "outputs": [t_out]}})
    b = write_tensor_dump(tmp_path / "b", {E: {"inputs": [x.clone()], "outputs": [b_out]}})
    rows = compare_dirs(tmp_path, t.parent, b.parent, **kw)
    return {r["NPU Name"][len(E) + 1 :]: r for r in rows}


def metrics(row: dict[str, str]) -> list[float | None]:
    return [None if row[c] == "N/A" else float(row[c]) for c in TENSOR_COLUMNS]


def close(a: float | None, b: float) -> bool:
    if a is None:
        return False
    if math.isnan(b):
        return math.isnan(a)
    return a == pytest.approx(b, rel=1e-12, abs=1e-15)


# ---------------------------------------------------------------- metric values


def test_scaled_copy(tmp_path: Path) -> None:
    b = torch.tensor([[1.0, -2.0, 3.0], [-4.0, 5.0, 0.5]], dtype=torch.float64)
    row = pair_rows(tmp_path, b * 2, b)["output.0"]
    values = [1.0, -2.0, 3.0, -4.0, 5.0, 0.5]
    cos, euc, mae, mre, r1, r5 = metrics(row)
    assert close(cos, 1.0)
    assert close(euc, math.sqrt(sum(v * v for v in values)))  # |2b - b| = |b|
    assert close(mae, 5.0)
    assert close(mre, 1.0)  # |2b - b| / |b|
    assert (r1, r5) == (0.0, 0.0)


def test_orthogonal(tmp_path: Path) -> None:
    rows = pair_rows(tmp_path, torch.tensor([1.0, 1.0]), torch.tensor([1.0, -1.0]))
    cos, euc, mae, mre, r1, r5 = metrics(rows["output.0"])
    assert close(cos, 0.0)
    assert close(euc, 2.0)
    assert close(mae, 2.0)
    assert close(mre, 2.0)  # |1 - (-1)| / |-1|
    assert (r1, r5) == (0.5, 0.5)  # the first element is exact


def test_exact_copy(tmp_path: Path) -> None:
    b = torch.linspace(-3, 3, 50, dtype=torch.float32)
    rows = pair_rows(tmp_path, b.clone(), b)
    for suffix in ("input.0", "output.0"):
        assert metrics(rows[suffix]) == [1.0, 0.0, 0.0, 0.0, 1.0, 1.0]
        assert rows[suffix]["Result"] == "pass"
        assert rows[suffix]["Err_message"] == "[]"


def test_perturbed_fraction(tmp_path: Path) -> None:
    g = torch.Generator().manual_seed(0)
    b = 1.0 + torch.rand(1000, generator=g, dtype=torch.float32)
    t = b.clone()
    t[:250] *= 1.002  # relative error ~0.002: outside 1/1000, inside 5/1000
    t[250:350] *= 1.01  # ~0.01: outside both
    cos, euc, mae, mre, r1, r5 = metrics(pair_rows(tmp_path, t, b)["output.0"])
    assert r1 == 0.65
    assert r5 == 0.9
    # Independent recomputation in plain Python from the stored float32 values.
    tv, bv = [float(v) for v in t], [float(v) for v in b]
    assert close(mae, max(abs(x - y) for x, y in zip(tv, bv)))
    assert close(mre, max(abs(x - y) / abs(y) for x, y in zip(tv, bv)))
    assert close(euc, math.sqrt(math.fsum((x - y) ** 2 for x, y in zip(tv, bv))))
    dot = math.fsum(x * y for x, y in zip(tv, bv))
    assert close(cos, dot / math.sqrt(math.fsum(x * x for x in tv) * math.fsum(y * y for y in bv)))


def test_bench_zero_uses_epsilon(tmp_path: Path) -> None:
    b = torch.tensor([0.0, 1.0, 2.0, 0.0])
    t = torch.tensor([1e-3, 1.0, 2.0, 0.0])  # the last 0 vs 0 is exact
    _, _, mae, mre, r1, r5 = metrics(pair_rows(tmp_path, t, b)["output.0"])
    t0 = float(torch.tensor(1e-3))  # the float32 value stored
    assert close(mae, t0)
    assert close(mre, t0 / F32_EPS)
    assert (r1, r5) == (0.75, 0.75)


def test_zero_tensors(tmp_path: Path) -> None:
    rows = pair_rows(tmp_path, torch.zeros(4), torch.zeros(4))
    assert metrics(rows["output.0"]) == [1.0, 0.0, 0.0, 0.0, 1.0, 1.0]
    one_zero = pair_rows(tmp_path / "2", torch.ones(4), torch.zeros(4))["output.0"]
    assert one_zero["Cosine"] == "nan"
    assert "Cosine: all the bench data is zero" in json.loads(one_zero["Err_message"])
    assert close(metrics(one_zero)[2], 1.0)


def test_non_finite(tmp_path: Path) -> None:
    nan, inf = math.nan, math.inf
    same = pair_rows(tmp_path, torch.tensor([nan, 1.0, inf, 2.0]), torch.tensor([nan, 1.0, inf, 2.0]))["output.0"]
    assert metrics(same) == [1.0, 0.0, 0.0, 0.0, 1.0, 1.0]  # matching non-finite positions count as 0 vs 0
    moved = pair_rows(tmp_path / "2", torch.tensor([1.0, nan, 2.0]), torch.tensor([nan, 1.0, 2.0]))["output.0"]
    assert all(math.isnan(v) for v in metrics(moved))  # type: ignore[arg-type]
    assert any("non-finite values at different positions (first at flat index 0" in m
               for m in json.loads(moved["Err_message"]))
    sign = pair_rows(tmp_path / "3", torch.tensor([inf, 1.0]), torch.tensor([-inf, 1.0]))["output.0"]
    assert all(math.isnan(v) for v in metrics(sign))  # type: ignore[arg-type]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int32, torch.bool])
def test_other_dtypes(tmp_path: Path, dtype: torch.dtype) -> None:
    b = torch.tensor([1, 0, 1, 1], dtype=dtype)
    row = pair_rows(tmp_path, b.clone(), b)["output.0"]
    assert metrics(row) == [1.0, 0.0, 0.0, 0.0, 1.0, 1.0]


def test_single_element_and_empty(tmp_path: Path) -> None:
    one = pair_rows(tmp_path, torch.tensor([3.0]), torch.tensor([2.0]))["output.0"]
    cos, euc, mae, mre, r1, r5 = metrics(one)
    assert math.isnan(cos)  # type: ignore[arg-type]
    assert "Cosine: not defined for a single element" in json.loads(one["Err_message"])
    assert (euc, mae, mre, r1, r5) == (1.0, 1.0, 0.5, 0.0, 0.0)
    empty = pair_rows(tmp_path / "2", torch.zeros(0, 3), torch.zeros(0, 3))["output.0"]
    assert metrics(empty) == [None] * 6
    assert "empty tensor: nothing to compare" in json.loads(empty["Err_message"])


# ---------------------------------------------------------------- mismatches and missing data


def test_missing_file_is_a_warning(tmp_path: Path) -> None:
    x = torch.ones(2, 3)
    t = write_tensor_dump(tmp_path / "t", {E: {"inputs": [x], "outputs": [x]}}, skip_files=frozenset({f"{E}.output.0"}))
    b = write_tensor_dump(tmp_path / "b", {E: {"inputs": [x], "outputs": [x]}})
    rows = {r["NPU Name"]: r for r in compare_dirs(tmp_path, t.parent, b.parent)}
    row = rows[f"{E}.output.0"]
    assert row["Result"] == "warning"
    (msg,) = json.loads(row["Err_message"])
    assert msg.startswith("tensor metrics not computed: target tensor file missing: ")
    assert msg.endswith(f"{TENSOR_DATA_DIR}/{E}.output.0.pt")
    assert metrics(row) == [None] * 6
    assert row["L2norm diff"] == "0"  # the statistics are still compared
    assert rows[f"{E}.input.0"]["Result"] == "pass"


def test_file_dtype_mismatch(tmp_path: Path) -> None:
    # dump.json agrees (float32 on both sides), the target file does not.
    x = torch.ones(2, 3)
    name = f"{E}.output.0"
    t = write_tensor_dump(tmp_path / "t", {E: {"outputs": [x]}})
    torch.save(x.half(), t.parent / TENSOR_DATA_DIR / f"{name}.pt")
    b = write_tensor_dump(tmp_path / "b", {E: {"outputs": [x]}})
    (row,) = compare_dirs(tmp_path, t.parent, b.parent)
    assert row["Result"] == "error"
    assert json.loads(row["Err_message"]) == [
        "tensor metrics not computed: dtype mismatch in the tensor files: torch.float16 vs torch.float32"
    ]
    assert metrics(row) == [None] * 6


def test_record_dtype_and_shape_mismatch(tmp_path: Path) -> None:
    x = torch.ones(2, 3)
    t = write_tensor_dump(tmp_path / "t", {E: {"outputs": [x.double(), x.reshape(3, 2)]}})
    b = write_tensor_dump(tmp_path / "b", {E: {"outputs": [x, x]}})
    rows = compare_dirs(tmp_path, t.parent, b.parent)
    assert [r["Result"] for r in rows] == ["error", "error"]
    assert "tensor metrics not computed: dtype mismatch: torch.float64 vs torch.float32" in json.loads(
        rows[0]["Err_message"])
    assert "tensor metrics not computed: shape mismatch: [3, 2] vs [2, 3]" in json.loads(rows[1]["Err_message"])
    assert all(metrics(r) == [None] * 6 for r in rows)


def test_unreadable_files(tmp_path: Path) -> None:
    good = tmp_path / "good.pt"
    torch.save(torch.ones(3), good)
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a zip archive")
    not_tensor = tmp_path / "dict.pt"
    torch.save({"a": torch.ones(3)}, not_tensor)
    with pytest.raises(_C.TensorFileError, match="garbage.pt' is not a readable torch.save archive"):
        _C.tensor_metrics(str(garbage), str(good))
    with pytest.raises(_C.TensorFileError, match="dict.pt' is not a readable torch.save archive: the file holds a "
                       "dict, not one tensor"):
        _C.tensor_metrics(str(good), str(not_tensor))
    with pytest.raises(OSError, match="cannot open tensor file"):
        _C.tensor_metrics(str(tmp_path / "absent.pt"), str(good))
    with pytest.raises(ValueError, match=r"shape mismatch in the tensor files: \[3\] vs \[2\]"):
        torch.save(torch.ones(2), tmp_path / "two.pt")
        _C.tensor_metrics(str(good), str(tmp_path / "two.pt"))


def test_non_contiguous_saved_view(tmp_path: Path) -> None:
    base = torch.arange(12.0).reshape(3, 4)
    torch.save(base.t(), tmp_path / "t.pt")  # strided view of a larger storage
    torch.save(base.t().contiguous() * 2, tmp_path / "b.pt")
    d = _C.tensor_metrics(str(tmp_path / "t.pt"), str(tmp_path / "b.pt"))
    assert d["max_abs_err"] == 11.0  # |v - 2v| at the largest v
    assert d["cosine"] == pytest.approx(1.0, abs=1e-15)


def test_strided_views_walk_in_row_major_order(tmp_path: Path) -> None:
    base = torch.arange(120.0).reshape(4, 6, 5)
    view = base[1:, ::2, 1:]  # storage offset, strides (30, 10, 1), sizes (3, 3, 4)
    assert not view.is_contiguous()
    torch.save(view, tmp_path / "v.pt")
    torch.save(view.contiguous(), tmp_path / "c.pt")
    torch.save(view.permute(2, 0, 1).contiguous().permute(1, 2, 0), tmp_path / "p.pt")  # other strides, same values
    assert _C.tensor_metrics(str(tmp_path / "v.pt"), str(tmp_path / "c.pt"))["max_abs_err"] == 0.0
    assert _C.tensor_metrics(str(tmp_path / "v.pt"), str(tmp_path / "p.pt"))["max_abs_err"] == 0.0
    torch.save(view.contiguous() * 2, tmp_path / "d.pt")
    # largest |v - 2v| = largest v = base[3, 4, 4] = 3*30 + 4*5 + 4
    assert _C.tensor_metrics(str(tmp_path / "v.pt"), str(tmp_path / "d.pt"))["max_abs_err"] == 114.0


def test_forked_workers_after_torch_used_threads(tmp_path: Path) -> None:
    """Workers are forked; a parent that already ran torch's OpenMP pool must
    not make them hang (no parallel ATen op on the metrics path)."""
    big = torch.arange(300 * 300, dtype=torch.float32).reshape(300, 300).t()  # strided, > one parallel grain
    for side in ("t", "b"):
        for rank in (0, 1):
            write_tensor_dump(tmp_path / side / "step0" / f"rank{rank}", {E: {"outputs": [big]}})
    script = (
        "import sys, torch\n"
        "from graphprobe.compare import compare\n"
        "x = torch.randn(2000, 2000); (x.t().contiguous() @ x).sum()  # uses the intra-op pool\n"
        f"run = compare({str(tmp_path / 't')!r}, {str(tmp_path / 'b')!r}, {str(tmp_path / 'out')!r}, "
        "jobs=2, progress=False)\n"
        "print([o.counts for o in run.outcomes], [o.error for o in run.outcomes])\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    one = "{'pass': 1, 'warning': 0, 'error': 0, 'unmatched': 0}"
    assert proc.stdout.strip() == f"[{one}, {one}] [None, None]"


def test_statistics_dump_on_one_side_stays_statistics(tmp_path: Path) -> None:
    x = torch.ones(2, 3)
    t = write_tensor_dump(tmp_path / "t", {E: {"outputs": [x]}})
    doc = json.loads(t.read_text())
    for rec in doc["data"][E]["output"]:
        del rec["data_name"]
    doc["task"] = "statistics"
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "dump.json").write_text(json.dumps(doc))
    rows = compare_dirs(tmp_path, tmp_path / "s", t.parent)
    assert "Cosine" not in rows[0]
    assert list(rows[0]) == _compare.csv_header()


# ---------------------------------------------------------------- verdict rules


def test_cosine_drop_warns(tmp_path: Path) -> None:
    # Exact input (Cosine 1); output Cosine 0.8 -> 1 - 0.8 > 0.1: warning.
    # (Its One Thousandth Err Ratio is 0 too: that error rule is switched off
    # here with thousandth_output_max=0, and on in the default run.)
    f64 = torch.float64
    t_out, b_out = torch.tensor([0.8, 0.6], dtype=f64), torch.tensor([1.0, 0.0], dtype=f64)
    assert pair_rows(tmp_path / "default", t_out, b_out)["output.0"]["Result"] == "error"
    rows = pair_rows(tmp_path, t_out, b_out, thresholds=Thresholds(thousandth_output_max=0.0))
    out = rows["output.0"]
    assert close(metrics(out)[0], 0.8)
    assert out["Result"] == "warning"
    assert any(m.startswith("output Cosine 0.8") for m in json.loads(out["Err_message"]))
    # The threshold is settable: a drop of 0.25 allowed -> no warning from this rule.
    relaxed = pair_rows(tmp_path / "2", t_out, b_out,
                        thresholds=Thresholds(cosine_drop=0.25, thousandth_output_max=0.0))["output.0"]
    assert relaxed["Result"] == "pass"
    assert not any("Cosine" in m for m in json.loads(relaxed["Err_message"]))


def test_thousandth_rule_errors_and_marks_first_divergence(tmp_path: Path) -> None:
    # Output values all ~0.5 % off (statistics: NormRelativeErr 0.5 %, below
    # every statistics threshold), inputs exact: One Thousandth Err Ratio 0 < 0.1.
    b = torch.arange(1.0, 101.0, dtype=torch.float64)
    x = torch.ones(4, dtype=torch.float64)
    t_dir = write_tensor_dump(tmp_path / "t", {E: {"inputs": [x], "outputs": [b * 1.005]}}).parent
    b_dir = write_tensor_dump(tmp_path / "b", {E: {"inputs": [x], "outputs": [b]}}).parent
    rows = {r["NPU Name"][len(E) + 1 :]: r for r in compare_dirs(tmp_path, t_dir, b_dir)}
    out = rows["output.0"]
    assert metrics(out)[4] == 0.0
    assert out["Result"] == "error"
    assert "output One Thousandth Err Ratio 0 < 0.1 while every input's is > 0.9" in json.loads(out["Err_message"])
    assert out["First Divergence"] == "yes" and rows["input.0"]["First Divergence"] == "yes"
    # thousandth_output_max 0: never below -> that rule stays silent.
    rows2 = compare_dirs(tmp_path / "2", t_dir, b_dir, Thresholds(thousandth_output_max=0.0))
    assert [r["Result"] for r in rows2] == ["pass", "pass"]


def test_engine_api_guards(tmp_path: Path) -> None:
    x = torch.ones(3)
    t = write_tensor_dump(tmp_path / "t", {E: {"outputs": [x]}})
    b = write_tensor_dump(tmp_path / "b", {E: {"outputs": [x]}})
    result = _compare.compare_files(str(t), str(b))
    assert result.has_tensor_data and result.target_task == "tensor"
    (row,) = result.rows
    assert row.target_data_name == f"{E}.output.0.pt" and row.tensor_status == "none"
    with pytest.raises(ValueError, match="status must be"):
        result.set_tensor_metrics(0, "fine", (None,) * 6, [])
    with pytest.raises(IndexError):
        result.set_tensor_metrics(5, "computed", (None,) * 6, [])
    result.set_tensor_metrics(0, "computed", (1.0, 0.0, 0.0, 0.0, 1.0, 1.0), [])
    result.finish_tensor_compare(_compare.CompareOptions())
    assert result.tensor_mode and result.rows[0].tensor_metrics == (1.0, 0.0, 0.0, 0.0, 1.0, 1.0)
    with pytest.raises(RuntimeError, match="called twice"):
        result.finish_tensor_compare(_compare.CompareOptions())
    with pytest.raises(ValueError, match="thresholds"):
        _compare.compare_files(str(t), str(b), _compare.CompareOptions(cosine_drop=-1.0))


# ---------------------------------------------------------------- CLI


def test_cli_tensor_dump_roots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    entries_b = {E: {"inputs": [x], "outputs": [x * 3]}}
    entries_t = {E: {"inputs": [x], "outputs": [x * 3 + torch.tensor([[0.0, 0.0], [0.0, 0.012]])]}}
    write_tensor_dump(tmp_path / "t" / "step0" / "rank0", entries_t)
    write_tensor_dump(tmp_path / "b" / "step0" / "rank0", entries_b)
    out = tmp_path / "out"
    code = main(["compare", str(tmp_path / "t"), str(tmp_path / "b"), "-o", str(out), "-q",
                 "--cosine-drop", "0.05", "--tensor-layout", "graphprobe"])
    _, err = capsys.readouterr()
    assert code == 0, err
    (csv_path,) = (out / "step0").glob("compare_result_0_*.csv")
    with open(csv_path, newline="") as f:
        header = next(csv.reader(f))
    stats_header = _compare.csv_header()
    assert header == stats_header[:-2] + TENSOR_COLUMNS + ["Match", "First Divergence"]
    assert header == _compare.csv_header(tensor_columns=True, tensor_layout="graphprobe")
    with open(csv_path, newline="") as f:
        rows = {r["NPU Name"][len(E) + 1 :]: r for r in csv.DictReader(f)}
    assert metrics(rows["input.0"]) == [1.0, 0.0, 0.0, 0.0, 1.0, 1.0]
    # Output: bench [3, 6, 9, 12], target differs by 0.012 at the last element
    # (float32 values: recomputed from the stored floats).
    t_last = float(torch.tensor(12.012))
    cos, euc, mae, mre, r1, r5 = metrics(rows["output.0"])
    assert close(mae, t_last - 12.0) and close(euc, t_last - 12.0)
    assert close(mre, (t_last - 12.0) / 12.0)  # ~0.001: not < 0.001
    assert (r1, r5) == (0.75, 1.0)
    dot = 9 + 36 + 81 + 12 * t_last
    assert close(cos, dot / math.sqrt((9 + 36 + 81 + t_last**2) * (9 + 36 + 81 + 144)))
    assert rows["output.0"]["Result"] == "pass"
    (report,) = (out / "step0").glob("compare_report_0_*.html")
    assert re.search(r"<th[^>]*>Cosine</th><th[^>]*>MaxAbsErr</th>", report.read_text())


# ---------------------------------------------------------------- float8 and dtypes without metrics (issue 28, D4)


FLOAT8 = [torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz, torch.float8_e8m0fnu]


@pytest.mark.parametrize("dtype", FLOAT8, ids=str)
def test_float8_is_compared_as_float64(tmp_path: Path, dtype: torch.dtype) -> None:
    """float8 dumps used to end compare with a NotImplementedError traceback;
    their values are compared as float64 (reference: the stored values
    converted by torch, the metrics in plain Python)."""
    values = [1.0, 2.0, 4.0, 0.5, 8.0, 16.0]  # exact in every float8 kind (e8m0 holds powers of two only)
    b = torch.tensor(values).reshape(2, 3).to(dtype)
    t = (torch.tensor(values) * torch.tensor([1, 1, 1, 1, 1, 2.0])).reshape(2, 3).to(dtype)
    row = pair_rows(tmp_path, t, b)["output.0"]
    tv, bv = t.double().flatten().tolist(), b.double().flatten().tolist()
    assert tv[-1] == 32.0 and bv[-1] == 16.0  # the one difference, stored exactly
    dot = sum(x * y for x, y in zip(tv, bv))
    cos = dot / math.sqrt(sum(x * x for x in tv) * sum(y * y for y in bv))
    cos_got, euc, mae, mre, r1, r5 = metrics(row)
    assert close(cos_got, cos) and close(euc, 16.0) and close(mae, 16.0) and close(mre, 1.0)
    assert (r1, r5) == (5 / 6, 5 / 6)
    msprobe = _C.msprobe_real_data(*(str(tmp_path / side / TENSOR_DATA_DIR / f"{E}.output.0.pt") for side in "tb"))
    assert msprobe["cells"][2] == 16.0 and msprobe["cells"][3] == 1.0


def _raw_dump(folder: Path, tensors: dict[str, torch.Tensor]) -> None:
    """A tensor dump of one entry per tensor, records written without
    statistics (no arithmetic exists for bits and fp4)."""
    (folder / TENSOR_DATA_DIR).mkdir(parents=True)
    data = {}
    for name, x in tensors.items():
        entry = f"Functional.{name}.0.forward"
        torch.save(x, folder / TENSOR_DATA_DIR / f"{entry}.output.0.pt")
        data[entry] = {"input_args": [], "input_kwargs": {}, "output": [{
            "type": "torch.Tensor", "dtype": str(x.dtype), "shape": list(x.shape), "Max": None, "Min": None,
            "Mean": None, "Norm": None, "requires_grad": False, "data_name": f"{entry}.output.0.pt"}]}
    (folder / "dump.json").write_text(json.dumps({"task": "tensor", "level": "L1", "data": data}))


@pytest.mark.parametrize("layout", ["msprobe", "graphprobe"])
def test_dtypes_without_metrics_are_reported_per_row(tmp_path: Path, layout: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """float8 next to fp4, bits and complex32 in one dump: the CLI finishes
    (exit 0, CSV written), float8 rows have metrics, the others a message."""
    raw = torch.arange(6, dtype=torch.uint8).reshape(2, 3)
    tensors = {"f8": torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]).to(torch.float8_e4m3fn),
               "fp4": raw.view(torch.float4_e2m1fn_x2), "bits": raw.view(torch.bits8),
               "c32": torch.ones(2, 3, dtype=torch.complex32), "u16": raw.to(torch.uint16)}
    for side in ("t", "b"):
        _raw_dump(tmp_path / side, tensors)
    out = tmp_path / "out"
    code = main(["compare", str(tmp_path / "t"), str(tmp_path / "b"), "-o", str(out), "-q",
                 "--tensor-layout", layout])
    _, err = capsys.readouterr()
    assert code == 0, err
    assert "Traceback" not in err
    (csv_path,) = out.glob("compare_result_*.csv")
    with open(csv_path, newline="") as f:
        rows = {r["NPU Name"].split(".")[1]: r for r in csv.DictReader(f)}
    assert set(rows) == set(tensors)
    cosine = "Cosine"
    for name in ("f8", "u16"):
        assert float(rows[name][cosine]) == 1.0, rows[name]
    for name, why in (("fp4", "two 4-bit values are packed"), ("bits", "raw bits"), ("c32", "no order")):
        messages = json.loads(rows[name]["Err_message"])
        assert any("are not supported: " in m and why in m for m in messages), messages
        if layout == "graphprobe":
            assert rows[name]["Result"] == "warning"
        else:
            assert rows[name][cosine] == "unsupported"

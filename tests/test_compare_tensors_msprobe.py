"""Tensor dumps in the default layout: msprobe's real-data compare.

The reference is the CSV that msprobe's own ``msprobe compare`` (26.2.0) wrote
for the pair in tests/msprobe_data/tensor_pair (made by
generate_tensor_pair.py: a 2 % weight fault, NaN/inf at equal and at
different positions, shapes and dtypes that differ, bfloat16, float16, int64
and bool tensors, zeros, empty, 0-d and one-element tensors, a missing file,
unmatched rows). Every row must agree column by column: words and verdicts
exactly, numbers within a tolerance. The metrics are also recomputed here in
float64 with numpy, independently of both tools. Where msprobe is installed, a
live test regenerates the pair and runs msprobe again.
"""

from __future__ import annotations

import csv
import functools
import gzip
import importlib.util
import io
import json
import math
import operator
import shutil
import sys
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from compare_fixtures import csv_disagreements

from graphprobe import _compare
from graphprobe.cli import main
from graphprobe.compare import compare

DATA = Path(__file__).parent / "msprobe_data" / "tensor_pair"
METRICS = ["Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
           "Five Thousandths Err Ratio"]
STATS = ["NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max", "Bench min", "Bench mean", "Bench l2norm"]
TEXT = ["Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape", "Result", "Data_name"]
WORDS = {"unsupported", "shape unmatched", "N/A", "Nan"}


def unpack(tmp: Path) -> tuple[Path, Path]:
    """The committed dumps, extracted: (target folder, bench folder)."""
    with tarfile.open(DATA / "dumps.tar.gz") as tar:
        tar.extractall(tmp, filter="data")
    return tmp / "target", tmp / "bench"


def read_csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def msprobe_csv() -> str:
    with gzip.open(DATA / "msprobe.csv.gz", "rt", encoding="utf-8", newline="") as f:
        return f.read()


def ours_csv(target: Path, bench: Path, out: Path, **kw: Any) -> str:
    run = compare(target / "dump.json", bench / "dump.json", out, progress=False, jobs=1, **kw)
    (outcome,) = run.outcomes
    assert outcome.error is None, outcome.error
    assert outcome.csv_path is not None
    return outcome.csv_path.read_text(encoding="utf-8")


def number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def same_metric(column: str, ours: str, theirs: str) -> bool:
    if ours in WORDS or theirs in WORDS:
        return ours == theirs
    a, b = number(ours), number(theirs)
    if a is None or b is None:
        return False
    if math.isinf(a) or math.isinf(b):
        return a == b
    # Cosine is rounded to 6 decimals above 0.9999; a sum in another order
    # can land on the other side of a rounding step.
    tol = 2e-6 if column == "Cosine" else 1e-9
    return a == pytest.approx(b, rel=tol, abs=1e-12)


def same_stat(ours: str, theirs: str) -> bool:
    a, b = number(ours), number(theirs)
    if a is None or b is None or math.isnan(a) or math.isnan(b):
        return True  # words ("Nan", "None", "N/A") are spelled differently; the numbers must agree
    return a == pytest.approx(b, rel=1e-6, abs=1e-12)


def disagreements(ours: list[dict[str, str]], theirs: list[dict[str, str]]) -> list[str]:
    """Every way in which our rows differ from msprobe's, one line each."""
    extra = {r["NPU Name"] for r in ours} - {r["NPU Name"] for r in theirs}
    same = {c: operator.eq for c in TEXT} | {c: functools.partial(same_metric, c) for c in METRICS}
    return [f"{name}: not in msprobe's CSV" for name in extra] + csv_disagreements(
        ours, theirs, same | {c: same_stat for c in STATS})


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[dict[str, str]], str]:
    tmp = tmp_path_factory.mktemp("tensor_pair")
    target, bench = unpack(tmp)
    text = ours_csv(target, bench, tmp / "out")
    return target, bench, read_csv(text), text


def test_columns_are_msprobes_real_data_columns(pair: tuple[Path, Path, list[dict[str, str]], str]) -> None:
    header = next(csv.reader(io.StringIO(pair[3])))
    theirs = next(csv.reader(io.StringIO(msprobe_csv())))
    assert header == theirs + ["Match", "First Divergence"]
    assert header == _compare.csv_header(tensor_columns=True)


def test_every_row_agrees_with_msprobe(pair: tuple[Path, Path, list[dict[str, str]], str]) -> None:
    theirs = read_csv(msprobe_csv())
    assert len(theirs) == 37
    assert disagreements(pair[2], theirs) == []


def test_the_check_sees_a_changed_cell(pair: tuple[Path, Path, list[dict[str, str]], str]) -> None:
    theirs = read_csv(msprobe_csv())
    rows = {r["NPU Name"]: r for r in theirs}
    rows["Functional.split.0.forward.output.0"]["Result"] = "pass"
    rows["Tensor.view.0.forward.output.0"]["Cosine"] = "unsupported"
    rows["Module.fc.Linear.forward.0.output.0"]["MaxRelativeErr"] = "0.0200004"
    found = disagreements(pair[2], theirs)
    assert len(found) == 3, found


def test_msprobes_rules_on_the_first_output(pair: tuple[Path, Path, list[dict[str, str]], str]) -> None:
    """Spelled out for the cases where msprobe's rules differ from
    graphprobe's own: the lowest output value decides, the first output row
    takes the verdict (split's exact output.0, not its rewritten output.1)."""
    rows = {r["NPU Name"]: r for r in pair[2]}
    assert rows["Functional.split.0.forward.output.0"]["Result"] == "error"
    assert rows["Functional.split.0.forward.output.1"]["Result"] == "pass"
    assert rows["Functional.gelu.0.forward.output.0"]["Result"] == "warning"
    # The 2 % weight fault: the output drifts, no real-data rule fires.
    assert {rows[f"Module.fc.Linear.forward.0.{s}"]["Result"] for s in ("input.0", "parameters.weight", "output.0")} \
        == {"pass"}
    assert rows["Functional.softmax.0.forward.output.0"]["Cosine"] == "unsupported"
    assert any("tensor file missing" in m for m in json.loads(rows["Functional.softmax.0.forward.output.0"]["Err_message"]))


def test_unreadable_and_complex_files_are_unsupported(tmp_path: Path) -> None:
    """msprobe writes "unsupported" for a file it cannot read or a dtype it
    does not support; the reason goes to Err_message. A file that cannot be
    read was not compared: Result error (msprobe passes it; issue 36 item 17),
    while an unsupported dtype keeps msprobe's pass."""
    target, bench = unpack(tmp_path)
    name = "Functional.gelu.0.forward.input.0.pt"
    (target / "dump_tensor_data" / name).write_bytes(b"not a torch.save archive")
    torch.save(torch.ones(2, dtype=torch.complex64), bench / "dump_tensor_data" / "Functional.relu.0.forward.input.0.pt")
    rows = {r["NPU Name"]: r for r in read_csv(ours_csv(target, bench, tmp_path / "out"))}
    for row_name, why, result in (("Functional.gelu.0.forward.input.0", "not a readable torch.save archive", "error"),
                                  ("Functional.relu.0.forward.input.0", "not supported", "pass")):
        row = rows[row_name]
        assert [row[c] for c in METRICS] == ["unsupported"] * 6
        assert row["Result"] == result
        assert any(why in m for m in json.loads(row["Err_message"])), row["Err_message"]


def test_engine_takes_msprobes_words_only(tmp_path: Path) -> None:
    target, bench = unpack(tmp_path)
    result = _compare.compare_files(str(target / "dump.json"), str(bench / "dump.json"))
    with pytest.raises(ValueError, match="'unsupported', 'shape unmatched', 'N/A', 'Nan'; got 'nope'"):
        result.set_tensor_metrics(0, "computed", (1.0, "nope", None, None, None, None), [])
    with pytest.raises(ValueError, match="6 items"):
        result.set_tensor_metrics(0, "computed", (1.0,), [])
    result.set_tensor_metrics(0, "computed", (1.0, "Nan", None, 0.5, "N/A", "shape unmatched"), [])
    assert result.rows[0].tensor_metrics == (1.0, None, None, 0.5, None, None)


# ------------------------------------------------------- independent float64


def load(folder: Path, name: str) -> np.ndarray:
    t = torch.load(folder / "dump_tensor_data" / name, weights_only=True)
    return np.squeeze(t.double().numpy())


NARROW = {"torch.float32", "torch.float16", "torch.bfloat16"}


def expected(x: np.ndarray, y: np.ndarray, narrow: bool) -> dict[str, float]:
    """The metrics in float64, from their definitions (docs/formats.md)."""
    finite = np.isfinite(x) & np.isfinite(y)
    x, y = np.where(finite, x, 0.0), np.where(finite, y, 0.0)
    eps = float(np.finfo(np.float32 if narrow else np.float64).eps)
    zero = y == 0
    rel = np.abs(x - y) / np.where(zero, eps, np.abs(y))  # (x + eps - (0 + eps)) / eps
    return {
        "Cosine": float(np.sum(x * y) / math.sqrt(float(np.sum(x * x)) * float(np.sum(y * y)))),
        "EucDist": math.sqrt(float(np.sum((x - y) ** 2))),
        "MaxAbsErr": float(np.max(np.abs(x - y))),
        "MaxRelativeErr": float(np.max(rel)),
        "One Thousandth Err Ratio": float(np.mean(rel < 0.001)),
        "Five Thousandths Err Ratio": float(np.mean(rel < 0.005)),
    }


def test_metrics_match_float64_definitions(pair: tuple[Path, Path, list[dict[str, str]], str]) -> None:
    target, bench, rows, _ = pair
    checked = 0
    for r in rows:
        names = r["Data_name"]
        if r["Cosine"] in WORDS:
            continue
        t_name, b_name = (s.strip(" '") for s in names.strip("[]").split(","))
        x, y = load(target, t_name), load(bench, b_name)
        exp = expected(x, y, r["NPU Dtype"] in NARROW and r["Bench Dtype"] in NARROW)
        got = {c: float(r[c]) for c in METRICS}
        n = x.size
        assert got["Cosine"] == pytest.approx(exp["Cosine"], abs=2e-6), r["NPU Name"]
        assert got["EucDist"] == pytest.approx(exp["EucDist"], rel=1e-9, abs=1e-12), r["NPU Name"]
        assert got["MaxAbsErr"] == pytest.approx(exp["MaxAbsErr"], abs=1e-11), r["NPU Name"]
        # float32 arithmetic for float types (as msprobe): ~1e-7 relative.
        assert got["MaxRelativeErr"] == pytest.approx(exp["MaxRelativeErr"], rel=1e-6, abs=1e-11), r["NPU Name"]
        for c in METRICS[4:]:
            assert abs(got[c] - exp[c]) <= 1 / n + 1e-12, (r["NPU Name"], c)
        checked += 1
    assert checked >= 20


# ------------------------------------------------------- both layouts, CLI, gate


def test_graphprobe_layout_stays_available(tmp_path: Path) -> None:
    target, bench = unpack(tmp_path)
    rows = read_csv(ours_csv(target, bench, tmp_path / "out", tensor_layout="graphprobe"))
    assert list(rows[0]) == _compare.csv_header(tensor_columns=True, tensor_layout="graphprobe")
    assert "NormRelativeErr" in rows[0] and "Tensor MaxRelativeErr" in rows[0] and "Data_name" not in rows[0]
    by_name = {r["NPU Name"]: r for r in rows}
    # graphprobe's rules judge each output row: split's rewritten output.1 is
    # the error (msprobe puts it on output.0).
    assert by_name["Functional.split.0.forward.output.1"]["Result"] == "error"
    with pytest.raises(ValueError, match="tensor_layout"):
        compare(target, bench, tmp_path / "x", tensor_layout="excel")


@pytest.mark.parametrize("layout", [None, "graphprobe"])
def test_cli_report_and_gate(tmp_path: Path, layout: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    target, bench = unpack(tmp_path)
    out = tmp_path / "out"
    extra = ["--tensor-layout", layout] if layout else []
    code = main(["compare", str(target / "dump.json"), str(bench / "dump.json"), "-o", str(out), "-q",
                 "--fail-on", "error", *extra])
    _, err = capsys.readouterr()
    assert code == 1
    assert "row(s) with Result error" in err
    (csv_path,) = out.glob("compare_result_*.csv")
    header = next(csv.reader(io.StringIO(csv_path.read_text())))
    assert header == _compare.csv_header(tensor_columns=True, tensor_layout=layout or "msprobe")
    (report,) = out.glob("compare_report_*.html")
    page = report.read_text()
    assert "Cosine" in page and "Functional.relu.0.forward.output.0" in page


def test_cli_help_names_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--help"]) == 0
    text = capsys.readouterr().out
    assert "--tensor-layout" in text and "{msprobe,graphprobe}" in text


# ------------------------------------------------------- live msprobe

needs_msprobe = pytest.mark.skipif(
    shutil.which("msprobe") is None or importlib.util.find_spec("msprobe") is None,
    reason="msprobe (pip install mindstudio-probe) is not installed",
)


@needs_msprobe
def test_live_msprobe_agrees(tmp_path: Path) -> None:
    sys.path.insert(0, str(DATA.parent))
    try:
        import generate_tensor_pair
    finally:
        sys.path.pop(0)
    fresh = tmp_path / "fresh"
    generate_tensor_pair.main(str(fresh))
    with tarfile.open(fresh / "dumps.tar.gz") as tar:
        tar.extractall(tmp_path / "dumps", filter="data")
    ours = read_csv(ours_csv(tmp_path / "dumps" / "target", tmp_path / "dumps" / "bench", tmp_path / "out"))
    with gzip.open(fresh / "msprobe.csv.gz", "rt", encoding="utf-8", newline="") as f:
        theirs = read_csv(f.read())
    assert disagreements(ours, theirs) == []


@needs_msprobe
def test_live_msprobe_agrees_on_graphprobes_own_tensor_dumps(tmp_path: Path) -> None:
    """The issue's case: two graphprobe tensor dumps of a small transformer,
    one with a weight 2 % off; msprobe's compare of them and ours agree row
    by row."""
    import subprocess

    sys.path.insert(0, str(Path(__file__).parent))
    try:
        from models import make_transformer
    finally:
        sys.path.pop(0)
    import graphprobe

    folders = []
    for name, scale in (("target", 1.02), ("bench", 1.0)):
        model = make_transformer()
        with torch.no_grad():
            model.layers[1].mlp.up.weight.mul_(scale)
        config = tmp_path / f"{name}.json"
        config.write_text(json.dumps({"task": "tensor", "level": "L0", "dump_path": str(tmp_path / name)}))
        dumper = graphprobe.AclGraphDumper(str(config))
        dumper.start(model)
        with torch.no_grad():
            model(torch.randint(0, 64, (2, 5), generator=torch.Generator().manual_seed(0)))
        dumper.step()
        dumper.stop()
        graphprobe.flush()
        (folder,) = (tmp_path / name / "step0").iterdir()
        folders.append(folder)
    target, bench = folders
    out = tmp_path / "msprobe_out"
    subprocess.run(["msprobe", "compare", "-tp", str(target / "dump.json"), "-gp", str(bench / "dump.json"),
                    "-o", str(out)], check=True, capture_output=True)
    (theirs_csv,) = out.glob("compare_result_*.csv")
    theirs = read_csv(theirs_csv.read_text(encoding="utf-8"))
    ours = read_csv(ours_csv(target, bench, tmp_path / "ours"))
    assert len(theirs) > 20
    assert any(r["Result"] != "pass" or float(r["MaxAbsErr"]) > 0 for r in theirs if r["MaxAbsErr"] not in WORDS)
    assert disagreements(ours, theirs) == []

"""graphprobe's compare against msprobe's own compare, on msprobe's own dumps.

The reference is the CSV msprobe's ``msprobe compare`` wrote for each pair
(tests/msprobe_data, see its README.md): every row msprobe reports must be
in graphprobe's CSV with the same Bench Name and Result, and every number
equal within 1e-6 relative. The per-part tests read the records straight
from msprobe's dump.json with Python's json. Where msprobe is installed, a
live test makes fresh dumps with msprobe's PrecisionDebugger, runs msprobe's
compare on them and checks the same.
"""

from __future__ import annotations

import csv
import gzip
import importlib.util
import json
import math
import operator
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from compare_fixtures import csv_disagreements

from graphprobe.compare import compare

DATA = Path(__file__).parent / "msprobe_data"

# name: (target dump, bench dump, msprobe's CSV for them)
PAIRS = {
    "quick_start": ("quick_start/step1.dump.json.gz", "quick_start/step0.dump.json.gz",
                    "quick_start/msprobe_step1_vs_step0.csv.gz"),
    "mix_cpu_training_step": ("mix_cpu/step1.dump.json.gz", "mix_cpu/step0.dump.json.gz",
                              "mix_cpu/msprobe_step1_vs_step0.csv.gz"),
    "mix_cpu_inf_nan": ("mix_cpu/step2.dump.json.gz", "mix_cpu/step1.dump.json.gz",
                        "mix_cpu/msprobe_step2_vs_step1.csv.gz"),
    "edge_cases": ("edge_cases/target/dump.json", "edge_cases/bench/dump.json", "edge_cases/msprobe.csv.gz"),
}

NUMBER_COLUMNS = ("Max diff", "Min diff", "Mean diff", "L2norm diff", "MaxRelativeErr", "MinRelativeErr",
                  "MeanRelativeErr", "NormRelativeErr", "NPU max", "NPU min", "NPU mean", "NPU l2norm",
                  "Bench max", "Bench min", "Bench mean", "Bench l2norm")
TEXT_COLUMNS = ("Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape", "Result")


def plain(path: Path, tmp: Path) -> Path:
    """The file itself, or its gunzipped copy (named dump.json, as msprobe wants)."""
    if path.suffix != ".gz":
        return path
    out = tmp / path.name.removesuffix(".gz").replace(".", "_") / ("dump.json" if ".json" in path.name else "x.csv")
    out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "rb") as f, open(out, "wb") as g:
        shutil.copyfileobj(f, g)
    return out


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def ours_csv(target: Path, bench: Path, out: Path) -> Path:
    run = compare(target, bench, out, html=False, progress=False, jobs=1)
    (outcome,) = run.outcomes
    assert outcome.error is None, outcome.error
    assert outcome.csv_path is not None
    return outcome.csv_path


def cell_value(text: str) -> float | str:
    """A number (percent sign dropped, msprobe's " inf" accepted) or the text."""
    s = text.strip()
    try:
        return float(s.removesuffix("%"))
    except ValueError:
        return s


def same_cell(a: str, b: str) -> bool:
    x, y = cell_value(a), cell_value(b)
    if isinstance(x, float) and isinstance(y, float):
        if math.isnan(x) or math.isnan(y):
            return math.isnan(x) and math.isnan(y)
        return x == y or math.isclose(x, y, rel_tol=1e-6, abs_tol=0.0)
    return x == y


def disagreements(ours: list[dict[str, str]], msprobe: list[dict[str, str]]) -> list[str]:
    """Every way in which our rows differ from msprobe's, one line each."""
    return csv_disagreements(ours, msprobe, {c: operator.eq for c in TEXT_COLUMNS} | {c: same_cell for c in NUMBER_COLUMNS})


def assert_agrees(ours: Path, msprobe: Path) -> None:
    rows, reference = read_csv(ours), read_csv(msprobe)
    assert reference, "msprobe's CSV is empty"
    problems = disagreements(rows, reference)
    assert not problems, f"{len(problems)} disagreements with msprobe, first: " + "; ".join(problems[:8])


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_rows_and_verdicts_are_msprobes(pair: str, tmp_path: Path) -> None:
    target, bench, reference = (plain(DATA / p, tmp_path) for p in PAIRS[pair])
    assert_agrees(ours_csv(target, bench, tmp_path / "out"), reference)


def test_the_check_sees_a_changed_verdict(tmp_path: Path) -> None:
    """The comparison above can fail: one Result changed is one disagreement."""
    target, bench, reference = (plain(DATA / p, tmp_path) for p in PAIRS["edge_cases"])
    rows = read_csv(ours_csv(target, bench, tmp_path / "out"))
    msprobe = read_csv(reference)
    assert disagreements(rows, msprobe) == []
    flipped = next(r for r in rows if r["Result"] == "error")
    flipped["Result"] = "pass"
    assert len(disagreements(rows, msprobe)) == 1


# One row per part and value type msprobe writes, from the quick-start dumps:
# (entry, JSON path inside the entry, row name).
PARTS = {
    "input_args tensor": ("Functional.conv2d.0.forward", ["input_args", 1], "Functional.conv2d.0.forward.input.1"),
    "input_args null": ("Functional.conv2d.0.forward", ["input_args", 2], "Functional.conv2d.0.forward.input.2"),
    "input_args nested int": ("Functional.conv2d.0.forward", ["input_args", 3, 1],
                              "Functional.conv2d.0.forward.input.3.1"),
    "input_args bool": ("Functional.batch_norm.0.forward", ["input_args", 5], "Functional.batch_norm.0.forward.input.5"),
    "input_kwargs str": ("Functional.cross_entropy.0.forward", ["input_kwargs", "reduction"],
                         "Functional.cross_entropy.0.forward.input.reduction"),
    "input_kwargs float": ("Functional.cross_entropy.0.forward", ["input_kwargs", "label_smoothing"],
                           "Functional.cross_entropy.0.forward.input.label_smoothing"),
    "input_kwargs null": ("Functional.cross_entropy.0.forward", ["input_kwargs", "weight"],
                          "Functional.cross_entropy.0.forward.input.weight"),
    "output": ("Module.conv1.Conv2d.forward.0", ["output", 0], "Module.conv1.Conv2d.forward.0.output.0"),
    "parameters": ("Module.conv1.Conv2d.forward.0", ["parameters", "weight"],
                   "Module.conv1.Conv2d.forward.0.parameters.weight"),
    "parameters_grad": ("Module.fc.Linear.parameters_grad.1", ["weight", 0], "Module.fc.Linear.parameters_grad.1.weight"),
    "backward input (grad_output)": ("Functional.cross_entropy.0.backward", ["input", 0],
                                     "Functional.cross_entropy.0.backward.input.0"),
    "backward output (grad_input)": ("Module.fc.Linear.backward.0", ["output", 0], "Module.fc.Linear.backward.0.output.0"),
}


def expected_cells(record: Any) -> dict[str, str]:
    """The NPU cells msprobe's compare makes of one record (read_op/gen_op_item)."""
    if record is None:
        return {"NPU Dtype": "N/A", "NPU Tensor Shape": "N/A", **{c: "None" for c in NUMBER_COLUMNS[8:12]}}
    if "dtype" in record:
        stats = [record[k] for k in ("Max", "Min", "Mean", "Norm")]
        return {"NPU Dtype": record["dtype"], "NPU Tensor Shape": str(record["shape"]),
                **{c: repr(v) for c, v in zip(NUMBER_COLUMNS[8:12], stats)}}
    value = record["value"]
    return {"NPU Dtype": str(type(value)), "NPU Tensor Shape": "[]", **{c: str(value) for c in NUMBER_COLUMNS[8:12]}}


@pytest.fixture(scope="module")
def quick_start_rows(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("quick_start")
    target, bench, _ = (plain(DATA / p, tmp) for p in PAIRS["quick_start"])
    rows = read_csv(ours_csv(target, bench, tmp / "out"))
    return json.loads(target.read_text())["data"], {r["NPU Name"]: r for r in rows}


@pytest.mark.parametrize("part", sorted(PARTS))
def test_every_part_is_read(part: str, quick_start_rows: tuple[dict[str, Any], dict[str, dict[str, str]]]) -> None:
    data, rows = quick_start_rows
    entry, path, name = PARTS[part]
    record: Any = data[entry]
    for key in path:
        record = record[key]
    assert name in rows, f"{part}: no row {name}"
    for col, want in expected_cells(record).items():
        assert same_cell(rows[name][col], want), f"{part}: {col} {rows[name][col]!r}, the file says {want!r}"


def _generate(script: str, *args: object) -> None:
    # In a child process: msprobe's PrecisionDebugger patches torch's APIs
    # for the rest of the process, which would break later tests.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, str(DATA / script), *map(str, args)], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, timeout=600, env=env)
    assert done.returncode == 0, f"{script} failed:\n{done.stderr[-3000:]}"


needs_msprobe = pytest.mark.skipif(
    shutil.which("msprobe") is None or importlib.util.find_spec("msprobe") is None,
    reason="msprobe is not installed (pip install mindstudio-probe)")


def test_our_l0_dump_compares_cleanly_with_msprobes_stored_dump(tmp_path: Path) -> None:
    """As below, without msprobe installed: msprobe's L0 dump of the same model
    (same seed, torch 2.13 CPU), stored once with
    `python3 tests/msprobe_data/same_model_l0.py msprobe OUT` (mindstudio-probe 26.2.0)."""
    _generate("same_model_l0.py", "graphprobe", tmp_path / "gp")
    bench = plain(DATA / "same_model_l0" / "msprobe_l0.dump.json.gz", tmp_path / "ms")
    (ours,) = (tmp_path / "gp" / "step0").glob("*/dump.json")
    rows = read_csv(ours_csv(ours, bench, tmp_path / "out"))
    assert len(rows) == 21  # 6 modules: an input and an output each, and 9 parameters
    assert sum(".parameters." in r["NPU Name"] for r in rows) == 9
    matched = [r for r in rows if r["Match"] == "matched"]
    assert len(matched) == len(rows), [r["Bench Name"] for r in rows if r["Match"] != "matched"]
    assert {r["Result"] for r in matched} == {"pass"}, [r["NPU Name"] for r in matched if r["Result"] != "pass"]


@needs_msprobe
def test_our_l0_dump_compares_cleanly_with_msprobes(tmp_path: Path) -> None:
    """The same model dumped at L0 by msprobe and by graphprobe: every row of
    either side has a partner and passes, msprobe's `parameters` rows
    included (graphprobe's L0 records carry the module's own parameters)."""
    _generate("same_model_l0.py", "msprobe", tmp_path / "ms")
    _generate("same_model_l0.py", "graphprobe", tmp_path / "gp")
    csv_path = ours_csv(tmp_path / "gp" / "step0", tmp_path / "ms" / "step0", tmp_path / "out")
    rows = read_csv(csv_path)
    assert len(rows) >= 21  # 6 modules, their inputs and outputs, at least
    matched = [r for r in rows if r["Match"] == "matched"]
    assert {r["Result"] for r in matched} == {"pass"}, [r["NPU Name"] for r in matched if r["Result"] != "pass"]
    assert [r["Bench Name"] for r in rows if r["Match"] != "matched"] == []


@needs_msprobe
def test_live_msprobe_agrees(tmp_path: Path) -> None:
    """Fresh dumps by msprobe's PrecisionDebugger (CPU) and the edge-case
    pair, compared by msprobe now and by us: the same rows and verdicts."""
    fresh = tmp_path / "mix_cpu"
    _generate("generate_mix_cpu.py", fresh)
    edges = tmp_path / "edge_cases"
    _generate("generate_edge_cases.py", edges)
    pairs = [("step1.dump.json.gz", "step0.dump.json.gz", "msprobe_step1_vs_step0.csv.gz"),
             ("step2.dump.json.gz", "step1.dump.json.gz", "msprobe_step2_vs_step1.csv.gz")]
    for i, names in enumerate(pairs):
        target, bench, reference = (plain(fresh / n, tmp_path / f"p{i}") for n in names)
        assert_agrees(ours_csv(target, bench, tmp_path / f"out{i}"), reference)
    reference = plain(edges / "msprobe.csv.gz", tmp_path / "e")
    assert_agrees(ours_csv(edges / "target" / "dump.json", edges / "bench" / "dump.json", tmp_path / "oute"), reference)

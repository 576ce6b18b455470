"""`graphprobe compare` end to end on hand-written dump trees (no torch model)."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from compare_fixtures import entry, simple_model_dump, tensor, write_dump

from graphprobe.cli import main

SRC = Path(__file__).resolve().parents[1] / "src"


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def make_root(root: Path, steps: dict[int, list[int]], *, scale: float = 1.0, diverge_at: int | None = None) -> None:
    for step, ranks in steps.items():
        for rank in ranks:
            write_dump(root / f"step{step}" / f"rank{rank}" / "dump.json", simple_model_dump(scale, diverge_at))


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_roots_pair_steps_and_ranks(tmp_path: Path, capsys) -> None:
    make_root(tmp_path / "t", {0: [0, 1, 2], 1: [0, 1, 2], 2: [0]}, scale=2.0, diverge_at=1)
    make_root(tmp_path / "b", {0: [0, 1], 1: [0, 1, 3]})
    out = tmp_path / "out"
    code, stdout, err = cli(capsys, "compare", str(tmp_path / "t"), str(tmp_path / "b"), "-o", str(out), "--top", "2")
    assert code == 0, err
    for step in (0, 1):
        for rank in (0, 1):
            (csv_path,) = (out / f"step{step}").glob(f"compare_result_{rank}_*.csv")
            rows = read_csv(csv_path)
            assert len(rows) == 6
            marked = {r["NPU Name"] for r in rows if r["First Divergence"] == "yes"}
            assert marked == {"Module.layers.1.Linear.forward.0.input.0", "Module.layers.1.Linear.forward.0.output.0"}
            assert len(list((out / f"step{step}").glob(f"compare_report_{rank}_*.html"))) == 1
    assert not list(out.glob("step*/compare_result_2_*.csv"))
    assert "Module.layers.1.Linear.forward.0" in stdout
    unpaired = stdout.split("without a partner:")[1]
    for what in ("target: step0/rank2", "target: step1/rank2", "bench: step1/rank3", "target: step2"):
        assert what in unpaired
    # counts per verdict per pair: 4 pairs, each 1 error (layer 1 output) and 5 pass
    lines = [l for l in stdout.splitlines() if l.startswith("step")]
    assert [l.split()[:5] for l in lines[:4]] == [[f"step{s}/rank{r}", "5", "0", "1", "0"] for s in (0, 1) for r in (0, 1)]


def test_single_process_folders_pid_and_proc(tmp_path: Path, capsys) -> None:
    # graphprobe writes pid{pid}, msprobe's eager dumper proc{pid}; pids differ between runs.
    write_dump(tmp_path / "t" / "step0" / "pid4242" / "dump.json", simple_model_dump(1.5, 2))
    write_dump(tmp_path / "b" / "step0" / "proc777" / "dump.json", simple_model_dump())
    out = tmp_path / "out"
    code, stdout, err = cli(capsys, "compare", str(tmp_path / "t" / "step0"), str(tmp_path / "b" / "step0"), "-o", str(out))
    assert code == 0, err
    (csv_path,) = out.glob("compare_result_pid4242_*.csv")
    assert {r["Result"] for r in read_csv(csv_path)} == {"pass", "warning"}
    # also: a process folder against a plain file, and two roots with one step each
    code, _, err = cli(capsys, "compare", str(tmp_path / "t" / "step0" / "pid4242"),
                       str(tmp_path / "b" / "step0" / "proc777" / "dump.json"), "-o", str(tmp_path / "o2"), "--no-report")
    assert code == 0, err
    assert len(list((tmp_path / "o2").glob("compare_result_pid4242_*.csv"))) == 1
    assert not list((tmp_path / "o2").glob("*.html"))
    code, _, err = cli(capsys, "compare", str(tmp_path / "t"), str(tmp_path / "b"), "-o", str(tmp_path / "o3"))
    assert code == 0, err
    assert len(list((tmp_path / "o3" / "step0").glob("compare_result_pid4242_*.csv"))) == 1


def test_rank_folder_without_dump_is_reported(tmp_path: Path, capsys) -> None:
    make_root(tmp_path / "t", {0: [0, 1]})
    make_root(tmp_path / "b", {0: [0]})
    (tmp_path / "b" / "step0" / "rank1").mkdir()
    code, stdout, _ = cli(capsys, "compare", str(tmp_path / "t"), str(tmp_path / "b"), "-o", str(tmp_path / "o"))
    assert code == 0
    assert "bench: step0/rank1 (no dump.json)" in stdout


@pytest.mark.parametrize(
    "text, place",
    [
        ('{"data": {\n  "Module.a.ReLU.forward.0": {"output": [1,]}}}', "bad.json:2:44: expected a value, found ']'"),
        ('{"data": {"Module.a.ReLU.forward.0": {"output": [{"type": "torch.Tensor", "dtype": "torch.float32", '
         '"shape": [2], "Max": "big"}]}}}',
         'bad.json: data["Module.a.ReLU.forward.0"].output[0].Max: expected a number or null, found a string'),
        ('{"data": {"Module.a.ReLU.forward.0": {"output": [{"type": "torch.Tensor", "dtype": "torch.float32", '
         '"shape": [2, -1]}]}}}',
         'bad.json: data["Module.a.ReLU.forward.0"].output[0].shape[1]: expected a non-negative integer'),
        ('{"task": "statistics"}', "bad.json: (top level): no \"data\" key"),
        ("[" * 100000, "bad.json:1:257: nesting deeper than 256 levels"),
        ("", "bad.json:1:1: expected a value, found end of input"),
        ('{"data": {"x": {"output": ["\\ud800"]}}}', "bad.json:1:29: unpaired surrogate"),
    ],
    ids=["syntax", "stat type", "shape", "no data", "deep", "empty", "surrogate"],
)
def test_malformed_dump_names_file_and_place(tmp_path: Path, capsys, text: str, place: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    good = write_dump(tmp_path / "good.json", simple_model_dump())
    code, _, err = cli(capsys, "compare", str(bad), str(good), "-o", str(tmp_path / "o"))
    assert code == 2
    assert place in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "args",
    [["compare"], ["compare", "only-one"], ["compare", "a", "b", "--top", "x"], ["compare", "a", "b", "--warning-pct", "-1"],
     ["compare", "a", "b", "--fail-on", "info"], ["nosuchcommand"]],
)
def test_usage_errors_exit_2(capsys, args: list[str]) -> None:
    code, _, err = cli(capsys, *args)
    assert code == 2
    assert "usage:" in err and "Traceback" not in err


def test_paths_that_are_not_dumps_exit_2(tmp_path: Path, capsys) -> None:
    good = write_dump(tmp_path / "good.json", simple_model_dump())
    code, _, err = cli(capsys, "compare", str(tmp_path / "missing"), str(good))
    assert code == 2 and "does not exist" in err
    (tmp_path / "empty").mkdir()
    code, _, err = cli(capsys, "compare", str(tmp_path / "empty"), str(good))
    assert code == 2 and "not a graphprobe/msprobe dump" in err
    make_root(tmp_path / "multi", {0: [0], 1: [0]})
    code, _, err = cli(capsys, "compare", str(tmp_path / "multi"), str(good))
    assert code == 2 and "several steps" in err


E = "Module.fc.Linear.forward.0"


@pytest.mark.parametrize(
    "out_norm, fail_on, extra, code",
    [
        (10.0, "error", [], 0),
        (10.0, "warning", [], 0),
        # inputs exact, output 30 %: a first divergence (issue 25: --fail-on error fails on it) ...
        (13.0, "error", [], 1),
        # ... and with the noise floor scaled to 100 % (1e-4 x 1e4) a msprobe warning only
        (13.0, "error", ["--floor-scale", "1e4"], 0),
        (13.0, "warning", [], 1),
        (16.0, "error", [], 1),  # 60 %: error
        (16.0, None, [], 0),
        (13.0, "error", ["--output-error-pct", "20", "--floor-scale", "1e4"], 1),  # the CLI threshold: 30 % an error
        (13.0, "warning", ["--warning-pct", "40", "--floor-scale", "1e4"], 0),
    ],
)
def test_fail_on(tmp_path: Path, capsys, out_norm: float, fail_on: str | None, extra: list[str], code: int) -> None:
    t = write_dump(tmp_path / "t.json", {E: entry([tensor(10.0)], [tensor(out_norm)])})
    b = write_dump(tmp_path / "b.json", {E: entry([tensor(10.0)], [tensor(10.0)])})
    args = ["compare", str(t), str(b), "-o", str(tmp_path / "o"), "--no-report", *extra]
    if fail_on:
        args += ["--fail-on", fail_on]
    got, _, err = cli(capsys, *args)
    assert got == code, err


def test_fail_on_warning_counts_unmatched(tmp_path: Path, capsys) -> None:
    t = write_dump(tmp_path / "t.json", {E: entry([tensor(10.0)], [tensor(10.0)])})
    b = write_dump(tmp_path / "b.json", {E: entry([tensor(10.0)], [tensor(10.0), tensor(1.0)])})
    args = ["compare", str(t), str(b), "-o", str(tmp_path / "o"), "--no-report"]
    assert cli(capsys, *args, "--fail-on", "error")[0] == 0
    assert cli(capsys, *args, "--fail-on", "warning")[0] == 1


def test_fuzzy_flag(tmp_path: Path, capsys) -> None:
    t = write_dump(tmp_path / "t.json", {"Module.fc.Linear.forward.1": entry([tensor(1.0)], [tensor(1.0)])})
    b = write_dump(tmp_path / "b.json", {"Module.fc.Linear.forward.0": entry([tensor(1.0)], [tensor(1.0)])})
    args = ["compare", str(t), str(b), "-o", str(tmp_path / "o"), "--no-report", "--fail-on", "warning"]
    assert cli(capsys, *args)[0] == 1
    assert cli(capsys, *args, "--fuzzy")[0] == 0


def test_compare_runs_without_torch(tmp_path: Path) -> None:
    """graphprobe, graphprobe.cli and the compare path import neither torch nor _C."""
    t = write_dump(tmp_path / "t.json", simple_model_dump(2.0, 0))
    b = write_dump(tmp_path / "b.json", simple_model_dump())
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["torch"] = None  # any "import torch" now fails
        from graphprobe.cli import main
        code = main(["compare", {str(t)!r}, {str(b)!r}, "-o", {str(tmp_path / "o")!r}, "--fail-on", "error"])
        assert "graphprobe._C" not in sys.modules
        sys.exit(code)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "Module.layers.0.Linear.forward.0" in proc.stdout


def test_python_dash_m(tmp_path: Path) -> None:
    t = write_dump(tmp_path / "t.json", simple_model_dump())
    b = write_dump(tmp_path / "b.json", simple_model_dump())  # not t itself: that fails --fail-on (issue 40 item 8)
    proc = subprocess.run(
        [sys.executable, "-m", "graphprobe", "compare", str(t), str(b), "-o", str(tmp_path / "o"), "--fail-on", "warning"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    assert proc.returncode == 0, proc.stderr
    assert "pass" in proc.stdout


def test_messages_name_msprobes_proc_folders_as_they_are_on_disk(tmp_path: Path, capsys) -> None:
    # msprobe's eager dumper writes proc{P}; the refusal listed them as "pid1", a folder that is not there.
    for name in ("proc1", "proc2"):
        write_dump(tmp_path / "t" / "step0" / name / "dump.json", simple_model_dump())
    write_dump(tmp_path / "b" / "step0" / "pid9" / "dump.json", simple_model_dump())
    code, _, err = cli(capsys, "compare", str(tmp_path / "t"), str(tmp_path / "b"), "-o", str(tmp_path / "o"))
    assert code == 2
    assert "proc1 (dump.json of" in err and "proc2 (dump.json of" in err and "pid9 (dump.json of" in err, err
    assert "pid1 " not in err and "pid2 " not in err, err
    code, out, err = cli(capsys, "compare", str(tmp_path / "t"), str(tmp_path / "b"), "-o", str(tmp_path / "o"),
                         "--pid-pairing", "newest", "--no-report")
    assert code == 0, err
    assert re.search(r"step0/proc[12] \(an older run", out), out  # the unpaired one, by its folder name

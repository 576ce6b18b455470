"""A new user's first hour: a forgotten step(), an L0 model without
submodules and step() without the model each end in a warning that names the
real cause, never in a silent empty dump."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

import graphprobe
from graphprobe.cli import main
from models import Small

ROOT = Path(__file__).resolve().parent.parent

X = torch.linspace(-1.0, 1.0, 24).reshape(3, 8)
# Tensor rows of one L0 call of Small, counted by hand: fc1 and fc2 each
# input, weight, bias, output (4); act input and output (2).
ROWS_PER_RUN = 4 + 2 + 4


def _messages(record: list[warnings.WarningMessage], part: str) -> list[str]:
    return [str(w.message) for w in record if part in str(w.message)]


def _step_folders(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir() if p.name.startswith("step")) if path.exists() else []


# -- item 2: records collected and never written ----------------------------------------------------------------


def test_stop_without_step_says_how_many_records_were_not_written(write_config, tmp_path) -> None:
    model = Small().eval()
    dumper = graphprobe.AclGraphDumper(write_config(dump_path=str(tmp_path / "d")))
    dumper.start(model)
    with torch.no_grad():
        for _ in range(3):
            model(X)
    with pytest.warns(RuntimeWarning, match="never written") as record:
        dumper.stop()
    (message,) = _messages(record.list, "never written")
    assert f"stop(): {3 * ROWS_PER_RUN} records collected since the last step()" in message
    assert "dumper.step()" in message and "step0" in message
    assert _step_folders(tmp_path / "d") == []


def test_stop_after_step_does_not_warn(write_config, tmp_path) -> None:
    model = Small().eval()
    dumper = graphprobe.AclGraphDumper(write_config(dump_path=str(tmp_path / "d")))
    dumper.start(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with torch.no_grad():
            model(X)
        dumper.step()
        dumper.stop()


def test_exit_without_step_says_how_many_records_were_not_written(tmp_path) -> None:
    config = tmp_path / "config.json"
    config.write_text('{"dump_path": "%s", "level": "L0"}' % (tmp_path / "d"))
    script = textwrap.dedent(f"""
        import torch
        from torch import nn
        import graphprobe
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).eval()
        dumper = graphprobe.AclGraphDumper({str(config)!r})
        dumper.start(model)
        with torch.no_grad():
            for _ in range(3):
                model(torch.ones(2, 8))
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"at exit: {3 * ROWS_PER_RUN} records collected since the last step() were never written" in proc.stderr
    assert "dumper.step()" in proc.stderr
    assert _step_folders(tmp_path / "d") == []


# -- item 3: the warning names the cause it has evidence for ----------------------------------------------------


def test_l0_model_without_submodules_names_the_real_cause(write_config, tmp_path) -> None:
    model = nn.Linear(4, 4)
    dumper = graphprobe.AclGraphDumper(write_config(dump_path=str(tmp_path / "d"), level="L0"))
    with pytest.warns(RuntimeWarning, match="has no submodules") as record:
        dumper.start(model)
    (message,) = _messages(record.list, "no submodules")
    assert "Linear has no submodules" in message and "L1" in message and "mix" in message
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with torch.no_grad():
            model(torch.ones(2, 4))
        dumper.step()
    dumper.stop()
    (message,) = _messages(record, "recorded nothing")
    assert "Cause:" in message and "no submodules" in message
    assert "before start()" not in message  # not the guessed cause of before


def test_l1_records_the_same_model(write_config, read_step, tmp_path) -> None:
    model = nn.Linear(4, 4)
    dumper = graphprobe.AclGraphDumper(write_config(dump_path=str(tmp_path / "d"), level="L1"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dumper.start(model)
        with torch.no_grad():
            model(torch.ones(2, 4))
        dumper.step()
    dumper.stop()
    assert list(read_step(str(tmp_path / "d"), 0)["data"]) == ["Functional.linear.0.forward"]


def test_empty_step_lists_the_candidates(write_config, tmp_path) -> None:
    dumper = graphprobe.AclGraphDumper(write_config(dump_path=str(tmp_path / "d")))
    dumper.start(Small().eval())
    dumper.enable(False)
    dumper.enable(True)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        dumper.step()  # the model did not run
    dumper.stop()
    (message,) = _messages(record, "recorded nothing")
    assert "Possible causes" in message
    for part in ("switched off", "before start()", "did not run"):
        assert part in message, (part, message)


# -- item 10: what an empty step writes -------------------------------------------------------------------------


def test_steps_without_the_model_write_no_folders_and_warn_once(write_config, read_step, tmp_path) -> None:
    model = Small().eval()
    dumper = graphprobe.AclGraphDumper(write_config(dump_path=str(tmp_path / "d")))
    dumper.start(model)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(200):
            dumper.step()
        graphprobe.flush()
    assert len(_messages(record, "recorded nothing")) == 1
    assert "no step folder was written" in _messages(record, "recorded nothing")[0]
    assert _step_folders(tmp_path / "d") == []
    assert dumper.step_number == 200  # steps keep counting iterations
    with torch.no_grad():
        model(X)
    dumper.step()
    dumper.stop()
    assert _step_folders(tmp_path / "d") == ["step200"]
    assert len(read_step(str(tmp_path / "d"), 200)["data"]) == 3


def test_l0_keywords_that_select_no_submodule_name_the_keywords(write_config, tmp_path) -> None:
    dumper = graphprobe.AclGraphDumper(write_config(dump_path=str(tmp_path / "d"), statistics={"list": ["conv"]}))
    with pytest.warns(RuntimeWarning, match="statistics.list keyword") as record:
        dumper.start(Small().eval())
    dumper.stop()
    (message,) = _messages(record.list, "statistics.list keyword")
    assert "['conv']" in message and "fix statistics.list" in message and "no submodules" not in message


# -- item 1: pid folders are called pid folders, paired without guessing, and a used dump_path warns ------------

from compare_fixtures import cli, read_csv, simple_model_dump, write_dump  # noqa: E402


def _pid_dump(folder: Path, scale: float = 1.0, when: int | None = None) -> Path:
    path = write_dump(folder / "dump.json", simple_model_dump(scale, 0 if scale != 1.0 else None))
    if when is not None:
        os.utime(path, (when, when))
    return path


def test_a_used_dump_path_warns_at_start_naming_what_is_there(write_config, tmp_path) -> None:
    _pid_dump(tmp_path / "d" / "step0" / "pid123")
    _pid_dump(tmp_path / "d" / "step1" / "pid123")
    dumper = graphprobe.AclGraphDumper(write_config(dump_path=str(tmp_path / "d")))
    with pytest.warns(RuntimeWarning, match="already holds step folders") as record:
        dumper.start(Small().eval())
    dumper.stop()
    (message,) = _messages(record.list, "already holds")
    assert "(step0, step1; step0 holds pid123)" in message
    assert "refuses to guess" in message and "--pid-pairing newest" in message
    assert record.list[0].filename == __file__  # points at the user's start() line


def test_single_pid_folders_are_called_pids_everywhere(tmp_path: Path, capsys) -> None:
    _pid_dump(tmp_path / "t" / "step0" / "pid4242", scale=3.0)
    _pid_dump(tmp_path / "b" / "step0" / "pid777")
    code, out, err = cli(capsys, "compare", str(tmp_path / "t"), str(tmp_path / "b"), "-o", str(tmp_path / "o"), "-q")
    assert code == 0, err
    assert "rank" not in out  # a single process has no rank
    assert any(line.startswith("step0/pid4242 ") for line in out.splitlines()), out
    (csv_path,) = (tmp_path / "o" / "step0").glob("compare_result_pid4242_*.csv")
    (report,) = (tmp_path / "o" / "step0").glob("compare_report_pid4242_*.html")
    assert "<title>graphprobe compare step0/pid4242</title>" in report.read_text()
    assert read_csv(csv_path)  # the rows are there


def test_two_runs_in_one_step_are_refused_with_what_is_there(tmp_path: Path, capsys) -> None:
    old = tmp_path / "t" / "step0" / "pid900"
    new = tmp_path / "t" / "step0" / "pid100"  # pid wrap-around: the newer run has the lower pid
    _pid_dump(old, when=1_000_000_000)
    _pid_dump(new, scale=3.0, when=1_000_000_100)
    _pid_dump(tmp_path / "b" / "step0" / "pid5")
    args = ["compare", str(tmp_path / "t"), str(tmp_path / "b"), "-o", str(tmp_path / "o"), "-q", "--no-report"]
    code, out, err = cli(capsys, *args)
    assert code == 2 and out == ""
    assert "cannot pair single-process (pid) folders without guessing" in err
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(1_000_000_000))
    assert f"step0: TARGET holds 2 pid folders (pid900 (dump.json of {when})" in err
    assert "BENCH holds 1 (pid5 (dump.json of" in err
    assert f"graphprobe compare {new} {tmp_path / 'b' / 'step0' / 'pid5'}" in err  # the way out, spelled out
    assert "--pid-pairing newest" in err and "--pid-pairing order" in err
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").rglob("*.csv"))
    # The rule, when asked for: the newest (pid100, which diverges) is compared; pid900 is listed.
    code, out, err = cli(capsys, *args, "--pid-pairing", "newest")
    assert code == 0, err
    assert any(line.startswith("step0/pid100 ") and line.endswith("Module.layers.0.Linear.forward.0")
               for line in out.splitlines()), out  # the newer run, which diverges
    assert "target: step0/pid900 (an older run" in out
    # The folders passed by hand: no rule needed.
    code, out, err = cli(capsys, "compare", str(new), str(tmp_path / "b" / "step0" / "pid5"), "-o",
                         str(tmp_path / "o2"), "-q", "--no-report")
    assert code == 0, err
    assert out.splitlines()[1].startswith("pid100 ")


def test_several_pids_diverging_are_counted_as_pids(tmp_path: Path, capsys) -> None:
    for side, pids, scale in (("t", (10, 20), 3.0), ("b", (3, 4), 1.0)):
        for pid in pids:
            _pid_dump(tmp_path / side / "step0" / f"pid{pid}", scale=scale)
    code, out, err = cli(capsys, "compare", str(tmp_path / "t"), str(tmp_path / "b"), "-o", str(tmp_path / "o"),
                         "-q", "--pid-pairing", "order")
    assert code == 0, err
    assert "across pids:" in out and "step0: 2 of 2 pids diverge; first: pid10 at" in out
    assert "ranks" not in out
    index = (tmp_path / "o" / "index.html").read_text()
    assert index.count('href="step0/compare_report_pid') == 2 and "<th>pid</th>" in index


# -- item 8: no "Failed to initialize NumPy" after a plain `pip install .` ----------------------------------------

def test_numpy_is_a_dependency_so_torch_does_not_warn_at_import() -> None:
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(d.split(">")[0].split("=")[0].strip() == "numpy" for d in deps), deps
    proc = subprocess.run([sys.executable, "-W", "always", "-c", "import graphprobe, torch; torch.zeros(1).numpy()"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert proc.returncode == 0, proc.stderr
    assert "Failed to initialize NumPy" not in proc.stderr


# -- item 9: every CSV column defined; the troubleshooting page; a changelog with a version policy ---------------

def test_formats_md_defines_every_statistics_csv_column(tmp_path) -> None:
    from graphprobe.compare import compare

    t = write_dump(tmp_path / "t.json", simple_model_dump())
    b = write_dump(tmp_path / "b.json", simple_model_dump())
    (outcome,) = compare(t, b, tmp_path / "o", html=False, progress=False).outcomes
    header = outcome.csv_path.read_text().splitlines()[0].split(",")
    text = (ROOT / "docs" / "formats.md").read_text()
    table = text[text.index("### Columns (statistics layout)"):]
    table = table[: table.index("\n### ", 1)]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    defined = {name for line in rows for name in re.findall(r"`([^`]+)`", line.split(" | ")[0])}
    assert set(header) <= defined, set(header) - defined
    assert "…" not in table  # nothing elided
    consistent = next(line for line in rows if line.startswith("| `Requires_grad Consistent`"))
    assert "`True`" in consistent and "`False`" in consistent and "`N/A`" in consistent


def test_troubleshooting_covers_the_first_hour_symptoms() -> None:
    text = (ROOT / "docs" / "troubleshooting.md").read_text()
    headings = [line for line in text.splitlines() if line.startswith("### ")]
    for symptom in ("recorded nothing", "unmatched", 'First divergence "-"', "the target is short",
                    "cannot pair single-process (pid) folders", "--xlsx needs openpyxl", "Failed to initialize NumPy"):
        assert any(symptom in h for h in headings), symptom
    assert "docs/troubleshooting.md" in (ROOT / "README.md").read_text()


def test_changelog_states_a_version_policy_and_the_current_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    assert "## Version policy" in text and "## Unreleased" in text
    assert f"## {graphprobe.__version__}" in text
    assert "CHANGELOG.md" in (ROOT / "README.md").read_text()


def test_demo_run_again_compares_its_own_latest_run(tmp_path: Path) -> None:
    # An earlier demo's dumps in the demo's folders (the issue: a second `bash scripts/demo.sh` compared
    # step0/rank10684 with step0/rank12747 and said "2 of 2 ranks diverge").
    for side in ("eager", "graph"):
        _pid_dump(tmp_path / "d" / side / "step0" / "pid1", scale=3.0 if side == "graph" else 1.0)
        _demo_config(tmp_path / "d", side)  # what the earlier demo wrote next to its dumps
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([sys.executable, "-m", "graphprobe", "demo", "--steps", "1", "--out", str(tmp_path / "d")],
                          capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (line,) = [line for line in proc.stdout.splitlines() if line.startswith("step0/")]
    assert re.match(r"step0/pid\d+ ", line) and "pid1 " not in line, proc.stdout
    assert "rank" not in proc.stdout and "without a partner" not in proc.stdout
    for side in ("eager", "graph"):
        assert [p.name for p in (tmp_path / "d" / side / "step0").iterdir()] != ["pid1"]
        assert not (tmp_path / "d" / side / "step0" / "pid1").exists()


def _demo_config(out: Path, side: str) -> None:
    """The config a demo writes for its ``side`` folder (graphprobe/demo/run.py)."""
    (out / f"{side}.json").write_text(json.dumps({"task": "statistics", "dump_path": str((out / side).resolve()),
                                                  "level": "mix", "rank": []}))


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_demo_out_holding_a_users_dumps_is_refused_and_nothing_removed(tmp_path: Path, capsys) -> None:
    # A user's own dumps named eager/ and graph/ (a natural choice), and `graphprobe demo --out` their parent:
    # the demo must not remove them as if an earlier demo had written them.
    for side in ("eager", "graph"):
        _pid_dump(tmp_path / "mine" / side / "step0" / "pid7")
    before = _tree(tmp_path / "mine")
    assert main(["demo", "--steps", "1", "--device", "cpu", "--out", str(tmp_path / "mine")]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "mine" / "eager") in err and "step0" in err and "no demo wrote" in err, err
    assert _tree(tmp_path / "mine") == before


def test_demo_out_holding_a_users_config_named_like_the_demos_is_refused(tmp_path: Path, capsys) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "graph.json").write_text('{"task": "tensor", "dump_path": "/data/run7"}')
    before = _tree(mine)
    assert main(["demo", "--steps", "1", "--device", "cpu", "--out", str(mine)]) == 2
    err = capsys.readouterr().err
    assert str(mine / "graph.json") in err and "not a config the demo wrote" in err, err
    assert _tree(mine) == before

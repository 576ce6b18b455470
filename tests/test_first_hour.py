"""A new user's first hour: a forgotten step(), an L0 model without
submodules and step() without the model each end in a warning that names the
real cause, never in a silent empty dump."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

import graphprobe
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

"""examples/long_run/flight_recorder.py end to end (a transformers Llama
under torch.compile, a NaN planted at a known step): the trigger fires at
that step, its full dump and the ones before it are on disk, the history
query names that step and the record. Over a minute on the 2-core machine:
runs with ``GRAPHPROBE_SLOW_TESTS=1`` (40 steps, aot_eager; and the full
300 steps under inductor)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("duckdb")

SCRIPT = Path(__file__).resolve().parent.parent / "examples" / "long_run" / "flight_recorder.py"
SLOW = os.environ.get("GRAPHPROBE_SLOW_TESTS") == "1"


@pytest.mark.skipif(not SLOW, reason="over a minute: runs with GRAPHPROBE_SLOW_TESTS=1")
@pytest.mark.parametrize("args,at", [(["--steps", "40", "--at", "30", "--backend", "aot_eager"], 30),
                                     (["--steps", "300", "--at", "250"], 250)])
def test_flight_recorder_example_names_the_planted_nan(tmp_path: Path, args: list[str], at: int) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(SCRIPT), *args, "--out", str(tmp_path / "out")], env=env,
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    trigger = re.search(r"^trigger: graphprobe trigger at step (\d+), rank 0: nonfinite (\S+)", proc.stdout, re.M)
    assert trigger and int(trigger.group(1)) == at
    first = re.search(r"^first non-finite: step (\d+), rank 0, (\S+) \(nonfinite\)", proc.stdout, re.M)
    assert first and int(first.group(1)) == at and first.group(2) == trigger.group(2)
    # The NaN went into layer 1's down_proj: the first record holding it is inside that layer.
    assert first.group(2).startswith("Module.model.layers.1.")
    kept = re.search(r"^step folders on disk: \[(.*)\]", proc.stdout, re.M)
    steps = [int(s) for s in kept.group(1).split(",")]
    assert set(range(at - 5, at + 1)) <= set(steps) and 1 not in steps
    assert (tmp_path / "out" / f"history_report.html").is_file()

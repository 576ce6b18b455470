"""scripts/gpu_check.sh --dry-run on CPU: the plan of the one GPU run, with a
time budget per stage within the 8 minutes, written to $OUT too; and the GPU
test harness helpers (tests/gpu/harness.py) that guard that run."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))


def test_dry_run_prints_the_plan_and_budgets(tmp_path):
    proc = subprocess.run(["bash", os.path.join(ROOT, "scripts", "gpu_check.sh"), "--dry-run"], capture_output=True,
                          text=True, env=dict(os.environ, OUT=str(tmp_path)), timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "nothing was built or run" in out
    total = int(re.search(r"total (\d+) s", out).group(1))
    assert total <= 480
    budgets = {m.group(1): int(m.group(2)) for m in re.finditer(r"^\s+\d (\w+)\s+~?(\d+) s", out, re.M)}
    assert set(budgets) >= {"env", "build", "smoke", "pytest", "kernel"}, budgets
    assert budgets["build"] + budgets["smoke"] + budgets["pytest"] + budgets["kernel"] <= total
    # The kernel's bandwidth (issue #16) is measured in the same one-shot run.
    assert "benchmarks.gpu_bandwidth" in out
    assert budgets["pytest"] > 0
    # Every smoke case is announced, and pytest files come cheapest first.
    import smoke

    for name in smoke.CASES:
        assert f"- {name}" in out
    assert out.index("test_acl_save_cuda.py") < out.index("test_cuda_graph_l1.py")
    assert (tmp_path / "gpu_check.log").read_text() == out


def test_unknown_argument_is_refused(tmp_path):
    proc = subprocess.run(["bash", os.path.join(ROOT, "scripts", "gpu_check.sh"), "--fast"], capture_output=True,
                          text=True, env=dict(os.environ, OUT=str(tmp_path)), timeout=60)
    assert proc.returncode == 2 and "--fast" in proc.stderr


def test_leftover_dumper_is_stopped(tmp_path):
    import graphprobe
    from harness import stop_leftover_dumper

    (tmp_path / "c.json").write_text('{"dump_path": "%s"}' % (tmp_path / "dump"))
    left = graphprobe.AclGraphDumper(str(tmp_path / "c.json"))  # as a failed test's frame holds it
    left.start(__import__("torch").nn.Linear(2, 2))
    assert stop_leftover_dumper() is True
    assert not left._active
    # A new dumper starts: nothing was left active.
    d = graphprobe.AclGraphDumper(str(tmp_path / "c.json"))
    d.start(__import__("torch").nn.Linear(2, 2))
    d.stop()
    assert stop_leftover_dumper() is False


def test_per_test_timeout_setting(monkeypatch):
    from harness import per_test_timeout

    monkeypatch.setenv("GRAPHPROBE_TEST_TIMEOUT", "45")
    assert per_test_timeout() == 45
    monkeypatch.setenv("GRAPHPROBE_TEST_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="GRAPHPROBE_TEST_TIMEOUT"):
        per_test_timeout()


def test_a_hung_test_is_ended_with_its_stack(tmp_path):
    # The timeout mechanism itself: faulthandler prints the stack and exits.
    code = ("import sys, time; sys.path.insert(0, %r); from harness import arm_timeout; arm_timeout(1); "
            "time.sleep(30)") % os.path.join(ROOT, "tests", "gpu")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "Timeout" in proc.stderr and "<string>" in proc.stderr, proc.stderr


def test_smoke_driver_reports_each_case(tmp_path):
    # On CPU a case fails (no device) in its own process; the driver says so,
    # keeps its log and summary, and cases beyond the budget are NOT RUN.
    script = os.path.join(ROOT, "tests", "gpu", "smoke.py")
    proc = subprocess.run([sys.executable, script, "--only", "dtype_sweep_eager", "used_devices_only", "--out",
                           str(tmp_path), "--timeout", "60", "--budget", "3"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1
    assert "SMOKE NOT RUN dtype_sweep_eager" in proc.stdout  # a 3 s budget starts nothing
    proc = subprocess.run([sys.executable, script, "--only", "dtype_sweep_eager", "--out", str(tmp_path),
                           "--timeout", "60"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "SMOKE FAIL    dtype_sweep_eager" in proc.stdout and "no CUDA device" in proc.stdout
    assert "SMOKE SUMMARY: 0/1 passed" in proc.stdout
    assert "no CUDA device" in (tmp_path / "smoke-dtype_sweep_eager.log").read_text()
    import json

    assert json.loads((tmp_path / "smoke.json").read_text())[0]["status"] == "FAIL"


def test_smoke_rejects_unknown_cases():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "gpu", "smoke.py"), "--case", "nope"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "unknown case 'nope'" in proc.stderr

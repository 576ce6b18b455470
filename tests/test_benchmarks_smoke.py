"""The benchmark machinery on a tiny configuration (``python -m benchmarks --smoke``).

Runs in a subprocess: the benchmark keeps several dumpers started in one
process, which the other tests must not inherit. No timing assertions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_smoke_run_reports_columns_and_counts_bytes(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--smoke", "--device", "cpu", "--out", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    md = (tmp_path / "cpu-smoke.md").read_text()
    results = json.loads((tmp_path / "cpu-smoke.json").read_text())

    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from benchmarks.report import COLUMNS

    header = "| " + " | ".join(COLUMNS) + " |"
    assert header in md
    for section in ("## Machine", "## Goals", "## mlp-tiny", "## Stats kernel micro-benchmark"):
        assert section in md
    assert results["bandwidth"]["bytes_per_s"] > 0
    assert results["kernel"]["rows"] and "float32" in results["kernel"]["per_dtype"]

    (model,) = results["models"]
    variants = model["variants"]
    for name in ("eager", "eager+L0", "hooks+L0"):
        assert variants[name]["available"], variants[name]
        assert len(variants[name]["per_step_s"]) == 2
    assert variants["eager+L0"]["ratio"] > 0 and "floor_s" in variants["eager+L0"]
    assert not variants["cudagraph+L0"]["available"] or results["facts"]["gpu"]

    # Bytes from dump.json equal an independent count: the hooks see the same
    # module inputs and outputs and sum numel * itemsize themselves.
    gp, hooks = variants["eager+L0"], variants["hooks+L0"]
    assert gp["records"] > 0
    assert (gp["records"], gp["bytes"]) == (hooks["records"], hooks["bytes"])
    # And from first principles: mlp-tiny is Sequential(Sequential(Linear, GELU) x 2) on a [4, 16] float32
    # input; every module's input and output is a [4, 16] float32 tensor (256 B): 7 modules x 2 tensors;
    # plus each Linear's own parameters: a [16, 16] weight and a [16] bias.
    assert (gp["records"], gp["bytes"]) == (14 + 2 * 2, 14 * 4 * 16 * 4 + 2 * (16 * 16 + 16) * 4)
    if variants["eager+L1"]["available"]:
        l1, hooks1 = variants["eager+L1"], variants["hooks+L1"]
        assert (l1["records"], l1["bytes"]) == (hooks1["records"], hooks1["bytes"])


def test_gpu_bandwidth_without_cuda_says_so(tmp_path):
    # The GPU benchmark (run by scripts/gpu_check.sh) refuses clearly on a CPU-only torch.
    import torch

    if torch.cuda.is_available():
        import pytest

        pytest.skip("CUDA present: gpu_check.sh runs the real measurement")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-m", "benchmarks.gpu_bandwidth", "--out", str(tmp_path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "CUDA is not available" in proc.stderr, proc.stderr
    assert not list(tmp_path.iterdir())

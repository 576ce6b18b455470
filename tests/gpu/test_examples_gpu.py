"""examples/cuda_graph.py on a GPU (issue 31 item 4): the recipe runs as a
user runs it and names the injected fault (block 1's output x1.5 in the
graph-mode run only), for a hand-captured CUDA graph and for
torch.compile(mode="reduce-overhead")."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cuda_graph.py"


@pytest.mark.parametrize("runner", ["cuda-graph", "reduce-overhead"])
def test_cuda_graph_example_names_the_injected_fault(tmp_path: Path, runner: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(EXAMPLE.parents[1] / "src"),
                                                         os.environ.get("PYTHONPATH", "")])}
    # Within the GPU check's per-test limit, so that a slow compile fails here with its output, not by the
    # harness's kill.
    limit = float(os.environ.get("GRAPHPROBE_TEST_TIMEOUT") or 0) - 5
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--runner", runner, "--inject-fault", "1"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=limit if limit > 0 else 300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    # Block 1 is Sequential(Linear, GELU): the fault shows at its record.
    assert "2 steps compared; first divergence: step0/pid" in out
    assert re.search(r"first divergence: step0/pid\d+ at Module\.1\.Sequential\.forward\.0$", out, re.M), out
    for step in (0, 1):
        assert (tmp_path / "graphprobe_cuda_graph" / "graph" / f"step{step}").is_dir()

"""Inductor bugs that graphprobe's probes can reach, and the fixes start()
applies (graphprobe/wiring/inductor_fixes.py).

Each case runs in a subprocess: on a torch without the fix the compiled code
corrupts the heap, which would take the test session down.
"""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from graphprobe.wiring import inductor_fixes

SLOW = os.environ.get("GRAPHPROBE_SLOW_TESTS") == "1"
TESTS = Path(__file__).resolve().parent
NEEDS_FIX = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 14)


def _run(code: str, tmp_path: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=tmp_path)


def test_start_applies_the_fixes_this_torch_lacks(tmp_path):
    from graphprobe import AclGraphDumper

    dumper = AclGraphDumper(dump_path=str(tmp_path / "dump"), level="L0")
    dumper.start(torch.nn.Linear(2, 2))
    try:
        expected = ["pytorch#191837"] if NEEDS_FIX else []
        assert inductor_fixes.installed() == expected
    finally:
        dumper.stop()
    inductor_fixes.install()  # idempotent
    assert inductor_fixes.installed().count("pytorch#191837") == (1 if NEEDS_FIX else 0)


def test_tile2d_accumulating_store_writes_where_eager_does(tmp_path):
    # pytorch/pytorch#191837's reproducer: permute + reshape + fold, whose
    # scatter lands in a 2-D tiled kernel; with two threads torch 2.13 writes
    # out of bounds (glibc aborts) unless the fix is applied.
    done = _run("""
        import torch
        import torch.nn.functional as F
        from graphprobe.wiring import inductor_fixes
        torch.set_num_threads(2)
        inductor_fixes.install()

        def f(x):
            x = x.permute(0, 1, 4, 3, 2).reshape(1, 192 * 3 * 3, 2 * 2)
            return F.fold(x, output_size=(4, 4), kernel_size=3, padding=1, stride=2)

        x = torch.randn(1, 6, 4, 9, 32, dtype=torch.float64)
        expected = f(x)
        got = torch.compile(f, fullgraph=True)(x.float())
        torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-5)
        print("ok")
    """, tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "ok", (done.returncode, done.stderr[-3000:])


@pytest.mark.skipif(not SLOW, reason="80 s per case: runs with GRAPHPROBE_SLOW_TESTS=1")
@pytest.mark.parametrize("level,dtype", [("mix", "bfloat16"), ("L1", "float16"), ("L0", "float32")])
def test_falcon_training_step_runs_wired_with_eagers_gradients(tmp_path, level, dtype):
    # Without the fix (torch 2.13): mix/bfloat16 and L1/float16 crash, and
    # L0/float32 runs with a gradient 1000x eager's error.
    pytest.importorskip("transformers")
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    done = subprocess.run([sys.executable, str(TESTS / "falcon_training_step.py"), level, dtype, "inductor",
                           str(tmp_path / "dump")], capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    assert "gradients agree with eager" in done.stdout, done.stdout

"""The CPU statistics kernels (AVX-512, AVX2 and portable) against float64
references, including the values that make a float32 block fall back to
double (inf/NaN, squares beyond float's range, tiny and subnormal values,
blocks of zeros), and the result's independence of the thread count."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile

import pytest
import torch
from dtype_sweep import sum_tolerance

SIZES = [1, 7, 8, 9, 31, 1000, 3 * 65536 + 5]
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int32, torch.uint8]


def _cases():
    gen = torch.Generator().manual_seed(0)
    for dtype in DTYPES:
        for n in SIZES:
            x = (torch.randn(n, generator=gen, dtype=torch.float64) * 50).to(dtype)
            yield f"{dtype}-{n}", x
            if dtype.is_floating_point and n >= 9:
                y = x.clone()
                y[n // 2] = float("inf")
                y[-1] = -float("inf")
                yield f"{dtype}-{n}-inf", y
                z = x.clone()
                z[n - 2] = float("nan")  # in the tail for odd sizes, in a lane otherwise
                yield f"{dtype}-{n}-nan", z
    # Strided views are read in place: transposed, every other element, expanded (stride 0), a column.
    for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.float64):
        m = (torch.randn(37, 45, generator=gen, dtype=torch.float64) * 1000).to(dtype)
        yield f"{dtype}-transposed", m.t()
        yield f"{dtype}-step2", m[:, ::2]
        yield f"{dtype}-column", m[:, 3]
        yield f"{dtype}-expanded", m[0].expand(5, 45)
        if dtype == torch.int64:
            yield "int64-big-strided", (torch.arange(12, dtype=torch.int64) + 2**60).reshape(3, 4).t()
    # Rows with a gap between elements, longer than the gather buffer (512).
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        wide = (torch.randn(3, 4001, generator=gen, dtype=torch.float64) * 300).to(dtype)
        yield f"{dtype}-wide-step2", wide[:, ::2]
        if dtype.is_floating_point:
            holed = wide.clone()
            holed[1, 2000] = float("nan")
            yield f"{dtype}-wide-step2-nan", holed[:, ::2]
    # Values whose float32 block sums would be wrong, so the block is redone in
    # double: squares (or sums) beyond float's range, squares below it, and
    # subnormals; a block of zeros stays on the float path (exact there).
    # 5000 elements: several blocks (1024 elements with AVX-512, 512 with AVX2) and a tail.
    for dtype in (torch.float32, torch.bfloat16):
        r = torch.randn(5000, generator=gen, dtype=torch.float64)
        yield f"{dtype}-huge", (r * 1e20).to(dtype)
        yield f"{dtype}-max-range", torch.full((5000,), 3e38, dtype=torch.float64).to(dtype)
        yield f"{dtype}-tiny", (r * 1e-30).to(dtype)
        yield f"{dtype}-subnormal", (r * 1e-40).to(dtype)
        one_huge = (r * 3).to(dtype)
        one_huge[2517] = 1e25
        yield f"{dtype}-one-huge", one_huge
        yield f"{dtype}-zeros-then-values", torch.cat([torch.zeros(3000, dtype=torch.float64), r]).to(dtype)
        yield f"{dtype}-values-then-zeros", torch.cat([r, torch.zeros(3000, dtype=torch.float64)]).to(dtype)
        yield f"{dtype}-zeros", torch.zeros(5000, dtype=dtype)
        mixed = (r * 7).to(dtype)
        mixed[1000:3100] = (r[1000:3100] * 1e-35).to(dtype)
        yield f"{dtype}-tiny-run", mixed

def _record_all(out_dir: str) -> list[str]:
    from graphprobe import _ops
    from graphprobe.wiring.probe import probe_output

    _ops._C.set_active(True)
    _ops._C.finish_step(None, "statistics", "L0")
    names = []
    for name, x in _cases():
        probe_output(f"K.{name}.{{n}}", x)
        names.append(name)
    summary = _ops._C.finish_step(out_dir, "statistics", "L0")
    _ops._C.writer_wait(summary["write_seq"])
    _ops._C.set_active(False)
    return names


def _check(out_dir: str) -> None:
    data = json.load(open(os.path.join(out_dir, "dump.json")))["data"]
    for name, x in _cases():
        got = data[f"K.{name}.0"]["output"][0]
        assert got["shape"] == list(x.shape), name
        d = x.to(torch.float64)
        if torch.isnan(d).any():
            assert all(math.isnan(got[k]) for k in ("Max", "Min", "Mean", "Norm")), name
            continue
        want = {"Max": d.max().item(), "Min": d.min().item(), "Mean": d.mean().item(), "Norm": d.norm().item()}
        for key, w in want.items():
            g = got[key]
            if math.isinf(w) or math.isnan(w):
                assert g == w or (math.isnan(w) and math.isnan(g)), (name, key, g, w)
            else:
                scale = max(abs(w), want["Norm"] / math.sqrt(x.numel())) if key == "Mean" else abs(w)
                assert abs(g - w) <= sum_tolerance(x.dtype) * scale + 1e-300, (name, key, g, w)


def test_kernel_in_this_process(tmp_path):
    _record_all(str(tmp_path))
    _check(str(tmp_path))


@pytest.mark.parametrize("env", [{"GRAPHPROBE_NO_SIMD": "1"}, {"GRAPHPROBE_SIMD": "none"},
                                 {"GRAPHPROBE_SIMD": "avx2"}])
def test_each_kernel_level(tmp_path, env):
    # On a CPU without AVX2 (or off x86-64) every level runs the portable loop.
    code = f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); import test_stats_kernel as t; t._record_all({str(tmp_path)!r})"
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, **env})
    _check(str(tmp_path))


def test_unknown_simd_level_is_refused():
    code = ("import torch; from graphprobe import _ops; from graphprobe.wiring.probe import probe_output; "
            "_ops._C.set_active(True); probe_output('K.x.{n}', torch.ones(40))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "GRAPHPROBE_SIMD": "sse9"})
    assert proc.returncode != 0
    assert "GRAPHPROBE_SIMD='sse9'" in proc.stderr and "none, avx2, avx512" in proc.stderr, proc.stderr[-2000:]


def _stats_with_threads(out_dir: str, threads: int, x: torch.Tensor) -> dict:
    from graphprobe import _ops
    from graphprobe.wiring.probe import probe_output

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        _ops._C.set_active(True)
        _ops._C.finish_step(None, "statistics", "L0")
        probe_output("T.x.{n}", x)
        probe_output("T.xt.{n}", x.view(512, -1).t())
        summary = _ops._C.finish_step(out_dir, "statistics", "L0")
        _ops._C.writer_wait(summary["write_seq"])
    finally:
        _ops._C.set_active(False)
        torch.set_num_threads(before)
    return json.load(open(os.path.join(out_dir, "dump.json")))["data"]


def test_result_does_not_depend_on_thread_count(tmp_path):
    # 2**20 elements: 16 chunks, split across threads when there are several;
    # the chunks are combined in index order either way.
    x = torch.randn(1 << 20, generator=torch.Generator().manual_seed(3)) * 100 + 1
    one = _stats_with_threads(str(tmp_path / "one"), 1, x)
    two = _stats_with_threads(str(tmp_path / "two"), 2, x)
    assert one == two
    got = one["T.x.0"]["output"][0]
    assert got["Mean"] == pytest.approx(x.double().mean().item(), rel=1e-6)

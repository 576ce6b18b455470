"""The CPU statistics kernels (AVX2 and portable) against float64 references."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile

import pytest
import torch

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
                assert abs(g - w) <= 1e-12 * scale + 1e-300, (name, key, g, w)


def test_kernel_in_this_process(tmp_path):
    _record_all(str(tmp_path))
    _check(str(tmp_path))


@pytest.mark.parametrize("no_simd", ["1"])
def test_portable_kernel(tmp_path, no_simd):
    code = f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); import test_stats_kernel as t; t._record_all({str(tmp_path)!r})"
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "GRAPHPROBE_NO_SIMD": no_simd})
    _check(str(tmp_path))

"""Tensors of every kind of dtype graphprobe meets, recorded through the
public dumper (L0, one module that returns its input), and the float64
reference their dump.json statistics must match.

Shared by the CPU test (tests/test_stats_dtypes.py), the GPU tests and the
GPU smoke script (tests/gpu/smoke.py): the same cases on CPU, on eager CUDA
and inside a CUDA graph replay.
"""

from __future__ import annotations

import glob
import json
import math
import os
from typing import Any

import torch

#: Dtypes whose records carry no statistics (Max/Min/Mean/Norm are null).
NO_STATS = (torch.complex64, torch.complex128)
ENTRY = "Module.emit.Emit.forward.{}"


def cases() -> list[tuple[str, torch.Tensor]]:
    """(name, CPU tensor) pairs: every reducible dtype, float8 and unsigned
    types included, NaN/Inf, subnormals, empty and 0-d tensors, a tensor large
    enough for many CUDA blocks, and complex (no statistics)."""
    gen = torch.Generator().manual_seed(14)
    base = torch.randn(1000, generator=gen, dtype=torch.float64) * 50
    out: list[tuple[str, torch.Tensor]] = []
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        out.append((f"{dtype}", base.to(dtype)))
        y = base.to(dtype)
        y[10] = float("nan")
        out.append((f"{dtype}-nan", y))
        z = base.to(dtype)
        z[3], z[7] = float("inf"), -float("inf")
        out.append((f"{dtype}-inf", z))
    # Subnormals: kept by the CPU path, flushed by fast-math GPU conversions.
    out.append(("float32-subnormal", torch.tensor([1e-40, -3e-41, 2.5e-39, 0.0], dtype=torch.float32)))
    out.append(("bfloat16-subnormal", torch.tensor([1e-40, -3e-41, 2.5e-39], dtype=torch.float32).to(torch.bfloat16)))
    out.append(("float16-subnormal", torch.tensor([1e-7, -3e-6, 5e-5], dtype=torch.float32).to(torch.float16)))
    out.append(("float64-subnormal", torch.tensor([1e-310, -4e-320, 1.0], dtype=torch.float64)))
    for dtype in (torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz):
        out.append((f"{dtype}", (base / 10).to(dtype)))
    out.append(("float8_e4m3fn-subnormal", torch.tensor([0.001, -0.005, 0.01], dtype=torch.float32).to(torch.float8_e4m3fn)))
    out.append(("float8_e8m0fnu", torch.tensor([0.25, 1.0, 3.0, 1024.0], dtype=torch.float32).to(torch.float8_e8m0fnu)))
    ints = (base * 1000).round().to(torch.int64)
    for dtype in (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8):
        info = torch.iinfo(dtype)
        out.append((f"{dtype}", ints.clamp(info.min, info.max).to(dtype)))
    out.append(("int64-big", torch.tensor([2**60 + 1, -(2**59), 7], dtype=torch.int64)))
    out.append(("uint16", ints.abs().clamp(max=65535).to(torch.uint16)))
    out.append(("uint32", (ints.abs() * 40000).clamp(max=2**32 - 1).to(torch.uint32)))
    out.append(("uint64", (ints.abs() * 2**33).to(torch.uint64)))
    out.append(("uint64-top", torch.tensor([2**63 + 2**40, 5, 2**64 - 1], dtype=torch.uint64)))
    out.append(("bool", base > 0))
    out.append(("bool-all-false", torch.zeros(17, dtype=torch.bool)))
    out.append(("complex64", torch.complex(base.float(), -base.float())))
    out.append(("complex128", torch.complex(base, base)))
    out.append(("empty", torch.empty(0, 4)))
    out.append(("empty-bf16", torch.empty(3, 0, dtype=torch.bfloat16)))
    out.append(("zero-dim", torch.tensor(-2.5)))
    out.append(("zero-dim-int", torch.tensor(7, dtype=torch.int32)))
    out.append(("large-float32", torch.randn(3 * 65536 + 5, generator=gen)))
    out.append(("transposed", (torch.randn(37, 45, generator=gen) * 9).t()))
    return out


class Emit(torch.nn.Module):
    """Returns its input: the L0 hooks record it as input and output."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class Holder(torch.nn.Module):
    """The model: the root is not listed, so the records are Module.emit.Emit."""

    def __init__(self) -> None:
        super().__init__()
        self.emit = Emit()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.emit(x)


def write_config(folder: str, **fields: Any) -> str:
    """A config.json in `folder` (L0 statistics into folder/dump unless given)."""
    fields.setdefault("dump_path", os.path.join(folder, "dump"))
    fields.setdefault("level", "L0")
    path = os.path.join(folder, "config.json")
    with open(path, "w") as f:
        json.dump(fields, f)
    return path


def read_step(dump_path: str, step: int) -> dict[str, Any]:
    """dump_path/step{N}/<the one process folder>/dump.json, after a flush."""
    import graphprobe

    graphprobe.flush()
    found = glob.glob(os.path.join(dump_path, f"step{step}", "*", "dump.json"))
    if len(found) != 1:
        raise AssertionError(f"expected one dump.json for step {step}, found {found}")
    with open(found[0]) as f:
        return json.load(f)


def record_eager(folder: str, device: str, tensors: list[torch.Tensor]) -> dict[str, Any]:
    """Runs the model once per tensor on `device` in one step; dump.json's data."""
    import graphprobe

    model = Holder()
    dumper = graphprobe.AclGraphDumper(write_config(folder))
    dumper.start(model)
    try:
        for x in tensors:
            model(x.to(device))
        dumper.step()
    finally:
        dumper.stop()
    return read_step(os.path.join(folder, "dump"), 0)["data"]


def record_captured(folder: str, tensors: list[torch.Tensor], warmup: bool = False) -> dict[str, Any]:
    """Captures one model call per tensor into one CUDA graph (no warm-up
    unless asked), replays it once, steps; dump.json's data of that step."""
    import graphprobe

    model = Holder()
    dumper = graphprobe.AclGraphDumper(write_config(folder))
    dumper.start(model)
    try:
        static = [x.to("cuda") for x in tensors]
        torch.cuda.synchronize()
        if warmup:
            for x in static:
                model(x)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for x in static:
                model(x)
        dumper.step(dump=False)
        graph.replay()
        dumper.step()
    finally:
        dumper.stop()
    return read_step(os.path.join(folder, "dump"), 0)["data"]


def reference(x: torch.Tensor) -> dict[str, Any]:
    """What dump.json must show for x, from float64 (None: null)."""
    if x.dtype in NO_STATS or x.numel() == 0:
        return {"Max": None, "Min": None, "Mean": None, "Norm": None}
    if x.dtype == torch.bool:
        return {"Max": bool(x.any()), "Min": bool(x.all()), "Mean": None, "Norm": None}
    d = x.to(torch.float64)
    if torch.isnan(d).any():
        nan = float("nan")
        return {"Max": nan, "Min": nan, "Mean": nan, "Norm": nan}
    finite = d[torch.isfinite(d)]
    scale = finite.abs().max().item() if finite.numel() else 0.0
    return {"Max": d.max().item(), "Min": d.min().item(), "Mean": d.mean().item(), "Norm": d.norm().item(),
            "_scale": scale}


def _same(got: Any, want: Any, tol: float) -> bool:
    if want is None or isinstance(want, bool):
        return got is want or (isinstance(got, bool) and got == want)
    if got is None:
        return False
    got, want = float(got), float(want)
    if math.isnan(want) or math.isinf(want):
        return (math.isnan(want) and math.isnan(got)) or got == want
    return abs(got - want) <= tol


#: Relative tolerance of Mean and Norm for floating types of at most 32 bits:
#: both kernels sum those in float32 over short runs (16 elements per lane on
#: the CPU, one 16-byte vector on CUDA) and in double across them, which
#: bounds the error by ~1.2e-6 of the sum of |x| (docs/formats.md); the
#: issue's goal is 1e-5.
FLOAT_BLOCK_TOL = 2e-6
#: Integers and float64 accumulate in double element by element.
DOUBLE_TOL = 1e-12


def sum_tolerance(dtype: torch.dtype) -> float:
    """Relative tolerance of the summed statistics (Mean, Norm) for dtype."""
    if dtype.is_floating_point and dtype != torch.float64:
        return FLOAT_BLOCK_TOL
    return DOUBLE_TOL


def problems(record: dict[str, Any], x: torch.Tensor) -> list[str]:
    """How one dump.json tensor leaf differs from x's float64 reference."""
    out = []
    if record.get("shape") != list(x.shape):
        out.append(f"shape {record.get('shape')} != {list(x.shape)}")
    if record.get("dtype") != str(x.dtype):
        out.append(f"dtype {record.get('dtype')} != {x.dtype}")
    want = reference(x)
    scale = want.pop("_scale", 0.0)
    for key, w in want.items():
        # Max/Min are exact; sums differ by the order and precision of summation.
        tol = 0.0
        if key == "Mean" and isinstance(w, float):
            tol = sum_tolerance(x.dtype) * scale
        elif key == "Norm" and isinstance(w, float) and math.isfinite(w):
            tol = sum_tolerance(x.dtype) * w
        if not _same(record.get(key), w, tol):
            out.append(f"{key} {record.get(key)!r} != {w!r}")
    return out


def sweep_problems(data: dict[str, Any], named: list[tuple[str, torch.Tensor]]) -> list[str]:
    """Every difference between the records of one sweep and the reference;
    empty when all match. Checks names and order too."""
    want_names = [ENTRY.format(i) for i in range(len(named))]
    if list(data) != want_names:
        return [f"record names/order {list(data)[:5]}... != {want_names[:5]}... ({len(data)} vs {len(want_names)})"]
    out = []
    for i, (name, x) in enumerate(named):
        rec = data[ENTRY.format(i)]
        for part in ("input_args", "output"):
            for p in problems(rec[part][0], x):
                out.append(f"{name} {part}: {p}")
    return out

"""The Sketch statistic on CUDA (issue 35): the kernel's one-pass sums
against the numpy reference of the definition (tests/sketch_reference.py)
for every floating dtype and the kernel's edges (a misaligned view, a
ragged last group, many blocks), equal to the CPU's within the documented
accumulation error, and on CUDA graph replay."""

from __future__ import annotations

import glob
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from checksum_reference import Wrap
from sketch_reference import sketch

import graphprobe
from graphs import capture


def _sketches(path: Path) -> list[list[float]]:
    graphprobe.flush()
    out = []
    for step_dir in sorted(glob.glob(str(path / "step*")), key=lambda p: int(p.rsplit("step", 1)[1])):
        (doc,) = glob.glob(step_dir + "/*/dump.json")
        out.append(json.loads(Path(doc).read_text())["data"]["Module.p.Pass.forward.0"]["output"][0]["Sketch"])
    return out


def _cases() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "float32": torch.randn(1000, generator=g),
        "float16": torch.randn(4097, generator=g).half(),
        "bfloat16": torch.randn(3, 1031, generator=g).bfloat16(),
        "float64": torch.randn(777, generator=g).double(),
        "misaligned_view": torch.randn(1 << 22, generator=g),  # from element 1 on: many blocks, a misaligned head
        "transposed": torch.randn(64, 48, generator=g).t(),
        "float8_e4m3fn": torch.randn(2049, generator=g).to(torch.float8_e4m3fn),
    }


def _close(got: list[float], x: torch.Tensor, where: str) -> None:
    want = sketch(x)
    total = float(x.double().abs().sum())
    norm = float(torch.linalg.vector_norm(x.double()))
    for k in range(4):
        err = abs(got[k] - want[k])
        assert err <= 16 * 2.0**-24 * total and err <= 1e-6 * norm, (where, k, got, want)


@pytest.mark.parametrize("name", list(_cases()))
@torch.no_grad()
def test_cuda_sketch_equals_reference_and_cpu(write_config, tmp_path: Path, name: str) -> None:
    x = _cases()[name]

    def on(device: str) -> torch.Tensor:
        moved = x.to(device)
        return moved[1:] if name == "misaligned_view" else moved

    for device in ("cpu", "cuda"):
        cfg = write_config(dump_path=str(tmp_path / device), level="L0")
        dumper = graphprobe.AclGraphDumper(cfg)
        model = Wrap()
        dumper.start(model)
        model(on(device))
        dumper.step()
        dumper.stop()
        (got,) = _sketches(tmp_path / device)
        _close(got, on("cpu"), f"{name} on {device}")


@torch.no_grad()
def test_sketch_on_cuda_graph_replay(write_config, tmp_path: Any) -> None:
    model = Wrap().cuda()
    dumper = graphprobe.AclGraphDumper(write_config(dump_path=str(tmp_path / "d"), level="L0"))
    dumper.start(model)
    static = torch.zeros(4096, device="cuda")
    graph, _ = capture(model, static)
    dumper.step(dump=False)  # warm-up and capture: discarded
    inputs = [torch.randn(4096, generator=torch.Generator().manual_seed(s)) for s in range(3)]
    for x in inputs:
        static.copy_(x.cuda())
        graph.replay()
        dumper.step()
    dumper.stop()
    for got, x in zip(_sketches(tmp_path / "d"), inputs):
        _close(got, x, "replay")


class _Doubled(torch.nn.Module):
    """x * 2 (exact in every dtype) and the same of x's transpose: a strided
    output whose Sketch follows its row-major order, not its storage's."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.mul(x, 2.0), torch.mul(x.transpose(0, -1), 2.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_fused_triton_sketch_equals_reference(write_config, tmp_path: Path, dtype: torch.dtype) -> None:
    """Statistics fused into inductor's Triton kernels (GRAPHPROBE_FUSED_STATS):
    the Sketch's hash as two 32-bit limbs in int64 (wiring/fused_stats.py),
    which Triton must compute as the CPU's C++ does; never run on a GPU
    before this check."""
    from graphprobe.wiring import fused_stats

    torch._dynamo.reset()
    before = fused_stats.enabled()
    fused_stats.set_enabled(True)
    try:
        x = torch.randn(33, 1031, generator=torch.Generator().manual_seed(3)).to(dtype)
        model = _Doubled()
        dumper = graphprobe.AclGraphDumper(write_config(dump_path=str(tmp_path / "d"), level="L1",
                                                        statistics={"list": ["mul"]}))
        dumper.start(model)
        compiled = torch.compile(model, backend="inductor", fullgraph=True)
        with torch.no_grad():
            compiled(x.cuda())
        dumper.step()
        dumper.stop()
        graphprobe.flush()
        (doc,) = glob.glob(str(tmp_path / "d" / "step0" / "*" / "dump.json"))
        data = json.loads(Path(doc).read_text())["data"]
        for name, want in (("Torch.mul.0.forward", x * 2.0), ("Torch.mul.1.forward", x.transpose(0, -1) * 2.0)):
            got = data[name]["output"][0]
            assert "Sketch" in got, (name, got)
            ref = sketch(want)
            total = float(want.double().abs().sum())
            for k in range(4):
                assert abs(got["Sketch"][k] - ref[k]) <= 1e-6 * total, (name, k, got["Sketch"], ref)
    finally:
        fused_stats.set_enabled(before)
        torch._dynamo.reset()

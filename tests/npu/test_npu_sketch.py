"""The Sketch on real NPU hardware (docs/formats.md, "Sketch"): the ATen
path's hash uses int64 multiply, and, xor and shifts on the device
(csrc/stats/stats_aten.cpp), whose values no fake device can vouch for; then
the recorded sums against the numpy reference, eager and replayed from a
torch.npu.NPUGraph, over two of the path's 2**20-element passes.

Unverified until an Ascend machine runs them (scripts/npu_check.sh)."""

from __future__ import annotations

import pytest
import torch
from sketch_reference import sketch

import graphprobe


class _Identity(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


ENTRY = "Module.0._Identity.forward.0"


def _close(got: list[float], x: torch.Tensor) -> None:
    want = sketch(x)
    norm = float(torch.linalg.vector_norm(x.double()))
    # float32 sums on the device: a few 1e-7 of the Norm on CPU kernels; the
    # NPU's reduction order may differ, hence 1e-5 (the Sketch's float32 floor).
    assert got == pytest.approx(want, abs=1e-5 * norm), (got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_eager_sketch(dtype, write_config, read_step, tmp_path):
    x = torch.randn((1 << 20) + 37, generator=torch.Generator().manual_seed(0)).to(dtype)
    model = torch.nn.Sequential(_Identity())
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    with torch.no_grad():
        model(x.npu())
        model(x.npu()[: 33 * 47].view(33, 47).t())  # a strided tensor: row-major order of its view
    dumper.step()
    dumper.stop()
    data = read_step(str(tmp_path / "dump"), 0)["data"]
    _close(data[ENTRY]["output"][0]["Sketch"], x)
    _close(data["Module.0._Identity.forward.1"]["output"][0]["Sketch"], x[: 33 * 47].view(33, 47).t())


def test_npugraph_sketch_follows_replays(write_config, read_step, tmp_path):
    model = torch.nn.Sequential(_Identity())
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    static = torch.zeros(1000).npu()
    with torch.no_grad():
        model(static)
        dumper.step(dump=False)
        graph = torch.npu.NPUGraph()
        with torch.npu.graph(graph):
            model(static)
    dumper.step(dump=False)
    inputs = [torch.randn(1000, generator=torch.Generator().manual_seed(s)) for s in range(2)]
    for x in inputs:
        static.copy_(x.npu())
        graph.replay()
        dumper.step()
    dumper.stop()
    for step, x in enumerate(inputs):
        _close(read_step(str(tmp_path / "dump"), step)["data"][ENTRY]["output"][0]["Sketch"], x)

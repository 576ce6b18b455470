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

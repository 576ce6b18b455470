"""statistics.summary_mode "md5" on CUDA: the checksum kernel against the
numpy reference (tests/checksum_reference.py), eager and on CUDA graph
replay, deterministic across runs, equal to the CPU's for equal bits."""

from __future__ import annotations

import glob
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from checksum_reference import Wrap, reference_checksum

import graphprobe
from graphs import capture


def _config(write_config: Any, path: Path) -> str:
    return write_config(dump_path=str(path), level="L0", statistics={"summary_mode": "md5"})


def _md5s(path: Path) -> list[tuple[str | None, str | None]]:
    graphprobe.flush()
    out = []
    for step_dir in sorted(glob.glob(str(path / "step*")), key=lambda p: int(p.rsplit("step", 1)[1])):
        (doc,) = glob.glob(step_dir + "/*/dump.json")
        rec = json.loads(Path(doc).read_text())["data"]["Module.p.Pass.forward.0"]
        out.append((rec["input_args"][0]["md5"], rec["output"][0]["md5"]))
    return out


def _cases() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    big = torch.randn(1 << 22, generator=g)
    return {
        "float32": torch.randn(1000, generator=g),
        "float16": torch.randn(4097, generator=g).half(),
        "bfloat16": torch.randn(3, 1031, generator=g).bfloat16(),
        "float64": torch.randn(777, generator=g).double(),
        "int64": torch.arange(-5000, 5000, 3),
        "int8": torch.randint(-128, 127, (999,), generator=g, dtype=torch.int8),
        "bool": torch.rand(1001, generator=g) > 0.5,
        "complex128": torch.randn(33, dtype=torch.complex128, generator=g),
        "misaligned_view": big,  # viewed from element 1 on its device: not 16-byte aligned, many blocks
        "transposed": torch.randn(64, 48, generator=g).t(),
    }


@pytest.mark.parametrize("name", list(_cases()))
@torch.no_grad()
def test_cuda_checksum_equals_reference_and_cpu(write_config, tmp_path, name):
    x = _cases()[name]

    def on(device: str) -> torch.Tensor:
        moved = x.to(device)
        return moved[1:] if name == "misaligned_view" else moved

    for device in ("cpu", "cuda"):
        dumper = graphprobe.AclGraphDumper(_config(write_config, tmp_path / device))
        model = Wrap()
        dumper.start(model)
        for _ in range(2):  # two runs: the block atomics must not change the value
            model(on(device))
            dumper.step()
        dumper.stop()
    want = reference_checksum(on("cpu"))
    assert _md5s(tmp_path / "cuda") == [(want, want)] * 2
    assert _md5s(tmp_path / "cpu") == [(want, want)] * 2


@torch.no_grad()
def test_checksum_on_cuda_graph_replay(write_config, tmp_path):
    model = Wrap().cuda()
    dumper = graphprobe.AclGraphDumper(_config(write_config, tmp_path / "d"))
    dumper.start(model)
    static = torch.zeros(4096, device="cuda")
    graph, _ = capture(model, static)
    dumper.step(dump=False)  # warm-up and capture: discarded
    inputs = [torch.randn(4096, generator=torch.Generator().manual_seed(s)) for s in range(3)]
    ulp = inputs[0].clone()
    ulp[4000] = torch.nextafter(ulp[4000], torch.tensor(float("inf")))
    inputs.append(ulp)
    for x in inputs:
        static.copy_(x.cuda())
        graph.replay()
        dumper.step()
    dumper.stop()
    got = _md5s(tmp_path / "d")
    assert got == [(reference_checksum(x), reference_checksum(x)) for x in inputs]
    assert got[0] != got[3], "a one-ulp change inside a replayed graph"

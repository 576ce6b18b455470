"""Backward records on a GPU (wiring/backward.py): inside cudagraph trees
(``torch.compile(mode="reduce-overhead")``, which captures the backward
graph too) and inside a ``torch.cuda.graph`` capture of forward and
backward, on every replay.

References: an eager CUDA run of the same model, steps and inputs (record
list), and float64 statistics of gradients captured by plain tensor hooks
on that eager twin (values).
"""

from __future__ import annotations

import copy
import glob
import json
import os
from typing import Any

import pytest
import torch
import torch.nn as nn
from reference import assert_stats_close, stats64

import graphprobe


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(16, 32)
        self.act = nn.GELU()
        self.out = nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.act(self.inp(x)))


def _read(dump_path: str, step: int) -> dict[str, Any]:
    graphprobe.flush()
    found = glob.glob(os.path.join(dump_path, f"step{step}", "*", "dump.json"))
    assert len(found) == 1, found
    with open(found[0]) as f:
        return json.load(f)["data"]


def _inputs(n: int) -> list[torch.Tensor]:
    gen = torch.Generator(device="cuda").manual_seed(1)
    return [torch.randn(4, 16, device="cuda", generator=gen) for _ in range(n)]


def _train(model: nn.Module, run: Any, config: str, inputs: list[torch.Tensor]) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    dumper = graphprobe.AclGraphDumper(config)
    dumper.start(model)
    fn = run(model)
    for x in inputs:
        fn(x).float().pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
        dumper.step()
    dumper.stop()


def test_cudagraph_trees_record_backward_as_eager(write_config, tmp_path):
    """mode="reduce-overhead": warm-up, recording and replays of the
    forward and backward graphs all give the eager record list, every step."""
    torch.manual_seed(0)
    base = Net().cuda()
    inputs = _inputs(5)
    _train(copy.deepcopy(base), lambda m: m, write_config(level="L0", dump_path=str(tmp_path / "eager")), inputs)
    torch._dynamo.reset()
    _train(copy.deepcopy(base), lambda m: torch.compile(m, mode="reduce-overhead", fullgraph=True),
           write_config(level="L0", dump_path=str(tmp_path / "trees")), inputs)
    for step in range(len(inputs)):
        eager, trees = _read(str(tmp_path / "eager"), step), _read(str(tmp_path / "trees"), step)
        assert list(trees) == list(eager), f"step {step}"
        assert any(".backward." in k for k in trees) and any(".parameters_grad." in k for k in trees)
        for name, record in eager.items():
            if ".backward." not in name:
                continue
            for part in ("input", "output"):
                for i, (g, w) in enumerate(zip(trees[name][part], record[part])):
                    assert_stats_close(g, w, 1e-4, f"step {step} {name}.{part}.{i}")


def test_captured_backward_records_on_every_replay(write_config, tmp_path):
    """torch.cuda.graph around forward and backward: the gradient probes are
    captured with the backward kernels and record on every replay; the values
    are those of the replay's input (float64 of the eager twin's gradients)."""
    torch.manual_seed(0)
    model = Net().cuda()
    twin = copy.deepcopy(model)
    grads: dict[str, torch.Tensor] = {}
    twin.out.register_full_backward_hook(lambda m, gi, go: grads.update(out_in=gi[0], out_out=go[0]))
    dumper = graphprobe.AclGraphDumper(write_config(level="L0", dump_path=str(tmp_path / "dump")))
    dumper.start(model)
    static = torch.zeros(4, 16, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            model(static).pow(2).mean().backward()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    model.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        model(static).pow(2).mean().backward()
    dumper.step(dump=False)  # warm-up and capture
    for step, x in enumerate(_inputs(3)):
        static.copy_(x)
        graph.replay()
        dumper.step()
        twin.zero_grad(set_to_none=True)
        twin(x).pow(2).mean().backward()
        data = _read(str(tmp_path / "dump"), step)
        record = data["Module.out.Linear.backward.0"]
        assert_stats_close(record["input"][0], stats64(grads["out_out"]), 1e-5, f"step {step} out input")
        assert_stats_close(record["output"][0], stats64(grads["out_in"]), 1e-5, f"step {step} out output")
    dumper.stop()


@pytest.mark.parametrize("dtype", [torch.bfloat16])
def test_bf16_gradients_keep_their_dtype(write_config, tmp_path, dtype):
    torch.manual_seed(0)
    model = Net().cuda().to(dtype)
    dumper = graphprobe.AclGraphDumper(write_config(level="L0", dump_path=str(tmp_path / "dump")))
    dumper.start(model)
    model(torch.randn(4, 16, device="cuda", dtype=dtype)).float().sum().backward()
    dumper.step()
    dumper.stop()
    data = _read(str(tmp_path / "dump"), 0)
    assert data["Module.out.Linear.backward.0"]["input"][0]["dtype"] == "torch.bfloat16"
    assert data["Module.out.Linear.parameters_grad.0"]["weight"][0]["dtype"] == "torch.bfloat16"

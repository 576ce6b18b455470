"""L1 and mix backward records on a GPU (wiring/api_backward.py): inside
cudagraph trees (``torch.compile(mode="reduce-overhead")``, which captures
the backward graph too), on every replay.

Reference: an eager CUDA run of the same model, steps and inputs (record
list and statistics).
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
import torch.nn.functional as F
from reference import assert_stats_close

import graphprobe


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(16, 32)
        self.out = nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(F.gelu(self.inp(x))) * 2


def _read(dump_path: str, step: int) -> dict[str, Any]:
    graphprobe.flush()
    found = glob.glob(os.path.join(dump_path, f"step{step}", "*", "dump.json"))
    assert len(found) == 1, found
    with open(found[0]) as f:
        return json.load(f)["data"]


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


@pytest.mark.parametrize("level", ["L1", "mix"])
def test_cudagraph_trees_record_api_backward_as_eager(write_config, tmp_path, level):
    """Warm-up, recording and replays of the forward and backward graphs
    all give the eager record list (API backward records included), every
    step, with the eager statistics."""
    torch.manual_seed(0)
    base = Net().cuda()
    gen = torch.Generator(device="cuda").manual_seed(1)
    inputs = [torch.randn(4, 16, device="cuda", generator=gen) for _ in range(4)]
    _train(copy.deepcopy(base), lambda m: m, write_config(level=level, dump_path=str(tmp_path / "eager")), inputs)
    torch._dynamo.reset()
    _train(copy.deepcopy(base), lambda m: torch.compile(m, mode="reduce-overhead", fullgraph=True),
           write_config(level=level, dump_path=str(tmp_path / "trees")), inputs)
    for step in range(len(inputs)):
        eager, trees = _read(str(tmp_path / "eager"), step), _read(str(tmp_path / "trees"), step)
        assert list(trees) == list(eager), f"step {step}"
        assert "Functional.linear.0.backward" in trees and "Tensor.__mul__.0.backward" in trees
        for name, record in eager.items():
            if not name.endswith(".backward"):
                continue
            for part in ("input", "output"):
                for i, (g, w) in enumerate(zip(trees[name][part], record[part])):
                    if w is not None:
                        assert_stats_close(g, w, 1e-4, f"step {step} {name}.{part}.{i}")

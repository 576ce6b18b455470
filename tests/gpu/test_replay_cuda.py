"""Replay (docs/diagnose.md, "Replay") under CUDA graph capture: the keep op
runs once, at capture; its copies are captured kernels, so each replay of the
graph refreshes them and step() judges the latest replay's values. The fault
is known (a ×1.001 branch taken only while a stream captures), and the kept
inputs are checked against an eager forward computed here."""

from __future__ import annotations

import copy
import glob
import json
import os

import pytest
import torch
from graphs import capture
from torch import nn

from graphprobe import AclGraphDumper

FAULT = 1.001


class CaptureOnlyFault(nn.Linear):
    """A Linear whose captured graph multiplies its output by FAULT (eager
    mode, and so replay, computes the true value)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = super().forward(x)
        if torch.cuda.is_current_stream_capturing():
            y = y * FAULT
        return y


class Block(nn.Module):
    def __init__(self, dim: int, faulty: bool) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.act = nn.ReLU()
        self.proj = (CaptureOnlyFault if faulty else nn.Linear)(2 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.proj(self.act(self.fc1(x)))


def _replay(dump: str, step: int) -> dict[str, dict]:
    (path,) = glob.glob(os.path.join(dump, f"step{step}", "*", "replay.json"))
    with open(path) as f:
        doc = json.load(f)
    return {m["module"]: dict(m, folder=os.path.dirname(path)) for m in doc["modules"]}


def test_replay_judges_captured_graph(tmp_path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(Block(32, False), Block(32, True)).cuda().eval()
    reference = copy.deepcopy(model)  # unwired: its eager calls are not kept
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"dump_path": str(tmp_path / "dump"), "level": "L0", "replay": True}))
    dumper = AclGraphDumper(str(config))
    dumper.start(model)
    static = torch.zeros(8, 32, device="cuda")
    with torch.no_grad():
        graph, _ = capture(model, static)
    dumper.step(dump=False)  # the eager warm-up calls
    for step in range(2):
        x = torch.randn(8, 32, device="cuda", generator=torch.Generator("cuda").manual_seed(step))
        static.copy_(x)
        graph.replay()
        dumper.step()
        mods = _replay(str(tmp_path / "dump"), step)
        proj = mods["1.proj"]
        assert proj["verdict"] == "creates", proj
        assert proj["outputs"][0]["local_error"] == pytest.approx(FAULT - 1, rel=1e-2)
        for path in ("0", "0.fc1", "0.act", "0.proj", "1.fc1", "1.act"):
            assert mods[path]["verdict"] == "inherits", (path, mods[path])
        # The kept inputs are this replay's: the projection's input computed eagerly here.
        with torch.no_grad():
            h = reference[1].act(reference[1].fc1(reference[0](x)))
        saved = torch.load(os.path.join(proj["folder"], proj["inputs_file"]), weights_only=True)
        torch.testing.assert_close(saved["args"][0], h.cpu(), rtol=1e-5, atol=1e-6)
    dumper.stop()

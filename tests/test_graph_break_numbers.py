"""Numbers a module returns that were computed from data, in a module
dynamo breaks (``.tolist()``): GraniteMoE's router returns its expert counts
so. From step 1 on, dynamo traces the output hook again for the new numbers,
and that part is registered as a call of its own; the call of the first
trace kept describing its output with the first trace's numbers -- a clean
GraniteMoE training step was named at its router ("value differs") although
the compiled and eager losses agreed bit for bit. No record may hold numbers
other than the step's own (docs/limitations.md: the call is still split)."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

import graphprobe


class _Router(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, list[int]]:
        counts = torch.bincount(x.argmax(-1), minlength=4).tolist()
        return x * 2, counts


class _Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.router = _Router()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, counts = self.router(x)
        return y.sum() + sum(counts)


def test_numbers_from_data_are_the_steps_own_in_every_record(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"dump_path": str(tmp_path / "dump"), "level": "L0"}))
    torch._dynamo.reset()
    model = _Model()
    dumper = graphprobe.AclGraphDumper(str(config))
    dumper.start(model)
    truth = []
    try:
        run = torch.compile(model, backend="aot_eager")
        for step in range(3):
            x = torch.randn(8, 4, generator=torch.Generator().manual_seed(step))
            truth.append(torch.bincount(x.argmax(-1), minlength=4).tolist())
            run(x)
            dumper.step()
    finally:
        dumper.stop()
        graphprobe.flush()
        torch._dynamo.reset()
    assert truth[0] != truth[1] != truth[2]  # the numbers change: dynamo traces the hook again
    for step, counts in enumerate(truth):
        (path,) = (tmp_path / "dump" / f"step{step}").glob("*/dump.json")
        data = json.loads(path.read_text())["data"]
        recorded = [[v["value"] for v in entry["output"][1]]
                    for name, entry in data.items()
                    if name.startswith("Module.router._Router.forward.") and len(entry["output"]) > 1]
        assert recorded == [counts], f"step {step}: {recorded} recorded, the step computed {counts}"

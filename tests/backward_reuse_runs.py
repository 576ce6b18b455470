"""One module called several times per step: the names of its backward
records, written by graphprobe or by msprobe's eager PrecisionDebugger.

Run as a script (each tool in its own process: msprobe patches torch)::

    python tests/backward_reuse_runs.py TOOL MODE CASE OUT

TOOL is ``graphprobe`` or ``msprobe``; MODE ``eager``, ``aot_eager`` or
``inductor`` (msprobe: eager only); CASE ``reuse`` (a Linear and a Tanh
called three times), ``accum`` (the same, two backward passes per step:
gradient accumulation) or ``ckpt`` (the three calls inside a non-reentrant
activation checkpoint). Writes ``OUT/names.json``: per step, the record
names of the dump in file order.
"""

from __future__ import annotations

import glob
import json
import os
import sys
from typing import Any

import torch
import torch.nn as nn
import torch.utils.checkpoint

STEPS = 2


class Reuse(nn.Module):
    """``shared`` and ``act`` called three times in one forward."""

    def __init__(self, checkpoint: bool = False) -> None:
        super().__init__()
        self.inp = nn.Linear(4, 8)
        self.shared = nn.Linear(8, 8)
        self.act = nn.Tanh()
        self.head = nn.Linear(8, 3)
        self.checkpoint = checkpoint

    def loop(self, h: torch.Tensor) -> torch.Tensor:
        for _ in range(3):
            h = self.act(self.shared(h))
        return h

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        if self.checkpoint:
            h = torch.utils.checkpoint.checkpoint(self.loop, h, use_reentrant=False)
        else:
            h = self.loop(h)
        return self.head(h)


def model(case: str) -> Reuse:
    """The model of ``case``, same weights every time."""
    torch.manual_seed(0)
    return Reuse(checkpoint=case == "ckpt")


def batch(step: int, micro: int = 0) -> torch.Tensor:
    """The input of one forward."""
    return torch.randn(5, 4, generator=torch.Generator().manual_seed(10 * step + micro))


def names(out: str, step: int) -> list[str]:
    """The record names of ``step``'s dump.json under ``out``, in file order."""
    found = glob.glob(os.path.join(out, f"step{step}", "*", "dump.json"))
    assert len(found) == 1, f"expected one dump.json for step {step}, found {found}"
    with open(found[0]) as f:
        return list(json.load(f)["data"])


def main(tool: str, mode: str, case: str, out: str) -> None:
    """Trains STEPS steps of ``case`` under ``tool`` in ``mode``."""
    net = model(case)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    micros = 2 if case == "accum" else 1
    os.makedirs(out, exist_ok=True)
    config = os.path.join(out, "config.json")
    if tool == "msprobe":
        from msprobe.pytorch import PrecisionDebugger

        with open(config, "w") as f:
            json.dump({"task": "statistics", "dump_path": out, "rank": [], "step": [], "level": "L0",
                       "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"}}, f)
        debugger: Any = PrecisionDebugger(config_path=config)
        for step in range(STEPS):
            debugger.start(net)
            for micro in range(micros):
                net(batch(step, micro)).sum().backward()
            debugger.stop()
            opt.step()
            opt.zero_grad()
            debugger.step()
    else:
        import graphprobe
        from graphprobe import AclGraphDumper

        with open(config, "w") as f:
            json.dump({"dump_path": out, "level": "L0"}, f)
        dumper = AclGraphDumper(config)
        dumper.start(net)
        run: Any = net if mode == "eager" else torch.compile(net, backend=mode, fullgraph=case != "ckpt")
        for step in range(STEPS):
            for micro in range(micros):
                run(batch(step, micro)).sum().backward()
            opt.step()
            opt.zero_grad()
            dumper.step()
        dumper.stop()
        graphprobe.flush()
    with open(os.path.join(out, "names.json"), "w") as f:
        json.dump([names(out, step) for step in range(STEPS)], f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:5])

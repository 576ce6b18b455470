"""Dumps one small CNN's forward at level L0 with msprobe's PrecisionDebugger
or with graphprobe's AclGraphDumper, same weights, same input, on CPU:

    python3 tests/msprobe_data/same_model_l0.py msprobe OUT      # OUT/step0/proc*/dump.json
    python3 tests/msprobe_data/same_model_l0.py graphprobe OUT   # OUT/step0/pid*/dump.json

Used by tests/test_compare_msprobe.py (each run in its own process: msprobe
patches torch for the rest of the process).
"""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc1 = nn.Linear(128, 32)
        self.norm = nn.LayerNorm(32)
        self.act = nn.GELU(approximate="tanh")
        self.fc2 = nn.Linear(32, 10, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2).reshape(x.size(0), -1)
        return self.fc2(self.act(self.norm(self.fc1(h))))


def main(tool: str, out: str) -> None:
    torch.manual_seed(0)
    model = Net().eval()
    x = torch.randn(4, 3, 8, 8)
    os.makedirs(out, exist_ok=True)
    config = os.path.join(out, "config.json")
    if tool == "msprobe":
        from msprobe.pytorch import PrecisionDebugger

        with open(config, "w") as f:
            json.dump({"task": "statistics", "dump_path": out, "rank": [], "step": [], "level": "L0",
                       "statistics": {"scope": [], "list": [], "data_mode": ["forward"],
                                      "summary_mode": "statistics"}}, f)
        debugger = PrecisionDebugger(config_path=config)
        debugger.start(model)
        with torch.no_grad():
            model(x)
        debugger.stop()
        debugger.step()
    elif tool == "graphprobe":
        import graphprobe
        from graphprobe import AclGraphDumper

        with open(config, "w") as f:
            json.dump({"dump_path": out, "level": "L0"}, f)
        dumper = AclGraphDumper(config)
        dumper.start(model)
        with torch.no_grad():
            model(x)
        dumper.step()
        dumper.stop()
        graphprobe.flush()
    else:
        raise SystemExit(f"tool must be msprobe or graphprobe, not {tool!r}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

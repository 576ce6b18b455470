"""One training step of a small model under a dumper at L1 or mix, for
tests/test_backward_l1.py; each tool in its own process (msprobe patches
torch for the rest of the process):

    python tests/backward_l1_runs.py TOOL MODEL LEVEL MODE OUT

TOOL: graphprobe or msprobe (its eager PrecisionDebugger, task statistics,
data_mode all); MODEL: small (Linear, ReLU, Linear, residual add) or llama
(tests/backward_training.py's transformers Llama, loss from labels); MODE:
eager, aot_eager or inductor (graphprobe only). Writes OUT/grads.pt: float64
gradients computed here with ``torch.autograd.grad`` on a float64 copy of
the model, the tests' independent reference:
``{"small": {"fc1.x": dL/dx at fc1's input, "fc2.x": ..., "fc2.y": dL/d(fc2 output)}}``.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from backward_training import batch, llama  # noqa: E402


class Small(nn.Module):
    """Linear, ReLU, Linear and a residual add; fc1's input is the
    model's input (requires grad, so Functional.linear.0 has its gradient)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.fc1(x))
        return self.fc2(h) + x


def small_input() -> torch.Tensor:
    """The small model's input (requires grad)."""
    return torch.randn(3, 4, generator=torch.Generator().manual_seed(1)).requires_grad_()


def small_reference() -> dict[str, torch.Tensor]:
    """float64 gradients of ``sum(Small()(x))`` at the API boundaries."""
    m = Small().double()
    x = small_input().detach().double().requires_grad_()
    a = F.linear(x, m.fc1.weight, m.fc1.bias)
    h = F.relu(a)
    y = F.linear(h, m.fc2.weight, m.fc2.bias)
    out = y + x
    gx_total, ga, gh, gy = torch.autograd.grad(out.sum(), [x, a, h, y], retain_graph=True)
    gx_fc1 = torch.autograd.grad(a, x, ga, retain_graph=True)[0]  # the part of dL/dx that passes fc1
    gw1, gb1 = torch.autograd.grad(a, [m.fc1.weight, m.fc1.bias], ga, retain_graph=True)
    gw2, gb2 = torch.autograd.grad(y, [m.fc2.weight, m.fc2.bias], gy)
    return {"x": gx_total, "fc1.x": gx_fc1, "fc1.w": gw1, "fc1.b": gb1, "fc1.y": ga, "relu.y": gh,
            "fc2.x": gh, "fc2.w": gw2, "fc2.b": gb2, "fc2.y": gy}


def main(tool: str, model_name: str, level: str, mode: str, out: str) -> None:
    """One step of ``model_name`` under ``tool`` at ``level`` in ``mode``."""
    os.makedirs(out, exist_ok=True)
    model: Any = Small() if model_name == "small" else llama()

    def step(run: Any) -> None:
        if model_name == "small":
            run(small_input()).sum().backward()
        else:
            ids = batch(0)
            run(input_ids=ids, labels=ids).loss.backward()

    config = os.path.join(out, "config.json")
    if tool == "msprobe":
        from msprobe.pytorch import PrecisionDebugger

        with open(config, "w") as f:
            json.dump({"task": "statistics", "dump_path": out, "rank": [], "step": [], "level": level,
                       "statistics": {"scope": [], "list": [], "data_mode": ["all"],
                                      "summary_mode": "statistics"}}, f)
        debugger = PrecisionDebugger(config_path=config)
        debugger.start(model)
        step(model)
        debugger.stop()
        debugger.step()
    else:
        import graphprobe
        from graphprobe import AclGraphDumper

        with open(config, "w") as f:
            json.dump({"dump_path": out, "level": level}, f)
        dumper = AclGraphDumper(config)
        dumper.start(model)
        step(model if mode == "eager" else torch.compile(model, backend=mode))
        dumper.step()
        dumper.stop()
        graphprobe.flush()
    if model_name == "small":
        torch.save(small_reference(), os.path.join(out, "grads.pt"))


if __name__ == "__main__":
    main(*sys.argv[1:6])

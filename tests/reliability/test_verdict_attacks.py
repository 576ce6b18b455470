"""Verdicts a careless comparison must not give (hardening attack D11): a
module whose weight differs passes msprobe's rules, since msprobe counts the
weight among the module's inputs; graphprobe's first divergence names it,
and the CI gate fails."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from graphprobe import AclGraphDumper
from graphprobe.cli import main


def _dump(model: torch.nn.Module, x: torch.Tensor, root: Path) -> Path:
    config = root.parent / f"{root.name}.json"
    config.write_text(json.dumps({"task": "statistics", "level": "L0", "dump_path": str(root)}))
    dumper = AclGraphDumper(str(config))
    dumper.start(model)
    with torch.no_grad():
        model(x)
    dumper.step()
    dumper.stop()
    return root


def test_d11_a_weight_three_times_larger_fails_the_gate(tmp_path: Path, capsys) -> None:
    torch.manual_seed(0)
    bench_model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    target_model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    target_model.load_state_dict(bench_model.state_dict())
    with torch.no_grad():
        target_model[2].weight.mul_(3.0)
    x = torch.randn(5, 8)
    # Independent reference: the weight's Norm is off by exactly 200 %, and
    # the last Linear's output by far more than any threshold.
    w = bench_model[2].weight.detach().double()
    assert abs(float((3 * w).norm() / w.norm()) - 3.0) < 1e-12
    t = _dump(target_model, x, tmp_path / "target")
    b = _dump(bench_model, x, tmp_path / "bench")
    args = ["compare", str(t), str(b), "-o", str(tmp_path / "out"), "--no-report", "--graphprobe-verdicts"]
    assert main([*args, "--fail-on", "warning"]) == 1
    err = capsys.readouterr().err
    assert "first divergence at Module.2.Linear.forward.0" in err
    assert "parameter `weight` differs" in err
    assert main([*args, "--fail-on", "error"]) == 1

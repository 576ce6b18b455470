"""Dump an eager model and a torch.compile'd copy with one block perturbed;
the compare must name that block as the first divergence."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import graphprobe  # noqa: E402
from graphprobe.compare import compare  # noqa: E402


def _dump(model: torch.nn.Module, x: torch.Tensor, path: Path, tmp: Path, *, compiled: bool) -> None:
    cfg = tmp / f"config_{path.name}.json"
    cfg.write_text(json.dumps({"dump_path": str(path), "level": "L0"}))
    dumper = graphprobe.AclGraphDumper(str(cfg))
    dumper.start(model)
    run = torch.compile(model, backend="aot_eager") if compiled else model
    with torch.no_grad():
        run(x)
    dumper.step()
    dumper.stop()


def test_first_divergence_is_the_perturbed_block(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()),
        torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()),
    )
    x = torch.randn(4, 16)
    compiled_copy = copy.deepcopy(model)
    # Added before compile (and before the dumper's hooks), in the copy only.
    compiled_copy[0].register_forward_hook(lambda mod, args, out: out * 3.0)

    _dump(model, x, tmp_path / "eager", tmp_path, compiled=False)
    _dump(compiled_copy, x, tmp_path / "compiled", tmp_path, compiled=True)

    run = compare(tmp_path / "compiled", tmp_path / "eager", tmp_path / "out", progress=False)
    assert not run.unpaired and not run.failures
    (outcome,) = run.outcomes
    assert outcome.first_divergence == "Module.0.Sequential.forward.0"
    assert outcome.counts["error"] >= 1

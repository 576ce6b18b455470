"""Issue 40 item 10: across training steps, a gradient fault at step 0
makes later steps' parameters differ; their first divergence ("parameter ...
differs; nothing recorded produced it") points back at step 0's first
divergence, and the "parameters differ from step K" line fires although only
one of three parameters differs. Hand-written dumps: three Linear layers,
forward and backward records per step."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from compare_fixtures import cli, entry, write_dump

X = [0.5 * math.sin(1.7 * i + 0.3) for i in range(64)]  # mean ~0
W = [0.2 * math.cos(0.9 * i) for i in range(64)]
G = [0.1 * math.sin(0.7 * i + 1.1) for i in range(64)]
FAULT = 1.01  # the faulty gradient (and what it does to the weight it updates): 1 %, 100x the float32 floor


def _stats(values: list[float]) -> dict[str, Any]:
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [len(values)], "Max": max(values),
            "Min": min(values), "Mean": math.fsum(values) / len(values),
            "Norm": math.sqrt(math.fsum(v * v for v in values)), "requires_grad": False}


def _scaled(values: list[float], k: float) -> list[float]:
    return [v * k for v in values]


def _step(*, grad_fault: bool, l1_weight: float) -> dict[str, Any]:
    """One step: l0, l1, l2 forward (with their weights), then the backward
    records in reverse order; ``grad_fault`` scales l1's input gradient
    (everything upstream of it in the backward, i.e. l0's too)."""
    data: dict[str, Any] = {}
    for i in range(3):
        e = entry([_stats(X)], [_stats(X)])
        e["parameters"] = {"weight": _stats(_scaled(W, l1_weight if i == 1 else 1.0))}
        data[f"Module.l{i}.Linear.forward.0"] = e
    k = 1.0
    for i in (2, 1, 0):
        grad_in = _scaled(G, k * (FAULT if grad_fault and i == 1 else 1.0))
        data[f"Module.l{i}.Linear.backward.0"] = entry([_stats(_scaled(G, k))], [_stats(grad_in)])
        k = k * (FAULT if grad_fault and i == 1 else 1.0)
    return data


def test_later_steps_point_back_at_the_step_whose_gradient_went_wrong(tmp_path: Path, capsys: Any) -> None:
    # Target: step 0's backward of l1 is wrong; its update moves l1's weight
    # (1 of 3 parameters), which steps 1 and 2 use. Bench: all correct.
    target = [_step(grad_fault=True, l1_weight=1.0), _step(grad_fault=False, l1_weight=FAULT),
              _step(grad_fault=False, l1_weight=FAULT * FAULT)]
    for step, data in enumerate(target):
        write_dump(tmp_path / "t" / f"step{step}" / "rank0" / "dump.json", data)
        write_dump(tmp_path / "b" / f"step{step}" / "rank0" / "dump.json", _step(grad_fault=False, l1_weight=1.0))
    code, out, err = cli(capsys, "compare", str(tmp_path / "t"), str(tmp_path / "b"), "-o", str(tmp_path / "o"),
                         "--no-report", "-q")
    assert code == 0, err
    lines = out.splitlines()
    step0 = next(line for line in lines if line.startswith("  step0/rank0: first divergence: "))
    assert step0.startswith("  step0/rank0: first divergence: Module.l1.Linear.backward.0 (")
    for step in (1, 2):
        line = next(line for line in lines if line.startswith(f"  step{step}/rank0: first divergence: "))
        assert line.startswith(f"  step{step}/rank0: first divergence: Module.l1.Linear.forward.0 (parameter "
                               "`weight` differs")
        assert ("nothing recorded produced it; the parameters already differed after step0, whose first divergence "
                "is Module.l1.Linear.backward.0: look there first)") in line
    assert ("parameters differ from step1 on (step1/rank0 first, 1 of 3 parameter rows beyond the floor): they "
            "already differed after step0, whose first divergence is Module.l1.Linear.backward.0 (step0/rank0): "
            "look there first") in lines


def test_some_parameters_differing_from_the_first_step_on_still_name_that_step(tmp_path: Path, capsys: Any) -> None:
    # No step before it diverges (the weights loaded differ in one layer).
    for step in range(2):
        write_dump(tmp_path / "t" / f"step{step}" / "rank0" / "dump.json", _step(grad_fault=False, l1_weight=FAULT))
        write_dump(tmp_path / "b" / f"step{step}" / "rank0" / "dump.json", _step(grad_fault=False, l1_weight=1.0))
    code, out, err = cli(capsys, "compare", str(tmp_path / "t"), str(tmp_path / "b"), "-o", str(tmp_path / "o"),
                         "--no-report", "-q")
    assert code == 0, err
    assert ("parameters differ from step0 on (step0/rank0 first, 1 of 3 parameter rows beyond the floor): the "
            "divergence started in an earlier step's update, or in the weights loaded") in out.splitlines()
    assert "the parameters already differed in step0 (step0/rank0)" in out

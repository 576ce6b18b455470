"""Outputs with several tensors are recorded element by element: a module
returning ``(a, b)`` (L0) and ``torch.max(x, dim=0)`` (L1) must record
``output.1``, and compare must judge it. A probe that looked only at the first
output element passed every other test (issue 17)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
import torch
from reference import stats64

import graphprobe
from graphprobe.cli import main


class Split(torch.nn.Module):
    """Returns two tensors; ``shift`` changes only the second."""

    def __init__(self, shift: float) -> None:
        super().__init__()
        self.shift = shift

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x * 2.0, x - self.shift


class Net(torch.nn.Module):
    def __init__(self, shift: float) -> None:
        super().__init__()
        self.split = Split(shift)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.split(x)
        values, indices = torch.max(a + b, dim=0)
        return values * indices


def dump(model: torch.nn.Module, level: str, x: torch.Tensor, write_config, read_step, root: Path) -> dict:
    dumper = graphprobe.AclGraphDumper(write_config(dump_path=str(root), level=level))
    dumper.start(model)
    try:
        with torch.no_grad():
            model(x)
        dumper.step()
    finally:
        dumper.stop()
    return read_step(str(root), 0)["data"]


def assert_stats(record: dict, want: torch.Tensor) -> None:
    ref = stats64(want)
    for key in ("Max", "Min", "Mean", "Norm"):
        assert math.isclose(record[key], ref[key], rel_tol=1e-9, abs_tol=1e-12), (key, record[key], ref[key])


def compare_rows(capsys, target: Path, bench: Path, out: Path) -> dict[str, dict[str, str]]:
    code = main(["compare", str(target), str(bench), "-o", str(out), "--no-report", "-q"])
    capsys.readouterr()
    assert code == 0
    (csv_path,) = out.rglob("compare_result_*.csv")
    with open(csv_path, newline="") as f:
        return {r["NPU Name"]: r for r in csv.DictReader(f)}


X = torch.tensor([[1.0, -2.0, 3.0], [4.0, 0.5, -6.0]], dtype=torch.float64)


FAULT = torch.tensor([[30.0], [1.0]], dtype=torch.float64)  # shifts row 0 below row 1 in every column


def faulty_split(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x * 2.0, x - FAULT


@pytest.mark.parametrize("level", ["L0", "L1"])
def test_second_output_is_recorded_and_compared(level, write_config, read_step, tmp_path, capsys):
    # L0: Split returns (2x, x - 1); L1: torch.max(3x - shift, dim=0) returns
    # (values, indices). Their second elements, in float64, independently:
    entry = "Module.split.Split.forward.0" if level == "L0" else "Torch.max.0.forward"
    good_second = X - 1.0 if level == "L0" else torch.max(3 * X - 1.0, dim=0).indices
    bad_second = X - FAULT if level == "L0" else torch.max(3 * X - FAULT, dim=0).indices
    assert not torch.equal(good_second, bad_second)

    good = dump(Net(1.0), level, X, write_config, read_step, tmp_path / "good")
    outputs = good[entry]["output"]
    assert len(outputs) == 2, outputs
    assert_stats(outputs[1], good_second)
    assert outputs[1]["dtype"] == ("torch.float64" if level == "L0" else "torch.int64")

    faulty_model = Net(1.0)
    faulty_model.split.forward = faulty_split  # a fault that reaches only the second output of Split
    faulty = dump(faulty_model, level, X, write_config, read_step, tmp_path / "faulty")
    assert_stats(faulty[entry]["output"][1], bad_second)

    rows = compare_rows(capsys, tmp_path / "faulty", tmp_path / "good", tmp_path / "cmp")
    assert rows[f"{entry}.output.1"]["Match"] == "matched"
    assert rows[f"{entry}.output.1"]["NormRelativeErr"] not in ("0", "0%", "N/A")
    if level == "L0":
        assert rows[f"{entry}.output.0"]["NormRelativeErr"] in ("0", "0%")  # msprobe writes "0" for equal values

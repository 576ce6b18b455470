"""Tensor dumps of modules whose names hold characters that are legal in a
file name but look like path separators elsewhere (issue 28 D17): graphprobe's
own tensor task writes ``Module.a\\b.Scale.forward.0.output.0.pt`` for a
submodule registered as ``a\\b``; its compare must read that file, compute
the metrics and judge the row -- before, it refused the name as "not a plain
file name", the tensors were never compared and the Result stayed "pass".
The reference is float64 numpy on the tensors the test itself fed in."""

from __future__ import annotations

import csv
import glob
import os
from pathlib import Path

import numpy as np
import pytest
import torch

import graphprobe
from graphprobe.compare import compare

NAME = "a\\b"


class Scale(torch.nn.Module):
    """tanh(x) * k with k a plain attribute, not a parameter: the inputs of
    both runs are equal and only the output differs, which msprobe's rules
    call an error (a parameter that differs would count as a differing
    input)."""

    def __init__(self, k: float) -> None:
        super().__init__()
        self.k = k

    def forward(self, x):
        return torch.tanh(x) * self.k


class Net(torch.nn.Module):
    def __init__(self, k: float) -> None:
        super().__init__()
        self.add_module(NAME, Scale(k))
        self.after = torch.nn.ReLU()

    def forward(self, x):
        return self.after(getattr(self, NAME)(x))


def _dump(tmp_path: Path, side: str, k: float, x: torch.Tensor, write_config) -> tuple[Path, np.ndarray]:
    cfg = write_config(task="tensor", level="L0", dump_path=str(tmp_path / side))
    os.replace(cfg, tmp_path / f"{side}.json")
    model = Net(k)
    dumper = graphprobe.AclGraphDumper(str(tmp_path / f"{side}.json"))
    dumper.start(model)
    with torch.no_grad():
        model(x)
    dumper.step()
    dumper.stop()
    graphprobe.flush()
    (proc,) = glob.glob(str(tmp_path / side / "step0" / "*"))
    return Path(proc), np.tanh(x.double().numpy()) * k


@pytest.mark.parametrize("layout", ["msprobe", "graphprobe"])
def test_a_backslash_in_a_module_name_is_compared(tmp_path: Path, write_config, layout: str) -> None:
    x = torch.randn(2, 4, generator=torch.Generator().manual_seed(1))
    target, t_out = _dump(tmp_path, "target", 1.5, x, write_config)
    bench, b_out = _dump(tmp_path, "bench", 1.0, x, write_config)
    data_file = f"Module.{NAME}.Scale.forward.0.output.0.pt"
    assert (target / "dump_tensor_data" / data_file).is_file()
    run = compare(target, bench, tmp_path / "out", progress=False, html=False, tensor_layout=layout)
    (o,) = run.outcomes
    assert o.error is None
    with open(o.csv_path, newline="", encoding="utf-8") as f:
        rows = {r["NPU Name"]: r for r in csv.DictReader(f)}
    row = rows[f"Module.{NAME}.Scale.forward.0.output.0"]
    assert "not a plain file name" not in row["Err_message"], row["Err_message"]
    want_cos = float(np.dot(t_out.ravel(), b_out.ravel()) / (np.linalg.norm(t_out) * np.linalg.norm(b_out)))
    want_max_abs = float(np.max(np.abs(t_out - b_out)))
    assert float(row["Cosine"]) == pytest.approx(want_cos, rel=1e-6)
    assert float(row["MaxAbsErr"]) == pytest.approx(want_max_abs, rel=1e-5)
    # The output is 50 % off with equal inputs: msprobe's rules call that an error.
    assert row["Result"] == "error", row
    inputs = rows[f"Module.{NAME}.Scale.forward.0.input.0"]
    assert float(inputs["Cosine"]) == pytest.approx(1.0) and inputs["Result"] == "pass"

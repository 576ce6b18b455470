"""``@torch.jit.script`` helpers called by a model at L1/mix: eager mode runs
them in TorchScript, which records none of their inner API calls; compiled
code must record the same list (wiring/scripted.py). DeBERTa-v2's
relative-position helpers are such functions: before, the compiled list held
their calls and every later call of the same APIs was numbered differently,
and compare called a clean eager-vs-inductor pair a divergence."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import graphprobe


@torch.jit.script
def _log_bucket(rel: torch.Tensor, mid: int) -> torch.Tensor:
    sign = torch.sign(rel)
    return torch.ceil(torch.log(torch.abs(rel) + 1.0) / math.log(2.0) * mid) * sign


@torch.jit.script
def _scale(q: torch.Tensor, factor: int) -> torch.Tensor:
    return torch.sqrt(torch.tensor(q.size(-1), dtype=torch.float) * factor)


class _RelativeAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(8, 8)
        self.k = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(x.shape[1], dtype=torch.float)
        bias = _log_bucket(pos[:, None] - pos[None, :], 4)
        scores = torch.matmul(self.q(x), self.k(x).transpose(-1, -2)) / _scale(x, 2)
        return torch.softmax(scores + bias * 0.1, dim=-1) @ x


def _names(write_config, tmp_path, level: str, mode: str) -> tuple[list[str], dict]:
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = _RelativeAttention()
    dumper = graphprobe.AclGraphDumper(write_config(level=level, dump_path=str(tmp_path / f"{level}-{mode}")))
    dumper.start(model)
    try:
        run = model if mode == "eager" else torch.compile(model, backend="aot_eager", fullgraph=True)
        x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(1))
        run(x).sum().backward()
        dumper.step()
    finally:
        dumper.stop()
        torch._dynamo.reset()
    graphprobe.flush()
    import glob
    import json

    (path,) = glob.glob(str(tmp_path / f"{level}-{mode}" / "step0" / "*" / "dump.json"))
    with open(path) as f:
        data = json.load(f)["data"]
    return list(data), data


@pytest.mark.parametrize("level", ["L1", "mix"])
def test_compiled_records_no_call_inside_a_scripted_function(write_config, tmp_path, level):
    eager, eager_data = _names(write_config, tmp_path, level, "eager")
    compiled, compiled_data = _names(write_config, tmp_path, level, "aot_eager")
    assert not any(n.startswith(("Torch.sign.", "Torch.ceil.", "Torch.sqrt.", "Torch.abs.")) for n in eager), eager
    assert compiled == eager
    # Numbered alike, so the same call is paired: the division by the
    # scripted scale has the same inputs on both sides.
    div = "Tensor.__truediv__.0.forward"
    assert div in eager
    for e, c in zip(eager_data[div]["input_args"], compiled_data[div]["input_args"]):
        assert e.get("Max") == pytest.approx(c.get("Max"), rel=1e-6)


def test_the_scripted_functions_are_given_back_at_stop(write_config, tmp_path):
    own = (_log_bucket._torchdynamo_inline, _scale._torchdynamo_inline)
    dumper = graphprobe.AclGraphDumper(write_config(level="L1", dump_path=str(tmp_path / "a")))
    dumper.start(_RelativeAttention())
    assert _log_bucket._torchdynamo_inline is not own[0] and _scale._torchdynamo_inline is not own[1]
    dumper.stop()
    assert (_log_bucket._torchdynamo_inline, _scale._torchdynamo_inline) == own
    dumper = graphprobe.AclGraphDumper(write_config(level="L0", dump_path=str(tmp_path / "b")))
    dumper.start(_RelativeAttention())  # L0 records no API: nothing replaced
    try:
        assert (_log_bucket._torchdynamo_inline, _scale._torchdynamo_inline) == own
    finally:
        dumper.stop()

"""The rule for a pair that agrees bit for bit (docs/formats.md) on its
home ground: eager against a CUDA graph replaying eager's kernels, in
bfloat16. A clean pair must stay silent -- the statistics kernel's block
atomics and float32 vector sums must leave bit-identical data within the
rule's 1e-12 -- and a graph-only change far below the bfloat16 floors must
be named where it is made."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from graphs import capture
from models import make_transformer

import graphprobe
from graphprobe.compare import compare


def _record(model: torch.nn.Module, tokens: torch.Tensor, dump: Path, graph: bool, tmp_path: Path) -> None:
    config = tmp_path / f"{dump.name}.json"
    config.write_text(f'{{"dump_path": "{dump}", "level": "L0"}}')
    dumper = graphprobe.AclGraphDumper(str(config))
    dumper.start(model)
    with torch.no_grad():
        if graph:
            static = torch.zeros_like(tokens)
            g, _ = capture(model, static)
            dumper.step(dump=False)  # warm-up and capture: discarded
            static.copy_(tokens)
            g.replay()
        else:
            model(tokens)
    dumper.step()
    dumper.stop()
    graphprobe.flush()


@pytest.mark.parametrize("fault", [False, True])
def test_eager_vs_cuda_graph_in_bfloat16(tmp_path: Path, fault: bool) -> None:
    base = make_transformer().cuda().to(torch.bfloat16)
    tokens = torch.randint(0, 64, (2, 6), device="cuda")
    _record(copy.deepcopy(base), tokens, tmp_path / "eager", False, tmp_path)
    model = copy.deepcopy(base)
    if fault:
        # Graph-only (the hook runs while capturing, so its ops are in the
        # graph): layer 1's MLP output moved by ~0.1 % of its L2 norm, a
        # fifth of the bfloat16 Sketch floor, Norm and Mean barely.
        def nudge(_m: torch.nn.Module, _i: object, out: torch.Tensor) -> torch.Tensor:
            return out + 1e-3 * out.roll(1, dims=-1)

        model.layers[1].mlp.register_forward_hook(nudge)
    _record(model, tokens, tmp_path / "graph", True, tmp_path)
    (o,) = compare(tmp_path / "graph", tmp_path / "eager", tmp_path / "cmp", html=False, progress=False).outcomes
    assert o.error is None, o.error
    if not fault:
        assert o.divergence is None, o.divergence.message
        return
    assert o.divergence is not None, "missed"
    assert o.first_divergence == "Module.layers.1.mlp.FeedForward.forward.0", o.divergence.message
    assert "bitwise-pair" in o.divergence.kinds, o.divergence.message

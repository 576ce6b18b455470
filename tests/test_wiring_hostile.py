"""Wiring never breaks the user's model, and the dumper writes only what its
own compare reads (issue #17, item 10)."""

from __future__ import annotations

import json

import torch

import graphprobe
from graphprobe.wiring.probe import MAX_DEPTH


def _nest(x: torch.Tensor, depth: int):
    out = x
    for _ in range(depth):
        out = [out]
    return out


class Deep(torch.nn.Module):
    def __init__(self, depth: int) -> None:
        super().__init__()
        self.depth = depth

    def forward(self, x: torch.Tensor):
        return _nest(x + 1, self.depth), x * 2


def test_deep_outputs_are_cut_at_the_depth_bound_and_compare_reads_them(write_config, read_step, tmp_path):
    x = torch.arange(4.0)
    for depth in (MAX_DEPTH - 1, 300, 5000):  # 5000 once raised RecursionError in the wired forward
        dumper = graphprobe.AclGraphDumper(write_config(level="L0"))
        model = torch.nn.Sequential(Deep(depth))
        dumper.start(model)
        out = model(x)
        dumper.step()
        dumper.stop()
        assert torch.equal(out[1], x * 2)
        data = read_step(str(tmp_path / "dump"), 0)["data"]
        rec = data["Module.0.Deep.forward.0"]["output"]
        assert rec[1]["Max"] == 6.0  # the shallow tensor is still recorded
        node, levels = rec[0], 1
        while isinstance(node, list):
            node, levels = node[0], levels + 1
        if depth < MAX_DEPTH:
            assert node["type"] == "torch.Tensor" and node["Max"] == 4.0
        else:
            assert node == {"type": "list"}  # cut: recorded by type, nothing probed below
            assert levels == MAX_DEPTH
        # the dumper's own compare reads what it wrote
        from graphprobe.compare import compare

        run = compare(tmp_path / "dump" / "step0", tmp_path / "dump" / "step0", tmp_path / f"cmp{depth}",
                      html=False, progress=False)
        assert run.outcomes[0].error is None, run.outcomes[0].error
        (tmp_path / "dump").rename(tmp_path / f"dump{depth}")


def test_lone_surrogates_in_names_and_values_do_not_break_the_model(write_config, read_step, tmp_path):
    class Named(torch.nn.Module):
        def forward(self, x, tag="ok"):
            return x + 1

    model = torch.nn.Module()
    model.add_module("bad\udc80name", Named())
    model.forward = lambda x: model.get_submodule("bad\udc80name")(x, tag="t\ud800")
    dumper = graphprobe.AclGraphDumper(write_config(level="L0"))
    dumper.start(model)
    out = model(torch.zeros(2))
    dumper.step()
    dumper.stop()
    assert torch.equal(out, torch.ones(2))
    data = read_step(str(tmp_path / "dump"), 0)["data"]
    (name,) = data
    assert name == "Module.bad\\udc80name.Named.forward.0"
    assert data[name]["input_kwargs"]["tag"] == {"type": "str", "value": "t\\ud800"}
    json.dumps(data)  # plain UTF-8 all through

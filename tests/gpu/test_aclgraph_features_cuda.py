"""Issue 29 on a GPU: statistics.slice and the tensor section (custom_api,
msprobe's aclgraph layout) inside torch.cuda.graph replays, with the live
switch. References: float64 statistics of the slice written out by hand, and
the eager tensors of the unwrapped functions (torch.equal)."""

from __future__ import annotations

import json
import os

from custom_api_target import Net
import pytest
import torch
from graphs import capture

import graphprobe




@torch.no_grad()
def test_slice_statistics_in_replays(write_config, read_step, tmp_path):
    model = Net().cuda()
    rules = [{"size": 64, "begin": -7, "end": -2}, {"dim": 1, "begin": 2, "end": 6}]
    dumper = graphprobe.AclGraphDumper(write_config(statistics={"list": ["lin"], "slice": rules}))
    dumper.start(model)
    static = torch.zeros(64, 8, device="cuda")
    graph, _ = capture(model, static)
    dumper.step(dump=False)
    for step in range(3):
        x = torch.randn(64, 8, device="cuda")
        static.copy_(x)
        graph.replay()
        dumper.step()
        record = read_step(str(tmp_path / "dump"), step)["data"]["Module.lin.Linear.forward.0"]["input_args"][0]
        want = x[-7:-2, 2:6].double()
        assert record["shape"] == [5, 4]
        assert (record["Max"], record["Min"]) == (want.max().item(), want.min().item())
        assert record["Mean"] == pytest.approx(want.mean().item(), abs=2e-6 * want.pow(2).mean().sqrt().item())
        assert record["Norm"] == pytest.approx(want.norm().item(), rel=2e-6)
    dumper.stop()


@torch.no_grad()
def test_custom_api_files_in_the_aclgraph_layout_from_replays(tmp_path):
    cfg = tmp_path / "c.json"
    config = {"dump_path": str(tmp_path / "dump"), "task": "tensor", "level": "L0",
              "tensor": {"list": ["lin"], "custom_api": ["custom_api_target.scale_add", "custom_api_target.split_pair"],
                         "layout": "aclgraph"}}
    cfg.write_text(json.dumps(config))
    model = Net().cuda()
    dumper = graphprobe.AclGraphDumper(str(cfg))
    dumper.start(model)
    static = torch.zeros(3, 8, device="cuda")
    graph, _ = capture(model, static)
    dumper.step(dump=False)  # the warm-up and capture calls use no call index
    written = []
    for step in range(4):
        dumper.enable(step != 1)
        x = torch.randn(3, 8, device="cuda")
        static.copy_(x)
        graph.replay()
        dumper.step()
        if step == 1:
            continue
        call = len(written)
        written.append(step)
        (proc,) = os.listdir(tmp_path / "dump" / f"step{step}")
        folder = tmp_path / "dump" / f"step{step}" / proc / "dump_tensor_data"
        h = torch.nn.functional.linear(x, model.lin.weight, model.lin.bias)  # not model.lin: it is wired
        a, b = h * 2, h - 1
        want = {f"Module.lin.Linear.{call}.input.0.pt": x, f"Module.lin.Linear.{call}.output.pt": h,
                f"Module.lin.Linear.{call}.parameters.weight.pt": model.lin.weight,
                f"Module.lin.Linear.{call}.parameters.bias.pt": model.lin.bias,
                f"split_pair.{call}.input.0.pt": h, f"split_pair.{call}.output.0.pt": a,
                f"split_pair.{call}.output.1.pt": b, f"scale_add.{call}.input.0.pt": a,
                f"scale_add.{call}.input.1.pt": b, f"scale_add.{call}.input_kwargs.bias.pt": h,
                f"scale_add.{call}.output.pt": a * 0.5 + b + h}
        assert sorted(os.listdir(folder)) == sorted(want)
        for name, tensor in want.items():
            got = torch.load(folder / name, weights_only=True)
            assert torch.equal(got, tensor.cpu()), (step, name)
    dumper.stop()
    assert sorted(os.listdir(tmp_path / "dump")) == ["step0", "step2", "step3"]

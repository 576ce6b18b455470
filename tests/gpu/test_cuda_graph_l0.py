"""L0 statistics recorded inside torch.cuda.graph replays."""

from __future__ import annotations

import copy

import pytest
import torch
from models import make_transformer
from reference import ReferenceRecorder, assert_stats_close, flatten_dump

import graphprobe
from graphs import capture



def _check(data, ref, rtol, step):
    got = flatten_dump(data)
    assert list(got) == list(ref), f"step {step}: names/order differ"
    for entry, places in ref.items():
        for place, want in places.items():
            assert_stats_close(got[entry][place], want, rtol, f"step {step} {entry} {place}")


@torch.no_grad()
def test_replays_record_every_step(write_config, read_step, tmp_path):
    base = make_transformer().cuda()
    ref_model = copy.deepcopy(base)
    recorder = ReferenceRecorder(ref_model)
    model = copy.deepcopy(base)
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    static = torch.zeros(2, 6, dtype=torch.long, device="cuda")
    graph, _ = capture(model, static)
    dumper.step(dump=False)  # warm-up and capture: discarded
    inputs = [torch.randint(0, 64, (2, 6), device="cuda", generator=None) for _ in range(5)]
    for step, tokens in enumerate(inputs):
        static.copy_(tokens)
        graph.replay()
        dumper.step()
        recorder.reset()
        ref_model(tokens)
        _check(read_step(str(tmp_path / "dump"), step)["data"], recorder.entries, 1e-5, step)
    dumper.stop()


@torch.no_grad()
def test_only_the_replayed_graph_is_listed(write_config, read_step, tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).cuda()
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    small, big = torch.zeros(2, 8, device="cuda"), torch.zeros(4, 8, device="cuda")
    g_small, _ = capture(model, small)
    g_big, _ = capture(model, big)
    dumper.step(dump=False)
    big.copy_(torch.randn(4, 8))
    g_big.replay()
    dumper.step()
    small.copy_(torch.randn(2, 8))
    g_small.replay()
    dumper.step()
    dumper.stop()
    for step, batch in ((0, 4), (1, 2)):
        data = read_step(str(tmp_path / "dump"), step)["data"]
        assert list(data) == ["Module.0.Linear.forward.0", "Module.1.ReLU.forward.0"]
        assert data["Module.0.Linear.forward.0"]["input_args"][0]["shape"] == [batch, 8]


@torch.no_grad()
def test_two_replays_between_steps_are_reported(write_config, read_step, tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8)).cuda()
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    static = torch.zeros(2, 8, device="cuda")
    graph, _ = capture(model, static)
    dumper.step(dump=False)
    graph.replay()
    static.fill_(2.0)
    graph.replay()
    with pytest.warns(RuntimeWarning, match="written more than once"):
        dumper.step()
    dumper.stop()
    rec = read_step(str(tmp_path / "dump"), 0)["data"]["Module.0.Linear.forward.0"]["input_args"][0]
    assert rec["write_count"] == 2 and rec["Max"] == 2.0  # the latest replay wins, and says so


def _compiled_steps_match_eager(write_config, read_step, tmp_path, **compile_kwargs):
    from torch._dynamo.utils import counters

    counters.clear()
    base = make_transformer().cuda()
    ref_model = copy.deepcopy(base)
    recorder = ReferenceRecorder(ref_model)
    model = copy.deepcopy(base)
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    compiled = torch.compile(model, fullgraph=True, **compile_kwargs)
    for _ in range(3):  # compile; cudagraph trees warm up, then record
        compiled(torch.randint(0, 64, (2, 5), device="cuda"))
    dumper.step(dump=False)
    for step in range(3):
        tokens = torch.randint(0, 64, (2, 5), device="cuda")
        compiled(tokens)
        dumper.step()
        recorder.reset()
        ref_model(tokens)
        _check(read_step(str(tmp_path / "dump"), step)["data"], recorder.entries, 1e-4, step)
    dumper.stop()
    if compile_kwargs.get("mode") == "reduce-overhead":
        # Otherwise the steps above ran without CUDA graphs and proved nothing about them.
        assert not counters["inductor"].get("cudagraph_skips"), dict(counters["inductor"])


@torch.no_grad()
def test_compiled_cuda_eager_path(write_config, read_step, tmp_path):
    _compiled_steps_match_eager(write_config, read_step, tmp_path)


@torch.no_grad()
def test_reduce_overhead_cudagraph_trees(write_config, read_step, tmp_path):
    _compiled_steps_match_eager(write_config, read_step, tmp_path, mode="reduce-overhead")


@torch.no_grad()
def test_switch_inside_captured_graph(write_config, read_step, tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).cuda()
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    static = torch.zeros(2, 8, device="cuda")
    graph, _ = capture(model, static)
    dumper.step(dump=False)
    for step in range(6):
        dumper.enable(step not in (2, 4))
        static.copy_(torch.randn(2, 8))
        graph.replay()
        dumper.step()
    dumper.stop()
    import os

    assert sorted(os.listdir(tmp_path / "dump")) == ["step0", "step1", "step3", "step5"]
    for step in (0, 1, 3, 5):
        assert len(read_step(str(tmp_path / "dump"), step)["data"]) == 2

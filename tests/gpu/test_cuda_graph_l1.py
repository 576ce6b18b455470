"""L1 and mix statistics recorded inside torch.cuda.graph replays."""

from __future__ import annotations

import copy

import pytest
import torch
from models import make_transformer
from reference import (
    OPERATOR_NAMES,
    TRANSFORMER_VIEWS,
    ApiReferenceRecorder,
    ReferenceRecorder,
    assert_stats_close,
    flatten_dump,
)

import graphprobe
from graphs import capture


@pytest.mark.parametrize("level", ["L1", "mix"])
@torch.no_grad()
def test_replays_record_apis_every_step(level, write_config, read_step, tmp_path):
    base = make_transformer().cuda()
    ref_model = copy.deepcopy(base)
    modules = ReferenceRecorder(ref_model) if level == "mix" else None
    apis = ApiReferenceRecorder(ref_model, TRANSFORMER_VIEWS, OPERATOR_NAMES, sink=modules)
    model = copy.deepcopy(base)
    dumper = graphprobe.AclGraphDumper(write_config(level=level))
    dumper.start(model)
    static = torch.zeros(2, 6, dtype=torch.long, device="cuda")
    graph, _ = capture(model, static)
    dumper.step(dump=False)  # warm-up and capture: discarded
    for step in range(5):
        tokens = torch.randint(0, 64, (2, 6), device="cuda")
        static.copy_(tokens)
        graph.replay()
        dumper.step()
        if modules is not None:
            modules.reset()
        apis.reset()
        ref_model(tokens)
        ref = modules.entries if modules is not None else apis.entries
        got = flatten_dump(read_step(str(tmp_path / "dump"), step)["data"])
        assert list(got) == list(ref), f"step {step}: names/order differ"
        assert any(n.startswith("Module.") for n in got) == (level == "mix")
        for entry, places in ref.items():
            assert set(got[entry]) == set(places), f"step {step} {entry}: places differ"
            for place, want in places.items():
                assert got[entry][place]["shape"] == want["shape"]
                assert_stats_close(got[entry][place], want, 1e-5, f"step {step} {entry} {place}")
    dumper.stop()

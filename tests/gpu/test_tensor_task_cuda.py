"""task "tensor" inside torch.cuda.graph replays, with the live switch."""

from __future__ import annotations

import copy
import json
import os

import torch
from models import make_transformer

import graphprobe
from graphs import capture



@torch.no_grad()
def test_replays_save_mlp_tensors_and_honour_the_switch(write_config, tmp_path):
    base = make_transformer().cuda()
    ref = copy.deepcopy(base)
    model = copy.deepcopy(base)
    dumper = graphprobe.AclGraphDumper(write_config(task="tensor", statistics={"list": ["mlp.down"]}))
    dumper.start(model)
    static = torch.zeros(2, 5, dtype=torch.long, device="cuda")
    graph, _ = capture(model, static)
    dumper.step(dump=False)
    for step in range(6):
        dumper.enable(step not in (2, 4))
        tokens = torch.randint(0, 64, (2, 5), device="cuda")
        static.copy_(tokens)
        graph.replay()
        dumper.step()
        if step in (2, 4):
            continue
        graphprobe.flush()
        (proc,) = os.listdir(tmp_path / "dump" / f"step{step}")
        folder = tmp_path / "dump" / f"step{step}" / proc
        outs = {}
        hooks = [ref.layers[i].mlp.down.register_forward_hook(lambda m, a, o, i=i: outs.__setitem__(i, o.clone()))
                 for i in range(2)]
        ref(tokens)
        for h in hooks:
            h.remove()
        for i in range(2):
            got = torch.load(folder / "dump_tensor_data" / f"Module.layers.{i}.mlp.down.Linear.forward.0.output.0.pt")
            assert torch.equal(got, outs[i].cpu()), (step, i)
        doc = json.loads((folder / "dump.json").read_text())
        assert len(doc["data"]) == 2
    dumper.stop()
    assert sorted(os.listdir(tmp_path / "dump")) == ["step0", "step1", "step3", "step5"]

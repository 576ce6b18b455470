"""Compare of two 4-rank dumps: one CSV per rank and step, in parallel, and a
cross-rank summary naming the rank that diverges first."""

from __future__ import annotations

import json
import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from graphprobe.compare import compare
from graphprobe.compare.summary import format_summary

WORLD, STEPS, FAULTY = 4, 2, 2


class Local(torch.nn.Module):
    """Per-rank work before the collective; scaled on the faulty rank in the run under test."""

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.tanh(x) * self.scale


class AllReduce(torch.nn.Module):
    def forward(self, x):
        y = x.clone()
        dist.all_reduce(y)
        return y


def _worker(rank: int, port: int, root: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        import graphprobe

        for name, scale in (("bench", 1.0), ("target", 3.0 if rank == FAULTY else 1.0)):
            cfg = os.path.join(root, f"{name}_{rank}.json")
            with open(cfg, "w") as f:
                json.dump({"dump_path": os.path.join(root, name)}, f)
            model = torch.nn.Sequential(Local(scale), AllReduce())
            dumper = graphprobe.AclGraphDumper(cfg)
            dumper.start(model)
            for step in range(STEPS):
                model(torch.randn(3, 4, generator=torch.Generator().manual_seed(rank * 10 + step)))
                dumper.step()
            dumper.stop()
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_four_rank_compare(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(_worker, args=(port, str(tmp_path)), nprocs=WORLD, start_method="spawn")
    run = compare(tmp_path / "target", tmp_path / "bench", tmp_path / "out", progress=False, jobs=2)
    assert not run.unpaired and not run.failures
    assert sorted(o.pair.label for o in run.outcomes) == sorted(
        f"step{s}/rank{r}" for s in range(STEPS) for r in range(WORLD))
    for step in range(STEPS):
        assert len(list((tmp_path / "out" / f"step{step}").glob("compare_result_*.csv"))) == WORLD
    by_label = {o.pair.label: o for o in run.outcomes}
    for step in range(STEPS):
        # The faulty rank goes wrong in its own module; the others only after
        # the all-reduce brings its error to them.
        assert by_label[f"step{step}/rank{FAULTY}"].first_divergence == "Module.0.Local.forward.0"
        for rank in set(range(WORLD)) - {FAULTY}:
            assert by_label[f"step{step}/rank{rank}"].first_divergence == "Module.1.AllReduce.forward.0"
    text = format_summary(run, 3)
    assert f"step0: 4 of 4 ranks diverge; first: rank{FAULTY} at Module.0.Local.forward.0 (entry #0)" in text

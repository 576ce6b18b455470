"""Run by tests/test_history_replicas.py: 4 gloo processes train a tiny DDP
model; ReplicaChecker checks the parameters after every optimizer step.

Phase 1: ``--clean`` steps, no fault. Phase 2: at step ``--flip-step`` rank
``--flip-rank`` flips the lowest bit of one element of ``--flip-param``
after the optimizer step. Phase 3: a model whose parameters differ between
even and odd ranks (two replica groups, as tensor-parallel shards would):
checked per group, then over the world. Rank 0 writes the results as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn


def _run(rank: int, args: argparse.Namespace) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args.port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=4)
    from graphprobe.history.replicas import ReplicaChecker

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-2)
    checker = ReplicaChecker(model, on_mismatch="return")
    gen = torch.Generator().manual_seed(100 + rank)  # each rank its own data, as in data parallelism
    clean_alarms = []
    found = []
    for step in range(args.clean + args.after):
        x = torch.randn(4, 8, generator=gen)
        ddp(x).square().mean().backward()
        opt.step()
        opt.zero_grad()
        if step == args.flip_step and rank == args.flip_rank:
            with torch.no_grad():
                flat = dict(model.named_parameters())[args.flip_param].view(-1)
                flat.view(torch.int32)[5] ^= 1  # the lowest mantissa bit of element 5
        got = checker.check(step)
        if step < args.clean:
            clean_alarms += [str(d) for d in got]
        elif got:
            found = [vars(d) for d in got]
            break
    # Phase 3: replicas only within {0, 2} and {1, 3}.
    groups = [dist.new_group([0, 2]), dist.new_group([1, 3])]
    torch.manual_seed(rank % 2)
    shard = nn.Linear(8, 8)
    per_group = ReplicaChecker(shard, group=groups[rank % 2], on_mismatch="return").check(0)
    world = ReplicaChecker(shard, on_mismatch="return").check(0)
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump({"clean_alarms": clean_alarms, "found": found, "per_group": [str(d) for d in per_group],
                       "world": [vars(d) for d in world]}, f)
    dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--clean", type=int, default=100)
    p.add_argument("--after", type=int, default=10)
    p.add_argument("--flip-step", type=int, default=103)
    p.add_argument("--flip-rank", type=int, default=2)
    p.add_argument("--flip-param", default="2.weight")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    mp.start_processes(_run, args=(args,), nprocs=4, start_method="spawn")


if __name__ == "__main__":
    sys.exit(main())

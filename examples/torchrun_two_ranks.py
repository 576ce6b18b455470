"""A multi-rank run under torchrun: every rank records, rank 0 compares.

    torchrun --nproc-per-node 2 examples/torchrun_two_ranks.py                  # CPU, gloo
    torchrun --nproc-per-node 2 examples/torchrun_two_ranks.py --fault-rank 1   # rank 1's compiled run faulty

With torch.distributed initialised, each rank writes
``dump_path/step{N}/rank{R}/dump.json`` (not ``pid{P}``), and compare pairs
the ranks by number: target rank R with bench rank R. Each rank here runs
a small model with an all_reduce between two layers, eagerly (bench) and
under ``torch.compile`` (target). After a barrier rank 0 compares the two
dump roots; the summary's "across ranks" line says which ranks diverge and
which diverged first. The config's ``"rank": []`` records every rank (list
ranks to record only those).
"""

from __future__ import annotations

import argparse
import copy
import json
import os

import torch
import torch.distributed as dist
from torch import nn

import graphprobe
from graphprobe.diagnose.owned_files import claim_out, record_out


class Block(nn.Module):
    """Two layers with the ranks' activations summed in between (what a
    tensor-parallel layer does)."""

    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(8, 16)
        self.down = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.up(x))
        dist.all_reduce(h)  # sum over the ranks
        return self.down(h)


def record(model: nn.Module, x: torch.Tensor, dump_path: str, backend: str | None) -> None:
    config = f"{dump_path}.rank{dist.get_rank()}.json"
    with open(config, "w") as f:
        json.dump({"task": "statistics", "level": "L0", "dump_path": dump_path, "rank": []}, f)
    dumper = graphprobe.AclGraphDumper(config)
    dumper.start(model)
    run = model if backend is None else torch.compile(model, backend=backend)
    with torch.no_grad():
        run(x)
    dumper.step()  # dump_path/step0/rank{R}/dump.json
    dumper.stop()


MARKER = ".graphprobe_example"  # in --out: lists the files this script wrote there (a later run removes only those)
OWNED = ('eager', 'compiled', 'compare')  # what this script writes into --out


def check_out(parser: argparse.ArgumentParser, out: str, remove: bool = True) -> None:
    """Removes the files of this example's earlier run in ``out`` (each run
    needs its own dump_path: compare refuses to pair two runs' pid folders
    in one step by guessing), and stops (exit 2), removing nothing, when
    ``out`` holds files this example did not write, or files it wrote that
    changed since (a report you edited): only those its marker lists,
    unchanged, are removed. ``remove=False`` only checks."""
    try:
        claim_out(out, OWNED, MARKER, remove)
    except ValueError as e:
        parser.error(str(e))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="graphprobe_ranks", help="output folder (default: %(default)s)")
    parser.add_argument("--backend", default="aot_eager", help="torch.compile backend (default: %(default)s)")
    parser.add_argument("--fault-rank", type=int, help="scale this rank's 'down' output by 1.5 in the compiled run")
    args = parser.parse_args(argv)

    check_out(parser, args.out, remove=False)  # every rank, before rank 0 changes the folder: all stop or none
    dist.init_process_group("gloo")  # torchrun sets RANK, WORLD_SIZE, MASTER_ADDR/PORT
    rank = dist.get_rank()
    bench_dir, target_dir = os.path.join(args.out, "eager"), os.path.join(args.out, "compiled")
    if rank == 0:  # each run its own dump_path
        check_out(parser, args.out)
    dist.barrier()

    torch.manual_seed(0)  # the same weights on every rank
    base = Block()
    x = torch.randn(2, 8, generator=torch.Generator().manual_seed(100 + rank))  # each rank its own batch
    record(copy.deepcopy(base), x, bench_dir, None)
    target = copy.deepcopy(base)
    if args.fault_rank == rank:
        target.down.register_forward_hook(lambda mod, inp, out: out * 1.5)
    record(target, x, target_dir, args.backend)

    dist.barrier()  # every rank's dump is written (stop() waits for the writes)
    if rank == 0:
        from graphprobe.compare import compare
        from graphprobe.compare.summary import format_summary

        run = compare(target_dir, bench_dir, os.path.join(args.out, "compare"), progress=False, jobs=1)
        print(format_summary(run, top=3), flush=True)
        record_out(args.out, OWNED, MARKER)  # what a later run may remove
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

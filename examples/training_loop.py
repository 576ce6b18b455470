"""A training loop recorded step by step: eager against torch.compile.

Each iteration (forward, backward, optimizer step) ends with
``dumper.step()``, so the dump holds one ``step{N}`` folder per iteration:
for every submodule the forward record (inputs, outputs and the parameters
the iteration used), the backward record (``Module.{path}.{Class}.backward.{n}``:
the gradients flowing through it) and the parameter gradients the optimizer
applies (``Module.{path}.{Class}.parameters_grad.{n}``), in the compiled run from
probes traced into the compiled backward graph too (statistics.data_mode
"forward" leaves out the last two). Two dump roots compare step by step, so
a run that drifts shows the step where its parameters first differ.

    python examples/training_loop.py                    # clean: no divergence in any step
    python examples/training_loop.py --fault-step 2     # the compiled run's weight nudged before step 2

``--fault-step K`` multiplies one weight of the compiled run by 1.01 before
iteration K (what a wrong update or a bad checkpoint load does); the compare
names step K's parameter as the first divergence and says that the
parameters differ from step K on.
"""

from __future__ import annotations

import argparse
import copy
import json
import os

import torch
from torch import nn

import graphprobe
from graphprobe.diagnose.owned_files import claim_out, record_out
from graphprobe.compare import compare
from graphprobe.compare.summary import format_summary


def build_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16), nn.LayerNorm(16), nn.Linear(16, 4))


def batches(steps: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)) for _ in range(steps)]


def train(model: nn.Module, data: list, dump_path: str, backend: str | None, fault_step: int | None) -> None:
    """Trains ``model`` on ``data`` with SGD, one ``dumper.step()`` per iteration."""
    config = dump_path + ".json"
    with open(config, "w") as f:
        json.dump({"task": "statistics", "level": "L0", "dump_path": dump_path}, f)
    dumper = graphprobe.AclGraphDumper(config)
    dumper.start(model)  # before torch.compile
    run = model if backend is None else torch.compile(model, backend=backend)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i, (x, y) in enumerate(data):
        if i == fault_step:
            with torch.no_grad():
                model[2].weight.mul_(1.01)
        loss = nn.functional.cross_entropy(run(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        dumper.step()  # this iteration's records -> dump_path/step{i}/pid{P}/dump.json
    dumper.stop()


MARKER = ".graphprobe_example"  # in --out: lists the files this script wrote there (a later run removes only those)
OWNED = ('eager', 'compiled', 'compare', 'eager.json', 'compiled.json')  # what this script writes into --out


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
    parser.add_argument("--out", default="graphprobe_training", help="output folder (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=3, help="iterations (default: %(default)s)")
    parser.add_argument("--backend", default="aot_eager", help="torch.compile backend (default: %(default)s)")
    parser.add_argument("--fault-step", type=int, help="nudge a weight of the compiled run before this iteration")
    args = parser.parse_args(argv)

    check_out(parser, args.out)  # each run its own dump_path
    bench_dir, target_dir = os.path.join(args.out, "eager"), os.path.join(args.out, "compiled")
    base, data = build_model(), batches(args.steps)
    train(copy.deepcopy(base), data, bench_dir, None, None)
    train(copy.deepcopy(base), data, target_dir, args.backend, args.fault_step)

    run = compare(target_dir, bench_dir, os.path.join(args.out, "compare"), progress=False)
    print(format_summary(run, top=3))
    first = next((o for o in run.outcomes if o.first_divergence), None)
    print()
    print(f"{len(run.outcomes)} steps compared; first step that diverges: "
          + (f"step{first.pair.step} at {first.first_divergence}" if first else "none"))
    record_out(args.out, OWNED, MARKER)  # what a later run may remove
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A CUDA graph recorded by replay: capture after start(), replay, step(), compare with eager.

    python examples/cuda_graph.py                               # needs a CUDA GPU
    python examples/cuda_graph.py --inject-fault 1              # scale block 1's output in the graph only
    python examples/cuda_graph.py --runner reduce-overhead      # torch.compile's CUDA graphs instead

The recipe of a graph runner (vLLM-style decode loops, static-shape
inference servers): start() wires the model *before* capture, so the probes
are captured into the graph; each ``graph.replay()`` then writes the
statistics on the device, and ``dumper.step()`` after the replays collects
them (several replays between two steps are one call with ``write_count``;
the values are the latest). Rules of capture apply: static input buffers
(``static.copy_(x)`` before each replay), a warm-up on a side stream, no
host synchronisation inside the captured region.

``--runner reduce-overhead`` uses ``torch.compile(mode="reduce-overhead")``,
which captures CUDA graphs itself (CUDA graph trees); start() comes before
torch.compile the same way.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
from typing import Callable

import torch
from torch import nn

import graphprobe
from graphprobe.diagnose.owned_files import claim_out, record_out
from graphprobe.compare import compare
from graphprobe.compare.summary import format_summary


def build_model(blocks: int = 3) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(*[nn.Sequential(nn.Linear(64, 64), nn.GELU()) for _ in range(blocks)], nn.Linear(64, 8))


def cuda_graph_runner(model: nn.Module, example: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """Captures ``model`` on a static copy of ``example``; returns a function
    that copies its input in and replays the graph."""
    static = example.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture (lazy init, cuBLAS workspaces)
        model(static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = model(static)

    def run(x: torch.Tensor) -> torch.Tensor:
        static.copy_(x)
        graph.replay()
        return out

    return run


def record(model: nn.Module, batches: list[torch.Tensor], dump_path: str, runner: str) -> None:
    """Records ``model`` on ``batches`` (one step per batch) into ``dump_path``."""
    config = dump_path + ".json"
    with open(config, "w") as f:
        json.dump({"task": "statistics", "level": "L0", "dump_path": dump_path}, f)
    dumper = graphprobe.AclGraphDumper(config)
    dumper.start(model)  # before capture: the probes are captured into the graph
    with torch.no_grad():
        if runner == "eager":
            run = model
        elif runner == "cuda-graph":
            run = cuda_graph_runner(model, batches[0])
        else:
            run = torch.compile(model, mode="reduce-overhead")
            for _ in range(3):  # compile, record the CUDA graph, replay: warm-up, not data
                run(batches[0])
        dumper.step(dump=False)  # the warm-up and capture calls are not data: drop them
        for x in batches:
            run(x)
            dumper.step()  # statistics the replay wrote on the device -> dump_path/step{N}/...
    dumper.stop()


MARKER = ".graphprobe_example"  # in --out: lists the files this script wrote there (a later run removes only those)
OWNED = ('eager', 'graph', 'compare', 'eager.json', 'graph.json')  # what this script writes into --out


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
    parser.add_argument("--out", default="graphprobe_cuda_graph", help="output folder (default: %(default)s)")
    parser.add_argument("--runner", choices=("cuda-graph", "reduce-overhead"), default="cuda-graph",
                        help="how the graph-mode run is made (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=2, help="batches, one step each (default: %(default)s)")
    parser.add_argument("--inject-fault", type=int, metavar="BLOCK",
                        help="scale block BLOCK's output by 1.5 in the graph-mode run only")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        parser.error("needs a CUDA GPU (torch.cuda.is_available() is False); "
                     "examples/eager_vs_compile.py is the CPU counterpart")

    check_out(parser, args.out)  # each run its own dump_path
    bench_dir, target_dir = os.path.join(args.out, "eager"), os.path.join(args.out, "graph")
    base = build_model().cuda().eval()
    g = torch.Generator(device="cuda").manual_seed(1)
    batches = [torch.randn(4, 64, device="cuda", generator=g) for _ in range(args.steps)]
    record(copy.deepcopy(base), batches, bench_dir, "eager")
    target = copy.deepcopy(base)
    if args.inject_fault is not None:
        # A forward hook registered before start() runs before the block's
        # output probe and is captured with it.
        target[args.inject_fault].register_forward_hook(lambda mod, inp, out: out * 1.5)
    record(target, batches, target_dir, args.runner)

    run = compare(target_dir, bench_dir, os.path.join(args.out, "compare"), progress=False)
    print(format_summary(run, top=3))
    first = next((o for o in run.outcomes if o.first_divergence), None)
    print()
    print(f"{len(run.outcomes)} steps compared; first divergence: "
          + (f"{first.pair.label} at {first.first_divergence}" if first else "none"))
    record_out(args.out, OWNED, MARKER)  # what a later run may remove
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Eager vs torch.compile of a transformers model: record both, compare, read the result.

A tiny Llama (random weights, no download) runs once eagerly (the reference,
"bench") and once under ``torch.compile`` (the run under test, "target"),
each recorded by graphprobe at level L0 (every submodule's inputs, outputs
and parameters). ``graphprobe.compare.compare`` then pairs the records and
names the first entry where the compiled run departs from eager beyond
float noise.

    python examples/eager_vs_compile.py                       # inductor, clean: no divergence
    python examples/eager_vs_compile.py --backend aot_eager   # faster to compile
    python examples/eager_vs_compile.py --inject-fault model.layers.1.mlp   # find a known fault

Copy it and replace ``build_model``/``make_inputs`` with your model and a
batch. Needs ``transformers`` (any model works the same way).
"""

from __future__ import annotations

import argparse
import copy
import json
import os

import torch

import graphprobe
from graphprobe.diagnose.owned_files import claim_out, record_out
from graphprobe.compare import compare
from graphprobe.compare.summary import format_summary


def build_model() -> torch.nn.Module:
    """A 2-layer Llama small enough for a laptop CPU (seeded random weights)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(config).eval()


def make_inputs() -> dict[str, torch.Tensor]:
    """One batch: 2 sequences of 12 tokens."""
    return {"input_ids": torch.randint(0, 128, (2, 12), generator=torch.Generator().manual_seed(1))}


def record(model: torch.nn.Module, inputs: dict[str, torch.Tensor], dump_path: str, backend: str | None) -> None:
    """Runs ``model`` once (compiled with ``backend`` unless None) and records
    it into ``dump_path``: start() before torch.compile, step() after the batch."""
    config = dump_path + ".json"
    with open(config, "w") as f:
        json.dump({"task": "statistics", "level": "L0", "dump_path": dump_path}, f)
    dumper = graphprobe.AclGraphDumper(config)
    dumper.start(model)  # before torch.compile: the probes go into the graph
    run = model if backend is None else torch.compile(model, backend=backend)
    with torch.no_grad():
        run(**inputs, use_cache=False)
    dumper.step()  # writes dump_path/step0/pid{P}/dump.json
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
    parser.add_argument("--out", default="graphprobe_example", help="output folder (default: %(default)s)")
    parser.add_argument("--backend", default="inductor", help="torch.compile backend (default: %(default)s)")
    parser.add_argument("--inject-fault", metavar="MODULE",
                        help="scale this module's output by 1.5 in the compiled run only, e.g. model.layers.1.mlp")
    args = parser.parse_args(argv)

    # Each run gets its own dump_path: a second run into a used one would put
    # two pid folders into each step (start() warns; compare refuses to guess).
    check_out(parser, args.out)
    bench_dir, target_dir = os.path.join(args.out, "eager"), os.path.join(args.out, "compiled")

    base, inputs = build_model(), make_inputs()
    record(copy.deepcopy(base), inputs, bench_dir, backend=None)
    target = copy.deepcopy(base)
    if args.inject_fault:
        # A hook registered before start() runs before graphprobe's output
        # probe: the module's own record shows the fault.
        target.get_submodule(args.inject_fault).register_forward_hook(lambda mod, inp, out: out * 1.5)
    record(target, inputs, target_dir, backend=args.backend)

    run = compare(target_dir, bench_dir, os.path.join(args.out, "compare"), progress=False)
    print(format_summary(run, top=5))

    # Reading the result: one pair per step and process (here step0/pid{P}).
    (outcome,) = run.outcomes
    print()
    print(f"rows per verdict: {dict(outcome.counts)} (Result is msprobe's verdict per row)")
    if outcome.first_divergence:
        print(f"first divergence: {outcome.first_divergence} -- the first entry whose outputs differ beyond the "
              "noise its inputs bring: look there first")
    else:
        print("first divergence: none -- the compiled run agrees with eager within float noise")
        if outcome.counts.get("warning") or outcome.counts.get("error"):
            print("  (the warning/error rows are msprobe's fixed-threshold rules firing on differences this small, "
                  "e.g. an output's relative error above 10x its inputs' while both are ~1e-6; the first divergence "
                  "weighs each difference against the dtype's rounding noise, see docs/troubleshooting.md)")
    print(f"every row: {outcome.csv_path}")
    print(f"plot and sortable table: {outcome.report_path}")
    record_out(args.out, OWNED, MARKER)  # what a later run may remove
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

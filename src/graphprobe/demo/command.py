"""The ``graphprobe demo`` subcommand."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from graphprobe._cli_types import int_at_least
from graphprobe.config import DEFAULT_LEVEL, LEVELS

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Adds ``demo`` to the CLI's subparsers."""
    p = subparsers.add_parser(
        "demo",
        help="record eager vs graph mode on a small transformer and compare them",
        description="Records a small transformer (fixed random weights) in eager mode as the reference and in "
        "graph mode (CUDA graphs on a GPU, torch.compile otherwise) as the run under test, then compares them. "
        "With --inject-fault the graph-mode run has one module's output scaled, and the compare must name it: "
        "at L0 and mix the module's own call is the first divergence; at L1 (no module records) the first "
        "divergence is the first call fed by the injected multiply, which is named as the source.",
    )
    p.add_argument("--inject-fault", metavar="MODULE[:SCALE]",
                   help="scale MODULE's output (default scale 2.0) in the graph-mode run, e.g. layers.1.mlp")
    p.add_argument("--level", choices=LEVELS, default=DEFAULT_LEVEL, help="what to record (default: %(default)s)")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto (default: %(default)s)")
    p.add_argument("--steps", type=int_at_least(1), default=3, help="recorded steps (default: %(default)s)")
    p.add_argument("--out", default="./graphprobe_demo", help="output folder (default: %(default)s)")
    p.add_argument("--diagnose", action="store_true",
                   help="run `graphprobe diagnose` on the demo model under torch.compile instead (the fault, if "
                   "any, only while compiling): screen, attribute, bisect, report into OUT/diagnose")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Runs the demo; exit 0 when the outcome is the expected one (the fault,
    if any, is named by the first divergence of every step, see
    :func:`graphprobe.demo.run.fault_found`; without one, no row is an error
    and nothing diverges)."""
    from graphprobe.compare.summary import format_summary
    from graphprobe.config import ConfigError
    from graphprobe.demo.run import DemoOptions, run_demo

    try:
        if args.diagnose:  # graphprobe/demo/diagnose_script.py
            from graphprobe.demo.diagnose_script import demo_diagnose

            return demo_diagnose(args.out, args.inject_fault, args.steps)
        result = run_demo(DemoOptions(out=args.out, level=args.level, device=args.device, steps=args.steps,
                                      inject_fault=args.inject_fault))
    except (ValueError, ConfigError, OSError) as e:  # a bad option or --out folder: exit 2, never a traceback
        print(f"graphprobe demo: error: {e}", file=sys.stderr)
        return 2
    compare_run = result.compare
    print(format_summary(compare_run, 5))
    print(f"\ndumps: reference (eager) {result.bench_dir}, under test ({result.graph_mode}) {result.target_dir}")
    print(f"first divergence: {result.first_divergence or 'none'}")
    if result.faulty_entry_prefix:
        # What "found" means: graphprobe.demo.run.fault_found.
        verdict = "found" if result.found else "NOT found"
        print(f"injected fault: {args.inject_fault} -> {verdict} as the first divergence: {result.found_how}")
        return 0 if result.found else 1
    clean = compare_run.total("error") == 0 and all(o.divergence is None for o in compare_run.outcomes)
    return 0 if clean else 1

"""``python -m benchmarks [--quick | --smoke] [--out DIR] [--device cpu|cuda] [--threads N]``."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="a reduced set (about 2 minutes)")
    size.add_argument("--smoke", action="store_true", help="one tiny model, eager only, 2 repeats (seconds)")
    parser.add_argument("--out", default=RESULTS, help=f"folder for the .md and .json results (default {RESULTS})")
    parser.add_argument("--device", choices=("cpu", "cuda"), default=None,
                        help="default: cuda when available, else cpu")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch.set_num_threads; 0 keeps torch's default. Default: 1 on the CPU (see README: "
                             "on a shared machine intra-op threads measure the scheduler), torch's on CUDA")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile variants")
    parser.add_argument("--note", default="", help="a line for the machine facts (e.g. 'machine shared')")
    parser.add_argument("--render", metavar="JSON", help="re-render the Markdown of an earlier run's .json; runs nothing")
    args = parser.parse_args(argv)
    if args.render:
        import json

        from benchmarks import report

        with open(args.render) as f:
            results = json.load(f)
        report.derive(results)
        md_path, _ = report.write(results, os.path.dirname(os.path.abspath(args.render)))
        print(f"written: {md_path}")
        return 0

    # Compile into a cache of this run: inductor's caches key on the traced
    # graph, not on graphprobe's lowerings, so a cache left by an earlier
    # build would time code this tree no longer generates; and the "first
    # step" column is meant to include the compile. Set before torch is
    # imported: inductor fixes its cache folder the first time it asks.
    own_cache = None
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        own_cache = os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="graphprobe-bench-inductor-")
    try:
        return _run(args)
    finally:
        if own_cache is not None:
            shutil.rmtree(own_cache, ignore_errors=True)


def _run(args: argparse.Namespace) -> int:
    import torch

    from benchmarks import report, suite

    if args.device == "cuda" and not torch.cuda.is_available():
        print("--device cuda: CUDA is not available", file=sys.stderr)
        return 2
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    threads = args.threads if args.threads is not None else (1 if device.type == "cpu" else 0)
    if threads > 0:
        torch.set_num_threads(threads)
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    plan = suite.plan_for(mode, device)
    if args.no_compile:
        plan = suite.Plan(**{**plan.__dict__, "compile": False})
    results = suite.run(plan, device)
    results["facts"]["note"] = args.note
    report.derive(results)
    md_path, json_path = report.write(results, args.out)
    print(report.markdown(results))
    print(f"written: {md_path}, {json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``graphprobe compare`` over many ranks: a synthetic dump root of
``--ranks`` rank folders x ``--steps`` steps (a small model each: ``--entries``
Linear calls, input + weight + output records), target and bench, with one
planted divergence (an output off by 1 %, and everything after it in that
rank) at step ``--steps - 1``, rank ``--bad-rank``, entry ``--bad-entry``,
and a later one (entry ``--bad-entry + 5``) on rank 3. Runs the CLI once
(CSV + HTML per pair, index.html, ``-j N``) in a fresh process and reports
its wall time, CPU time (its own and its workers'), peak RSS (VmHWM of the
main process) and whether the summary's headline names the planted step,
rank, entry and record.
Run: ``python benchmarks/compare_ranks.py [--ranks 1024] [--steps 2] [-j 2]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.compare_memory import CLI, SRC, run_child


def _record(rng: random.Random, scale: float) -> dict:
    base = 1.0 + rng.random()
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [4, 64], "Max": base * scale,
            "Min": -base * scale, "Mean": 0.01 * base * scale, "Norm": 16.0 * base * scale, "requires_grad": False}


def write_rank(path: Path, seed: int, entries: int, bad_from: int | None) -> int:
    """One rank's dump.json; from entry ``bad_from`` on, outputs are off by
    1 % (and the inputs after it, which those outputs feed)."""
    rng = random.Random(seed)
    data = {}
    for i in range(entries):
        off_in = 1.01 if bad_from is not None and i > bad_from else 1.0
        off_out = 1.01 if bad_from is not None and i >= bad_from else 1.0
        data[f"Module.layers.{i}.Linear.forward.0"] = {
            "input_args": [_record(rng, off_in)],
            "parameters": {"weight": _record(rng, 1.0)},
            "output": [_record(rng, off_out)],
        }
    text = json.dumps({"task": "statistics", "level": "L0", "framework": "pytorch", "dump_data_dir": None,
                       "data": data}, indent=1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return len(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--entries", type=int, default=24)
    parser.add_argument("--bad-rank", type=int, default=517)
    parser.add_argument("--bad-entry", type=int, default=7)
    parser.add_argument("-j", "--jobs", type=int, action="append",
                        help="worker processes; repeat (-j 1 -j 2) to run each on the same dumps (default 2)")
    parser.add_argument("--no-report", action="store_true", help="CSVs only, no HTML")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="gp_compare_ranks_"))
    try:
        size = 0
        last = args.steps - 1
        for side in ("t", "b"):
            for step in range(args.steps):
                for rank in range(args.ranks):
                    bad = None
                    if side == "t" and step == last:
                        bad = args.bad_entry if rank == args.bad_rank else (args.bad_entry + 5 if rank == 3 else None)
                    size += write_rank(tmp / side / f"step{step}" / f"rank{rank}" / "dump.json", step * 100_003 + rank,
                                       args.entries, bad)
        env = dict(os.environ, PYTHONPATH=str(SRC))
        walls = {}
        for jobs in args.jobs or [2]:
            shutil.rmtree(tmp / "out", ignore_errors=True)
            argv = ["compare", str(tmp / "t"), str(tmp / "b"), "-o", str(tmp / "out"), "-j", str(jobs), "-q"]
            if args.no_report:
                argv.append("--no-report")
            out_file = tmp / "stdout.txt"
            code = CLI.replace("sys.exit(main(sys.argv[1:]))",
                               f"sys.stdout = open({str(out_file)!r}, 'w')\nsys.exit(main(sys.argv[1:]))")
            t0 = time.perf_counter()
            usage = run_child(sys.executable, code, argv, env)
            wall = walls[jobs] = time.perf_counter() - t0
            text = out_file.read_text()
            pairs = args.ranks * args.steps
            headline = text.splitlines()[0] if text else ""
            m = re.match(r"first divergence: (\S+), (\S+) \(entry #(\d+), record (\S+)\)", headline)
            named = m.groups() if m else None
            entry = f"Module.layers.{args.bad_entry}.Linear.forward.0"
            want = (f"step{last}/rank{args.bad_rank}", entry, str(args.bad_entry), f"{entry}.output.0")
            index = sorted((tmp / "out").glob("index*.html"))
            scaling = f" ({walls[min(walls)] / wall:.2f}x -j {min(walls)})" if len(walls) > 1 else ""
            print(f"| {args.ranks} ranks x {args.steps} steps = {pairs:,} pairs, {args.entries} entries each | "
                  f"{size / 1e6:,.1f} | -j {jobs}{', no HTML' if args.no_report else ''} | {wall:.1f}{scaling} | "
                  f"{usage.cpu_s:.1f} | {usage.peak_rss / 1e6:,.0f} | "
                  f"{'yes' if named == want else f'NO: {named}'} | {'yes' if index else 'no'} | exit {usage.code} |")
            print(headline)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Throughput of ``graphprobe compare`` on synthetic dumps.

* one pair of 100,000 rows: the C++ engine alone (read + parse + match +
  verdicts, one ``compare_files`` call), the CSV write, and the whole
  ``compare()`` (CSV + HTML report + digest, in-process);
* 8 ranks of 100,000 rows each: ``compare()`` over a dump root, worker
  processes in parallel.

Prints a Markdown table and writes it to ``benchmarks/results/compare.md``.
Run: ``python benchmarks/compare_bench.py [--rows N] [--ranks R]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import tempfile
import time
from pathlib import Path

from graphprobe import _compare
from graphprobe.compare import compare

RESULTS = Path(__file__).resolve().parent / "results" / "compare.md"
MEMORY_SECTION = "## Peak memory"


def make_dump(rows: int, seed: int, noise: float) -> str:
    """``rows`` tensors: entries with one input and one output each."""
    rng = random.Random(seed)
    data = {}
    for i in range(rows // 2):
        def rec(base: float) -> dict:
            k = 1.0 + rng.uniform(-noise, noise)
            return {"type": "torch.Tensor", "dtype": "torch.bfloat16", "shape": [8, 4096],
                    "Max": base * k, "Min": -base * k, "Mean": 0.01 * k, "Norm": 40.0 * base * k,
                    "requires_grad": False}
        data[f"Module.layers.{i % 64}.block{i // 64}.Linear.forward.0"] = {
            "input_args": [rec(1.0 + i % 7)], "input_kwargs": {}, "output": [rec(2.0 + i % 5)]}
    return json.dumps({"task": "statistics", "level": "L0", "framework": "pytorch", "dump_data_dir": None,
                       "data": data})


def timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--ranks", type=int, default=8)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="gp_compare_bench_"))
    try:
        target_text, bench_text = make_dump(args.rows, 1, 0.02), make_dump(args.rows, 2, 0.0)
        for side, text in (("t", target_text), ("b", bench_text)):
            for r in range(args.ranks):
                p = tmp / side / "step0" / f"rank{r}" / "dump.json"
                p.parent.mkdir(parents=True)
                p.write_text(text)
        size_mb = len(target_text) / 1e6
        t1 = tmp / "t" / "step0" / "rank0" / "dump.json"
        b1 = tmp / "b" / "step0" / "rank0" / "dump.json"

        _compare.compare_files(str(t1), str(b1))  # warm the page cache
        engine_s, result = min((timed(lambda: _compare.compare_files(str(t1), str(b1))) for _ in range(3)),
                               key=lambda x: x[0])
        n = len(result)
        csv_s, _ = timed(lambda: result.write_csv(str(tmp / "one.csv")))
        full_s, _ = timed(lambda: compare(t1, b1, tmp / "out1", progress=False))
        ranks_s, run = timed(lambda: compare(tmp / "t", tmp / "b", tmp / "out8", progress=False))
        total_rows = sum(o.rows for o in run.outcomes)
        workers = min(args.ranks, os.cpu_count() or 1)

        lines = [
            f"# graphprobe compare throughput",
            "",
            f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPU(s), Python {platform.python_version()}; "
            f"dump.json of {n:,} rows = {size_mb:.1f} MB per side.",
            "",
            "| case | rows | seconds | rows/s |",
            "| --- | ---: | ---: | ---: |",
            f"| C++ engine, 1 pair (read + parse both files, match, verdicts; best of 3) | {n:,} | {engine_s:.3f} | {n / engine_s:,.0f} |",
            f"| CSV write, 1 pair (atomic) | {n:,} | {csv_s:.3f} | {n / csv_s:,.0f} |",
            f"| `compare()`, 1 pair (engine + CSV + HTML + digest) | {n:,} | {full_s:.3f} | {n / full_s:,.0f} |",
            f"| `compare()`, {args.ranks} ranks, {workers} worker processes | {total_rows:,} | {ranks_s:.3f} | {total_rows / ranks_s:,.0f} |",
            "",
        ]
        text = "\n".join(lines)
        print(text)
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        # The peak-memory section is compare_memory.py's: keep it.
        old = RESULTS.read_text() if RESULTS.exists() else ""
        kept = old[old.index(MEMORY_SECTION):] if MEMORY_SECTION in old else ""
        RESULTS.write_text(text + ("\n" + kept if kept else ""))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

"""The history at scale, simulated: a synthetic history of RANKS x STEPS x
RECORDS (random statistics with bounded noise and one planted deviation) in
a temporary folder; the first-anomaly query's time and peak memory (DuckDB,
each query in a fresh process), the other two queries' times, and the bytes
on disk per rank per step next to dump.json's for the same records.

    python -m benchmarks.history_scale --ranks 1024 --steps 100 --records 300 --out benchmarks/results/history.md

The folder is deleted at the end (``--keep`` keeps it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

RULE = {"k": 8.0, "window": 20, "min_history": 20, "rtol": 1e-3, "stat": "Norm"}


def record_names(n: int) -> list[str]:
    """Realistic names: a transformer's modules, 3 records each (input, output, weight)."""
    kinds = ["self_attn.q_proj", "self_attn.o_proj", "mlp.up_proj", "mlp.down_proj", "input_layernorm"]
    out = []
    for i in range((n + 2) // 3):
        mod = f"Module.model.layers.{i // len(kinds)}.{kinds[i % len(kinds)]}.Linear.forward.0"
        out += [f"{mod}.input_args.0", f"{mod}.output.0", f"{mod}.parameters.weight"]
    return out[:n]


def generate(root: Path, ranks: int, steps: int, records: int, every: int, plant: tuple[int, int, int]) -> float:
    """Writes the history; returns seconds. Noise is uniform within +-1 %, so
    no value is 8 standard deviations from its window's mean by chance."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from graphprobe.history.writer import file_name, rank_dir, schema

    names = pa.array(record_names(records), pa.string())
    t0 = time.perf_counter()
    for rank in range(ranks):
        rng = np.random.default_rng(rank)
        level = rng.uniform(0.5, 50.0, size=(1, records))
        folder = root / rank_dir(rank)
        folder.mkdir(parents=True)
        for first in range(0, steps, every):
            n = min(every, steps - first)
            cols = {}
            for k, s in enumerate(("Max", "Min", "Mean", "Norm")):
                v = level * (1 + rng.uniform(-0.01, 0.01, size=(n, records))) * (1.0, -1.0, 0.01, 10.0)[k]
                if s == "Norm" and rank == plant[1] and first <= plant[0] < first + n:
                    v[plant[0] - first, plant[2]] *= 10
                cols[s] = v.reshape(-1)
            step = np.repeat(np.arange(first, first + n, dtype=np.int64), records)
            table = pa.table({
                "step": step, "rank": np.full(n * records, rank, np.int32),
                "ord": np.tile(np.arange(records, dtype=np.int32), n),
                "record": pa.concat_arrays([names] * n),
                "dtype": pa.array(["torch.bfloat16"] * (n * records), pa.string()),
                **cols, "checksum": pa.nulls(n * records, pa.int64())}, schema=schema())
            pq.write_table(table, folder / file_name(first, first + n - 1), compression="zstd",
                           row_group_size=65536, use_dictionary=["record", "dtype"])
    return time.perf_counter() - t0


def dump_json_bytes(records: int) -> int:
    """dump.json's size for the same number of tensor records (graphprobe's
    layout: one line per record, full-precision doubles, Sketch included)."""
    rng = np.random.default_rng(0)
    names = record_names(records)
    data: dict[str, dict] = {}
    for i in range(0, records, 3):
        mod = names[i].rsplit(".input_args.0", 1)[0]
        rec = [{"type": "torch.Tensor", "dtype": "torch.bfloat16", "shape": [2, 128, 512],
                "Max": float(rng.normal()), "Min": float(rng.normal()), "Mean": float(rng.normal()),
                "Norm": float(rng.normal()), "Sketch": [float(x) for x in rng.normal(size=4)],
                "requires_grad": False} for _ in range(3)]
        data[mod] = {"input_args": [rec[0]], "input_kwargs": {}, "output": [rec[1]], "parameters": {"weight": rec[2]}}
    body = {"task": "statistics", "level": "L0", "framework": "pytorch", "dump_data_dir": None, "data": data}
    text = json.dumps(body, indent=1)
    return len(text.encode())


_CHILD = """
import json, resource, sys, time
from graphprobe.history import query as q
from graphprobe.history.rules import AnomalyRule
hist, what, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
con = q.connect(threads=threads)
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
if what == "first":
    r = q.first_anomaly(hist, AnomalyRule(**json.loads(sys.argv[4])), con=con)
    answer = None if r is None else list(r.key())
elif what == "movers":
    a, b = json.loads(sys.argv[4])
    answer = [[m.rank, m.record] for m in q.movers(hist, a, b, top=3, con=con)]
else:
    answer = len(q.record_over_steps(hist, sys.argv[4], con=con))
dt = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "rss_before_mib": rss0 / 1024, "answer": answer}))
"""


def run_query(hist: Path, what: str, threads: int, arg: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(hist), what, str(threads), arg],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=1024)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--records", type=int, default=300)
    p.add_argument("--every", type=int, default=100, help="steps per file")
    p.add_argument("--threads", type=int, default=2, help="DuckDB threads")
    p.add_argument("--tmp", default=None, help="parent folder of the temporary history")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--out", default=None, help="append the Markdown table to this file")
    p.add_argument("--note", default="")
    a = p.parse_args(argv)
    plant = (int(a.steps * 0.9), (a.ranks * 3) // 4, a.records // 2)
    root = Path(tempfile.mkdtemp(prefix="gp_history_", dir=a.tmp))
    try:
        gen_s = generate(root, a.ranks, a.steps, a.records, a.every, plant)
        files = list(root.rglob("*.parquet"))
        disk = sum(f.stat().st_size for f in files)
        per_rank_step = disk / (a.ranks * a.steps)
        dj = dump_json_bytes(a.records)
        first = run_query(root, "first", a.threads, json.dumps(RULE))
        expected = [plant[0], plant[1], record_names(a.records)[plant[2]], "deviation"]
        if first["answer"] != expected:
            raise SystemExit(f"first anomaly {first['answer']} != planted {expected}")
        movers = run_query(root, "movers", a.threads, json.dumps([plant[0] - 1, plant[0]]))
        series = run_query(root, "record", a.threads, record_names(a.records)[plant[2]])
    finally:
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
    rows = a.ranks * a.steps * a.records
    md = (f"\n### {a.ranks} ranks x {a.steps} steps x {a.records} records ({rows:,} rows), "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n\n"
          f"Machine: {platform.machine()}, {os.cpu_count()} cores, DuckDB threads {a.threads}, load average "
          f"{os.getloadavg()[0]:.1f} at the end{'; ' + a.note if a.note else ''}. Files: {len(files):,} "
          f"({a.every} steps each); generated in {gen_s:.0f} s.\n\n"
          "| query | time (s) | peak RSS (MiB) | RSS after import (MiB) | answer |\n| --- | --- | --- | --- | --- |\n"
          f"| first anomaly (k={RULE['k']}, window {RULE['window']}) | {first['seconds']:.1f} | "
          f"{first['peak_rss_mib']:.0f} | {first['rss_before_mib']:.0f} | step {first['answer'][0]}, rank "
          f"{first['answer'][1]} (the planted one) |\n"
          f"| movers between 2 steps (top 3) | {movers['seconds']:.1f} | {movers['peak_rss_mib']:.0f} | "
          f"{movers['rss_before_mib']:.0f} | rank {movers['answer'][0][0]} first |\n"
          f"| one record over all steps and ranks | {series['seconds']:.1f} | {series['peak_rss_mib']:.0f} | "
          f"{series['rss_before_mib']:.0f} | {series['answer']} steps |\n\n"
          "| on disk | bytes per rank per step | bytes per record |\n| --- | --- | --- |\n"
          f"| history (Parquet, zstd, no checksums) | {per_rank_step:,.0f} | {per_rank_step / a.records:.1f} |\n"
          f"| dump.json (same {a.records} records, graphprobe's layout) | {dj:,} | {dj / a.records:.1f} |\n"
          f"| ratio dump.json / history | {dj / per_rank_step:.1f}x | |\n")
    print(md)
    if a.out:
        with open(a.out, "a", encoding="utf-8") as f:
            f.write(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What the flight recorder adds to a training step, as ratios in one run.

One process, the demo's transformer (width 64, 3 blocks, 2 x 64 tokens),
AdamW, eager, one torch thread; interleaved blocks of steps:

* ``unwired`` -- a copy of the model without graphprobe;
* ``dumper`` -- the wired copy (L0), ``dumper.step()`` (dump.json every step);
* ``recorder`` -- the wired copy, ``FlightRecorder.step()`` (the above, plus
  reading the previous step's dump.json into the history, judging it and
  deleting the step folders no trigger needs, on the recorder's thread);
* ``recorder-sync`` -- the same with ``background=False``: the reading and
  judging on the caller's thread, as before issue 39's change.

The two recorders wrap two dumpers of two wired copies (one engine).

    python -m benchmarks.history_recorder_cost [--rounds 6 --block 20] [--out benchmarks/results/history.md]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--block", type=int, default=20, help="steps per variant per round")
    p.add_argument("--out", default=None, help="append the Markdown table to this file")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    from graphprobe import AclGraphDumper
    from graphprobe.demo.model import DemoTransformer
    from graphprobe.history.recorder import FlightRecorder
    from graphprobe.history.rules import AnomalyRule

    tmp = Path(tempfile.mkdtemp(prefix="gp_reccost_"))
    torch.manual_seed(0)
    base = DemoTransformer(dim=64, layers=3)
    wired = copy.deepcopy(base)
    wired_sync = copy.deepcopy(base)
    dumpers = {}
    for name, model in (("dump", wired), ("dump_sync", wired_sync)):
        (tmp / f"{name}.json").write_text(json.dumps({"task": "statistics", "level": "L0",
                                                      "dump_path": str(tmp / name)}))
        dumpers[name] = AclGraphDumper(str(tmp / f"{name}.json"))
        AclGraphDumper._started = None  # two dumpers on purpose (one per recorder)
        dumpers[name].start(model)
    dumper = dumpers["dump"]
    rec = FlightRecorder(dumper, tmp / "history", every=100, keep=5, rule=AnomalyRule(k=1e6))
    rec_sync = FlightRecorder(dumpers["dump_sync"], tmp / "history_sync", every=100, keep=5,
                              rule=AnomalyRule(k=1e6), background=False)
    opts = {id(m): torch.optim.AdamW(m.parameters(), lr=1e-4) for m in (base, wired, wired_sync)}
    tokens = torch.randint(0, 256, (2, 64), generator=torch.Generator().manual_seed(1))
    times: dict[str, list[float]] = {"unwired": [], "dumper": [], "recorder": [], "recorder-sync": []}
    step_call: dict[str, list[float]] = {"dumper": [], "recorder": [], "recorder-sync": []}
    models = {"unwired": base, "dumper": wired, "recorder": wired, "recorder-sync": wired_sync}

    def one(model: torch.nn.Module, end: str) -> None:
        t0 = time.perf_counter()
        model(tokens).float().square().mean().backward()
        opts[id(model)].step()
        opts[id(model)].zero_grad()
        t1 = time.perf_counter()
        if end == "dumper":
            dumper.step()
        elif end == "recorder":
            rec.step()
        elif end == "recorder-sync":
            rec_sync.step()
        t2 = time.perf_counter()
        times[end].append(t2 - t0)
        if end != "unwired":
            step_call[end].append(t2 - t1)

    for _ in range(3):  # warm-up
        for end in times:
            one(models[end], end)
    for v in times.values():
        v.clear()
    for v in step_call.values():
        v.clear()
    load = os.getloadavg()[0]
    for r in range(a.rounds):
        order = list(times)[r % len(times):] + list(times)[: r % len(times)]  # rotated: drift hits all alike
        for end in order:
            for _ in range(a.block):
                one(models[end], end)
    rec.close()
    rec_sync.close()
    for d in dumpers.values():
        d.stop()
    rows = sum(1 for _ in (tmp / "history").rglob("*.parquet"))
    med = {k: statistics.median(v) for k, v in times.items()}
    md = (f"\n### Flight recorder cost, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n\n"
          f"The demo transformer (width 64, 3 blocks, 2 x 64 tokens), AdamW, eager, 1 torch thread, L0 "
          f"(forward, backward, parameters_grad); {a.rounds} rounds x {a.block} steps per variant, interleaved; "
          f"median step; load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end (shared machine); "
          f"{rows} history file(s).\n\n"
          "| variant | step (ms) | vs unwired | the step() call on the caller's thread (ms) |\n"
          "| --- | --- | --- | --- |\n"
          f"| unwired | {med['unwired'] * 1e3:.1f} | 1.00 | - |\n"
          f"| dumper.step() every step | {med['dumper'] * 1e3:.1f} | {med['dumper'] / med['unwired']:.2f} | "
          f"{statistics.median(step_call['dumper']) * 1e3:.2f} |\n"
          f"| FlightRecorder.step(), reading on the caller's thread (background=False, as before) | "
          f"{med['recorder-sync'] * 1e3:.1f} | {med['recorder-sync'] / med['unwired']:.2f} | "
          f"{statistics.median(step_call['recorder-sync']) * 1e3:.2f} |\n"
          f"| FlightRecorder.step(), reading on the recorder's thread (default) | {med['recorder'] * 1e3:.1f} | "
          f"{med['recorder'] / med['unwired']:.2f} | {statistics.median(step_call['recorder']) * 1e3:.2f} |\n")
    print(md)
    if a.out:
        with open(a.out, "a", encoding="utf-8") as f:
            f.write(md)
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

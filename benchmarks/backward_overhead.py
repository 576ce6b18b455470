"""What backward records (issue #26) cost in a training step, eager and compiled.

One training step: ``loss = model(x).float().pow(2).mean()``, ``loss.backward()``,
``AdamW.step()``, ``zero_grad()``, and ``dumper.step()`` where a dumper is
wired. Variants, on the demo model (``graphprobe.demo.model.build_demo_model()``,
in train mode) with the same weights and inputs:

- ``train``: no dumper (the baseline);
- ``L0 fwd``: graphprobe at L0 with ``statistics.data_mode`` ``["forward"]``
  (forward records only: what a training step paid before backward records);
- ``L0 fwd+bwd``: L0 with the default ``["all"]``: forward, backward and
  parameter-gradient records.

Per mode (eager; ``torch.compile`` with ``--backend``, fullgraph) the
variants alternate over ``--rounds`` rounds (each round starts its dumper
again, so compiled variants compile again; the first steps are not timed),
and each ratio is the median over rounds of (variant / train), each
variant's time being its fastest step of the round (the least disturbed by
other jobs on a shared machine),
measured side by side in the same minutes: a ratio carries over to another
machine, an absolute time does not.

Usage: ``python benchmarks/backward_overhead.py [--steps 20] [--rounds 3] [--backend inductor] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any, Iterator

import torch

import graphprobe
from graphprobe.demo.model import build_demo_model

__all__ = ["measure", "render"]

VARIANTS = ("train", "L0 fwd", "L0 fwd+bwd")


@contextlib.contextmanager
def _dumper(model: torch.nn.Module, variant: str, root: str) -> Iterator[graphprobe.AclGraphDumper | None]:
    if variant == "train":
        yield None
        return
    folder = tempfile.mkdtemp(dir=root)
    config = os.path.join(folder, "config.json")
    mode = ["forward"] if variant == "L0 fwd" else ["all"]
    with open(config, "w") as f:
        json.dump({"level": "L0", "dump_path": os.path.join(folder, "dump"), "statistics": {"data_mode": mode}}, f)
    dumper = graphprobe.AclGraphDumper(config)
    dumper.start(model)
    try:
        yield dumper
    finally:
        dumper.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _variant(variant: str, backend: str | None, steps: int, root: str) -> dict[str, float]:
    """The least seconds per training step of one variant over ``steps`` steps (fresh model, fresh compile)."""
    torch._dynamo.reset()
    model = build_demo_model().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, model.vocab, (2, 32), generator=torch.Generator().manual_seed(0))
    times: list[float] = []
    records = 0
    with _dumper(model, variant, root) as dumper:
        fn = model if backend is None else torch.compile(model, backend=backend, fullgraph=True)
        for i in range(steps + 2):  # two warm-up steps: compiling forward and backward, the optimizer's state
            t0 = time.perf_counter()
            fn(x).float().pow(2).mean().backward()
            opt.step()
            opt.zero_grad()
            if dumper is not None:
                dumper.step()
            if i >= 2:
                times.append(time.perf_counter() - t0)
        if dumper is not None:
            graphprobe.flush()
            step_dirs = sorted(os.listdir(dumper.config.dump_path))
            path = os.path.join(dumper.config.dump_path, step_dirs[-1])
            dump = os.path.join(path, os.listdir(path)[0], "dump.json")
            with open(dump) as f:
                records = len(json.load(f)["data"])
    # The fastest step: on a shared machine a step's time is its cost plus
    # whatever the other jobs took from it, and the least of 20 steps is the
    # best estimate of the cost alone (the median moved by 1.5x between rounds).
    return {"step": min(times), "records": records}


def measure(steps: int, rounds: int, backend: str) -> list[dict[str, Any]]:
    """Per mode: each variant's median step time, record count and ratios to ``train``."""
    rows = []
    root = tempfile.mkdtemp(prefix="backward_overhead_")
    try:
        for mode in (None, backend):
            per: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
            for r in range(rounds):
                order = VARIANTS[r % len(VARIANTS):] + VARIANTS[:r % len(VARIANTS)]  # rotate against drift
                for name in order:
                    per[name].append(_variant(name, mode, steps, root))
            row: dict[str, Any] = {"mode": "eager" if mode is None else f"torch.compile({mode}, fullgraph)"}
            for name in VARIANTS:
                row[name] = {"step": statistics.median(v["step"] for v in per[name]),
                             "records": per[name][-1]["records"]}
                ratios = [v["step"] / b["step"] for v, b in zip(per[name], per["train"])]
                row[name]["ratios"] = ratios
                row[name]["ratio"] = statistics.median(ratios)
            increments = [b["step"] / f["step"] for b, f in zip(per["L0 fwd+bwd"], per["L0 fwd"])]
            row["increment"] = {"ratios": increments, "ratio": statistics.median(increments)}
            rows.append(row)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rows


def render(rows: list[dict[str, Any]], steps: int, rounds: int, backend: str) -> str:
    """The Markdown table of :func:`measure`'s rows."""
    model = build_demo_model()
    calls = sum(1 for name, _ in model.named_modules() if name)
    lines = [
        "# Training-step overhead of L0 with backward records",
        "",
        f"`python benchmarks/backward_overhead.py --steps {steps} --rounds {rounds} --backend {backend}`: the demo "
        f"model (`graphprobe.demo.model.build_demo_model()`, train mode, {calls} submodules, tokens 2x32), one "
        "step = forward, backward, AdamW step, zero_grad, `dumper.step()`; CPU, torch threads "
        f"{torch.get_num_threads()}, torch {torch.__version__}. Variants rotate per round; times are (ms "
        "per step: the fastest of the round's steps, then the median over rounds), a ratio is the median over "
        "rounds of the per-round ratio to `train` (no dumper).",
        "",
        "| mode | train ms | L0 fwd ms | L0 fwd+bwd ms | records fwd / fwd+bwd | **L0 fwd / train** | "
        "**L0 fwd+bwd / train** | **fwd+bwd / fwd** (what backward records add) | per-round (fwd+bwd / fwd) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        t, f, b = row["train"], row["L0 fwd"], row["L0 fwd+bwd"]
        lines.append(
            f"| {row['mode']} | {t['step'] * 1e3:.1f} | {f['step'] * 1e3:.1f} | {b['step'] * 1e3:.1f} | "
            f"{f['records']} / {b['records']} | **{f['ratio']:.2f}x** | **{b['ratio']:.2f}x** | "
            f"**{row['increment']['ratio']:.2f}x** | " + " / ".join(f"{r:.2f}" for r in row["increment"]["ratios"])
            + " |")
    lines += [
        "",
        "What the backward records add: per probed gradient one autograd node and one probe (eager: a Python "
        "`autograd.Function` call in forward and backward; compiled: a `record_stats` node in the backward "
        "graph and one copy of the probed tensor in the forward graph, see docs/limitations.md), and per step "
        "one parameter-gradient record per module with parameters, read eagerly when the optimizer steps.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line: measures, prints and writes the Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: a shared machine)")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "backward_overhead.md"))
    args = parser.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    rows = measure(args.steps, args.rounds, args.backend)
    text = render(rows, args.steps, args.rounds, args.backend)
    print(text)
    with open(args.out, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

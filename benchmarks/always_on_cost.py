"""Issue 39's overhead table: what leaving graphprobe on costs a compiled
training step, next to msprobe's eager dumper, as ratios in one run.

The model is the issue's: transformers ``LlamaForCausalLM``, hidden 512,
4 layers (intermediate 1376, 8 heads, vocabulary ``--vocab``), random
weights, 2 x 128 tokens, loss from labels, AdamW; one torch thread per
process. Each variant lives in a process of its own (msprobe's debugger is
a process-wide singleton that patches torch, and each compiled variant
keeps its own code), holding the same weights and batches; the driver
hands them blocks of ``--block`` steps in turn, ``--rounds`` times, so that
the variants share the machine's load. One step:

* ``unwired`` -- ``torch.compile(model)`` (inductor), no tool;
* ``always-on L0`` / ``always-on mix`` -- graphprobe wired before
  compiling, every step's statistics (forward, backward,
  parameters_grad) into the history by :class:`FlightRecorder`
  (``FlightRecorder.step(loss=...)``, full dumps kept around triggers only;
  the recorder's default: no Sketch); ``+ Sketch``: ``FlightRecorder(...,
  sketch=True)``, the Sketch's second CPU pass included;
* ``dumper L0`` -- the same wiring with ``dumper.step()`` alone (dump.json
  every step, no history): the recorder's own share;
* ``eager`` -- the model without ``torch.compile``, no tool: msprobe's baseline;
* ``msprobe L0`` / ``msprobe mix`` -- msprobe's eager ``PrecisionDebugger``
  (task statistics, data_mode all), ``start``/``stop``/``step`` around each
  step as its documentation shows.

Per variant and round the median step time over the block (the first block
of each variant, which compiles, is not timed); a ratio is the median over
rounds of (variant / unwired of the same round), and for msprobe also over
``eager``. Each step is split into the forward+backward, the optimizer
and the tool's ``step()`` call on the caller's thread.

    python -m benchmarks.always_on_cost [--rounds 5 --block 6] [--out benchmarks/results/always_on.md]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from typing import Any

VARIANTS = ("unwired", "always-on L0", "always-on mix", "dumper L0", "always-on L0 + Sketch", "always-on mix + Sketch",
            "eager", "msprobe L0", "msprobe mix")


def _build(vocab: int) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=vocab, hidden_size=512, intermediate_size=1376, num_hidden_layers=4,
                         num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=256,
                         attn_implementation="eager")
    return LlamaForCausalLM(config).train()


def _worker(variant: str, vocab: int, root: str, conn: Any) -> None:
    """One variant: waits for ("run", n), answers with n steps' timings; ("stop",) ends it."""
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    model = _build(vocab)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    folder = os.path.join(root, variant.replace(" ", "_"))
    os.makedirs(folder)
    gen = torch.Generator().manual_seed(1)
    batches = [torch.randint(0, vocab, (2, 128), generator=gen) for _ in range(8)]
    # FlightRecorder turns the Sketch off unless asked (a second CPU pass, sketch_cost.md);
    # "always-on L0 + Sketch" asks for it.
    sketch = variant.endswith(" + Sketch")
    level = variant.removesuffix(" + Sketch").split()[-1]
    tool: Any = None
    debugger: Any = None
    run: Any = model
    if variant.removesuffix(" + Sketch") in ("always-on L0", "always-on mix", "dumper L0"):
        from graphprobe import AclGraphDumper
        from graphprobe.history.recorder import FlightRecorder

        dumper = AclGraphDumper(dump_path=os.path.join(folder, "dump"), level=level)
        dumper.start(model)
        tool = dumper
        if variant.startswith("always-on"):
            tool = FlightRecorder(dumper, os.path.join(folder, "history"), every=100, keep=5, sketch=sketch)
    elif variant.startswith("msprobe"):
        from msprobe.pytorch import PrecisionDebugger

        config = os.path.join(folder, "config.json")
        with open(config, "w") as f:
            json.dump({"task": "statistics", "dump_path": os.path.join(folder, "dump"), "rank": [], "step": [],
                       "level": level, "statistics": {"scope": [], "list": [], "data_mode": ["all"],
                                                      "summary_mode": "statistics"}}, f)
        debugger = PrecisionDebugger(config_path=config)
    if variant not in ("eager",) and not variant.startswith("msprobe"):
        run = torch.compile(model)
    step = 0
    while True:
        msg = conn.recv()
        if msg[0] == "stop":
            break
        rows = []
        for _ in range(msg[1]):
            ids = batches[step % len(batches)]
            t0 = time.perf_counter()
            if debugger is not None:
                debugger.start(model)
            loss = run(input_ids=ids, labels=ids, use_cache=False).loss
            loss.backward()
            if debugger is not None:
                debugger.stop()
            t1 = time.perf_counter()
            opt.step()
            opt.zero_grad()
            t2 = time.perf_counter()
            if debugger is not None:
                debugger.step()
            elif variant.startswith("always-on"):
                tool.step(loss=loss.detach())
            elif tool is not None:
                tool.step()
            t3 = time.perf_counter()
            rows.append((t3 - t0, t1 - t0, t2 - t1, t3 - t2))
            step += 1
        conn.send(rows)
    try:
        info = _info(variant, tool)
    except Exception as exc:  # noqa: BLE001 - the timings matter more than the counts
        info = {"error": f"{type(exc).__name__}: {exc}"}
    conn.send(info)


def _info(variant: str, tool: Any) -> dict[str, Any]:
    """Records per step, graph breaks and triggers of a worker's variant (after its last step)."""
    info: dict[str, Any] = {}
    if tool is not None:
        dumper = tool.dumper if hasattr(tool, "dumper") else tool
        if hasattr(tool, "close"):
            tool.close()
        dumper.stop()
        import torch._dynamo.utils as dyn_utils

        info["graph_breaks"] = sum(dyn_utils.counters["graph_break"].values())
        info["unique_graphs"] = dyn_utils.counters["stats"].get("unique_graphs", 0)
        info["triggers"] = len(tool.triggers) if hasattr(tool, "triggers") else 0
        steps = sorted((d for d in os.listdir(dumper.config.dump_path) if d.startswith("step")),
                       key=lambda s: int(s[4:]))
        if steps:
            leaf = os.path.join(dumper.config.dump_path, steps[-1])
            leaf = os.path.join(leaf, os.listdir(leaf)[0], "dump.json")
            info["records"] = len(json.load(open(leaf))["data"])
    elif variant == "unwired":
        import torch._dynamo.utils as dyn_utils

        info["graph_breaks"] = sum(dyn_utils.counters["graph_break"].values())
        info["unique_graphs"] = dyn_utils.counters["stats"].get("unique_graphs", 0)
    return info


def measure(rounds: int, block: int, vocab: int, variants: tuple[str, ...]) -> dict[str, Any]:
    """Runs the variants (module docstring); returns per-variant per-round medians and the infos."""
    root = tempfile.mkdtemp(prefix="gp_always_on_")
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(root, "inductor_cache"))  # fresh compiles
    ctx = mp.get_context("spawn")
    procs: dict[str, tuple[Any, Any]] = {}
    load = [open("/proc/loadavg").read().split()[:3]]
    try:
        for v in variants:
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_worker, args=(v, vocab, root, child), daemon=True)
            p.start()
            procs[v] = (p, parent)
        # Warm-up block, one variant at a time: compiling forward and backward, the optimizer's state.
        for v in variants:
            t = time.perf_counter()
            procs[v][1].send(("run", 2))
            procs[v][1].recv()
            print(f"  {v}: warm-up {time.perf_counter() - t:.1f} s", flush=True)
        per_round: dict[str, list[list[tuple[float, ...]]]] = {v: [] for v in variants}
        for r in range(rounds):
            order = variants[r % len(variants):] + variants[: r % len(variants)]
            for v in order:
                procs[v][1].send(("run", block))
                per_round[v].append(procs[v][1].recv())
            load.append(open("/proc/loadavg").read().split()[:3])
            print(f"  round {r + 1}/{rounds} done, load {' '.join(load[-1])}", flush=True)
        infos = {}
        for v in variants:
            procs[v][1].send(("stop",))
            infos[v] = procs[v][1].recv()
    finally:
        for p, _ in procs.values():
            p.join(timeout=60)
            if p.is_alive():
                p.terminate()
        shutil.rmtree(root, ignore_errors=True)
    return {"per_round": per_round, "infos": infos, "load": load, "rounds": rounds, "block": block, "vocab": vocab}


def _median_part(rows: list[tuple[float, ...]], i: int) -> float:
    return statistics.median(r[i] for r in rows)


def render(res: dict[str, Any]) -> str:
    """The Markdown table of :func:`measure`'s result."""
    pr, infos = res["per_round"], res["infos"]
    variants = list(pr)
    lines = [
        f"### Always-on cost, Llama (hidden 512, 4 layers, vocabulary {res['vocab']}, 2 x 128 tokens, AdamW), "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC",
        "",
        f"`python -m benchmarks.always_on_cost --rounds {res['rounds']} --block {res['block']} --vocab {res['vocab']}`; "
        f"CPU, 1 torch thread per variant, one process per variant, {res['rounds']} rounds x {res['block']} steps "
        f"per variant, interleaved; load average (1, 5, 15 min) {' / '.join(res['load'][0])} at the start, "
        f"{' / '.join(res['load'][-1])} at the end (2 cores, shared).",
        "",
        "| variant | step (ms) | vs unwired (compiled) | vs eager | fwd+bwd (ms) | optimizer (ms) | "
        "tool's step() (ms) | dump.json entries | graph breaks |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for v in variants:
        step = statistics.median(_median_part(rows, 0) for rows in pr[v])
        ratio = "-"
        if "unwired" in pr:
            ratio = f"**{statistics.median(_median_part(a, 0) / _median_part(b, 0) for a, b in zip(pr[v], pr['unwired'])):.3f}**"
        vs_eager = "-"
        if "eager" in pr:
            vs_eager = f"{statistics.median(_median_part(a, 0) / _median_part(b, 0) for a, b in zip(pr[v], pr['eager'])):.2f}"
        parts = [statistics.median(_median_part(rows, i) for rows in pr[v]) * 1e3 for i in (1, 2, 3)]
        info = infos.get(v, {})
        lines.append(f"| {v} | {step * 1e3:.1f} | {ratio} | {vs_eager} | {parts[0]:.1f} | {parts[1]:.1f} | "
                     f"{parts[2]:.2f} | {info.get('records', '-')} | {info.get('graph_breaks', '-')} |")
    lines.append("")
    lines.append("Per-round ratios to unwired: " + "; ".join(
        f"{v}: " + " / ".join(f"{_median_part(a, 0) / _median_part(b, 0):.3f}" for a, b in zip(pr[v], pr["unwired"]))
        for v in variants if v != "unwired" and "unwired" in pr))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--block", type=int, default=6, help="steps per variant per round")
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    p.add_argument("--out", default=None, help="append the Markdown table to this file")
    a = p.parse_args(argv)
    res = measure(a.rounds, a.block, a.vocab, tuple(a.variants))
    with open(os.path.join(tempfile.gettempdir(), "always_on_cost.json"), "w") as f:
        json.dump(res, f)  # the raw timings, should rendering fail
    text = render(res)
    print(text)
    if a.out:
        with open(a.out, "a") as f:
            f.write("\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

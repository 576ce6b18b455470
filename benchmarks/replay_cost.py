"""What replay (config key ``"replay"``, docs/diagnose.md "Replay") costs on the demo model.

Variants, each a fresh dumper on the same model and input, under ``torch.no_grad()``:

- ``L0``: graphprobe's L0 statistics (the baseline: what a screening run pays);
- ``L0+replay``: the same with ``"replay": true`` (every submodule's calls kept inside the graph and
  replayed, in its dtype and in float64, at ``step()``).

Per variant and mode (eager; ``torch.compile`` with ``--backend``) one step is ``model(x)`` then
``dumper.step()``; the forward and the step are timed apart, and the writer is waited for before each
``step()`` (untimed: the previous step's dump.json is written in the background during a real
iteration), so that ``step()`` is what the caller's thread pays. The replay part of ``step()`` (the
re-runs, errors and replay.json) is also timed on its own. The two variants alternate over
``--rounds`` rounds (each round starts its dumper again, so compiled variants compile again: the
first step is not timed), and the reported ratio is the median over rounds of (L0+replay / L0) per
step, measured side by side in the same minutes: a ratio carries over to another machine, an
absolute time does not.

Usage: ``python benchmarks/replay_cost.py [--steps 5] [--rounds 3] [--backend inductor] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

import torch

import graphprobe
import graphprobe.replay.judge as replay_judge
from graphprobe.demo.model import build_demo_model

__all__ = ["measure"]


def _variant(model: torch.nn.Module, x: torch.Tensor, replay: bool, backend: str | None, steps: int,
             root: str) -> dict[str, float]:
    folder = tempfile.mkdtemp(dir=root)
    config = os.path.join(folder, "config.json")
    fields: dict[str, Any] = {"level": "L0", "dump_path": os.path.join(folder, "dump")}
    if replay:
        fields["replay"] = True
    with open(config, "w") as f:
        json.dump(fields, f)
    torch._dynamo.reset()
    dumper = graphprobe.AclGraphDumper(config)
    dumper.start(model)
    fn = model if backend is None else torch.compile(model, backend=backend, fullgraph=True)
    forward, step, judged = [], [], []
    judge_step = replay_judge.judge_step

    def timed_judge(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return judge_step(*args, **kwargs)
        finally:
            judged.append(time.perf_counter() - t)

    replay_judge.judge_step = timed_judge  # type: ignore[assignment]
    try:
        with torch.no_grad():
            fn(x)  # compiles
            dumper.step()
            judged.clear()
            for _ in range(steps):
                t0 = time.perf_counter()
                fn(x)
                t1 = time.perf_counter()
                graphprobe.flush()
                t2 = time.perf_counter()
                dumper.step()
                t3 = time.perf_counter()
                forward.append(t1 - t0)
                step.append(t3 - t2)
        dumper.stop()
    finally:
        replay_judge.judge_step = judge_step  # type: ignore[assignment]
    shutil.rmtree(folder, ignore_errors=True)
    return {"forward": statistics.median(forward), "step": statistics.median(step),
            "total": statistics.median(f + s for f, s in zip(forward, step)),
            "replay": statistics.median(judged) if judged else 0.0}


def measure(steps: int, rounds: int, backend: str | None) -> list[dict[str, Any]]:
    """Per mode (eager, then ``torch.compile(backend)`` unless ``backend`` is
    None): the medians of each variant and the per-round ratios."""
    torch.manual_seed(0)
    model = build_demo_model()
    x = torch.randint(0, model.vocab, (2, 32), generator=torch.Generator().manual_seed(0))
    rows = []
    root = tempfile.mkdtemp(prefix="replay_cost_")
    try:
        for mode in (None, backend) if backend else (None,):
            per: dict[str, list[dict[str, float]]] = {"L0": [], "L0+replay": []}
            for r in range(rounds):
                order = ("L0", "L0+replay") if r % 2 == 0 else ("L0+replay", "L0")
                for name in order:
                    per[name].append(_variant(model, x, name == "L0+replay", mode, steps, root))
            ratios = [b["total"] / a["total"] for a, b in zip(per["L0"], per["L0+replay"])]
            forward_ratios = [b["forward"] / a["forward"] for a, b in zip(per["L0"], per["L0+replay"])]
            rows.append({
                "mode": "eager" if mode is None else f"torch.compile({mode}, fullgraph)",
                "L0": {k: statistics.median(v[k] for v in per["L0"]) for k in ("forward", "step", "total")},
                "L0+replay": {k: statistics.median(v[k] for v in per["L0+replay"]) for k in ("forward", "step",
                                                                                                 "total", "replay")},
                "ratios": ratios,
                "ratio": statistics.median(ratios),
                "forward_ratio": statistics.median(forward_ratios),
            })
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rows


def render(rows: list[dict[str, Any]], steps: int, rounds: int) -> str:
    """The Markdown table of :func:`measure`'s rows."""
    model = build_demo_model()
    calls = sum(1 for name, _ in model.named_modules() if name)
    lines = [
        "# Cost of replay on the demo model (issue #27 part 1)",
        "",
        f"`python benchmarks/replay_cost.py --steps {steps} --rounds {rounds}`: the demo model "
        f"(`graphprobe.demo.model.build_demo_model()`, {calls} submodules, tokens 2x32), "
        "CPU, torch threads "
        f"{torch.get_num_threads()}, torch {torch.__version__}. Variants alternate per round; times are medians "
        "(ms per step), the ratio is the median over rounds of the per-round ratio (L0+replay / L0).",
        "",
        "| mode | L0 forward | L0 step() | L0+replay forward | L0+replay step() | of which replay | "
        "forward ratio (keep op) | replay ms per module | ratio (total per step) | per-round ratios |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        a, b = row["L0"], row["L0+replay"]
        per_call = b["replay"] / calls * 1e3
        lines.append(f"| {row['mode']} | {a['forward'] * 1e3:.2f} | {a['step'] * 1e3:.2f} | {b['forward'] * 1e3:.2f} "
                     f"| {b['step'] * 1e3:.2f} | {b['replay'] * 1e3:.2f} | {row['forward_ratio']:.2f}x | "
                     f"{per_call:.2f} | **{row['ratio']:.1f}x** | " + " / ".join(f"{r:.1f}" for r in row["ratios"])
                     + " |")
    lines += [
        "",
        "Where the time goes: the forward pays the keep op's copies (inputs, buffers, outputs of every "
        "submodule); `step()` pays the module copies (`copy.deepcopy` of each outermost module, twice per "
        "step) and, per call, one eager and one float64 forward and the error norms. Every module of the model is "
        "replayed here "
        "(`\"replay\": true`); narrowing `replay.list` to the first divergent module and its submodules, as "
        "`graphprobe diagnose` does, scales the step() part down with the number of replayed calls.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line: measures, prints and writes the Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backend", default="inductor", help="torch.compile backend; 'none': eager only")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "replay_cost.md"))
    args = parser.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    rows = measure(args.steps, args.rounds, None if args.backend == "none" else args.backend)
    text = render(rows, args.steps, args.rounds)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What the Sketch statistic (issue #35; docs/formats.md, "Sketch") costs.

Two measurements, each as ratios taken side by side in one run (a shared
machine moves absolute times by 2x between minutes):

- **kernel**: ``record_stats`` alone on CPU tensors of several sizes, with
  ``statistics.sketch`` on and off, against ``torch.sum`` (one read of
  memory): back-to-back triples, order rotated, median of the per-triple
  ratios. On the CPU the Sketch is a second read after the vectorised
  statistics (``csrc/stats/sketch_cpu.cpp``); the CUDA kernel computes it in
  its one pass.
- **model**: one training step of the demo model (forward, backward, AdamW,
  ``dumper.step()``) at L0 with backward records, eager and
  ``torch.compile``, unwired / sketch off / sketch on; variants rotate per
  round, a step's time is the fastest of the round, a ratio the median over
  rounds of the per-round ratio to the unwired step.

Usage: ``python benchmarks/sketch_cost.py [--rounds 3] [--steps 10] [--backend aot_eager] [--kernel-only] [--out FILE]``
(torch threads 1, as the test suite runs: with threads waiting on a busy
machine torch.sum's own time moved by 1000x).
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
from graphprobe import _ops
from graphprobe.demo.model import build_demo_model

__all__ = ["kernel_rows", "model_rows", "render"]

_C = _ops._C
_OP = torch.ops.graphprobe.record_stats.default
SIZES = (1024, 65536, 1 << 20)
DTYPES = (torch.float32, torch.bfloat16)
VARIANTS = ("unwired", "sketch off", "sketch on")


def _site() -> int:
    return int(_C.open_call("Bench.{n}", [("output", "0")], [0], [False], (), 1, _C.new_program()))


def _reset() -> None:
    _C.finish_step(None, "statistics", "L0")


def _time(fn: Any, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def kernel_rows(triples: int = 9) -> list[dict[str, Any]]:
    """Per size and dtype: median seconds and paired ratios of record_stats
    with the Sketch on and off, against torch.sum."""
    _reset()
    _C.set_active(True)
    rows = []
    try:
        for dtype in DTYPES:
            for numel in SIZES:
                x = torch.randn(numel).to(dtype)
                site = _site()
                calls = max(1, min(2000, int(2e-2 / max(_time(lambda: x.sum(), 3), 1e-7))))

                def op(on: bool) -> float:
                    _C.set_sketches(on)
                    t = _time(lambda: _OP(x, site, 0), calls)
                    _reset()
                    return t

                fns = {"sum": lambda: _time(lambda: x.sum(), calls), "off": lambda: op(False), "on": lambda: op(True)}
                samples: dict[str, list[float]] = {k: [] for k in fns}
                order = list(fns)
                for r in range(triples):
                    for k in order[r % 3:] + order[:r % 3]:
                        samples[k].append(fns[k]())
                on_off = [a / b for a, b in zip(samples["on"], samples["off"])]
                on_sum = [a / b for a, b in zip(samples["on"], samples["sum"])]
                off_sum = [a / b for a, b in zip(samples["off"], samples["sum"])]
                rows.append({"dtype": str(dtype).replace("torch.", ""), "numel": numel,
                             **{f"{k}_us": statistics.median(v) * 1e6 for k, v in samples.items()},
                             "on_over_off": statistics.median(on_off), "on_over_sum": statistics.median(on_sum),
                             "off_over_sum": statistics.median(off_sum)})
    finally:
        _C.set_sketches(True)
        _C.set_active(False)
        _C.reset()
    return rows


@contextlib.contextmanager
def _dumper(model: torch.nn.Module, variant: str, root: str) -> Iterator[Any]:
    if variant == "unwired":
        yield None
        return
    folder = tempfile.mkdtemp(dir=root)
    config = os.path.join(folder, "config.json")
    with open(config, "w") as f:
        json.dump({"level": "L0", "dump_path": os.path.join(folder, "dump"),
                   "statistics": {"sketch": variant == "sketch on"}}, f)
    dumper = graphprobe.AclGraphDumper(config)
    dumper.start(model)
    try:
        yield dumper
    finally:
        dumper.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _step_time(variant: str, backend: str | None, steps: int, root: str) -> float:
    torch._dynamo.reset()
    model = build_demo_model().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, model.vocab, (2, 32), generator=torch.Generator().manual_seed(0))
    times = []
    with _dumper(model, variant, root) as dumper:
        fn = model if backend is None else torch.compile(model, backend=backend, fullgraph=True)
        for i in range(steps + 2):
            t0 = time.perf_counter()
            fn(x).float().pow(2).mean().backward()
            opt.step()
            opt.zero_grad()
            if dumper is not None:
                dumper.step()
            if i >= 2:
                times.append(time.perf_counter() - t0)
    return min(times)


def model_rows(rounds: int, steps: int, backend: str) -> list[dict[str, Any]]:
    """Per mode: median step ms per variant and the ratios to the unwired step."""
    root = tempfile.mkdtemp(prefix="sketch_cost_")
    rows = []
    try:
        for mode in (None, backend):
            per: dict[str, list[float]] = {v: [] for v in VARIANTS}
            for r in range(rounds):
                for name in VARIANTS[r % 3:] + VARIANTS[:r % 3]:
                    per[name].append(_step_time(name, mode, steps, root))
            row: dict[str, Any] = {"mode": "eager" if mode is None else f"torch.compile({mode})"}
            for name in VARIANTS:
                row[f"{name} ms"] = statistics.median(per[name]) * 1e3
                row[f"{name} / unwired"] = statistics.median(a / b for a, b in zip(per[name], per["unwired"]))
            row["on / off"] = statistics.median(a / b for a, b in zip(per["sketch on"], per["sketch off"]))
            rows.append(row)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rows


def render(kernel: list[dict[str, Any]], model: list[dict[str, Any]], args: argparse.Namespace) -> str:
    """The Markdown tables."""
    cpu = "unknown"
    with contextlib.suppress(OSError):
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    lines = [
        "# Cost of the Sketch statistic (issue #35)",
        "",
        f"`python benchmarks/sketch_cost.py --rounds {args.rounds} --steps {args.steps} --backend {args.backend}"
        f"{' --kernel-only' if args.kernel_only else ''}`; "
        f"{cpu}, torch {torch.__version__}, threads {torch.get_num_threads()}, SIMD level "
        f"{_C.simd_level() if hasattr(_C, 'simd_level') else 'see stats_kernel.md'}. Ratios are medians of "
        "ratios taken side by side; absolute times are for orientation only (shared machine).",
        "",
        "## record_stats alone (CPU)",
        "",
        "| dtype | elements | torch.sum us | sketch off us | sketch on us | **on / off** | on / torch.sum | off / torch.sum |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in kernel:
        lines.append(f"| {r['dtype']} | {r['numel']} | {r['sum_us']:.1f} | {r['off_us']:.1f} | {r['on_us']:.1f} | "
                     f"**{r['on_over_off']:.2f}** | {r['on_over_sum']:.2f} | {r['off_over_sum']:.2f} |")
    if not model:
        return "\n".join(lines) + "\n"
    lines += [
        "",
        "## A training step of the demo model at L0 with backward records",
        "",
        "| mode | unwired ms | sketch off ms | sketch on ms | off / unwired | on / unwired | **on / off** |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in model:
        lines.append(f"| {r['mode']} | {r['unwired ms']:.2f} | {r['sketch off ms']:.2f} | {r['sketch on ms']:.2f} | "
                     f"{r['sketch off / unwired']:.2f} | {r['sketch on / unwired']:.2f} | **{r['on / off']:.2f}** |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--backend", default="aot_eager")
    parser.add_argument("--kernel-only", action="store_true", help="skip the training-step measurement")
    parser.add_argument("--out", default=None, help="write the Markdown table here (default: stdout)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    model = [] if args.kernel_only else model_rows(args.rounds, args.steps, args.backend)
    text = render(kernel_rows(), model, args)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

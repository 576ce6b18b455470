"""Read bandwidth of the CUDA statistics kernel (issue #16: >= 80 % of the device's).

``python -m benchmarks.gpu_bandwidth [--out DIR] [--budget SECONDS] [--max-mib N]``

For float32 and bfloat16 tensors of 16 MiB to 1 GiB, times with CUDA events
``record_stats`` (the probe op, engine active: stamping kernel + reduction),
``torch.sum`` (a read-only reduction: the device's read bandwidth as ATen
reaches it) and ``copy_`` into a preallocated buffer (read + write). Each
size runs back-to-back pairs (torch.sum, then record_stats; copy, then
record_stats) and reports the median of the per-pair time ratios, so drift
between rounds cancels. The goal: record_stats' read GB/s >= 0.8 x torch.sum's
on every size >= 16 MiB.

Writes ``gpu_bandwidth.md`` and ``gpu_bandwidth.json`` into ``--out``
(default ``benchmarks/results``). Without CUDA it prints why and exits 2.
``scripts/gpu_check.sh`` runs it with a small budget on a lent GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Callable

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
GOAL = 0.8

__all__ = ["measure", "markdown", "main"]


def _event_time(fn: Callable[[], Any], calls: int) -> float:
    """Seconds per call of ``fn``, timed with CUDA events around ``calls`` calls."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / calls


def _pairs(base: Callable[[], Any], ours: Callable[[], Any], calls: int, rounds: int,
           between: Callable[[], None]) -> tuple[float, float, float]:
    """Median seconds of ``base`` and ``ours`` and median of the per-pair ratios base/ours."""
    tb: list[float] = []
    to: list[float] = []
    for _ in range(rounds):
        tb.append(_event_time(base, calls))
        between()
        to.append(_event_time(ours, calls))
        between()
    return statistics.median(tb), statistics.median(to), statistics.median(b / o for b, o in zip(tb, to))


def measure(sizes_mib: list[int], dtypes: list[str], budget_s: float) -> dict[str, Any]:
    """Rows of GB/s and paired ratios; sizes are skipped (and said so) once the budget is spent."""
    import torch

    from graphprobe import _ops

    from benchmarks.floor import _reset, _site

    op = torch.ops.graphprobe.record_stats.default
    device = torch.device("cuda")
    props = torch.cuda.get_device_properties(device)
    deadline = time.monotonic() + budget_s
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    _reset()
    _ops._C.set_active(True)
    try:
        site = _site("GpuBandwidth.{n}")
        for dtype_name in dtypes:
            dtype = getattr(torch, dtype_name)
            for mib in sizes_mib:
                if time.monotonic() > deadline:
                    skipped.append(f"{dtype_name} {mib} MiB")
                    continue
                numel = (mib << 20) // torch.tensor([], dtype=dtype).element_size()
                x = torch.randn(numel, device=device, dtype=torch.float32).to(dtype)
                y = torch.empty_like(x)
                nbytes = x.numel() * x.element_size()

                def ours() -> None:
                    op(x, site, 0)

                def total() -> None:
                    x.sum()

                def copy() -> None:
                    y.copy_(x)

                for fn in (ours, total, copy):  # warm-up: lazy init, caching allocator
                    fn()
                _reset()
                torch.cuda.synchronize()
                # About 20 ms per timed batch; at least 3 calls.
                one = _event_time(ours, 3)
                _reset()
                calls = max(3, min(200, int(0.02 / max(one, 1e-6))))
                t_sum, t_ours, r_sum = _pairs(total, ours, calls, 7, _reset)
                t_copy, t_ours2, r_copy = _pairs(copy, ours, calls, 5, _reset)
                rows.append({
                    "dtype": dtype_name, "mib": mib, "bytes": nbytes, "calls": calls,
                    "record_stats_s": statistics.median([t_ours, t_ours2]), "sum_s": t_sum, "copy_s": t_copy,
                    "record_stats_gbps": nbytes / t_ours / 1e9, "sum_gbps": nbytes / t_sum / 1e9,
                    # A copy reads and writes every byte: its read rate is half the traffic.
                    "copy_read_gbps": nbytes / t_copy / 1e9, "copy_traffic_gbps": 2 * nbytes / t_copy / 1e9,
                    "ours_over_sum": r_sum, "ours_over_copy_read": r_copy,
                })
                del x, y
                torch.cuda.empty_cache()
    finally:
        _ops._C.set_active(False)
        _ops._C.reset()
    return {
        "device": props.name, "multiprocessors": props.multi_processor_count,
        "torch": torch.__version__, "cuda": torch.version.cuda, "goal": GOAL,
        "rows": rows, "skipped_for_budget": skipped, "budget_s": budget_s,
    }


def markdown(result: dict[str, Any]) -> str:
    """The table: GB/s of each, the paired ratios and the verdict per row."""
    out = [
        "# CUDA statistics kernel: read bandwidth",
        "",
        f"Device: {result['device']} ({result['multiprocessors']} SMs), torch {result['torch']}, CUDA {result['cuda']}. "
        "`record_stats` is the probe op (stamp + reduction kernels); `torch.sum` a read-only reduction; "
        "`copy_` reads and writes (its read rate is bytes / time). Ratios: median of back-to-back pairs "
        f"(time of the other / time of record_stats). Goal: record_stats / torch.sum >= {result['goal']}.",
        "",
        "| dtype | MiB | record_stats GB/s | torch.sum GB/s | copy read GB/s | record_stats / sum | "
        "record_stats / copy read | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        verdict = "met" if r["ours_over_sum"] >= result["goal"] else "**missed**"
        out.append(f"| {r['dtype']} | {r['mib']} | {r['record_stats_gbps']:.0f} | {r['sum_gbps']:.0f} | "
                   f"{r['copy_read_gbps']:.0f} | {r['ours_over_sum']:.2f} | {r['ours_over_copy_read']:.2f} | "
                   f"{verdict} |")
    if result["skipped_for_budget"]:
        out += ["", f"Not measured (budget of {result['budget_s']:.0f} s spent): "
                + ", ".join(result["skipped_for_budget"])]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_bandwidth", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=RESULTS, help=f"folder for gpu_bandwidth.md/.json (default {RESULTS})")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds; sizes left when it is spent are listed")
    parser.add_argument("--max-mib", type=int, default=1024, help="largest tensor in MiB (default 1024)")
    args = parser.parse_args(argv)
    if args.budget <= 0 or args.max_mib < 16:
        parser.error(f"--budget must be > 0 (got {args.budget}) and --max-mib >= 16 (got {args.max_mib})")
    import torch

    if not torch.cuda.is_available():
        print("gpu_bandwidth: CUDA is not available (torch "
              f"{torch.__version__}): nothing measured", file=sys.stderr)
        return 2
    sizes = [m for m in (16, 64, 256, 1024) if m <= args.max_mib]
    result = measure(sizes, ["float32", "bfloat16"], args.budget)
    os.makedirs(args.out, exist_ok=True)
    md = markdown(result)
    with open(os.path.join(args.out, "gpu_bandwidth.md"), "w") as f:
        f.write(md)
    with open(os.path.join(args.out, "gpu_bandwidth.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())

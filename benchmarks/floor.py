"""The floor and the cost of the statistics kernels.

The floor of recording ``B`` bytes is ``B / read_bandwidth``: the least time
any tool needs to read those tensors once. The read bandwidth is measured in
the same run (``torch.sum`` over a buffer much larger than the caches), since
an absolute figure from another run, or another machine, means little here.

:func:`kernel_costs` times ``torch.ops.graphprobe.record_stats`` alone on
tensors of several sizes and dtypes, with the engine active, against
``torch.sum`` (one pass over memory) and against the four reductions a hook
computes (``max``, ``min``, ``mean``, ``norm``): small tensors show the fixed
cost of one call, large ones the cost per byte. The per-byte cost is the slope
between the two largest sizes; its ratio to ``torch.sum``'s slope is the
"passes" column: about 1 for a kernel that reads memory once at full speed.
A kernel that reads once but computes slowly also shows more than 1; it then
shows the same bytes/s whether its tensor fits in cache or not. Each row also
carries ``sum_over_op_paired``: torch.sum's time over record_stats' from
back-to-back pairs (median of the per-pair ratios), i.e. the kernel's
throughput relative to torch.sum's (issue #16's goal: >= 0.8 from 64 KiB to
16 MiB of float32).
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any, Callable

import torch

from graphprobe import _ops

__all__ = ["read_bandwidth", "kernel_costs"]

_C = _ops._C
_OP = torch.ops.graphprobe.record_stats.default
PAIRS = 9  # back-to-back (torch.sum, record_stats) pairs per kernel row, at least


def _sync_for(device: torch.device) -> Callable[[], None]:
    return torch.cuda.synchronize if device.type == "cuda" else (lambda: None)


def _time(fn: Callable[[], Any], n: int, sync: Callable[[], None]) -> float:
    sync()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    sync()
    return (time.perf_counter() - start) / n


def read_bandwidth(device: torch.device, nbytes: int, repeats: int) -> dict[str, Any]:
    """Bytes per second of ``torch.sum`` over a float32 buffer of ``nbytes``."""
    sync = _sync_for(device)
    buf = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    buf.sum()
    times = [_time(buf.sum, 1 if device.type == "cpu" else 10, sync) for _ in range(repeats)]
    seconds = statistics.median(times)
    return {
        "method": f"torch.sum over a {nbytes / 2**20:.0f} MiB float32 buffer, median of {repeats}",
        "bytes": buf.numel() * 4,
        "seconds": seconds,
        "bytes_per_s": buf.numel() * 4 / seconds,
        "threads": torch.get_num_threads(),
    }


def _calls_for(fn: Callable[[], Any], target_s: float, sync: Callable[[], None], after: Callable[[], None]) -> int:
    one = _time(fn, 1, sync)
    after()
    one = min(one, _time(fn, 3, sync))
    after()
    return max(1, min(20000, math.ceil(target_s / max(one, 1e-7))))


def _site(entry: str) -> int:
    """A probe site with one output tensor, registered as a traced call
    would be: what compiled code passes to the op on every execution."""
    return int(_C.open_call(entry, [("output", "0")], [0], [False], (), 1, _C.new_program()))


def _reset() -> None:
    _C.finish_step(None, "statistics", "L0")


def kernel_costs(
    device: torch.device, sizes: list[int], dtypes: list[torch.dtype], repeats: int, target_s: float
) -> dict[str, Any]:
    """Per-call and per-byte cost of ``record_stats`` against ``torch.sum``.

    Must run while no dumper is started: it drives the engine directly and
    leaves it inactive and empty.
    """
    sync = _sync_for(device)
    _reset()
    _C.set_active(True)
    rows: list[dict[str, Any]] = []
    try:
        for dtype in dtypes:
            for numel in sizes:
                x = torch.randn(numel, device=device).to(dtype)
                rows.append(_one(f"{numel}", x, sync, repeats, target_s))
        # A non-contiguous input of the largest size (a transposed matrix, as
        # attention feeds ``k.transpose(-1, -2)`` to matmul).
        side = int(math.isqrt(max(sizes)))
        xt = torch.randn(side, side, device=device).t()
        rows.append(_one(f"{side}x{side} transposed", xt, sync, repeats, target_s))
        # Every other column: no unit stride in any dimension (gathered in
        # small buffers for the vectorised kernels).
        rows.append(_one(f"{side}x{side}[:, ::2]", xt.t()[:, ::2], sync, repeats, target_s))
        # Fixed cost split: the engine inactive (dispatcher, string arguments,
        # the early exit) against active with a one-element tensor.
        one = torch.ones(1, device=device)
        _C.set_active(False)
        site = _site("Bench.{n}")
        n = _calls_for(lambda: _OP(one, site, 0), target_s, sync, _reset)
        inactive = statistics.median(_time(lambda: _OP(one, site, 0), n, sync) for _ in range(repeats))
    finally:
        _C.set_active(False)
        _C.reset()
    per_byte = _slopes(rows)
    return {"rows": rows, "inactive_call_s": inactive, **per_byte}


def _one(label: str, x: torch.Tensor, sync: Callable[[], None], repeats: int, target_s: float) -> dict[str, Any]:
    site = _site("Bench.{n}")

    def op() -> None:
        _OP(x, site, 0)

    def four() -> None:
        f = x if x.dtype in (torch.float32, torch.float64) else x.float()
        f.max(), f.min(), f.mean(), f.norm()

    fns = {"op": op, "sum": lambda: x.sum(), "four": four}
    calls = {k: _calls_for(fn, target_s, sync, _reset) for k, fn in fns.items()}
    samples: dict[str, list[float]] = {k: [] for k in fns}
    # torch.sum and record_stats run as back-to-back pairs (their order
    # alternating) so that each pair sees the same machine; the ratio is the
    # median of the per-pair ratios. The four reductions run after each pair.
    pair_ratios: list[float] = []
    for r in range(max(repeats, PAIRS)):
        for k in ("sum", "op") if r % 2 == 0 else ("op", "sum"):
            samples[k].append(_time(fns[k], calls[k], sync))
            _reset()  # one epoch per batch: the engine reuses the batch's slots
        pair_ratios.append(samples["sum"][-1] / samples["op"][-1])
        if r < repeats:
            samples["four"].append(_time(fns["four"], calls["four"], sync))
            _reset()
    nbytes = x.numel() * x.element_size()
    row: dict[str, Any] = {
        "size": label,
        "dtype": str(x.dtype).replace("torch.", ""),
        "numel": x.numel(),
        "bytes": nbytes,
        "contiguous": x.is_contiguous(),
    }
    for k, values in samples.items():
        t = statistics.median(values)
        row[f"{k}_s"] = t
        row[f"{k}_bytes_per_s"] = nbytes / t
    # Throughput of record_stats relative to torch.sum's (1 = as fast).
    row["sum_over_op_paired"] = statistics.median(pair_ratios)
    row["pairs"] = len(pair_ratios)
    return row


def _slopes(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-byte costs from the two largest contiguous sizes of each dtype, and
    the fixed cost from the smallest."""
    out: dict[str, Any] = {"per_dtype": {}}
    for dtype in sorted({r["dtype"] for r in rows}):
        group = sorted((r for r in rows if r["dtype"] == dtype and r["contiguous"]), key=lambda r: r["bytes"])
        if len(group) < 2:
            continue
        small, a, b = group[0], group[-2], group[-1]
        db = b["bytes"] - a["bytes"]
        slope = {k: (b[f"{k}_s"] - a[f"{k}_s"]) / db for k in ("op", "sum", "four")}
        out["per_dtype"][dtype] = {
            "fixed_call_s": small["op_s"],
            "fixed_sum_s": small["sum_s"],
            "op_s_per_byte": slope["op"],
            "sum_s_per_byte": slope["sum"],
            "four_s_per_byte": slope["four"],
            "op_bytes_per_s": 1 / slope["op"] if slope["op"] > 0 else float("inf"),
            "passes": slope["op"] / slope["sum"] if slope["sum"] > 0 else float("nan"),
            "from_sizes": [a["size"], b["size"]],
        }
    return out

"""Measurement: interleaved step timing, peak memory, recorded bytes.

Timing. Every variant is warmed up, then timed over ``repeats`` rounds; in
each round every variant runs ``n`` steps back to back (``n`` calibrated so
that one measurement lasts about ``target_s``) and the round's time per step
is kept. Rounds visit the variants in a rotated order, so slow drift of a
shared machine (other jobs starting, frequency changes) reaches all variants
alike. Ratios are taken within a round (variant / its baseline in the same
round) and the median over rounds is reported. Python's garbage collector is
off while steps are timed; it runs once before each round.

Memory. On the CPU, the peak resident set size while a variant's steps run
(``VmHWM`` after resetting it through ``/proc/self/clear_refs``) minus the
resident size just before them: the transient memory one step needs on top
of what is already resident. :func:`malloc_for_memory` makes glibc hand
blocks of 64 KiB and more back to the OS when freed (and trims the heap), so
that one variant's freed memory does not hide the next variant's peak. That
setting costs every large allocation an ``mmap`` and its page faults: timed
under it, the compiled transformer-l ran 26 % slower, and compiled+L0 (which
materialises more buffers) read 1.05x instead of 1.035x. So steps are timed
under :func:`malloc_for_timing`, where blocks up to 32 MiB are reused from
the heap, as glibc's own adaptive threshold ends up doing in a long-running
process, and only the memory steps run under :func:`malloc_for_memory`. On CUDA,
``torch.cuda.max_memory_allocated`` over the steps minus the memory
allocated before them.

Bytes. :func:`dump_bytes` counts numel * itemsize over the tensors listed in
a dump.json (from their shapes and dtypes), independently of the engine.
"""

from __future__ import annotations

import ctypes
import gc
import json
import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import torch

__all__ = [
    "Timed",
    "calibrate",
    "dump_bytes",
    "interleaved",
    "peak_memory",
    "malloc_for_memory",
    "malloc_for_timing",
    "tensor_bytes",
]

_DTYPES = {str(t): t for t in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
    torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128,
)}


def tensor_bytes(t: torch.Tensor) -> int:
    """numel * itemsize: the bytes a tool reads to reduce ``t`` once."""
    return t.numel() * t.element_size()


def dump_bytes(dump: dict[str, Any]) -> tuple[int, int]:
    """(tensor records, bytes) listed in a loaded dump.json, from shapes and dtypes."""
    count = 0
    total = 0

    def walk(node: Any) -> None:
        nonlocal count, total
        if isinstance(node, dict):
            if node.get("type") == "torch.Tensor" and "shape" in node:
                dtype = _DTYPES.get(node.get("dtype", ""))
                itemsize = dtype.itemsize if dtype is not None else 0
                count += 1
                total += math.prod(node["shape"]) * itemsize
                return
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(dump.get("data", {}))
    return count, total


def load_json(path: str) -> dict[str, Any]:
    with open(path) as f:
        return json.load(f)


# -- timing ------------------------------------------------------------------


@dataclass
class Timed:
    """Per-step seconds of one variant, one entry per round."""

    name: str
    steps_per_round: int = 1
    per_step: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.per_step) if self.per_step else float("nan")


def _run(step: Callable[[], None], n: int, sync: Callable[[], None]) -> float:
    # No collection can land in the timed steps; the garbage is collected
    # once per round (interleaved), because after compiling the large models
    # a full collection takes about 0.3 s, which per measurement was a third
    # of the suite's wall time.
    gc.disable()
    try:
        sync()
        start = time.perf_counter()
        for _ in range(n):
            step()
        sync()
        return (time.perf_counter() - start) / n
    finally:
        gc.enable()


def calibrate(step: Callable[[], None], target_s: float, sync: Callable[[], None], max_steps: int = 500) -> int:
    """Steps per measurement so that one lasts about ``target_s``."""
    one = _run(step, 1, sync)
    if one * 3 < target_s:  # a second look: the first step after warm-up is often slow
        one = min(one, _run(step, 3, sync))
    return max(1, min(max_steps, math.ceil(target_s / max(one, 1e-7))))


def interleaved(
    steps: dict[str, Callable[[], None]],
    repeats: int,
    target_s: float,
    sync: Callable[[], None] = lambda: None,
    progress: Callable[[str], None] = lambda s: None,
) -> dict[str, Timed]:
    """Times every step function over ``repeats`` rounds, rotating the order."""
    names = list(steps)
    gc.collect()
    timed = {name: Timed(name, calibrate(steps[name], target_s, sync)) for name in names}
    for r in range(repeats):
        order = names[r % len(names):] + names[: r % len(names)]
        gc.collect()
        for name in order:
            timed[name].per_step.append(_run(steps[name], timed[name].steps_per_round, sync))
        progress(f"round {r + 1}/{repeats}")
    return timed


def paired_ratios(variant: Timed, baseline: Timed) -> list[float]:
    """variant / baseline within each round."""
    return [v / b for v, b in zip(variant.per_step, baseline.per_step) if b > 0]


def quantiles(values: Iterable[float]) -> tuple[float, float, float]:
    """(25th percentile, median, 75th percentile)."""
    data = sorted(values)
    if not data:
        return (float("nan"),) * 3
    if len(data) == 1:
        return (data[0],) * 3
    q = statistics.quantiles(data, n=4, method="inclusive")
    return q[0], statistics.median(data), q[2]


# -- memory ------------------------------------------------------------------

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# glibc's adaptive mmap threshold never rises above this on 64-bit systems
# (DEFAULT_MMAP_THRESHOLD_MAX); the trim threshold follows at twice it.
_ADAPTIVE_MAX = 32 << 20


def _mallopt(mmap_threshold: int, trim_threshold: int, trim: bool) -> bool:
    try:
        libc = ctypes.CDLL("libc.so.6")
        ok = bool(libc.mallopt(_M_MMAP_THRESHOLD, mmap_threshold)) and bool(
            libc.mallopt(_M_TRIM_THRESHOLD, trim_threshold))
        if ok and trim:
            libc.malloc_trim(0)
        return ok
    except (OSError, AttributeError):
        return False


def malloc_for_memory() -> bool:
    """Makes glibc return freed blocks of 64 KiB and more to the OS (fixed mmap
    threshold) and trims the heap, so that RSS peaks of one variant are not
    hidden in heap memory freed by an earlier one. False where unavailable."""
    return _mallopt(64 * 1024, 128 * 1024, trim=True)


def malloc_for_timing() -> bool:
    """Blocks up to 32 MiB come from the heap and are reused, as in a
    long-running process under glibc's adaptive threshold (see the module
    docstring). False where unavailable."""
    return _mallopt(_ADAPTIVE_MAX, 2 * _ADAPTIVE_MAX, trim=False)


def _status_kib(key: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_memory(step: Callable[[], None], n: int, device: torch.device) -> int | None:
    """Bytes the steps need on top of what was resident (CPU: RSS; CUDA:
    allocated device memory) at their start; None when it cannot be read."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        for _ in range(n):
            step()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before
    before = _status_kib("VmRSS")
    if before is None or not _reset_hwm():
        return None
    for _ in range(n):
        step()
    peak = _status_kib("VmHWM")
    return None if peak is None else max(0, peak - before) * 1024

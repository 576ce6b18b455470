"""One benchmark run: the plan (what ``--smoke``/``--quick``/full measure) and
the orchestration (floor, kernel micro-benchmark, then each model's variants
built, warmed up, timed interleaved, measured for memory and bytes).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import torch

from benchmarks import floor, measure, step_hold
from benchmarks.models import MODELS
from benchmarks.variants import VARIANTS, available, baseline_of, build_variant

__all__ = ["Plan", "plan_for", "run"]


@dataclass(frozen=True)
class Plan:
    """What one run measures."""

    name: str
    models: tuple[str, ...]
    repeats: int  # interleaved rounds per model
    target_s: float  # length of one measurement of one variant
    warmup: int  # steps before timing (after the first, which compiles)
    memory_steps: int
    bandwidth_bytes: int
    bandwidth_repeats: int
    kernel_sizes: tuple[int, ...]
    kernel_dtypes: tuple[torch.dtype, ...]
    kernel_repeats: int
    kernel_target_s: float
    compile: bool = True
    # Models on which the fused-statistics variants run: each compiles one
    # reduction kernel per probe, minutes on 2 cores for every model.
    fused_models: tuple[str, ...] = ()


def plan_for(mode: str, device: torch.device) -> Plan:
    """The plan of ``mode`` (smoke, quick, full) on ``device``."""
    gpu = device.type == "cuda"
    if mode == "smoke":
        return Plan("smoke", ("mlp-tiny",), repeats=2, target_s=0.005, warmup=1, memory_steps=1,
                    bandwidth_bytes=16 << 20, bandwidth_repeats=3, kernel_sizes=(16, 4096, 65536),
                    kernel_dtypes=(torch.float32,), kernel_repeats=2, kernel_target_s=0.002, compile=False)
    if mode == "quick":
        return Plan("quick", ("transformer-s", "mlp"), repeats=5, target_s=0.06, warmup=2,
                    memory_steps=2, bandwidth_bytes=(1 << 30) if gpu else (128 << 20), bandwidth_repeats=5,
                    kernel_sizes=(16, 4096, 1 << 18, 1 << 21, 1 << 23) if gpu else (16, 4096, 1 << 18, 1 << 21, 1 << 23),
                    kernel_dtypes=(torch.float32, torch.bfloat16), kernel_repeats=3, kernel_target_s=0.01,
                    # The GPU check's only benchmark: it must show the Triton fused path too.
                    fused_models=("transformer-s",) if gpu else ())
    return Plan("full", ("transformer-s", "transformer-m", "transformer-l", "mlp"), repeats=9, target_s=0.2,
                warmup=3, memory_steps=3, bandwidth_bytes=(2 << 30) if gpu else (256 << 20), bandwidth_repeats=9,
                kernel_sizes=(16, 1024, 16384, 1 << 18, 1 << 20, 1 << 22, 1 << 24) + ((1 << 26,) if gpu else ()),
                kernel_dtypes=(torch.float32, torch.bfloat16), kernel_repeats=5, kernel_target_s=0.03,
                fused_models=("transformer-m", "transformer-l"))


def _configure_dynamo() -> None:
    # Every compiled variant compiles the same forward code object again
    # (another model instance, other hooks); the default limit of 8 would
    # silently fall back to eager part-way through the run.
    cfg = torch._dynamo.config
    for key in ("recompile_limit", "cache_size_limit"):
        if hasattr(cfg, key):
            setattr(cfg, key, 256)
    if hasattr(cfg, "fail_on_recompile_limit_hit"):
        cfg.fail_on_recompile_limit_hit = True
    # By default dynamo does not guard on module hooks: compiled+L0 (a copy
    # wired with hooks) would silently reuse the graph compiled for the
    # unwired copy and record nothing. Guarding on hooks makes it compile its
    # own graph; every compiled variant pays the same (small) guard cost.
    if hasattr(cfg, "skip_nnmodule_hook_guards"):
        cfg.skip_nnmodule_hook_guards = False


def _first_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def run_model(name: str, plan: Plan, device: torch.device, workdir: str, log: Callable[[str], None]) -> dict[str, Any]:
    """Builds, warms up, times and measures every variant of one model."""
    spec = MODELS[name]
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    base = spec.build(device)
    x = spec.make_input(device)
    result: dict[str, Any] = {"model": name, "description": spec.description,
                              "parameters": sum(p.numel() for p in base.parameters()), "variants": {}}
    built = {}
    torch._dynamo.utils.counters.clear()
    for vname in VARIANTS:
        reason = available(vname, device, plan.compile)
        if reason is None and VARIANTS[vname][0] == "fused" and name not in plan.fused_models:
            reason = "not run (fused statistics are measured on " + (", ".join(plan.fused_models) or "no model") + ")"
        if reason is None and baseline_of(vname) != vname and baseline_of(vname) not in built:
            reason = f"not run (baseline {baseline_of(vname)} unavailable)"
        if reason is not None:
            result["variants"][vname] = {"available": False, "reason": reason}
            continue
        try:
            start = time.perf_counter()
            variant = build_variant(vname, base, x, os.path.join(workdir, name))
            variant.step()  # compiles, for compiled variants
            sync()
            first = time.perf_counter() - start
            for _ in range(plan.warmup):
                variant.step()
        except Exception as exc:  # a variant that cannot run is reported, not fatal
            log(f"  {vname}: FAILED {_first_line(exc)}")
            traceback.print_exc()
            result["variants"][vname] = {"available": False, "reason": f"failed: {_first_line(exc)}"}
            continue
        variant.collect_s.clear()
        built[vname] = variant
        result["variants"][vname] = {"available": True, "first_step_s": first}
        log(f"  {vname}: ready (first step {first:.2f} s)")
    result["graph_breaks"] = int(sum(torch._dynamo.utils.counters["graph_break"].values()))
    timed = measure.interleaved({k: v.step for k, v in built.items()}, plan.repeats, plan.target_s, sync,
                                progress=lambda s: log(f"  timing {s}"))
    for vname, variant in built.items():
        entry = result["variants"][vname]
        entry["per_step_s"] = timed[vname].per_step
        entry["steps_per_round"] = timed[vname].steps_per_round
        entry["time_s"] = timed[vname].median
        entry["collect_s"] = (sorted(variant.collect_s)[len(variant.collect_s) // 2] if variant.collect_s else None)
        base_name = baseline_of(vname)
        if base_name != vname:
            q1, med, q3 = measure.quantiles(measure.paired_ratios(timed[vname], timed[base_name]))
            # The overhead follows the paired ratio (robust to drift), not
            # the difference of two medians taken from different rounds.
            entry.update(baseline=base_name, ratio=med, ratio_q1=q1, ratio_q3=q3,
                         overhead_s=(med - 1.0) * timed[base_name].median)
    measure.malloc_for_memory()
    try:
        for vname, variant in built.items():
            entry = result["variants"][vname]
            entry["peak_mem_bytes"] = measure.peak_memory(variant.step, plan.memory_steps, device)
            entry["records"], entry["bytes"] = variant.count()
    finally:
        measure.malloc_for_timing()
    for variant in built.values():
        try:
            variant.close()
        except Exception as exc:
            log(f"  {variant.name}: close failed: {_first_line(exc)}")
    torch._dynamo.reset()
    return result


def run(plan: Plan, device: torch.device, log: Callable[[str], None] = print) -> dict[str, Any]:
    """The whole run; returns everything :mod:`benchmarks.report` needs."""
    from benchmarks import report

    _configure_dynamo()
    freed = measure.malloc_for_timing()
    started = time.time()
    sharing = report.cpu_sharing()
    facts = report.machine_facts(device)
    log(f"benchmark {plan.name} on {facts['device']} ({facts['cpu']}, {facts['threads']} threads)")
    workdir = tempfile.mkdtemp(prefix="graphprobe-bench-")
    results: dict[str, Any] = {"plan": plan.name, "facts": facts, "models": [], "mallopt_available": freed}
    try:
        with torch.no_grad():
            log("read bandwidth ...")
            results["bandwidth"] = floor.read_bandwidth(device, plan.bandwidth_bytes, plan.bandwidth_repeats)
            log(f"  {results['bandwidth']['bytes_per_s'] / 1e9:.1f} GB/s")
            log("stats kernel micro-benchmark ...")
            results["kernel"] = floor.kernel_costs(device, list(plan.kernel_sizes), list(plan.kernel_dtypes),
                                                   plan.kernel_repeats, plan.kernel_target_s)
            log("step() on the caller's thread ...")
            results["step_hold"] = step_hold.step_hold(device, (16, 100), repeats=20 * plan.repeats)
            for name in plan.models:
                log(f"model {name} ...")
                results["models"].append(run_model(name, plan, device, workdir, log))
            # The bandwidth again at the end: how much the machine drifted.
            results["bandwidth_end"] = floor.read_bandwidth(device, plan.bandwidth_bytes, plan.bandwidth_repeats)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    results["wall_s"] = time.time() - started
    results["facts"]["load_end"] = report.load_average()
    results["facts"]["sharing"] = report.shared_summary(sharing, report.cpu_sharing(), results["wall_s"])
    return results

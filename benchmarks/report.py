"""The report: machine facts, derived columns, goals, Markdown and JSON.

Everything here is computed from what :mod:`benchmarks.suite` measured in the
same run; ratios are the numbers to read, absolute times hold for this run
only.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import resource
from typing import Any, Callable

import torch

from benchmarks.variants import has_acl_save, supported_levels

__all__ = ["COLUMNS", "machine_facts", "load_average", "cpu_sharing", "derive", "markdown", "write"]

GOAL_COMPILED_L0 = 1.25  # compiled + L0 within this ratio of compiled (CPU transformer)
GOAL_FLOOR = 3.0  # overhead at most this many floors
GOAL_HOOKS = 5.0  # at least this many times cheaper than hooks at the same level
GOAL_CUDAGRAPH_L0 = 1.15  # CUDA graph + L0 within this ratio of the plain replay
# Issue #16 (statistics fused into compiled code), CPU transformers:
GOAL_FUSED_L0 = {"transformer-m": 1.10, "transformer-l": 1.05}  # compiled+L0 / compiled
GOAL_FUSED_FLOOR_L = 1.5  # compiled+L0 overhead / floor, transformer-l
GOAL_FUSED_HOOKS_L = 3.0  # hooks overhead / ours, compiled+L0, transformer-l
GOAL_KERNEL_THROUGHPUT = 0.8  # CPU stats kernel at least this fraction of torch.sum's throughput ...
KERNEL_GOAL_BYTES = (64 << 10, 16 << 20)  # ... on tensors of these sizes (issue #16)
GOAL_FIXED_US = 1.5  # fixed cost per probe on a tiny CPU tensor, microseconds
GOAL_STEP_HOLD_MS = 0.1  # step() holds the caller's thread at most this long with 100 records (issue #16)

COLUMNS = [
    "variant", "ms/step", "x baseline [IQR]", "overhead ms", "records", "recorded KiB", "floor ms",
    "overhead / floor", "hooks / this", "predicted ms", "step() ms", "peak mem +MiB", "first step s",
]
"""The columns of each model's table, in order (the JSON keys are in :func:`derive`)."""


# -- machine facts -------------------------------------------------------------


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def _cpu_ticks() -> int | None:
    """Busy jiffies of the whole machine (user + nice + system + irq + softirq + steal)."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()[1:]
        v = [int(x) for x in fields]
        return v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)
    except (OSError, ValueError, IndexError):
        return None


def cpu_sharing() -> dict[str, Any]:
    """A snapshot for :func:`shared_summary`: machine busy time and our own CPU time."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"ticks": _cpu_ticks(), "own_s": own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime,
            "hz": os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100}


def shared_summary(before: dict[str, Any], after: dict[str, Any], wall_s: float) -> dict[str, Any] | None:
    """CPU time that other processes used during the run, in cores on average."""
    if before["ticks"] is None or after["ticks"] is None or wall_s <= 0:
        return None
    busy = (after["ticks"] - before["ticks"]) / before["hz"]
    own = after["own_s"] - before["own_s"]
    others = max(0.0, busy - own)
    return {"others_core_s": others, "others_cores_avg": others / wall_s, "own_cores_avg": own / wall_s}


def machine_facts(device: torch.device) -> dict[str, Any]:
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "device": f"cuda ({gpu})" if gpu else "cpu",
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": gpu,
        "python": platform.python_version(),
        "graphprobe_levels": list(supported_levels()),
        "acl_save": has_acl_save(),
        "load_start": load_average(),
    }


# -- derived columns and goals ---------------------------------------------------


def _kernel_model(results: dict[str, Any]) -> tuple[float, float] | None:
    """(fixed seconds per call, seconds per byte) of record_stats on float32."""
    f32 = results.get("kernel", {}).get("per_dtype", {}).get("float32")
    if not f32:
        return None
    return f32["fixed_call_s"], max(0.0, f32["op_s_per_byte"])


def derive(results: dict[str, Any]) -> None:
    """Adds floor, overhead/floor, hooks/this, the cost model's prediction and
    memory deltas to every variant, and the goal verdicts to ``results``."""
    bw = results["bandwidth"]["bytes_per_s"]
    model = _kernel_model(results)
    for m in results["models"]:
        vs = m["variants"]
        for name, v in vs.items():
            if not v.get("available"):
                continue
            base = vs.get(v.get("baseline", ""), {})
            if v.get("bytes"):
                v["floor_s"] = v["bytes"] / bw
                if "overhead_s" in v:
                    v["overhead_per_floor"] = v["overhead_s"] / v["floor_s"]
                if model and "+L" in name and not name.startswith("hooks"):
                    v["predicted_s"] = v["records"] * model[0] + v["bytes"] * model[1]
            if v.get("peak_mem_bytes") is not None and base.get("peak_mem_bytes") is not None:
                v["peak_mem_delta_bytes"] = v["peak_mem_bytes"] - base["peak_mem_bytes"]
            level = name.split("+", 1)[1] if "+" in name else None
            hooks = vs.get(f"hooks+{level}", {})
            if level and not name.startswith("hooks") and hooks.get("overhead_s", 0) > 0 and v.get("overhead_s"):
                # A recording cost within the noise (<= 0) makes the ratio unbounded.
                v["hooks_over_this"] = hooks["overhead_s"] / v["overhead_s"] if v["overhead_s"] > 0 else math.inf
        m["checks"] = _checks(vs)
    results["goals"] = _goals(results)


def _checks(vs: dict[str, Any]) -> list[str]:
    """Recorded bytes counted from dump.json against the hooks' own count, and
    recording variants that recorded nothing."""
    out = []
    for name, v in vs.items():
        if v.get("available") and "+L" in name and not v.get("records"):
            out.append(f"{name}: RECORDED NOTHING (its numbers do not measure recording)")
    for level in ("L0", "L1"):
        hooks = vs.get(f"hooks+{level}", {})
        for mode in ("eager", "compiled", "fused", "cudagraph"):
            v = vs.get(f"{mode}+{level}", {})
            if not (v.get("available") and hooks.get("available")):
                continue
            same = (v["records"], v["bytes"]) == (hooks["records"], hooks["bytes"])
            out.append(f"{mode}+{level}: {v['records']} records, {v['bytes']} B from dump.json; hooks counted "
                       f"{hooks['records']} records, {hooks['bytes']} B: {'equal' if same else 'DIFFERENT'}")
    return out


def _fmt_ms(s: float | None) -> str:
    return "–" if s is None or (isinstance(s, float) and math.isnan(s)) else f"{s * 1e3:.3g}"


def _gap_text(v: dict[str, Any], results: dict[str, Any]) -> str:
    """Where the overhead of a recording variant goes, by the cost model."""
    model = _kernel_model(results)
    if not model or "overhead_s" not in v:
        return ""
    calls = v["records"] * model[0]
    per_byte = v["bytes"] * model[1]
    collect = v.get("collect_s") or 0.0
    rest = v["overhead_s"] - calls - per_byte - collect
    return (f"overhead {_fmt_ms(v['overhead_s'])} ms = {v['records']} calls x {model[0] * 1e6:.1f} us fixed "
            f"({_fmt_ms(calls)} ms) + {v['bytes'] / 2**20:.2f} MiB at the kernel's "
            f"{1 / model[1] / 1e9 if model[1] else math.inf:.2f} GB/s ({_fmt_ms(per_byte)} ms) + step() "
            f"{_fmt_ms(collect)} ms + rest {_fmt_ms(rest)} ms (Python hooks in eager, fusion barriers when "
            "compiled, noise)")


def results_time(v: dict[str, Any], results: dict[str, Any]) -> float | None:
    """The baseline's time per step for variant ``v``."""
    for m in results["models"]:
        for name, other in m["variants"].items():
            if other is v:
                return m["variants"].get(v.get("baseline", ""), {}).get("time_s")
    return None


def _goals(results: dict[str, Any]) -> list[dict[str, Any]]:
    goals: list[dict[str, Any]] = []
    models = results["models"]
    gpu = results["facts"]["gpu"] is not None

    def add(goal: str, where: str, value: float | None, target: float, higher_is_better: bool, v: dict[str, Any],
            why: str | None = None):
        if value is None or (isinstance(value, float) and math.isnan(value)):
            goals.append({"goal": goal, "where": where, "value": None, "met": None, "note": "not measured"})
            return
        met = value >= target if higher_is_better else value <= target
        gap = "" if met else (f"missed by {target / value:.2f}x" if higher_is_better else f"missed by {value / target:.2f}x")
        note = "" if met else (why if why is not None else _gap_text(v, results))
        goals.append({"goal": goal, "where": where, "value": value, "target": target, "met": met, "gap": gap,
                      "note": note})

    for m in models:
        vs = m["variants"]
        if m["model"].startswith("transformer") and not gpu:
            v = vs.get("compiled+L0", {})
            add(f"compiled+L0 <= {GOAL_COMPILED_L0}x compiled (CPU transformer)", m["model"],
                v.get("ratio") if v.get("records") else None,
                GOAL_COMPILED_L0, False, v)
        if m["model"] in GOAL_FUSED_L0 and not gpu:
            for name in ("compiled+L0", "fused+L0"):  # opaque probes, fused statistics
                v = vs.get(name, {})
                add(f"{name} <= {GOAL_FUSED_L0[m['model']]}x compiled (#16)", m["model"],
                    v.get("ratio") if v.get("records") else None, GOAL_FUSED_L0[m["model"]], False, v)
        if m["model"] == "transformer-l" and not gpu:
            for name in ("compiled+L0", "fused+L0"):
                v = vs.get(name, {})
                add(f"{name} overhead <= {GOAL_FUSED_FLOOR_L}x floor (#16)", m["model"],
                    v.get("overhead_per_floor"), GOAL_FUSED_FLOOR_L, False, v)
                add(f"{name}: hooks overhead / ours >= {GOAL_FUSED_HOOKS_L} (#16)", m["model"],
                    v.get("hooks_over_this"), GOAL_FUSED_HOOKS_L, True, v)
        if gpu:
            v = vs.get("cudagraph+L0", {})
            add(f"cudagraph+L0 <= {GOAL_CUDAGRAPH_L0}x cudagraph", m["model"],
                v.get("ratio") if v.get("records") else None,
                GOAL_CUDAGRAPH_L0, False, v)
        for name in ("eager+L0", "compiled+L0", "cudagraph+L0", "eager+L1", "compiled+L1", "cudagraph+L1"):
            v = vs.get(name, {})
            if v.get("available") and "overhead_per_floor" in v:
                add(f"overhead <= {GOAL_FLOOR}x floor", f"{m['model']} {name}", v["overhead_per_floor"],
                    GOAL_FLOOR, False, v)
        for name in ("eager+L0", "eager+L1", "compiled+L0", "compiled+L1"):
            v = vs.get(name, {})
            if v.get("available") and "hooks_over_this" in v:
                add(f">= {GOAL_HOOKS}x cheaper than hooks (overhead)", f"{m['model']} {name}", v["hooks_over_this"],
                    GOAL_HOOKS, True, v)
    if not gpu:
        _kernel_goals(results.get("kernel", {}), add)
    for row in results.get("step_hold", []):
        if row["records"] == 100:
            add(f"step() holds the caller <= {GOAL_STEP_HOLD_MS} ms, 100 records (#16)", "step_hold",
                row["step_s"] * 1e3, GOAL_STEP_HOLD_MS, False, {},
                f"step(dump=False) costs {row['collect_s'] * 1e3:.3f} ms; the rest is collecting the rows, copying "
                "the call table and queuing the job (benchmarks/results/step_hold.md)")
    return goals


def _kernel_goals(kernel: dict[str, Any], add: Callable[..., None]) -> None:
    """Issue #16's CPU kernel rows: throughput against torch.sum (paired
    ratios, the worst size in range) and the fixed cost per probe."""
    lo, hi = KERNEL_GOAL_BYTES
    for dtype in ("float32", "bfloat16"):
        rows = [r for r in kernel.get("rows", []) if r["dtype"] == dtype and r["contiguous"]
                and lo <= r["bytes"] <= hi and "sum_over_op_paired" in r]
        if not rows:
            continue
        worst = min(rows, key=lambda r: r["sum_over_op_paired"])
        where = (f"{dtype}, {rows[0]['bytes'] >> 10} KiB-{rows[-1]['bytes'] >> 10} KiB "
                 f"(worst: {worst['bytes'] >> 10} KiB)")
        why = (f"at {worst['bytes'] >> 10} KiB record_stats reads {worst['op_bytes_per_s'] / 1e9:.1f} GB/s, "
               f"torch.sum {worst['sum_bytes_per_s'] / 1e9:.1f} GB/s: in cache the single pass is bound by its "
               "4 vector operations per vector (max, min, add, fma) against torch.sum's one")
        add(f"stats kernel >= {GOAL_KERNEL_THROUGHPUT}x torch.sum's throughput (paired)", where,
            worst["sum_over_op_paired"], GOAL_KERNEL_THROUGHPUT, True, {}, why)
    f32 = kernel.get("per_dtype", {}).get("float32")
    if f32:
        add(f"fixed cost per probe <= {GOAL_FIXED_US} us (CPU, 16 float32 elements)", "record_stats",
            f32["fixed_call_s"] * 1e6, GOAL_FIXED_US, False, {},
            f"torch.sum on the same tensor: {f32['fixed_sum_s'] * 1e6:.2f} us; the engine inactive (dispatcher "
            "and early exit only) is in the kernel section")


# -- output ----------------------------------------------------------------------


def _num(x: Any, fmt: str = "{:.3g}") -> str:
    if x is None or (isinstance(x, float) and (math.isnan(x))):
        return "–"
    if isinstance(x, float) and math.isinf(x):
        return "∞"
    return fmt.format(x)


def _row(name: str, v: dict[str, Any]) -> list[str]:
    if not v.get("available"):
        return [name, v.get("reason", "not available")] + [""] * (len(COLUMNS) - 2)
    ratio = "1 (baseline)" if "ratio" not in v else (
        f"{v['ratio']:.3f} [{v['ratio_q1']:.2f}–{v['ratio_q3']:.2f}]")
    mem = v.get("peak_mem_delta_bytes", v.get("peak_mem_bytes") if "baseline" not in v else None)
    return [
        name,
        _fmt_ms(v.get("time_s")),
        ratio,
        _fmt_ms(v.get("overhead_s")) if "overhead_s" in v else "",
        _num(v.get("records")) if v.get("records") else "",
        _num(v["bytes"] / 1024, "{:.1f}") if v.get("bytes") else "",
        _fmt_ms(v.get("floor_s")) if "floor_s" in v else "",
        _num(v.get("overhead_per_floor"), "{:.1f}") if "overhead_per_floor" in v else "",
        _num(v.get("hooks_over_this"), "{:.2f}") if "hooks_over_this" in v else "",
        _fmt_ms(v.get("predicted_s")) if "predicted_s" in v else "",
        _fmt_ms(v.get("collect_s")) if v.get("collect_s") is not None else "",
        ("" if mem is None else f"{mem / 2**20:+.1f}" if "baseline" in v else f"{mem / 2**20:.1f} (abs)"),
        _num(v.get("first_step_s"), "{:.2f}"),
    ]


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def markdown(results: dict[str, Any]) -> str:
    f = results["facts"]
    bw = results["bandwidth"]
    out = [f"# graphprobe benchmark — {results['plan']} run, {f['device']}", ""]
    out.append(f"Generated by `python -m benchmarks{'' if results['plan'] == 'full' else ' --' + results['plan']}` on "
               f"{f['date']}; wall time {results['wall_s']:.0f} s. Ratios are the result; absolute times hold "
               "for this run only. See benchmarks/README.md for what each column means.")
    out += ["", "## Machine", ""]
    share = f.get("sharing")
    shared = share is not None and share["others_cores_avg"] > 0.1
    facts = [
        ("CPU", f"{f['cpu']} ({f['cores']} cores; torch threads {f['threads']})"),
        ("GPU", f["gpu"] or "none"),
        ("torch", f"{f['torch']}" + (f" (CUDA {f['cuda']})" if f["cuda"] else "")),
        ("python", f["python"]),
        ("graphprobe levels", ", ".join(f["graphprobe_levels"]) + ("; acl_save available" if f["acl_save"]
                                                                   else "; acl_save not available")),
        ("load average (1, 5, 15 min) at start / end", f"{f['load_start']} / {f.get('load_end')}"),
        ("machine shared", ("yes: other processes used {:.2f} cores on average during the run (this run {:.2f})"
                            .format(share["others_cores_avg"], share["own_cores_avg"]) if shared else
                            ("no other load measured" if share else "unknown"))),
        ("read bandwidth (the floor's denominator)",
         f"{bw['bytes_per_s'] / 1e9:.2f} GB/s at start, "
         f"{results.get('bandwidth_end', bw)['bytes_per_s'] / 1e9:.2f} GB/s at end ({bw['method']})"),
    ]
    if f.get("note"):
        facts.append(("note", f["note"]))
    out += _table(["fact", "value"], [[k, str(v)] for k, v in facts])

    out += ["", "## Goals", ""]
    rows = []
    for g in results["goals"]:
        verdict = "not measured" if g["met"] is None else ("met" if g["met"] else f"**missed** ({g['gap']})")
        rows.append([g["goal"], g["where"], _num(g["value"], "{:.2f}"), verdict, g.get("note", "")])
    out += _table(["goal", "where", "value", "verdict", "where the overhead goes (missed goals)"], rows)

    out += ["", _FIXES_TEXT]
    for m in results["models"]:
        out += ["", f"## {m['model']}: {m['description']}, {m['parameters'] / 1e6:.2f} M parameters", ""]
        out += _table(COLUMNS, [_row(name, v) for name, v in m["variants"].items()])
        notes = [f"graph breaks while compiling: {m['graph_breaks']}"] + m["checks"]
        out += [""] + [f"- {n}" for n in notes]

    if results.get("step_hold"):
        out += ["", "## step() on the caller's thread (benchmarks/step_hold.py)", ""]
        rows = [[str(r["records"]), _num(r["step_s"] * 1e3, "{:.3f}"), _num(r["collect_s"] * 1e3, "{:.3f}"),
                 _num(r["step_over_collect"], "{:.2f}"), _num(r["back_to_back_s"] * 1e3, "{:.3f}")]
                for r in results["step_hold"]]
        out += _table(["records", "step() ms (writer idle)", "step(dump=False) ms", "step / collect (paired)",
                       "step() ms back-to-back"], rows)

    k = results["kernel"]
    out += ["", "## Stats kernel micro-benchmark (`record_stats` alone, engine active)", ""]
    rows = []
    for r in k["rows"]:
        rows.append([r["size"], r["dtype"], _num(r["bytes"] / 1024, "{:.1f}"), _num(r["op_s"] * 1e6, "{:.2f}"),
                     _num(r["op_bytes_per_s"] / 1e9, "{:.2f}"), _num(r["sum_s"] * 1e6, "{:.2f}"),
                     _num(r["sum_bytes_per_s"] / 1e9, "{:.2f}"), _num(r["four_s"] * 1e6, "{:.2f}"),
                     _num(r["op_s"] / r["sum_s"], "{:.2f}"), _num(r.get("sum_over_op_paired"), "{:.2f}")])
    out += _table(["elements", "dtype", "KiB", "record_stats us", "GB/s", "torch.sum us", "GB/s",
                   "max+min+mean+norm us", "record_stats / sum", "throughput vs sum (paired)"], rows)
    out += ["", "\"throughput vs sum (paired)\": torch.sum's time over record_stats' in back-to-back pairs, "
                "median of the per-pair ratios (1 = as fast as torch.sum; goal >= "
                f"{GOAL_KERNEL_THROUGHPUT} from 64 KiB to 16 MiB)."]
    out += ["", f"- engine inactive (dispatcher, string arguments, early exit): "
                f"{k['inactive_call_s'] * 1e6:.2f} us per call"]
    for st in k.get("step_rows", []):
        out.append(f"- end of step with {st['records']} records: collect only (`finish_step(None)`) "
                   f"{st['collect_s'] * 1e3:.3f} ms; collect and write dump.json {st['collect_write_s'] * 1e3:.3f} ms")
    for dtype, d in k["per_dtype"].items():
        out.append(
            f"- {dtype}: fixed cost per call {d['fixed_call_s'] * 1e6:.2f} us (torch.sum on the same tiny tensor "
            f"{d['fixed_sum_s'] * 1e6:.2f} us); per-byte cost between {d['from_sizes'][0]} and "
            f"{d['from_sizes'][1]} elements: {d['op_bytes_per_s'] / 1e9:.2f} GB/s, "
            f"{d['passes']:.2f}x torch.sum's per-byte time (1.0 = one pass at memory speed), four "
            f"separate reductions {d['four_s_per_byte'] / d['sum_s_per_byte'] if d['sum_s_per_byte'] > 0 else math.nan:.2f}x")
    return "\n".join(out) + "\n"


_FIXES_TEXT = """What closes the remaining gaps. Naming the calls, the step folder, the JSON text and dump.json
are the writer thread's job (step() costs the collection of the rows and a copy of the call table) and the float32/bf16/fp16 kernel is
a single vectorised pass (AVX-512 or AVX2, sums in float32 per block of 16 elements per lane and in double
across blocks, on torch's threads for large tensors). The probe op takes
two integers (a site registered when the probe was inserted, and the tensor's index) instead of three
strings, which brought its fixed cost to about torch.sum's own on a tiny tensor; in eager mode one call per
call part hands all of its tensors to the engine without the dispatcher. Under inductor a probe takes its
tensor in any layout, so a fused result that several probes read is stored once, and a value probed twice
in one graph (a module's output that is the next module's input) is read once: the later probe records the
first one's row (record_mirror). L0 records also carry each
module's own parameters (msprobe's `parameters` part), which adds a record per weight and bias and a read
of every weight per call: the "records" column counts them, and the hooks baseline records them too. On
small models the rest is the Python hooks themselves (eager) and the fusion barrier each opaque probe puts
into compiled code (compiled). Statistics fused into inductor's kernels (the fused+L0/L1 rows, opt-in) remove
that barrier where inductor generates the loop that makes the tensor; weights, inputs and matmul outputs
keep the opaque kernel, which reads a stored tensor faster than a generated reduction. Lowered that way,
with max/min in float32 and a vectorised NaN test, they went from 1.45x to within a few percent of the
opaque probes on transformer-l, but not below them: on a CPU the extra arithmetic per element in the
producing loop costs about what re-reading the stored tensor does, so they stay off by default.
Steps are timed with glibc's steady-state malloc (blocks up to 32 MiB reused from the heap). Runs before
2026-11-30 15:00 UTC timed them under the memory measurement's 64 KiB mmap threshold, which made every
large buffer an mmap with fresh page faults: it slowed the compiled transformer-l by about a quarter and
charged the extra buffers that opaque probes materialise to recording (compiled+L0 read 1.13x there,
1.04-1.06x since). What remains is the probes' reads (overhead/floor below 1 on transformer-l: a probe
reads what its producer has just written, partly from cache), about 40 % of them the weights of the
`parameters` part, plus a few microseconds per probe call and dynamo's guards on the module hooks.
Strided inputs are read in place (the transposed row of the micro-benchmark). On a CPU the "hooks"
comparison is the weakest case for us: a host read there is no device synchronisation, so the
hook-and-`.item()` way costs little more
than its four vectorised reductions; it is judged on a GPU, where each read stalls the device."""


def write(results: dict[str, Any], out_dir: str) -> tuple[str, str]:
    """Writes ``{cpu,gpu}.md`` and ``.json`` into ``out_dir``; returns their paths."""
    os.makedirs(out_dir, exist_ok=True)
    stem = "gpu" if results["facts"]["gpu"] else "cpu"
    if results["plan"] != "full":
        stem += f"-{results['plan']}"
    md_path = os.path.join(out_dir, stem + ".md")
    json_path = os.path.join(out_dir, stem + ".json")
    text = markdown(results)
    with open(md_path, "w") as fh:
        fh.write(text)
    with open(json_path, "w") as fh:
        json.dump(results, fh, indent=1, default=str)
    return md_path, json_path

"""GPU smoke cases: the risky CUDA paths, each in a fresh process of its own
under its own timeout, with faulthandler, printing PASS/FAIL per case.

    python3 tests/gpu/smoke.py                 # every case, one subprocess each
    python3 tests/gpu/smoke.py --list          # the case names
    python3 tests/gpu/smoke.py --case NAME     # one case, in this process
    python3 tests/gpu/smoke.py --out DIR       # also DIR/smoke.json and DIR/smoke-NAME.log

A fresh process per case matters: the first probe of a device creates its
record table, and several defects showed only when that happened inside a
capture. scripts/gpu_check.sh runs this before pytest; tests/gpu/
test_smoke_cases.py runs the same cases under pytest. Every comparison goes
through dump.json and the saved files, never through engine internals.
"""

from __future__ import annotations

import argparse
import atexit
import faulthandler
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from typing import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

#: Seconds one case may run (its process is killed after, tracebacks dumped first).
DEFAULT_TIMEOUT = 90

CASES: dict[str, Callable[[str], str | None]] = {}


def case(fn: Callable[[str], str | None]) -> Callable[[str], str | None]:
    """Registers a case. It gets a scratch folder, raises on failure, and may
    return a note (e.g. why it did not apply)."""
    CASES[fn.__name__] = fn
    return fn


# ----------------------------------------------------------------- helpers


def _torch():
    import torch

    return torch


def _cuda_records(folder: str, named) -> dict:
    from dtype_sweep import record_eager

    return record_eager(folder, "cuda", [x for _, x in named])


def _saved(folder: str, stem: str) -> list[str]:
    names = [n for n in os.listdir(folder) if n.startswith(stem + "_") and n.endswith(".pt")]
    return sorted(names, key=lambda n: int(n[len(stem) + 1 : -3]))


# ----------------------------------------------------------------- cases


@case
def dtype_sweep_eager(tmp: str) -> None:
    """Every dtype on eager CUDA: float64 reference, and the CPU path's records."""
    from dtype_sweep import cases, record_eager, sweep_problems

    named = cases()
    gpu = record_eager(os.path.join(tmp, "gpu"), "cuda", [x for _, x in named])
    cpu = record_eager(os.path.join(tmp, "cpu"), "cpu", [x for _, x in named])
    bad = sweep_problems(gpu, named)
    assert not bad, "\n".join(bad[:20])
    assert list(gpu) == list(cpu)
    for key in gpu:  # the CPU path agrees (statistics within summation order)
        for part in ("input_args", "output"):
            g, c = gpu[key][part][0], cpu[key][part][0]
            assert (g["dtype"], g["shape"]) == (c["dtype"], c["shape"]), key
            assert (g["Max"] is None) == (c["Max"] is None), (key, g, c)


@case
def dtype_sweep_captured_first_probe(tmp: str) -> None:
    """Every dtype inside one CUDA graph; the device's first probe is inside
    the capture (no warm-up), and complex/float8 must not abort it."""
    from dtype_sweep import cases, record_captured, sweep_problems

    named = cases()
    data = record_captured(tmp, [x for _, x in named])
    bad = sweep_problems(data, named)
    assert not bad, "\n".join(bad[:20])


@case
def capture_with_switch_off_no_warmup(tmp: str) -> None:
    """dump_enable=false at start(), capture without warm-up (the table is
    created inside the capture), then switch on: the replay records."""
    torch = _torch()
    import graphprobe
    from dtype_sweep import Holder, read_step, reference, write_config

    model = Holder()
    dumper = graphprobe.AclGraphDumper(write_config(tmp, dump_enable=False))
    dumper.start(model)
    x = torch.randn(4096, device="cuda")
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        model(x)
    dumper.step(dump=False)
    g.replay()
    dumper.step()  # off: nothing recorded, no folder
    dumper.enable(True)
    x.copy_(torch.randn(4096))
    g.replay()
    dumper.step()
    dumper.stop()
    assert not os.path.exists(os.path.join(tmp, "dump", "step0")), "a step with the switch off wrote a folder"
    data = read_step(os.path.join(tmp, "dump"), 1)["data"]
    rec = data["Module.emit.Emit.forward.0"]["output"][0]
    want = reference(x.cpu())
    assert rec["Max"] == want["Max"] and rec["Min"] == want["Min"], (rec, want)


@case
def warmup_saves_then_capture_x3(tmp: str) -> None:
    """Eager acl_saves queued (the writer thread then queries their events
    and frees their pinned copies, one file at a time) and a capture started
    at once, three times: in the default global capture mode any CUDA call
    of the writer thread during the capture would invalidate it."""
    torch = _torch()
    import graphprobe

    x = torch.zeros(1 << 18, device="cuda")  # 1 MiB per file: the writer makes CUDA calls every few ms
    for round_ in range(3):
        for i in range(32):
            graphprobe.acl_save(x + i, os.path.join(tmp, f"warm{round_}.pt"))
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = x
            for _ in range(300):  # a capture long enough to overlap the writer's work
                y = y * 1.0
            graphprobe.acl_save(y * 2, os.path.join(tmp, f"cap{round_}.pt"))
        x.fill_(float(round_ + 1))
        g.replay()
    graphprobe.flush()
    for round_ in range(3):
        assert _saved(tmp, f"warm{round_}") == [f"warm{round_}_{i}.pt" for i in range(32)]
        (cap,) = _saved(tmp, f"cap{round_}")
        got = torch.load(os.path.join(tmp, cap), weights_only=True)
        assert torch.equal(got, torch.full((1 << 18,), 2.0 * (round_ + 1))), round_


@case
def captured_save_small_budget_x20(tmp: str) -> None:
    """A captured acl_save with a 1 MiB writer budget, 20 replays without
    synchronisation: every file written, in order, peak within the budget."""
    torch = _torch()
    from graphs import replay_save_under_budget

    n = (512 << 10) // 4  # 512 KiB per replay
    peak = replay_save_under_budget(tmp, n, budget=1 << 20, replays=20)
    assert peak <= 1 << 20, peak
    assert _saved(tmp, "b") == [f"b_{i}.pt" for i in range(20)]
    for i in range(20):
        assert torch.equal(torch.load(os.path.join(tmp, f"b_{i}.pt"), weights_only=True), torch.full((n,), float(i)))


@case
def float8_eager_and_captured(tmp: str) -> None:
    """float8 statistics eager and captured, and float8 acl_save, bit for bit."""
    torch = _torch()
    import graphprobe
    from dtype_sweep import record_captured, sweep_problems

    named = [(str(d), (torch.randn(3000) * 20).to(d)) for d in (torch.float8_e4m3fn, torch.float8_e5m2)]
    bad = sweep_problems(_cuda_records(os.path.join(tmp, "eager"), named), named)
    bad += sweep_problems(record_captured(os.path.join(tmp, "graph"), [x for _, x in named], warmup=True), named)
    assert not bad, "\n".join(bad)
    x = named[0][1].cuda()
    graphprobe.acl_save(x, os.path.join(tmp, "f8.pt"))
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        graphprobe.acl_save(x, os.path.join(tmp, "f8g.pt"))
    g.replay()
    graphprobe.flush()
    for name in ("f8_0.pt", "f8g_0.pt"):
        got = torch.load(os.path.join(tmp, name), weights_only=True)
        assert got.dtype == x.dtype and torch.equal(got.view(torch.uint8), x.cpu().view(torch.uint8)), name


def kernel_edge_cases(device: str) -> list:
    """(name, tensor on `device`) pairs for the statistics kernel's edges: views
    whose data does not start on a 16-byte boundary (the CUDA kernel reads
    elements one by one up to the first aligned address, then 16-byte
    vectors, then the tail), lengths around a vector, and the values that send
    a float32 vector to the exact double path (inf, NaN, squares beyond float
    range, tiny and subnormal values, vectors of zeros)."""
    torch = _torch()
    gen = torch.Generator().manual_seed(16)
    out = []
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int8, torch.int64):
        base = torch.randn(3 * 4099, generator=gen, dtype=torch.float64) * (20 if dtype == torch.int8 else 50)
        full = base.to(dtype).to(device)
        for start, stop in ((1, None), (3, 4098), (5, 21), (7, 8), (0, 15), (0, 17), (2, 4099)):
            out.append((f"{dtype}[{start}:{stop}]", full[start:stop]))
    for dtype in (torch.float32, torch.bfloat16):
        r = torch.randn(5000, generator=gen, dtype=torch.float64)
        for name, values in (("huge", r * 1e20), ("tiny", r * 1e-30), ("subnormal", r * 1e-40),
                             ("zeros-then-values", torch.cat([torch.zeros(3000, dtype=torch.float64), r]))):
            out.append((f"{dtype}-{name}", values.to(dtype).to(device)[1:]))
        holed = r.to(dtype).to(device)
        holed[2001] = float("nan")
        out.append((f"{dtype}-nan", holed))
        ends = r.to(dtype).to(device)
        ends[10], ends[4000] = float("inf"), -float("inf")
        out.append((f"{dtype}-inf", ends))
    return out


@case
def stats_kernel_edges(tmp: str) -> None:
    """The CUDA statistics kernel on misaligned views, lengths around a 16-byte
    vector and values that need its exact path, against float64 references."""
    from dtype_sweep import record_eager, sweep_problems

    named = kernel_edge_cases("cuda")
    data = record_eager(tmp, "cuda", [x for _, x in named])  # .to("cuda") keeps the views
    bad = sweep_problems(data, named)
    assert not bad, "\n".join(bad[:20])


@case
def reduce_overhead_records_once(tmp: str) -> None:
    """torch.compile(mode="reduce-overhead"): cudagraph trees really capture
    (no cudagraph skips) and each step's records are written once."""
    torch = _torch()
    import graphprobe
    from torch._dynamo.utils import counters
    from dtype_sweep import read_step, write_config
    from models import make_transformer

    model = make_transformer().cuda()
    dumper = graphprobe.AclGraphDumper(write_config(tmp))
    dumper.start(model)
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(model, mode="reduce-overhead", fullgraph=True)
    with torch.no_grad():
        for _ in range(3):
            compiled(torch.randint(0, 64, (2, 5), device="cuda"))
        dumper.step(dump=False)
        for _ in range(3):
            compiled(torch.randint(0, 64, (2, 5), device="cuda"))
            dumper.step()
    dumper.stop()
    assert not counters["inductor"].get("cudagraph_skips"), dict(counters["inductor"])
    for step in range(3):
        data = read_step(os.path.join(tmp, "dump"), step)["data"]
        assert data, step
        counts = [leaf.get("write_count", 1) for rec in data.values() for part in rec.values()
                  if isinstance(part, list) for leaf in part if isinstance(leaf, dict) and "Max" in leaf]
        assert counts and set(counts) == {1}, (step, sorted(set(counts)))


@case
def fused_stats_triton(tmp: str) -> None:
    """Statistics fused into Triton kernels (inductor, default mode and
    reduce-overhead): the generated code holds record_values, and every
    value equals a float64 reference; a bfloat16 intermediate is rounded as
    a stored tensor would be."""
    torch = _torch()
    import graphprobe
    from graphprobe.wiring import fused_stats
    from torch._inductor.utils import run_and_get_code
    from dtype_sweep import read_step, write_config

    fused_stats.set_enabled(True)  # off by default

    class Chain(torch.nn.Module):
        def forward(self, a, b):
            return torch.sum(torch.exp(torch.tanh(torch.mul(a, b))), dim=-1)

    for dtype in (torch.float32, torch.bfloat16):
        for mode in ("default", "reduce-overhead"):
            folder = os.path.join(tmp, f"{dtype}-{mode}".replace(".", "_"))
            os.makedirs(folder)
            torch.manual_seed(0)
            a = torch.randn(512, 4096, device="cuda", dtype=dtype)
            b = torch.randn(512, 4096, device="cuda", dtype=dtype)
            model = Chain()
            dumper = graphprobe.AclGraphDumper(write_config(folder, level="L1"))
            dumper.start(model)
            torch._dynamo.reset()
            compiled = torch.compile(model, mode=mode, fullgraph=True)
            with torch.no_grad():
                _, codes = run_and_get_code(compiled, a, b)
                for _ in range(2):
                    compiled(a, b)
                dumper.step(dump=False)
                compiled(a, b)
            dumper.step()
            dumper.stop()
            code = "\n".join(codes)
            assert "torch.ops.graphprobe.record_values" in code, (dtype, mode)
            # a and b are graph inputs: read again by the opaque kernel (fused_stats._made_by_generated_loop).
            assert "torch.ops.graphprobe.record_stats_fusable.default" in code, (dtype, mode)
            data = read_step(os.path.join(folder, "dump"), 0)["data"]
            # One rounding per stored tensor, as the fused kernel does.
            mul = (a.float() * b.float()).to(dtype).double()
            tanh = torch.tanh(mul.float()).to(dtype).double()
            exp = torch.exp(tanh.float()).to(dtype).double()
            for name, want in (("Torch.mul.0.forward", mul), ("Torch.tanh.0.forward", tanh),
                               ("Torch.exp.0.forward", exp)):
                got = data[name]["output"][0]
                # Triton's tanh/exp may differ from torch's by an ulp, which a
                # bfloat16 rounding can turn into one bfloat16 ulp (2^-8).
                loose = dtype == torch.bfloat16 and name != "Torch.mul.0.forward"
                rms = want.pow(2).mean().sqrt().item()
                for key, ref in (("Max", want.max().item()), ("Min", want.min().item()),
                                 ("Mean", want.mean().item()), ("Norm", want.norm().item())):
                    rtol = (2**-8 if key in ("Max", "Min") else 1e-4) if loose else 1e-5
                    scale = abs(ref) if key == "Norm" else max(abs(ref), rms)
                    assert abs(got[key] - ref) <= rtol * scale, (dtype, mode, name, key, got[key], ref)


@case
def padded_probe_inductor(tmp: str) -> None:
    """The probes take any layout (flexible_layout, csrc/ops/schemas.cpp), so
    inductor may pad a probed intermediate's rows (1100 float32 -> a stride
    of 1120): statistics still equal a float64 reference, in default mode
    and under cudagraph trees, with no cudagraph skip; a second probe of one
    value (record_mirror) is recorded on every replay too."""
    torch = _torch()
    import graphprobe
    from torch._dynamo.utils import counters
    from torch._inductor.utils import run_and_get_code
    from dtype_sweep import read_step, write_config

    class Pad(torch.nn.Module):
        def forward(self, a):
            return torch.relu(torch.sin(a) * 2.0) @ torch.ones(1100, 8, device=a.device)

    for mode in ("default", "reduce-overhead"):
        folder = os.path.join(tmp, mode)
        os.makedirs(folder)
        torch.manual_seed(0)
        a = torch.randn(256, 1100, device="cuda")
        model = Pad()
        dumper = graphprobe.AclGraphDumper(write_config(folder, level="L1"))
        dumper.start(model)
        torch._dynamo.reset()
        counters.clear()
        compiled = torch.compile(model, mode=mode, fullgraph=True)
        with torch.no_grad():
            _, codes = run_and_get_code(compiled, a)
            for _ in range(2):
                compiled(a)
            dumper.step(dump=False)
            compiled(a)
        dumper.step()
        dumper.stop()
        assert not counters["inductor"].get("cudagraph_skips"), (mode, dict(counters["inductor"]))
        code = "\n".join(codes)
        assert "graphprobe.record_mirror.default(" in code, mode
        data = read_step(os.path.join(folder, "dump"), 0)["data"]
        sin2 = torch.sin(a.double()) * 2.0
        # relu's input is mul's output again: a record_mirror (wiring/shared_probes.py)
        # that must replay under cudagraph trees although its host call does not.
        for name, part, want in (("Tensor.__mul__.0.forward", "output", sin2),
                                 ("Torch.relu.0.forward", "input_args", sin2),
                                 ("Torch.relu.0.forward", "output", torch.relu(sin2))):
            got = data[name][part][0]
            for key, ref in (("Max", want.max().item()), ("Min", want.min().item()),
                             ("Mean", want.mean().item()), ("Norm", want.norm().item())):
                assert abs(got[key] - ref) <= 1e-5 * max(abs(ref), 1.0), (mode, name, key, got[key], ref)


def _record_list(data: dict) -> list:
    out = []
    for name, rec in data.items():
        for part in ("input_args", "input_kwargs", "parameters", "output"):
            value = rec.get(part)
            leaves = value if isinstance(value, list) else list((value or {}).values())
            for leaf in leaves:
                if isinstance(leaf, dict) and "shape" in leaf:
                    out.append((name, part, tuple(leaf["shape"])))
    return out


@case
def record_lists_agree(tmp: str) -> None:
    """The dump.json record list (names, order, shapes) is the same for eager
    CUDA, a torch.cuda.graph replay and torch.compile(mode="reduce-overhead"),
    for a model whose module is called twice."""
    torch = _torch()
    import graphprobe
    from dtype_sweep import read_step, write_config

    class Twice(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)
            self.act = torch.nn.GELU()

        def forward(self, x):
            return self.lin(self.act(self.lin(x)))

    def run(mode: str) -> list:
        folder = os.path.join(tmp, mode)
        os.makedirs(folder)
        torch.manual_seed(0)
        model = Twice().cuda()
        dumper = graphprobe.AclGraphDumper(write_config(folder))
        dumper.start(model)
        x = torch.randn(4, 8, device="cuda")
        with torch.no_grad():
            if mode == "eager":
                model(x)
            elif mode == "graph":
                from graphs import capture

                graph, _ = capture(model, x)
                dumper.step(dump=False)
                graph.replay()
            else:
                torch._dynamo.reset()
                compiled = torch.compile(model, mode="reduce-overhead", fullgraph=True)
                for _ in range(3):
                    compiled(x)
                dumper.step(dump=False)
                compiled(x)
        dumper.step()
        dumper.stop()
        return _record_list(read_step(os.path.join(folder, "dump"), 0)["data"])

    eager = run("eager")
    assert [n for n, _, _ in eager].count("Module.lin.Linear.forward.1") >= 2, eager
    for mode in ("graph", "reduce_overhead"):
        got = run(mode)
        assert got == eager, f"{mode}:\n{got}\n!= eager:\n{eager}"


@case
def live_switch_after_queued_replays(tmp: str) -> None:
    """Replays queued without synchronisation, then the switch turned off:
    the queued replays finish with the switch on (no Max=-inf rows)."""
    torch = _torch()
    import graphprobe
    from dtype_sweep import Holder, read_step, reference, write_config

    model = Holder()
    dumper = graphprobe.AclGraphDumper(write_config(tmp))
    dumper.start(model)
    x = torch.randn(1 << 26, device="cuda")  # 256 MiB: replays are still queued when the switch flips
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        model(x)
    dumper.step(dump=False)
    for _ in range(30):
        g.replay()
    dumper.enable(False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 30 replays in one step: the write_count warning
        dumper.step()
    dumper.enable(True)
    dumper.stop()
    rec = read_step(os.path.join(tmp, "dump"), 0)["data"]["Module.emit.Emit.forward.0"]["output"][0]
    want = reference(x.cpu())
    assert rec["Max"] == want["Max"] and rec["Min"] == want["Min"], (rec["Max"], rec["Min"], want)


@case
def invalidated_capture_reports_capture(tmp: str) -> None:
    """step() inside a capture that an illegal call invalidated names the
    capture, not a confusing later CUDA error."""
    torch = _torch()
    import graphprobe
    from dtype_sweep import Holder, write_config

    model = Holder()
    dumper = graphprobe.AclGraphDumper(write_config(tmp))
    dumper.start(model)
    x = torch.randn(64, device="cuda")
    model(x)  # the table exists
    dumper.step(dump=False)
    g = torch.cuda.CUDAGraph()
    message = ""
    try:
        with torch.cuda.graph(g):
            try:
                torch.cuda.current_stream().query()  # not allowed while capturing: invalidates it
            except RuntimeError:
                pass
            try:
                dumper.step()
            except RuntimeError as exc:
                message = str(exc)
    except RuntimeError:
        pass  # ending the invalidated capture fails, as it should
    # CUDA's own error for a host wait in a capture says "capturing" too; the
    # message must be graphprobe's, naming the invalidated capture.
    assert message.startswith("graphprobe") and "invalidated" in message, (
        f"step() inside an invalidated capture said: {message!r}")
    dumper.stop()


@case
def threads_grow_the_table(tmp: str) -> None:
    """Two threads probe on their own streams while the record table grows
    past a chunk (4096 rows): every record is there with the right values."""
    torch = _torch()
    import graphprobe
    from dtype_sweep import Holder, read_step, write_config

    model = Holder()
    dumper = graphprobe.AclGraphDumper(write_config(tmp))
    dumper.start(model)
    values = [torch.full((16,), float(i), device="cuda") for i in range(8)]
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            with torch.cuda.stream(torch.cuda.Stream()):
                for i in range(2500):
                    model(values[(i + k) % 8])
            torch.cuda.synchronize()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    dumper.step()
    dumper.stop()
    data = read_step(os.path.join(tmp, "dump"), 0)["data"]
    assert len(data) == 5000, len(data)
    for rec in data.values():
        leaf = rec["output"][0]
        assert leaf["Max"] == leaf["Min"] and float(leaf["Max"]) in range(8), leaf


@case
def used_devices_only(tmp: str) -> str | None:
    """flush() synchronises only the devices graphprobe used; on a second
    GPU, using cuda:1 creates no context on cuda:0 (writer thread included)."""
    torch = _torch()
    import graphprobe
    from graphprobe import writer

    if torch.cuda.device_count() < 2:
        x = torch.ones(8, device="cuda:0")
        graphprobe.acl_save(x, os.path.join(tmp, "d.pt"))
        graphprobe.flush()
        assert writer._devices_to_synchronize() == [0], writer._devices_to_synchronize()
        return "one GPU: cuda:1 part not applicable"
    from dtype_sweep import cases, record_captured, sweep_problems

    with torch.cuda.device(1):
        x = torch.ones(1 << 20, device="cuda:1")
        graphprobe.acl_save(x, os.path.join(tmp, "d.pt"))
        graphprobe.flush()
        named = [(n, t) for n, t in cases() if n in ("torch.float32", "torch.bfloat16", "complex64")]
        data = record_captured(tmp, [t for _, t in named])  # on the current device, cuda:1
        assert not sweep_problems(data, named)
    assert writer._devices_to_synchronize() == [1], writer._devices_to_synchronize()
    assert not torch._C._cuda_hasPrimaryContext(0), "graphprobe created a context on cuda:0"
    return None


# Cheapest first (the torch.compile cases last): when time runs out, the
# cases not started are the costly ones.
_COMPILE_CASES = ("reduce_overhead_records_once", "record_lists_agree", "padded_probe_inductor",
                  "fused_stats_triton")
CASES = {k: v for k, v in CASES.items() if k not in _COMPILE_CASES} | {k: CASES[k] for k in _COMPILE_CASES}

# ----------------------------------------------------------------- driver


def run_one(name: str) -> None:
    """Runs one case in this process; exits 0 on pass, 1 on failure."""
    faulthandler.enable()
    torch = _torch()
    if not torch.cuda.is_available():
        print(f"{name}: no CUDA device", flush=True)
        sys.exit(1)
    with tempfile.TemporaryDirectory(prefix=f"smoke-{name}-") as tmp:
        note = CASES[name](tmp)
    if note:
        print(f"note: {note}")


def run_in_subprocess(name: str, timeout: float, log_dir: str | None = None) -> dict:
    """Runs one case in a fresh process; returns {"case", "status", "seconds", "output"}.

    The child arms faulthandler to dump every thread's stack shortly before
    the timeout, so a hang shows where it hangs."""
    env = dict(os.environ, PYTHONFAULTHANDLER="1", GRAPHPROBE_SMOKE_DUMP_AFTER=str(max(timeout - 5, 1)))
    start = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--case", name], capture_output=True,
                              text=True, timeout=timeout, env=env)
        status = "PASS" if proc.returncode == 0 else "FAIL"
        output = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        status = "TIMEOUT"
        output = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        output += (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
    result = {"case": name, "status": status, "seconds": round(time.monotonic() - start, 1), "output": output}
    if log_dir:
        with open(os.path.join(log_dir, f"smoke-{name}.log"), "w") as f:
            f.write(output)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print the case names")
    parser.add_argument("--case", help="run one case in this process")
    parser.add_argument("--only", nargs="*", help="run only these cases (subprocesses)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per case")
    parser.add_argument("--out", help="folder for smoke.json and one log per case")
    parser.add_argument("--budget", type=float, default=0,
                        help="seconds for all cases; cases that would start later are NOT RUN (0: no limit)")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(CASES))
        return 0
    if args.case:
        if args.case not in CASES:
            parser.error(f"--case: unknown case {args.case!r}; known: {', '.join(CASES)}")
        dump_after = float(os.environ.get("GRAPHPROBE_SMOKE_DUMP_AFTER", "0"))
        if dump_after > 0:
            faulthandler.dump_traceback_later(dump_after, exit=True)
        run_one(args.case)
        return 0
    # Inductor's caches key on the traced graph, not on graphprobe's lowerings:
    # a cache left by an earlier build would hand back code this tree no
    # longer generates (tests/conftest.py does the same for pytest). The
    # cases' processes inherit it, and it goes when the run ends.
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        own_cache = os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="graphprobe-smoke-inductor-")
        atexit.register(shutil.rmtree, own_cache, True)
    names = args.only or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error(f"--only: unknown case(s) {unknown}; known: {', '.join(CASES)}")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    results = []
    began = time.monotonic()
    for name in names:
        remaining = args.budget - (time.monotonic() - began) if args.budget > 0 else args.timeout
        if remaining < 5:
            results.append({"case": name, "status": "NOT RUN", "seconds": 0, "output": "no time left in the budget"})
            print(f"SMOKE NOT RUN {name} (budget of {args.budget:.0f} s spent)", flush=True)
            continue
        r = run_in_subprocess(name, min(args.timeout, remaining), args.out)
        results.append(r)
        note = next((line for line in r["output"].splitlines() if line.startswith("note: ")), "")
        print(f"SMOKE {r['status']:7s} {name} ({r['seconds']} s) {note}", flush=True)
        if r["status"] != "PASS":
            print("    " + "\n    ".join(r["output"].strip().splitlines()[-25:]), flush=True)
    failed = [r["case"] for r in results if r["status"] != "PASS"]
    print(f"SMOKE SUMMARY: {len(results) - len(failed)}/{len(results)} passed" +
          (f"; not passed: {', '.join(failed)}" if failed else ""), flush=True)
    if args.out:
        with open(os.path.join(args.out, "smoke.json"), "w") as f:
            json.dump([{k: v for k, v in r.items() if k != "output"} for r in results], f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

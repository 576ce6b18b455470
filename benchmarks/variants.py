"""The variants: ways of running one model, with and without recording.

=====================  ==========================================================
name                   what one step is
=====================  ==========================================================
eager                  ``model(x)``
eager+L0 / eager+L1    graphprobe wired at that level, ``model(x)``, ``dumper.step()``
compiled               ``torch.compile(model)(x)`` (inductor)
compiled+L0 / +L1      graphprobe wired before ``torch.compile``, then as above
                       (every probe an opaque op, the default)
fused+L0 / +L1         the same with fused statistics switched on
                       (``graphprobe.wiring.fused_stats``): the probes become
                       reductions inside inductor's kernels
hooks+L0 / hooks+L1    the usual way: Python hooks (L0: module forward hooks; L1:
                       a ``TorchFunctionMode`` over the same APIs graphprobe's L1
                       records) computing max/min/mean/norm of every tensor with
                       one host read (``.tolist()``) per tensor; the records are
                       written to a JSON file per step, as dump.json is
cudagraph              ``torch.cuda.graph`` replay (CUDA only)
cudagraph+L0 / +L1     graphprobe wired before capture, replay, ``dumper.step()``
cudagraph+acl_save     the model's output saved with ``graphprobe.acl_save`` in
                       the captured forward, so every replay writes it
=====================  ==========================================================

On CUDA every step ends with a synchronisation in every variant (a training
loop reads its loss once per step), so that steps do not overlap.

graphprobe's engine is one per process and ``AclGraphDumper`` refuses a second
start while another dumper is active. The benchmark interleaves variants, so
it keeps several dumpers started at once; only one variant runs between two
``step()`` calls, so each ``step()`` collects exactly its own records (the
report checks this: recorded bytes equal the hooks' independent count).
"""

from __future__ import annotations

import copy
import glob
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

import graphprobe
import graphprobe.config
from benchmarks.measure import dump_bytes, load_json, tensor_bytes

__all__ = ["Variant", "VARIANTS", "available", "build_variant", "baseline_of", "supported_levels", "has_acl_save"]

# name -> (mode, level); the order is the report's row order.
VARIANTS: dict[str, tuple[str, str | None]] = {
    "eager": ("eager", None),
    "eager+L0": ("eager", "L0"),
    "eager+L1": ("eager", "L1"),
    "hooks+L0": ("hooks", "L0"),
    "hooks+L1": ("hooks", "L1"),
    "compiled": ("compiled", None),
    "compiled+L0": ("compiled", "L0"),
    "compiled+L1": ("compiled", "L1"),
    "fused+L0": ("fused", "L0"),
    "fused+L1": ("fused", "L1"),
    "cudagraph": ("cudagraph", None),
    "cudagraph+L0": ("cudagraph", "L0"),
    "cudagraph+L1": ("cudagraph", "L1"),
    "cudagraph+acl_save": ("cudagraph", "acl_save"),
}


def baseline_of(name: str) -> str:
    """The no-recording variant a variant is compared with."""
    mode, _ = VARIANTS[name]
    return {"hooks": "eager", "fused": "compiled"}.get(mode, mode)


def supported_levels() -> tuple[str, ...]:
    """The levels this graphprobe records (checked at run time: L1 may land later)."""
    return tuple(getattr(graphprobe.config, "SUPPORTED_LEVELS", ("L0",)))


def has_acl_save() -> bool:
    return hasattr(graphprobe, "acl_save")


def available(name: str, device: torch.device, compile_: bool) -> str | None:
    """None when the variant can run here, else why not (for the report)."""
    mode, level = VARIANTS[name]
    if mode == "cudagraph" and device.type != "cuda":
        return "CUDA only"
    if mode in ("compiled", "fused") and not compile_:
        return "not run (--no-compile)"
    if level == "L1" and "L1" not in supported_levels():
        return "not available (graphprobe without L1)"
    if level == "L1" and mode == "hooks" and _l1_table() is None:
        return "not available (graphprobe.wiring.apis missing)"
    if level == "acl_save" and not has_acl_save():
        return "not available (graphprobe without acl_save)"
    return None


@dataclass
class Variant:
    """One built variant: ``step()`` runs one iteration."""

    name: str
    step: Callable[[], None]
    count: Callable[[], tuple[int, int]]  # (tensor records, bytes) of the latest step
    collect_s: list[float] = field(default_factory=list)  # time inside dumper.step(), per step
    close: Callable[[], None] = lambda: None


def _sync_for(device: torch.device) -> Callable[[], None]:
    return torch.cuda.synchronize if device.type == "cuda" else (lambda: None)


def _start_dumper(model: nn.Module, level: str, workdir: str, name: str) -> graphprobe.AclGraphDumper:
    root = os.path.join(workdir, name.replace("+", "_"))
    os.makedirs(root, exist_ok=True)
    config = os.path.join(root, "config.json")
    with open(config, "w") as f:
        json.dump({"task": "statistics", "dump_path": os.path.join(root, "dump"), "rank": [], "level": level}, f)
    dumper = graphprobe.AclGraphDumper(config)
    # Several dumpers on purpose (see the module docstring): skip the guard.
    graphprobe.AclGraphDumper._started = None
    dumper.start(model)
    return dumper


def _dump_count(dumper: graphprobe.AclGraphDumper) -> tuple[int, int]:
    last = dumper.step_number - 1
    dumper.flush()  # dump.json is written by the writer thread
    found = glob.glob(os.path.join(dumper.config.dump_path, f"step{last}", "*", "dump.json"))
    if len(found) != 1:
        return 0, 0
    return dump_bytes(load_json(found[0]))


def _with_dumper(name: str, forward: Callable[[], Any], dumper: graphprobe.AclGraphDumper) -> Variant:
    variant = Variant(name=name, step=lambda: None, count=lambda: _dump_count(dumper))

    def step() -> None:
        forward()
        start = time.perf_counter()
        dumper.step()
        variant.collect_s.append(time.perf_counter() - start)

    variant.step = step
    variant.close = dumper.stop
    return variant


# -- the usual way -----------------------------------------------------------


def _tensors(value: Any, out: list[torch.Tensor]) -> None:
    if isinstance(value, torch.Tensor):
        out.append(value)
    elif isinstance(value, (tuple, list)):
        for item in value:
            _tensors(item, out)
    elif isinstance(value, dict):
        for item in value.values():
            _tensors(item, out)


class HookStats:
    """Statistics the usual way: hooks, four reductions and one host read per tensor."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.records: list[dict[str, Any]] = []
        self.last = (0, 0)

    def record(self, name: str, part: str, value: Any) -> None:
        tensors: list[torch.Tensor] = []
        _tensors(value, tensors)
        for t in tensors:
            rec: dict[str, Any] = {"name": name, "part": part, "dtype": str(t.dtype), "shape": list(t.shape),
                                   "bytes": tensor_bytes(t)}
            if t.numel() and not t.is_complex():
                x = t if t.dtype in (torch.float32, torch.float64) else t.float()
                rec["Max"], rec["Min"], rec["Mean"], rec["Norm"] = torch.stack(
                    [x.max(), x.min(), x.mean(), x.norm()]).tolist()
            self.records.append(rec)

    def finish(self) -> None:
        self.last = (len(self.records), sum(r["bytes"] for r in self.records))
        with open(self.path, "w") as f:
            json.dump(self.records, f)
        self.records = []


def _module_hooks(model: nn.Module, stats: HookStats) -> list[Any]:
    handles = []
    for path, module in model.named_modules():
        if not path:
            continue
        name = f"Module.{path}.{type(module).__name__}"

        def pre(mod: nn.Module, args: Any, kwargs: Any, name: str = name) -> None:
            stats.record(name, "input_args", args)
            stats.record(name, "input_kwargs", kwargs)
            # msprobe's L0 records (and graphprobe's) carry the module's own parameters
            stats.record(name, "parameters", dict(mod.named_parameters(recurse=False)))

        def post(mod: nn.Module, args: Any, kwargs: Any, output: Any, name: str = name) -> None:
            stats.record(name, "output", output)

        handles.append(module.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(module.register_forward_hook(post, with_kwargs=True))
    return handles


def _l1_table() -> dict[Any, str] | None:
    try:
        from graphprobe.wiring.apis import resolve_apis
    except ImportError:
        return None
    return resolve_apis(())


class _ApiHooks(TorchFunctionMode):
    """The usual L1 way: wraps the APIs graphprobe's L1 records."""

    def __init__(self, entries: dict[Any, str], stats: HookStats) -> None:
        super().__init__()
        self.entries = entries
        self.stats = stats

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        entry = self.entries.get(func)
        if entry is None:
            return func(*args, **kwargs)
        self.stats.record(entry, "input_args", args)
        self.stats.record(entry, "input_kwargs", kwargs)
        out = func(*args, **kwargs)
        self.stats.record(entry, "output", out)
        return out


def _hooks(name: str, level: str, model: nn.Module, x: torch.Tensor, workdir: str, sync: Callable[[], None]) -> Variant:
    stats = HookStats(os.path.join(workdir, name.replace("+", "_") + ".json"))
    handles: list[Any] = []
    if level == "L0":
        handles = _module_hooks(model, stats)

        def forward() -> None:
            model(x)
    else:
        mode = _ApiHooks(_l1_table() or {}, stats)

        def forward() -> None:
            with mode:
                model(x)

    def step() -> None:
        forward()
        stats.finish()
        sync()

    def close() -> None:
        for h in handles:
            h.remove()

    return Variant(name=name, step=step, count=lambda: stats.last, close=close)


# -- CUDA graphs ---------------------------------------------------------------


def _capture(model: nn.Module, static: torch.Tensor) -> tuple[torch.cuda.CUDAGraph, Any]:
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):  # warm-up outside the graph, as torch.cuda.graph's docs advise
            model(static)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = model(static)
    torch.cuda.synchronize()
    return graph, out


class _SaveOutput(nn.Module):
    def __init__(self, model: nn.Module, path: str) -> None:
        super().__init__()
        self.model = model
        self.path = path

    def forward(self, x: torch.Tensor) -> Any:
        out = self.model(x)
        graphprobe.acl_save(out, self.path)
        return out


def _cudagraph(name: str, level: str | None, model: nn.Module, x: torch.Tensor, workdir: str) -> Variant:
    static = x.clone()
    if level is None:
        graph, _ = _capture(model, static)

        def step() -> None:
            graph.replay()
            torch.cuda.synchronize()

        return Variant(name=name, step=step, count=lambda: (0, 0))
    if level == "acl_save":
        root = os.path.join(workdir, "acl_save")
        os.makedirs(root, exist_ok=True)
        graph, out = _capture(_SaveOutput(model, os.path.join(root, "out.pt")), static)
        saved = (1, tensor_bytes(out))

        def step() -> None:
            graph.replay()
            torch.cuda.synchronize()

        flush = getattr(graphprobe, "flush", None)
        return Variant(name=name, step=step, count=lambda: saved, close=flush if callable(flush) else (lambda: None))
    dumper = _start_dumper(model, level, workdir, name)
    graph, _ = _capture(model, static)
    dumper.step(dump=False)  # warm-up and capture records: discarded
    return _with_dumper(name, graph.replay, dumper)


# -- building ------------------------------------------------------------------


def _fused_statistics(runner: Callable[..., Any]) -> Callable[..., Any]:
    """``runner`` with fused statistics switched on while it runs (dynamo
    guards on the switch, so each variant keeps its own graph)."""
    from graphprobe.wiring import fused_stats

    def run(*args: Any) -> Any:
        before = fused_stats.enabled()
        fused_stats.set_enabled(True)
        try:
            return runner(*args)
        finally:
            fused_stats.set_enabled(before)

    return run


def build_variant(name: str, base: nn.Module, x: torch.Tensor, workdir: str) -> Variant:
    """Builds ``name`` on its own copy of ``base`` (same weights) and input ``x``."""
    mode, level = VARIANTS[name]
    model = copy.deepcopy(base)
    sync = _sync_for(x.device)
    if mode == "cudagraph":
        return _cudagraph(name, level, model, x, workdir)
    if mode == "hooks":
        assert level is not None
        return _hooks(name, level, model, x, workdir, sync)
    dumper = _start_dumper(model, level, workdir, name) if level else None
    runner = torch.compile(model) if mode in ("compiled", "fused") else model
    if mode == "fused":
        runner = _fused_statistics(runner)
    if dumper is None:

        def step() -> None:
            runner(x)
            sync()

        return Variant(name=name, step=step, count=lambda: (0, 0))
    return _with_dumper(name, lambda: runner(x), dumper)

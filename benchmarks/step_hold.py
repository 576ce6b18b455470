"""How long ``AclGraphDumper.step()`` holds the caller's thread.

A real dumper is started on ``Sequential`` of ``ReLU`` modules whose L0
records (an input and an output per module, the ``Sequential`` included) make
exactly ``records`` tensor records per step, on a 64-element tensor (so the
statistics cost nothing). Each round runs the forward (not timed), waits
until the writer is idle (not timed), then times one call, interleaved:

- ``step``: ``dumper.step()``, what a training loop pays per iteration when
  the writer kept up (the usual case: one iteration is longer than writing
  one dump.json);
- ``collect``: ``dumper.step(dump=False)``, the same rows collected and
  discarded: the floor that collecting costs;
- ``back-to-back``: ``dumper.step()`` right after the forward, without
  waiting for the writer: step() then also waits for the previous step's
  dump.json (its errors are raised by the next step), which shows when one
  forward is shorter than one write.

Reported per record count: the medians and the median of the per-round
ratios ``step / collect``.

``--models transformer-s`` also times ``step()`` after each forward of a
model of :mod:`benchmarks.models` (eager, L0, ``torch.no_grad()`` as the
suite runs it): a model with parameters, whose wiring also counts parameter
gradients (issue 39 found step() walking every parameter there each step);
with ``--recorder``, ``FlightRecorder.step()`` against ``dumper.step()`` on it. Runs with any graphprobe build that has the public
dumper API, so the same file measures the code before and after a change.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import statistics
import tempfile
import time
from typing import Any, Callable

import torch

import graphprobe
from graphprobe import saving

__all__ = ["step_hold"]


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _one(records: int, device: torch.device, repeats: int, root: str) -> dict[str, Any]:
    if records < 2 or records % 2:
        raise ValueError(f"step_hold: records must be an even number >= 2, got {records}")
    # Sequential + (records/2 - 1) ReLUs, each with an input and an output.
    model = torch.nn.Sequential(*(torch.nn.ReLU() for _ in range(records // 2 - 1))).to(device)
    x = torch.ones(64, device=device)
    folder = os.path.join(root, f"r{records}")
    os.makedirs(folder)
    config = os.path.join(folder, "config.json")
    with open(config, "w") as f:
        json.dump({"task": "statistics", "level": "L0", "rank": [], "dump_path": os.path.join(folder, "dump")}, f)
    dumper = graphprobe.AclGraphDumper(config)
    graphprobe.AclGraphDumper._started = None  # the suite starts several dumpers in one process
    dumper.start(model)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    kinds: dict[str, list[float]] = {"step": [], "collect": [], "back-to-back": []}
    gc.collect()
    gc.disable()  # a collection would land in whichever call allocates next
    try:
        for r in range(repeats + 1):  # the first round creates the slots
            order = list(kinds)[r % 3:] + list(kinds)[: r % 3]
            for kind in order:
                model(x)
                sync()
                if kind != "back-to-back":
                    saving.flush()
                took = _timed(dumper.step if kind != "collect" else lambda: dumper.step(dump=False))
                if r:
                    kinds[kind].append(took)
        dumper.flush()
        written = len(json.load(open(os.path.join(dumper.config.dump_path, "step0", f"pid{os.getpid()}",
                                                  "dump.json")))["data"])
    finally:
        gc.enable()
        dumper.stop()
    ratios = [s / c for s, c in zip(kinds["step"], kinds["collect"]) if c > 0]
    return {
        "records": records,
        "entries": written,
        "step_s": statistics.median(kinds["step"]),
        "collect_s": statistics.median(kinds["collect"]),
        "back_to_back_s": statistics.median(kinds["back-to-back"]),
        "step_over_collect": statistics.median(ratios),
        "repeats": repeats,
    }


def model_step_hold(name: str, device: torch.device, repeats: int = 200) -> dict[str, Any]:
    """``step()`` and ``step(dump=False)`` after each forward of the model
    ``name`` of :mod:`benchmarks.models` (eager, L0, no_grad), writer idle,
    interleaved; medians as :func:`step_hold`'s rows."""
    from benchmarks.models import MODELS

    spec = MODELS[name]
    model, x = spec.build(device), spec.make_input(device)
    root = tempfile.mkdtemp(prefix="graphprobe-step-hold-")
    config = os.path.join(root, "config.json")
    with open(config, "w") as f:
        json.dump({"task": "statistics", "level": "L0", "rank": [], "dump_path": os.path.join(root, "dump")}, f)
    dumper = graphprobe.AclGraphDumper(config)
    graphprobe.AclGraphDumper._started = None
    dumper.start(model)
    try:
        took = _interleaved(model, x, {"step": dumper.step, "collect": lambda: dumper.step(dump=False)}, repeats,
                            saving.flush)
        dumper.flush()
    finally:
        dumper.stop()
        shutil.rmtree(root, ignore_errors=True)
    return {"model": name, "step_s": took["step"], "collect_s": took["collect"], "repeats": repeats}


def _interleaved(model: torch.nn.Module, x: torch.Tensor, calls: dict[str, Callable[[], Any]], repeats: int,
                 settle: Callable[[], None]) -> dict[str, float]:
    """Each round: per call (in alternating order) a forward and ``settle()``,
    not timed, then the call, timed; the medians (s) over ``repeats`` rounds
    after three that create the slots. The garbage collector is off inside (a
    collection would land in whichever call allocates next)."""
    times: dict[str, list[float]] = {k: [] for k in calls}
    gc.collect()
    gc.disable()
    try:
        with torch.no_grad():
            for r in range(repeats + 3):
                for kind in (list(calls) if r % 2 else list(calls)[::-1]):
                    model(x)
                    settle()
                    took = _timed(calls[kind])
                    if r >= 3:
                        times[kind].append(took)
    finally:
        gc.enable()
    return {k: statistics.median(v) for k, v in times.items()}


def recorder_step_hold(name: str, device: torch.device, repeats: int = 200) -> dict[str, Any]:
    """``FlightRecorder.step()`` and ``dumper.step()`` on one dumper, after
    each forward of the model ``name`` (eager, L0, no_grad), interleaved; the
    writer and the recorder's thread idle before each timed call (as after a
    real iteration, which is longer than reading one step). Issue 39: the
    recorder's step() on the caller's thread <= 0.1 ms. The rounds timed
    with ``dumper.step()`` alone are steps the recorder never reads."""
    from benchmarks.models import MODELS

    from graphprobe.history.recorder import FlightRecorder

    spec = MODELS[name]
    model, x = spec.build(device), spec.make_input(device)
    root = tempfile.mkdtemp(prefix="graphprobe-step-hold-")
    dumper = graphprobe.AclGraphDumper(dump_path=os.path.join(root, "dump"), level="L0")
    graphprobe.AclGraphDumper._started = None
    dumper.start(model)
    rec = FlightRecorder(dumper, os.path.join(root, "history"), every=100, keep=2, rule=None)

    def settle() -> None:
        saving.flush()
        while rec._outbox.qsize() < rec._in_flight:  # the recorder's thread done
            time.sleep(0.0002)

    try:
        took = _interleaved(model, x, {"recorder": rec.step, "dumper": dumper.step}, repeats, settle)
        rec.close()
    finally:
        dumper.stop()
        shutil.rmtree(root, ignore_errors=True)
    return {"model": name, "recorder_s": took["recorder"], "dumper_s": took["dumper"], "repeats": repeats}


def step_hold(device: torch.device, record_counts: tuple[int, ...] = (16, 100), repeats: int = 200) -> list[dict[str, Any]]:
    """One row per record count (see the module docstring). Starts and stops
    its own dumpers: call it while no other dumper is started."""
    root = tempfile.mkdtemp(prefix="graphprobe-step-hold-")
    try:
        with torch.no_grad():
            return [_one(n, device, repeats, root) for n in record_counts]
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Time step() on the caller's thread (see the module docstring).")
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--records", type=int, nargs="+", default=[16, 100])
    parser.add_argument("--models", nargs="*", default=[], help="models of benchmarks.models, e.g. transformer-s")
    parser.add_argument("--recorder", action="store_true",
                        help="with --models: FlightRecorder.step() against dumper.step() (issue 39)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"graphprobe from {os.path.dirname(graphprobe.__file__)}")
    if args.models:
        import sys

        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run as a script
    for name in args.models:
        if args.recorder:
            row = recorder_step_hold(name, torch.device("cpu"), args.repeats)
            print(f"{name}: FlightRecorder.step {row['recorder_s'] * 1e3:.3f} ms, "
                  f"dumper.step {row['dumper_s'] * 1e3:.3f} ms")
            continue
        row = model_step_hold(name, torch.device("cpu"), args.repeats)
        print(f"{name}: step {row['step_s'] * 1e3:.3f} ms, step(dump=False) {row['collect_s'] * 1e3:.3f} ms")
    for row in step_hold(torch.device("cpu"), tuple(args.records), args.repeats):
        print(f"{row['records']:4d} records ({row['entries']} entries): step {row['step_s'] * 1e3:.3f} ms, "
              f"collect only {row['collect_s'] * 1e3:.3f} ms, step/collect {row['step_over_collect']:.2f}x, "
              f"back-to-back {row['back_to_back_s'] * 1e3:.3f} ms")

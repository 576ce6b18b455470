"""The demo loop: record a reference in eager mode, record the run under test
in graph mode (CUDA graphs on a GPU, torch.compile otherwise), optionally with
an injected fault, and compare the two."""

from __future__ import annotations

import copy
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from graphprobe.config import DEFAULT_LEVEL, LEVELS
from graphprobe.dump_folder import step_folders
from graphprobe.demo.model import build_demo_model, demo_inputs
from graphprobe.output_files import make_dirs, write_text_atomic

__all__ = ["DemoOptions", "DemoResult", "fault_found", "parse_fault", "run_demo"]


@dataclass
class DemoOptions:
    """What ``graphprobe demo`` runs."""

    out: str = "./graphprobe_demo"
    level: str = DEFAULT_LEVEL
    device: str = "auto"  # auto: cuda when available
    steps: int = 3
    inject_fault: str | None = None  # "MODULE[:SCALE]", e.g. "layers.1.mlp:2.0"
    progress: Callable[[str], None] | None = None


@dataclass
class DemoResult:
    """Where the demo wrote its outputs and what the compare found.

    ``found`` (with an injected fault) says whether every compared step names
    the fault, ``found_how`` how or why not (see :func:`fault_found`)."""

    graph_mode: str
    bench_dir: str
    target_dir: str
    compare: Any = None
    first_divergence: str | None = None
    faulty_entry_prefix: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    found: bool = False
    found_how: str = ""


def fault_found(outcome: Any, prefix: str) -> tuple[bool, str]:
    """Whether one pair's first divergence names the injected fault, and how.

    The fault is a forward hook that scales the module's output in the run
    under test only. Two ways of naming it count, and nothing else:

    * L0 and mix record the module itself, after the hook: its entry
      (``prefix``, e.g. ``Module.layers.1.mlp.FeedForward.forward.``) must be
      the first divergence, with the output as the cause (its inputs agree);
    * L1 records no modules: the hook's multiply is a call recorded only in
      the run under test (the one difference between the two models), so
      the first divergence must be the first recorded call fed by it, of the
      kind "input from unrecorded code", with that target-only call named as
      the place the error came from.
    """
    d = getattr(outcome, "divergence", None)
    if d is None:
        return False, "no first divergence"
    if d.entry.startswith(prefix):
        if "output" in d.kinds:
            return True, f"the faulty module's call {d.entry} is the first divergence (its output; its inputs agree)"
        return False, f"{d.entry} is the first divergence, but as {', '.join(d.kinds)}, not for its output"
    if "unrecorded-input" in d.kinds and d.unmatched_between:
        return True, (f"{d.entry} is the first divergence: its input comes from "
                      f"{', '.join(d.unmatched_between)}, recorded only in the run under test (the injected "
                      f"multiply), after {d.last_agreeing or 'the start'}, the last record that agrees")
    return False, f"the first divergence is {d.entry} ({', '.join(d.kinds)}), not the faulty module nor fed by it"


def parse_fault(spec: str, model: torch.nn.Module) -> tuple[str, float]:
    """``MODULE[:SCALE]`` → (module path, scale); the module must exist."""
    path, _, scale_text = spec.partition(":")
    scale = 2.0
    if scale_text:
        try:
            scale = float(scale_text)
        except ValueError:
            raise ValueError(f"--inject-fault: scale {scale_text!r} is not a number (form: MODULE[:SCALE])") from None
    names = dict(model.named_modules())
    if not path or path not in names:
        choices = ", ".join(n for n in names if n)
        raise ValueError(f"--inject-fault: no module {path!r} in the demo model; choose one of: {choices}")
    return path, scale


def _resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: CUDA is not available on this machine")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"--device: {device!r} is not supported (cpu, cuda, auto)")
    return dev


def _write_config(path: str, dump_path: str, level: str) -> str:
    write_text_atomic(path, json.dumps({"task": "statistics", "dump_path": dump_path, "level": level, "rank": []}))
    return path


_DEMO_CONFIG_KEYS = {"task", "dump_path", "level", "rank"}


def _written_by_demo(config_path: str, dump_dir: str) -> bool:
    """Whether ``config_path`` is the config an earlier demo wrote for
    ``dump_dir`` (:func:`_write_config`'s keys, that dump_path)."""
    try:
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError):
        return False
    return (isinstance(config, dict) and set(config) == _DEMO_CONFIG_KEYS
            and isinstance(config.get("dump_path"), str) and os.path.abspath(config["dump_path"]) == dump_dir)


def _clear_earlier_demo(out: str, sides: dict[str, str]) -> None:
    """Removes the ``step*`` folders of an earlier demo run into ``out`` (an
    earlier run's steps next to this run's would be two pid folders per step,
    which compare refuses to pair by guessing).

    Only what a demo wrote is removed: ``{out}/{side}/step*`` when
    ``{out}/{side}.json`` is the config the demo writes for that folder. When
    ``--out`` holds anything else under those names (a user's own dumps in
    ``eager/`` or ``graph/``, a user's ``eager.json``), the demo would remove
    or overwrite it: a ValueError naming it, before anything is changed."""
    doomed = []
    for side, dump_dir in sides.items():
        config_path = os.path.join(out, f"{side}.json")
        steps = step_folders(dump_dir)
        ours = _written_by_demo(config_path, dump_dir)
        if os.path.lexists(config_path) and not ours:
            raise ValueError(f"--out {out}: {config_path} exists and is not a config the demo wrote (it would be "
                             "overwritten); allowed: a new or empty folder, or one an earlier demo wrote")
        if steps and not ours:
            raise ValueError(f"--out {out}: {dump_dir} holds step folders ({', '.join(steps[:5])}"
                             f"{', ...' if len(steps) > 5 else ''}) that no demo wrote ({config_path} is missing), "
                             "and the demo would remove them; allowed: a new or empty folder, or one an earlier "
                             "demo wrote")
        # A link (the dump folder, or a step folder in it) is not followed: the demo did not make it, and what
        # it points at is not the demo's to remove.
        links = [p for p in (dump_dir, *(os.path.join(dump_dir, n) for n in steps)) if os.path.islink(p)]
        if links:
            raise ValueError(f"--out {out}: {links[0]} is a symbolic link (to {os.readlink(links[0])!r}); the demo "
                             "removes an earlier demo's step folders and does not follow links it did not make: "
                             "nothing was changed; allowed: a new or empty folder, or one an earlier demo wrote")
        doomed.extend(os.path.join(dump_dir, name) for name in steps)
    for folder in doomed:
        shutil.rmtree(folder)


def _record(model, inputs, config_path, runner_factory, say) -> None:
    from graphprobe.dumper import AclGraphDumper

    dumper = AclGraphDumper(config_path)
    dumper.start(model)
    run = runner_factory(model, inputs[0])
    dumper.step(dump=False)  # warm-up / compile / capture runs are not data
    for i, tokens in enumerate(inputs):
        run(tokens)
        dumper.step()
        say(f"    step {i} recorded")
    dumper.stop()


def _eager_runner(model, example):
    @torch.no_grad()
    def run(tokens):
        return model(tokens)

    return run


def _compiled_runner(model, example):
    compiled = torch.compile(model, fullgraph=True)
    with torch.no_grad():
        compiled(example)  # compile outside the recorded steps

    @torch.no_grad()
    def run(tokens):
        return compiled(tokens)

    return run


def _cuda_graph_runner(model, example):
    static = example.clone()
    with torch.no_grad():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            model(static)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            model(static)

    def run(tokens):
        static.copy_(tokens)
        graph.replay()

    return run


def run_demo(options: DemoOptions) -> DemoResult:
    """Runs the demo and returns where everything went."""
    say = options.progress or (lambda msg: print(msg, file=sys.stderr, flush=True))
    if options.steps < 1:
        raise ValueError(f"--steps: got {options.steps}; allowed: 1 or more")
    if options.level not in LEVELS:
        raise ValueError(f"--level: got {options.level!r}; allowed: {', '.join(LEVELS)}")
    device = _resolve_device(options.device)
    graph_mode = "cuda-graph" if device.type == "cuda" else "torch.compile"
    make_dirs(options.out)
    out = os.path.abspath(options.out)
    bench_dir, target_dir = os.path.join(out, "eager"), os.path.join(out, "graph")
    base = build_demo_model().to(device)
    inputs = [t.to(device) for t in demo_inputs(options.steps)]
    fault = parse_fault(options.inject_fault, base) if options.inject_fault else None

    t0 = time.time()
    _clear_earlier_demo(out, {"eager": bench_dir, "graph": target_dir})
    say(f"[1/3] reference: eager on {device}, level {options.level}, {options.steps} steps -> {bench_dir}")
    _record(copy.deepcopy(base), inputs, _write_config(os.path.join(out, "eager.json"), bench_dir, options.level),
            _eager_runner, say)

    target = copy.deepcopy(base)
    prefix = None
    if fault is not None:
        path, scale = fault
        module = target.get_submodule(path)
        # Registered before start(): it runs before graphprobe's output probe,
        # so the record of this module itself shows the fault.
        module.register_forward_hook(lambda mod, args, output: output * scale)
        prefix = f"Module.{path}.{type(module).__name__}.forward."
        say(f"      injecting a fault: output of '{path}' scaled by {scale} in the graph-mode run only")
    say(f"[2/3] under test: {graph_mode} on {device} -> {target_dir}")
    runner = _cuda_graph_runner if graph_mode == "cuda-graph" else _compiled_runner
    _record(target, inputs, _write_config(os.path.join(out, "graph.json"), target_dir, options.level), runner, say)

    say("[3/3] compare: graph mode (target) against eager (bench)")
    from graphprobe.compare import compare

    run = compare(target_dir, bench_dir, os.path.join(out, "compare"), progress=False)
    first = next((o.first_divergence for o in run.outcomes if o.first_divergence), None)
    result = DemoResult(graph_mode, bench_dir, target_dir, run, first, prefix)
    if prefix is not None:
        # Every step must name it (each step is its own pair).
        checks = [(o.pair.label, *fault_found(o, prefix)) for o in run.outcomes]
        result.found = bool(checks) and all(ok for _, ok, _ in checks)
        missed = [f"{label}: {how}" for label, ok, how in checks if not ok]
        result.found_how = "; ".join(missed) if missed else (checks[0][2] if checks else "nothing was compared")
    result.extra["seconds"] = time.time() - t0
    return result

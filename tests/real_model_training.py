"""Recording and judging the pairs of the first-divergence matrix (issue #35):
forward passes (one dump per phase) and training steps (forward, backward,
AdamW step, ``dumper.step()`` after each), eager against a compiled backend;
each compiled dump compared with the eager one by graphprobe's compare (its
defaults) and judged against tests/real_model_faults.py's reference.

Used by tests/test_first_divergence_matrix.py (reduced set) and
scripts/real_model_matrix.py (the full matrix and its table).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

import real_model_faults as F
import real_models as rm

# Where the lowering fault needs inductor and the switchable faults do not:
# aot_eager runs eager's kernels, so their pairs carry only the fault.
SWITCH_BACKEND = "aot_eager"


# Clean eager-vs-inductor pairs. Inference: one forward. Training: two AdamW
# steps, both compared (each a pair); the key-projection biases (BERT, ViT,
# OPT, DistilBERT, GPT-2's fused c_attn) and the final LayerNorms / norms
# (OPT, GPT-2, GPT-NeoX, ViT, Llama, Mistral) are among them.
CLEAN = [
    ("gpt2", "fp32", "L0"), ("gpt2", "bf16", "mix"), ("gpt_neox", "fp32", "mix"), ("gpt_neox", "bf16", "L0"),
    ("llama", "fp32", "mix"), ("llama", "bf16", "L0"), ("mistral", "fp32", "L0"), ("mistral", "bf16", "mix"),
    ("opt", "fp32", "mix"), ("opt", "bf16", "L0"), ("bert", "fp32", "L0"), ("bert", "bf16", "mix"),
    ("distilbert", "fp32", "mix"), ("vit", "bf16", "L0"), ("moe", "fp32", "mix"), ("qwen2", "bf16", "mix"),
]
CLEAN_TRAIN = [
    ("bert", "fp32", "L0"), ("bert", "bf16", "mix"), ("vit", "fp32", "mix"), ("opt", "fp32", "L0"),
    ("opt", "bf16", "mix"), ("distilbert", "fp32", "L0"), ("llama", "fp32", "L0"), ("gpt2", "fp32", "mix"),
]

def loss_of(out: Any) -> torch.Tensor:
    """A scalar loss from every floating output (a parameter whose output
    the loss left out has ``p.grad`` None in eager mode but zeros under
    torch.compile, which would make the record lists differ for torch's
    reasons)."""
    leaves = [out] if isinstance(out, torch.Tensor) else list(out.to_tuple() if hasattr(out, "to_tuple") else out)
    floats = [t for t in leaves if isinstance(t, torch.Tensor) and t.is_floating_point()]
    if LOSS == "head":
        return sum(_head_loss(t) for t in floats)  # type: ignore[return-value]
    return sum(t.float().pow(2).mean() for t in floats)  # type: ignore[return-value]


# "square-mean": the mean square of each output. After a final LayerNorm
# that is ~1 whatever its input (scale invariant), so the whole backward is
# rounding residue: the hardest case for the first divergence's floors.
# "head": cross entropy through a fixed random linear head, as a language
# model's loss is; the gradients then carry signal, not residue.
LOSS = "square-mean"

# Mixed precision as most training runs it: float32 weights and optimizer,
# the forward and the loss under torch.autocast with this dtype (None: off).
# The model's own dtype ("fp32") is then that of its master weights.
AUTOCAST: torch.dtype | None = None
# Training steps in train mode (dropout, stochastic depth and BatchNorm's
# batch statistics on), each run's step k seeded with 1000 + k (torch and
# numpy), inductor's random numbers drawn as eager mode draws them
# (torch._inductor.config.fallback_random) and compiled numpy draws taken
# from numpy's generator: what a user comparing clean training with dropout
# on must set up for the two runs to draw alike.
TRAIN_MODE = False


def _mode(backend: str) -> str:
    """A training case's mode: the backend, the loss when not the default, autocast when on."""
    mode = backend if LOSS == "square-mean" else f"{backend}, {LOSS} loss"
    return mode if AUTOCAST is None else f"{mode}, autocast {str(AUTOCAST).removeprefix('torch.')}"


def _head_loss(t: torch.Tensor) -> torch.Tensor:
    g = torch.Generator().manual_seed(t.shape[-1])
    w = torch.randn(t.shape[-1], 16, generator=g) / t.shape[-1] ** 0.5
    flat = t.float().reshape(-1, t.shape[-1])
    target = torch.randint(0, 16, (flat.shape[0],), generator=g)
    return torch.nn.functional.cross_entropy(flat @ w, target)


def _first_float(out: Any) -> torch.Tensor:
    leaves = [out] if isinstance(out, torch.Tensor) else list(out.to_tuple() if hasattr(out, "to_tuple") else out)
    return next(t for t in leaves if isinstance(t, torch.Tensor) and t.is_floating_point())


def _config(out_dir: str, level: str) -> str:
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    path = os.path.join(out_dir, "config.json")
    with open(path, "w") as f:
        json.dump({"dump_path": os.path.join(out_dir, "dump"), "level": level}, f)
    return path


def _dump(out_dir: str, step: int) -> str:
    (found,) = glob.glob(os.path.join(out_dir, "dump", f"step{step}", "*", "dump.json"))
    return found


@dataclass
class Run:
    """The dump.json of each step and the model's first floating output
    (float64) of each step (forward) or the loss (training)."""

    dumps: list[str]
    outputs: list[torch.Tensor]


def record(model: nn.Module, inputs: rm.Inputs, level: str, backend: Any, out_dir: str,
           phases: list[Callable[[], Any]], train: bool = False, fullgraph: bool = True,
           context: Any = None) -> Run:
    """Wires ``model`` at ``level`` and runs one step per phase (the phase
    function runs first: it switches a fault), eagerly (``backend`` "eager")
    or compiled with ``backend``; forward steps under no_grad, training steps
    forward + backward + AdamW."""
    import graphprobe

    args, kwargs = inputs
    torch._dynamo.reset()
    dumper = graphprobe.AclGraphDumper(_config(out_dir, level))
    dumper.start(model)
    outputs = []
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3) if train else None
    random_alike = train and TRAIN_MODE
    if random_alike:
        model.train()
    try:
        runner = model if backend == "eager" else torch.compile(model, backend=backend, fullgraph=fullgraph)
        with context if context is not None else rm.inductor_pass(None), \
                _random_as_eager() if random_alike else contextlib.nullcontext():
            for k, phase in enumerate(phases):
                phase()
                if random_alike:
                    # numpy too: transformers' SpecAugment (wav2vec2, HuBERT) draws its masks with it.
                    torch.manual_seed(1000 + k)
                    np.random.seed(1000 + k)
                if train:
                    with torch.autocast("cpu", dtype=AUTOCAST) if AUTOCAST is not None else contextlib.nullcontext():
                        loss = loss_of(runner(*args, **kwargs))
                    loss.backward()
                    opt.step()  # type: ignore[union-attr]
                    opt.zero_grad()  # type: ignore[union-attr]
                    outputs.append(loss.detach().double())
                else:
                    with torch.no_grad():
                        outputs.append(_first_float(runner(*args, **kwargs)).detach().double())
                dumper.step()
    finally:
        dumper.stop()
        graphprobe.flush()
        torch._dynamo.reset()
    return Run([_dump(out_dir, s) for s in range(len(phases))], outputs)


def _random_as_eager() -> Any:
    import torch._dynamo.config as dynamo_config
    import torch._inductor.config as inductor_config

    # Compiled numpy draws (SpecAugment's masks) come from torch's generator
    # unless dynamo is told to use numpy's.
    stack = contextlib.ExitStack()
    stack.enter_context(inductor_config.patch(fallback_random=True))
    stack.enter_context(dynamo_config.patch(use_numpy_random_stream=True))
    return stack


def rel_l2(a: torch.Tensor, b: torch.Tensor) -> float:
    """||a - b|| / ||b||."""
    return float((a - b).norm() / b.norm().clamp_min(1e-300))


@dataclass
class Case:
    """One compared pair and its judgement."""

    model: str
    dtype: str
    level: str
    fault: str  # a fault kind, "clean" (inference) or "clean-train"
    mode: str
    step: int = 0
    expected: str | None = None
    how: str = ""  # exact | consumer | none
    got: str | None = None
    gate_fails: bool | None = None
    # named exactly | first consumer | missed | wrong place | silent | false
    # alarm | error | no effect (a fault that changes no record of the level
    # in the eager reference: nothing to name; a name given is a wrong place)
    outcome: str = ""
    effect: float | None = None  # rel. L2 change of the model's output (fault vs eager)
    noise: float | None = None  # the same for a clean compile of the pair (where measured)
    message: str = ""
    seconds: float = 0.0
    cpu: float | None = None  # CPU seconds of this process (about the wall time on a quiet machine)
    error: str | None = None
    target: str | None = None
    bench: str | None = None

    @property
    def ok(self) -> bool:
        """As the acceptance wants: a fault named at its place, a clean pair silent."""
        return self.outcome in ("named exactly", "first consumer", "silent", "no effect")


def judge(case: Case, target: str, bench: str, out_dir: str) -> Case:
    """Compares ``target`` with ``bench`` (compare's defaults) and sets the outcome."""
    case.target, case.bench = target, bench
    res = rm.compare_dumps(target, bench, out_dir)
    case.got, case.gate_fails = res.first_divergence, bool(res.gate_error)
    if case.fault.startswith("clean") or case.fault == "control":
        case.outcome = "silent" if case.got is None and not res.gate_error else "false alarm"
        if case.got is None and res.gate_error:
            case.message = "; ".join(res.gate_error)[:300]
    elif case.how == "none":
        case.outcome = "no effect" if case.got is None else "wrong place"
    elif case.got is None:
        case.outcome = "missed"
    elif case.got == case.expected:
        case.outcome = "named exactly" if case.how == "exact" else "first consumer"
    else:
        case.outcome = "wrong place"
    return case


def _sub(root: str, *parts: str) -> str:
    return os.path.join(root, *parts)


def forward_faults(name: str, dt: str, level: str, root: str, kinds: tuple[str, ...] = F.FAULT_KINDS) -> list[Case]:
    """Every applicable forward fault of ``kinds`` on one model, dtype and
    level: one eager bench, one ``aot_eager`` compile serving the switchable
    faults (and a clean control step), one compile per compiler fault."""
    arch = F.ARCHS[name]
    dtype_kinds = [k for k in kinds if k not in ("grad",) and F.applicable(arch, k)]
    switchable = tuple(k for k in dtype_kinds if k in F.SWITCHABLE)
    cases: list[Case] = []
    cpu0 = time.process_time()
    model, inputs = F.build(name, dt)
    sw = F.wire_switches(model, arch, dt, switchable)
    try:
        bench = record(model, inputs, level, "eager", _sub(root, "eager"), [sw.off])
    finally:
        sw.uninstall()
    expected = {k: F.differential_trace(name, dt, k) for k in dtype_kinds}

    def new(kind: str, mode: str) -> Case:
        e = expected[kind]
        return Case(name, dt, level, kind, mode, expected=e.place[level], how=e.how[level])

    if switchable:
        t = time.time()
        model, _ = F.build(name, dt)
        sw = F.wire_switches(model, arch, dt, switchable)
        labels = ["control"] + list(switchable)
        try:
            phases = [sw.off] + [(lambda k=k: sw.on(k)) for k in switchable]
            run = record(model, inputs, level, SWITCH_BACKEND, _sub(root, "switch"), phases)
        finally:
            sw.off()
            sw.uninstall()
        each = (time.time() - t) / len(labels)
        control = Case(name, dt, level, "control", SWITCH_BACKEND, expected=None, how="none")
        judge(control, run.dumps[0], bench.dumps[0], _sub(root, "cmp-control"))
        control.effect = rel_l2(run.outputs[0], bench.outputs[0])
        control.seconds = each
        cases.append(control)
        for i, k in enumerate(switchable, start=1):
            c = judge(new(k, SWITCH_BACKEND), run.dumps[i], bench.dumps[0], _sub(root, f"cmp-{k}"))
            c.effect, c.noise, c.seconds = rel_l2(run.outputs[i], bench.outputs[0]), control.effect, each
            cases.append(c)
    if "decomp" in dtype_kinds:
        t = time.time()
        model, _ = F.build(name, dt)
        backend = F.wrong_decomposition_backend(arch.norm, rm.FAULT_SCALE[dt])
        run = record(model, inputs, level, backend, _sub(root, "decomp"), [lambda: None])
        c = judge(new("decomp", "aot+decomp"), run.dumps[0], bench.dumps[0], _sub(root, "cmp-decomp"))
        c.effect, c.seconds = rel_l2(run.outputs[0], bench.outputs[0]), time.time() - t
        cases.append(c)
    if "lowering" in dtype_kinds:
        t = time.time()
        model, _ = F.build(name, dt)
        with F.wrong_lowering(arch.act, rm.FAULT_SCALE[dt]) as backend:
            run = record(model, inputs, level, backend, _sub(root, "lowering"), [lambda: None],
                         context=contextlib.nullcontext())
        c = judge(new("lowering", "inductor+lowering"), run.dumps[0], bench.dumps[0], _sub(root, "cmp-lowering"))
        c.effect, c.seconds = rel_l2(run.outputs[0], bench.outputs[0]), time.time() - t
        cases.append(c)
    for c in cases:
        c.seconds = round(c.seconds, 1)
        c.cpu = round((time.process_time() - cpu0) / len(cases), 1)  # the job's CPU time, shared out
    return cases


def grad_fault(name: str, dt: str, level: str, root: str) -> Case:
    """The backward-only gradient scale: one eager training step (bench)
    against one ``aot_eager`` training step with the fault on; step 0."""
    arch = F.ARCHS[name]
    t, cpu0 = time.time(), time.process_time()
    e = F.grad_expected(name, dt, (level,))
    runs = []
    for mode in ("eager", SWITCH_BACKEND):
        model, inputs = F.build(name, dt)
        sw = F.wire_switches(model, arch, dt, ("grad",))
        try:
            phase = sw.off if mode == "eager" else (lambda: sw.on("grad"))
            runs.append(record(model, inputs, level, mode, _sub(root, f"train-{mode}"), [phase], train=True,
                               fullgraph=False))
        finally:
            sw.off()
            sw.uninstall()
    c = Case(name, dt, level, "grad", _mode(SWITCH_BACKEND), expected=e.place[level], how=e.how[level])
    judge(c, runs[1].dumps[0], runs[0].dumps[0], _sub(root, "cmp-grad"))
    c.effect = rel_l2(runs[1].outputs[0], runs[0].outputs[0])  # the loss: forward untouched, ~0
    c.seconds, c.cpu = round(time.time() - t, 1), round(time.process_time() - cpu0, 1)
    return c


def clean_inference(name: str, dt: str, level: str, root: str, backend: str = "inductor") -> Case:
    """Eager vs ``backend``, one no-grad forward of the unmodified model."""
    t, cpu0 = time.time(), time.process_time()
    runs = []
    for mode in ("eager", backend):
        model, inputs = F.build(name, dt)
        runs.append(record(model, inputs, level, mode, _sub(root, f"clean-{mode}"), [lambda: None]))
    c = Case(name, dt, level, "clean", backend, how="none")
    judge(c, runs[1].dumps[0], runs[0].dumps[0], _sub(root, "cmp-clean"))
    c.effect = rel_l2(runs[1].outputs[0], runs[0].outputs[0])
    c.seconds, c.cpu = round(time.time() - t, 1), round(time.process_time() - cpu0, 1)
    return c


def clean_training(name: str, dt: str, level: str, root: str, backend: str = "inductor",
                   steps: int = 2) -> list[Case]:
    """Eager vs ``backend``, ``steps`` AdamW training steps of the
    unmodified model; one case per step (step 1 runs on weights that one
    AdamW update already moved apart by the step-0 noise)."""
    t, cpu0 = time.time(), time.process_time()
    runs = []
    for mode in ("eager", backend):
        model, inputs = F.build(name, dt)
        runs.append(record(model, inputs, level, mode, _sub(root, f"train-clean-{mode}"),
                           [lambda: None] * steps, train=True, fullgraph=False))
    cases = []
    for s in range(steps):
        c = Case(name, dt, level, "clean-train", _mode(backend), step=s, how="none")
        judge(c, runs[1].dumps[s], runs[0].dumps[s], _sub(root, f"cmp-train-{s}"))
        c.effect = rel_l2(runs[1].outputs[s], runs[0].outputs[s])
        c.seconds = round((time.time() - t) / steps, 1)
        c.cpu = round((time.process_time() - cpu0) / steps, 1)
        cases.append(c)
    return cases


def describe(c: Case) -> str:
    """One line per case, for logs and assertion messages."""
    return (f"{c.model} {c.dtype} {c.level} {c.fault}{'@' + str(c.step) if c.fault == 'clean-train' else ''} "
            f"[{c.mode}]: {c.outcome}; got {c.got}; expected {c.expected} ({c.how}); "
            f"--fail-on error {'fails' if c.gate_fails else 'passes'}; effect {c.effect}")


"""This session's features checked on third-party models (transformers,
tiny configs, random weights, no downloads): backward records in training,
checksums, replay and statistics.slice.

Every reference is computed here, independently of graphprobe's dumps:
float64 statistics of ``p.grad`` and of sliced tensors, losses and gradients
of the same model trained without a dumper, the known injection site of a
graph-only fault. Used by tests/test_real_models_features.py (reduced) and
scripts/real_model_features.py (the full table,
benchmarks/results/real_model_features.md).
"""

from __future__ import annotations

import copy
import glob
import json
import math
import os
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn

import real_models as rm
from reference import stats64

TESTS = os.path.dirname(os.path.abspath(__file__))
RTOL = 1e-6  # the CPU statistics kernel sums float32 blocks: ~1e-7 relative (tests/test_backward.py)


# ---------------------------------------------------------------------------
# models and inputs (batch 2: statistics.slice {"end": 1} must cut something)


def _batch2(name: str, value: Any) -> Any:
    """A batch-2 version of a batch-1 input: a second, different row."""
    if not isinstance(value, torch.Tensor) or value.dim() == 0 or value.shape[0] != 1:
        return value
    if "mask" in name:
        second = value.clone()
    elif value.dtype == torch.long:
        second = (value * 7 + 3) % 64
    else:
        second = value * 0.5 + 0.25
    return torch.cat([value, second])


def build(name: str, dtype: torch.dtype = torch.float32) -> tuple[nn.Module, rm.Inputs]:
    """``name``'s model (weights from seed 0, eval mode: no dropout) and batch-2 inputs."""
    model, (args, kwargs) = rm.build(name, dtype)
    return model, (tuple(_batch2("arg", a) for a in args), {k: _batch2(k, v) for k, v in kwargs.items()})


def loss_of(out: Any) -> torch.Tensor:
    """A scalar loss from every floating output (last hidden state, pooler
    output, encoder output): a parameter whose output the loss left out has
    ``p.grad`` None in eager mode but zeros under torch.compile (AOTAutograd
    materialises the unused outputs' gradients), which would make the record
    lists differ for torch's reasons, not graphprobe's."""
    leaves = [out] if isinstance(out, torch.Tensor) else list(out.to_tuple() if hasattr(out, "to_tuple") else out)
    floats = [t for t in leaves if isinstance(t, torch.Tensor) and t.is_floating_point()]
    return sum(t.float().pow(2).mean() for t in floats)  # type: ignore[return-value]


def _write_config(out_dir: str, **fields: Any) -> str:
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "config.json")
    with open(path, "w") as f:
        json.dump({"dump_path": os.path.join(out_dir, "dump"), **fields}, f)
    return path


def dump_json(out_dir: str, step: int) -> str:
    """The step's dump.json path."""
    (found,) = glob.glob(os.path.join(out_dir, "dump", f"step{step}", "*", "dump.json"))
    return found


def load(out_dir: str, step: int) -> dict[str, Any]:
    """dump.json's ``data`` of a step."""
    with open(dump_json(out_dir, step)) as f:
        return json.load(f)["data"]


def signature(value: Any) -> Any:
    """A record without its numbers: names, order, shapes, dtypes."""
    if isinstance(value, dict):
        if "dtype" in value and "type" in value:
            return (value.get("type"), value.get("dtype"), value.get("shape"))
        return [(k, signature(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [signature(v) for v in value]
    return value if not isinstance(value, float) else "float"


# ---------------------------------------------------------------------------
# 1. training: backward records


@dataclass
class TrainRun:
    """What one training run produced."""

    losses: list[torch.Tensor]
    grads: list[dict[str, torch.Tensor]]  # per step: name -> p.grad (copied, own dtype)
    warnings: list[str]
    out_dir: str | None
    params_after: dict[str, torch.Tensor] = field(default_factory=dict)


def train(name: str, mode: str, out_dir: str | None, level: str = "L0", steps: int = 2,
          dtype: torch.dtype = torch.float32, extra: dict[str, Any] | None = None) -> TrainRun:
    """``steps`` AdamW steps of ``name`` in ``mode``; with a dumper at
    ``level`` writing to ``out_dir`` (None: no dumper). Warnings are recorded."""
    import graphprobe

    torch._dynamo.reset()
    model, (args, kwargs) = build(name, dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    dumper = None
    losses, grads = [], []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if out_dir is not None:
            dumper = graphprobe.AclGraphDumper(_write_config(out_dir, level=level, **(extra or {})))
            dumper.start(model)
        try:
            run: Callable[..., Any] = model if mode == "eager" else torch.compile(model, backend=mode)
            for _ in range(steps):
                loss = loss_of(run(*args, **kwargs))
                loss.backward()
                losses.append(loss.detach().clone())
                grads.append({n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None})
                opt.step()
                opt.zero_grad()
                if dumper is not None:
                    dumper.step()
        finally:
            if dumper is not None:
                dumper.stop()
                graphprobe.flush()
            torch._dynamo.reset()
    texts = [f"{w.category.__name__}: {w.message} ({os.path.basename(w.filename)}:{w.lineno})" for w in caught]
    return TrainRun(losses, grads, texts, out_dir, {n: p.detach().clone() for n, p in model.state_dict().items()})


def grad_stat_errors(run: TrainRun) -> tuple[int, float, list[str]]:
    """Every parameters_grad record against float64 statistics of the
    ``p.grad`` the run copied: (records checked, worst relative error,
    problems: a parameter with a gradient but no record, or the reverse)."""
    checked, worst, problems = 0, 0.0, []
    for step, want in enumerate(run.grads):
        data = load(run.out_dir, step)  # type: ignore[arg-type]
        seen = set()
        for entry, record in data.items():
            if ".parameters_grad." not in entry:
                continue
            path = entry[len("Module."):].rsplit(".", 3)[0]
            for pname, rows in record.items():
                full = f"{path}.{pname}" if path else pname
                got = rows[0] if isinstance(rows, list) else rows
                if full not in want:
                    problems.append(f"step {step}: {entry}.{pname} recorded, no p.grad")
                    continue
                seen.add(full)
                ref = stats64(want[full])
                rms = ref["Norm"] / math.sqrt(max(want[full].numel(), 1))
                for key in ("Max", "Min", "Mean", "Norm"):
                    g, w = got.get(key), ref[key]
                    if g is None:
                        problems.append(f"step {step}: {full} {key} null")
                        continue
                    scale = max(abs(w), rms if key == "Mean" else 0.0) or 1.0
                    worst = max(worst, abs(g - w) / scale)
                checked += 1
        problems += [f"step {step}: p.grad of {n} has no parameters_grad record" for n in sorted(set(want) - seen)]
    return checked, worst, problems


def record_lists(out_dir: str, steps: int) -> list[Any]:
    """The record signature of each step."""
    return [signature(load(out_dir, s)) for s in range(steps)]


# Records that differ between eager and compiled code for a documented reason
# (docs/limitations.md): none now. BERT's embeddings (``e = a + b; e += c``)
# and T5's attention (``scores = torch.matmul(q, k.T); scores += position_bias``)
# update an API's output in place, which makes its gradient bypass the eager
# probe; since the bypass is recorded through a hook on the output's base,
# eager code has the ``input`` row that compiled code has.
KNOWN_INPLACE: dict[tuple[str, str], set[str]] = {}


def masked(lists: list[Any], names: set[str]) -> list[Any]:
    """Record lists with the places of ``names`` left out (the names and their order stay)."""
    return [[(k, "masked" if k in names else v) for k, v in step] for step in lists]


def first_list_difference(a: list[Any], b: list[Any]) -> str | None:
    """Where two steps' record lists first differ (None: identical)."""
    for step, (x, y) in enumerate(zip(a, b)):
        if x != y:
            xn, yn = [k for k, _ in x], [k for k, _ in y]
            if xn != yn:
                i = next((i for i, (p, q) in enumerate(zip(xn, yn)) if p != q), min(len(xn), len(yn)))
                return (f"step {step}: {len(xn)} vs {len(yn)} records; first different at {i}: "
                        f"{xn[i] if i < len(xn) else None} vs {yn[i] if i < len(yn) else None}")
            i = next(i for i, (p, q) in enumerate(zip(x, y)) if p != q)
            return f"step {step}: {xn[i]} differs in shape/dtype/places"
    return None if len(a) == len(b) else "different number of steps"


def max_rel_diff(a: TrainRun, b: TrainRun) -> float:
    """Step 0 (before AdamW, which turns a rounding difference in a near-zero
    gradient into a full-size update): the loss's relative difference and
    every gradient's largest difference relative to the largest gradient
    element of the model (0: bit-identical values)."""
    x, y = a.losses[0].double(), b.losses[0].double()
    worst = float((x - y).abs() / y.abs().clamp_min(1e-30))
    scale = max(float(g.double().abs().max()) for g in b.grads[0].values()) or 1.0
    for n, g in b.grads[0].items():
        worst = max(worst, float((a.grads[0][n].double() - g.double()).abs().max()) / scale)
    return worst


def bit_identical(a: TrainRun, b: TrainRun) -> bool:
    """Losses, gradients and the trained parameters equal bit for bit."""
    if len(a.losses) != len(b.losses) or any(not torch.equal(x, y) for x, y in zip(a.losses, b.losses)):
        return False
    for ga, gb in zip(a.grads, b.grads):
        if ga.keys() != gb.keys() or any(not torch.equal(ga[n], gb[n]) for n in ga):
            return False
    return all(torch.equal(a.params_after[n], b.params_after[n]) for n in a.params_after)


def new_warnings(run: TrainRun, plain: TrainRun) -> list[str]:
    """Warnings of a dumper run that the same run without a dumper did not give."""
    base = set(plain.warnings)
    return sorted({w for w in run.warnings if w not in base})


# ---------------------------------------------------------------------------
# 2. checksums


def forward_dump(name: str, mode: str, out_dir: str, level: str = "L0", **extra: Any) -> str:
    """One no-grad forward of ``name`` in ``mode``, dumped; the dump.json path."""
    import graphprobe

    torch._dynamo.reset()
    model, (args, kwargs) = build(name)
    dumper = graphprobe.AclGraphDumper(_write_config(out_dir, level=level, **extra))
    dumper.start(model)
    try:
        run = model if mode == "eager" else torch.compile(model, backend=mode, fullgraph=True)
        with torch.no_grad():
            run(*args, **kwargs)
        dumper.step()
    finally:
        dumper.stop()
        graphprobe.flush()
        torch._dynamo.reset()
    return dump_json(out_dir, 0)


def forward_dump_in_child(name: str, out_dir: str, level: str = "L0", **extra: Any) -> str:
    """:func:`forward_dump` eagerly in a second Python process."""
    code = (f"import sys; sys.path.insert(0, {TESTS!r}); import real_model_features as f; "
            f"f.forward_dump({name!r}, 'eager', {out_dir!r}, {level!r}, **{extra!r})")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=600)
    return dump_json(out_dir, 0)


def checksum_counts(target: str, bench: str) -> dict[str, Any]:
    """The checksum compare of two dump.json files: counts per result and the first bit-different tensor."""
    from graphprobe.compare.checksums import compare_checksums

    result = compare_checksums(target, bench)
    if result is None:
        return {"error": "no checksums on both sides"}
    counts: dict[str, Any] = {}
    for row in result.rows:
        counts[row.result] = counts.get(row.result, 0) + 1
    counts["first"] = result.first_different
    return counts


# ---------------------------------------------------------------------------
# 3. replay


def graph_only_hook(model: nn.Module, path: str, scale: float) -> torch.Tensor:
    """Fault A as a forward hook (registered before the dumper's, so the
    records see it): the output of ``model.{path}`` times ``scale`` when
    dynamo traces it, untouched in eager mode. A hook and not
    :func:`real_models.graph_only_scale`'s instance ``forward``: replay
    deep-copies the module, and a closure over the original module would
    run the original (float32) module on the float64 copy's inputs."""
    factor = torch.full((), scale, dtype=torch.float32)

    def hook(mod: nn.Module, args: Any, out: Any) -> Any:
        return rm._scale_output(out, factor) if torch.compiler.is_compiling() else None

    model.get_submodule(path).register_forward_hook(hook)
    return factor


def ancestors(path: str) -> set[str]:
    """``a.b.c`` -> {"a", "a.b"}."""
    parts = path.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


@dataclass
class ReplayResult:
    """replay.json's verdicts against the injection site."""

    verdicts: dict[str, str]  # module -> verdict (first call)
    unexpected: list[str]  # modules whose verdict is not the expected one
    state_dict_identical: bool
    counts: dict[str, int]


def replay(name: str, mode: str, out_dir: str, scale: float = 1.001) -> ReplayResult:
    """Replay (L0) on ``name`` compiled with ``mode``, fault A (×``scale``
    under ``torch.compiler.is_compiling()``) on the spec's target. Expected:
    the target "creates"; its ancestors (whose replay re-runs it eagerly)
    "create" or, when the error has faded under the floor at their output,
    "inherit"; every other judged module "inherits"."""
    import graphprobe

    torch._dynamo.reset()
    model, (args, kwargs) = build(name)
    target = rm.SPECS[name].target
    factor = graph_only_hook(model, target, scale)
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    dumper = graphprobe.AclGraphDumper(_write_config(out_dir, level="L0", replay=True))
    dumper.start(model)
    try:
        run = torch.compile(model, backend=mode, fullgraph=True)
        with torch.no_grad():
            run(*args, **kwargs)
        dumper.step()
    finally:
        dumper.stop()
        graphprobe.flush()
        torch._dynamo.reset()
    after = model.state_dict()
    identical = before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    (path,) = glob.glob(os.path.join(out_dir, "dump", "step0", "*", "replay.json"))
    with open(path) as f:
        doc = json.load(f)
    called = {m["module"] for m in doc["modules"]}
    # The target creates; each ancestor creates when the error is still above
    # the floor at its output, else inherits (a LayerNorm after the target
    # can bring x1.001 under 1e-4); every other module inherits.
    creators = {target}
    either = ancestors(target) & called  # a ModuleList is never called
    verdicts: dict[str, str] = {}
    counts: dict[str, int] = {}
    unexpected = []
    for m in doc["modules"]:
        counts[m["verdict"]] = counts.get(m["verdict"], 0) + 1
        verdicts.setdefault(m["module"], m["verdict"])
        if m["verdict"] == "not judged":
            continue
        want = "creates" if m["module"] in creators else "inherits"
        if m["verdict"] != want and m["module"] not in either:
            unexpected.append(f"{m['entry']}: {m['verdict']} (want {want}): {m['reason']}")
    missing = sorted(c for c in creators if c not in verdicts)
    unexpected += [f"{c}: no replay.json entry (want creates)" for c in missing]
    return ReplayResult(verdicts, unexpected, identical, counts)


# ---------------------------------------------------------------------------
# 4. statistics.slice


def slice_spot_check(name: str, mode: str, out_dir: str) -> tuple[int, float, list[str]]:
    """statistics.slice [{"end": 1}] (dim 0, the batch): the target's output,
    the weight module's output and its weight against float64 statistics of
    the slice taken here from an unwired eager copy. (checked, worst
    relative error, problems)."""
    model, (args, kwargs) = build(name)
    spec = rm.SPECS[name]
    ref_model = copy.deepcopy(model)
    caught: dict[str, torch.Tensor] = {}
    handles = []
    for path in (spec.target, spec.weight):
        def hook(mod: nn.Module, inp: Any, out: Any, path: str = path) -> None:
            caught[path] = (out if isinstance(out, torch.Tensor) else out[0]).detach().clone()
        handles.append(ref_model.get_submodule(path).register_forward_hook(hook))
    with torch.no_grad():
        ref_model(*args, **kwargs)
    for h in handles:
        h.remove()
    forward_dump(name, mode, out_dir, statistics={"slice": [{"end": 1}]})
    data = load(out_dir, 0)
    wanted = {f"{rm.module_entry(model, p)}.output.0": caught[p][:1] for p in (spec.target, spec.weight)}
    wanted[f"{rm.module_entry(model, spec.weight)}.parameters.weight"] = \
        model.get_submodule(spec.weight).weight.detach()[:1]
    checked, worst, problems = 0, 0.0, []
    for key, t in wanted.items():
        entry, part = key.split(".output.") if ".output." in key else key.split(".parameters.")
        rec = data.get(entry)
        if rec is None:
            problems.append(f"{entry}: no record")
            continue
        got = rec["output"][int(part)] if ".output." in key else rec["parameters"][part]
        if got.get("shape") != list(t.shape):
            problems.append(f"{key}: shape {got.get('shape')}, want {list(t.shape)}")
        ref = stats64(t)
        rms = ref["Norm"] / math.sqrt(max(t.numel(), 1))
        for k in ("Max", "Min", "Mean", "Norm"):
            scale = max(abs(ref[k]), rms if k == "Mean" else 0.0) or 1.0
            worst = max(worst, abs(got[k] - ref[k]) / scale)
        checked += 1
    return checked, worst, problems

"""The real-model matrix (issue #25, item 6), as tests.

Third-party models (`transformers`, tiny configs, random weights) dumped in
eager mode and compiled; graphprobe's compare, with its defaults, must find
no first divergence on a clean pair, and name exactly the module a
graph-only fault was injected into (the reference: the injection site,
traced on an unwired eager copy -- tests/real_models.py:
``expected_first_divergence``); ``--fail-on error`` passes on clean pairs
and fails on faults; the record lists are identical across modes.

By default a reduced set runs (three architectures, a few levels, both
dtypes, both injection methods, the weight fault); the full matrix (every
model x dtype x level x compiled mode) with ``GRAPHPROBE_SLOW_TESTS=1``.
``scripts/real_model_matrix.py`` runs the same matrix and writes the
results table (benchmarks/results/real_model_matrix.md).
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import Any

import pytest
import torch

pytest.importorskip("transformers")

import real_models as rm  # noqa: E402

SLOW = os.environ.get("GRAPHPROBE_SLOW_TESTS") == "1"

# (model, dtype, level, mode): each compiles once and records three steps (clean, fault A, weight x1.3).
# aot_eager runs eager's kernels (no noise at all); inductor's bf16 noise
# shows most at mix, where casts and norm internals are recorded too.
REDUCED = [
    ("qwen2", "fp32", "L0", "inductor"),
    ("qwen2", "bf16", "mix", "inductor"),
    ("t5", "fp32", "L1", "aot_eager"),
    ("t5", "bf16", "L0", "aot_eager"),
    ("vit", "fp32", "mix", "aot_eager"),
    ("vit", "bf16", "L0", "inductor"),
]
# fault B (inductor only): one more compile each.
REDUCED_B = [("qwen2", "fp32", "L0"), ("vit", "bf16", "L0")]

if SLOW:
    COMBOS = list(itertools.product(rm.SPECS, rm.DTYPES, rm.LEVELS, ("aot_eager", "inductor")))
    COMBOS_B = list(itertools.product(rm.SPECS, rm.DTYPES, rm.LEVELS))
else:
    COMBOS, COMBOS_B = REDUCED, REDUCED_B


@dataclass
class Recording:
    """The dumps of one combination and what the reference trace expects."""

    dt: str
    bench: str  # the eager dump.json
    steps: dict[str, str]  # case -> compiled dump.json
    expected: dict[str, str | None]
    applied: list[str] | None = None  # fault B: the nodes the pass scaled


_CACHE: dict[tuple[Any, ...], Recording] = {}


def _bench(name: str, dt: str, level: str, root: str) -> tuple[str, rm.ReferenceTrace, rm.Inputs]:
    key = ("bench", name, dt, level)
    if key not in _CACHE:
        model, inputs = rm.build(name, rm.DTYPES[dt])
        trace = rm.ReferenceTrace.run(model, inputs)
        path = rm.record(model, inputs, level, "eager", os.path.join(root, "eager"), [rm.Phase("clean")])["clean"]
        _CACHE[key] = (path, trace, inputs)  # type: ignore[assignment]
    return _CACHE[key]  # type: ignore[return-value]


def _recording(name: str, dt: str, level: str, mode: str, factory: pytest.TempPathFactory) -> Recording:
    key = (name, dt, level, mode)
    if key in _CACHE:
        return _CACHE[key]
    root = str(factory.mktemp(f"{name}-{dt}-{level}"))
    bench, trace, inputs = _bench(name, dt, level, root)
    spec = rm.SPECS[name]
    model, _ = rm.build(name, rm.DTYPES[dt])
    expected: dict[str, str | None] = {"clean": None}
    if mode == "inductor-B":
        p = rm.ScaleModuleOutput(spec.target, rm.FAULT_SCALE[dt])
        steps = rm.record(model, inputs, level, "inductor", os.path.join(root, mode), [rm.Phase("B")], post_grad=p)
        expected["B"] = rm.expected_first_divergence(trace, spec, "B", level)
        rec = Recording(dt, bench, steps, expected, p.applied)
    else:
        scale = rm.graph_only_scale(model, spec.target)
        held: list[Any] = []

        def weight_on() -> None:
            held.append(rm.scaled_parameter(model, spec.weight, rm.WEIGHT_SCALE))
            held[-1].__enter__()

        phases = [rm.Phase("clean"),
                  rm.Phase("A", lambda: scale.fill_(rm.FAULT_SCALE[dt]), lambda: scale.fill_(1.0)),
                  rm.Phase("W", weight_on, lambda: held[-1].__exit__(None, None, None))]
        steps = rm.record(model, inputs, level, mode, os.path.join(root, mode), phases)
        for case in ("A", "W"):
            expected[case] = rm.expected_first_divergence(trace, spec, case, level)
        rec = Recording(dt, bench, steps, expected)
    _CACHE[key] = rec
    return rec


def _check(rec: Recording, case: str, out_dir: str) -> None:
    target, bench = rm.load_data(rec.steps[case]), rm.load_data(rec.bench)
    assert rm.record_list(target) == rm.record_list(bench), "record list differs from eager mode's"
    expected = rec.expected[case]
    if case != "clean":
        # The fault is real (independent of the tool): the expected entry
        # differs by about the injected factor, in float64 from the dumps.
        assert expected is not None and expected in target, f"expected entry {expected!r} not recorded"
        factor = (rm.WEIGHT_SCALE if case == "W" else rm.FAULT_SCALE[rec.dt]) - 1
        worst = max((e.get("Norm", 0.0) for e in rm.entry_errors(target, bench, expected).values()), default=0.0)
        assert 0.3 * factor < worst < 3 * factor, f"{expected}: Norm error {worst:.3g}, injected {factor:.3g}"
    res = rm.compare_dumps(rec.steps[case], rec.bench, out_dir)
    if case == "clean":
        assert res.first_divergence is None, f"false first divergence on a clean pair: {res.first_divergence}"
        assert not res.gate_error, f"--fail-on error fails on a clean pair: {res.gate_error}"
    else:
        assert res.first_divergence == expected, f"fault {case}: named {res.first_divergence}, injected at {expected}"
        assert res.gate_error, f"--fail-on error passes although fault {case} is named"


@pytest.mark.parametrize("case", ["clean", "A", "W"])
@pytest.mark.parametrize("name,dt,level,mode", COMBOS)
def test_real_model(name, dt, level, mode, case, tmp_path_factory, tmp_path):
    rec = _recording(name, dt, level, mode, tmp_path_factory)
    _check(rec, case, str(tmp_path))


@pytest.mark.parametrize("name,dt,level", COMBOS_B)
def test_real_model_inductor_pass_fault(name, dt, level, tmp_path_factory, tmp_path):
    rec = _recording(name, dt, level, "inductor-B", tmp_path_factory)
    assert rec.applied is not None and len(rec.applied) == 1, f"the post-grad pass scaled {rec.applied}"
    _check(rec, "B", str(tmp_path))


def test_expected_names_come_from_the_injection_site():
    # The reference itself, on a model whose structure is known: Qwen2's
    # layers.1.mlp returns down_proj's output; at L1 the residual add after
    # the MLP is the first call that reads it.
    model, inputs = rm.build("qwen2", torch.float32)
    trace = rm.ReferenceTrace.run(model, inputs)
    spec = rm.SPECS["qwen2"]
    assert rm.expected_first_divergence(trace, spec, "A", "L0") == "Module.layers.1.mlp.Qwen2MLP.forward.0"
    assert rm.expected_first_divergence(trace, spec, "A", "mix") == "Module.layers.1.mlp.Qwen2MLP.forward.0"
    assert rm.expected_first_divergence(trace, spec, "B", "L0") == "Module.layers.1.mlp.down_proj.Linear.forward.0"
    assert rm.expected_first_divergence(trace, spec, "W", "L0") == "Module.layers.1.mlp.down_proj.Linear.forward.0"
    linear = rm.expected_first_divergence(trace, spec, "W", "L1")
    assert linear is not None and linear.startswith("Functional.linear.")
    assert rm.expected_first_divergence(trace, spec, "B", "L1") == linear
    consumer = rm.expected_first_divergence(trace, spec, "A", "L1")
    assert consumer is not None and consumer.startswith("Tensor.__add__.")

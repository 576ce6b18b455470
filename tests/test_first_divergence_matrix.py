"""The first-divergence matrix of issue #35, as tests.

Graph-only faults of seven kinds in third-party architectures (tiny
configs, random weights) must be named where an independent reference puts
them -- the first record whose tensors differ between an eager run with the
fault forced on and a clean eager run of an unwired copy
(tests/real_model_faults.py) -- with ``--fail-on error`` failing; clean
eager-vs-inductor pairs, inference and training steps (AdamW, step 0 and
step 1), must have no first divergence and pass ``--fail-on error``.

By default a reduced set (a few minutes on two cores: aot_eager wherever
inductor adds nothing, one inductor compile per compiler-only case); the
full matrix with ``GRAPHPROBE_SLOW_TESTS=1``. scripts/real_model_matrix.py
runs the full matrix and writes benchmarks/results/real_model_matrix.md.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import pytest
import torch

pytest.importorskip("transformers")

import real_model_faults as F  # noqa: E402
import real_model_training as T  # noqa: E402
import real_models as rm  # noqa: E402

SLOW = os.environ.get("GRAPHPROBE_SLOW_TESTS") == "1"
SWITCHABLE = ("scale", "softmax", "precision", "routing", "decomp")

# (model, dtype, level, fault kinds): one eager dump, one aot_eager compile
# for the switchable kinds, one compile per compiler fault.
REDUCED_FORWARD = [
    ("llama", "fp32", "L0", ("scale", "softmax", "precision", "decomp")),
    ("gpt_neox", "bf16", "mix", ("softmax", "precision")),
    ("moe", "bf16", "mix", ("routing",)),
    ("bert", "bf16", "mix", ("lowering",)),
]
REDUCED_GRAD = [("opt", "fp32", "mix")]
REDUCED_CLEAN = [("opt", "bf16", "L0")]
REDUCED_TRAIN = [("bert", "fp32", "L0"), ("opt", "bf16", "mix")]
# Against inductor the training parts use a language model's loss (cross
# entropy through a fixed head, T.LOSS "head"): under the mean square of a
# final LayerNorm's output every gradient is rounding residue, 1.4 % apart
# between eager and inductor in float32, and no x1.001 fault is above that.
REDUCED_HEAD_GRAD = [("gpt2", "bf16", "L0")]
REDUCED_HEAD_TRAIN = [("opt", "fp32", "L0")]
# Mixed precision as most training runs it: float32 weights, the forward under
# torch.autocast(bfloat16) (T.AUTOCAST), a language model's loss.
REDUCED_AUTOCAST_TRAIN = [("llama", "fp32", "mix")]
REDUCED_AUTOCAST_GRAD = [("bert", "fp32", "L0")]

if SLOW:
    FORWARD = [(m, d, lv, tuple(k for k in F.FAULT_KINDS if k != "grad" and F.applicable(F.ARCHS[m], k)))
               for m, d, lv in itertools.product(F.ARCHS, ("fp32", "bf16"), ("L0", "mix"))]
    GRAD = list(itertools.product(F.ARCHS, ("fp32", "bf16"), ("L0", "mix")))
    CLEAN, TRAIN = T.CLEAN, T.CLEAN_TRAIN
    HEAD_GRAD, HEAD_TRAIN = GRAD, T.CLEAN_TRAIN
    AUTOCAST_TRAIN = AUTOCAST_GRAD = [(m, "fp32", lv) for m, _, lv in T.CLEAN_TRAIN]
else:
    FORWARD, GRAD, CLEAN, TRAIN = REDUCED_FORWARD, REDUCED_GRAD, REDUCED_CLEAN, REDUCED_TRAIN
    HEAD_GRAD, HEAD_TRAIN = REDUCED_HEAD_GRAD, REDUCED_HEAD_TRAIN
    AUTOCAST_TRAIN, AUTOCAST_GRAD = REDUCED_AUTOCAST_TRAIN, REDUCED_AUTOCAST_GRAD

# Cases the compare engine at 55315f6 gets wrong (the baseline of
# benchmarks/results/real_model_matrix.md): strict xfail, so that each one
# fails the suite as soon as the engine names it -- then its entry goes (the
# MoE routing flip went with 5b8ced9, the integer-record rule; BERT's first
# training steps with 36c42fa, the cancellation rule; Llama's softmax scale
# with the float32 Sketch floor 2e-6; GPT-NeoX's bfloat16 precision loss,
# 0.47 % under the bfloat16 Sketch floor against aot_eager, with the rule for
# a pair that agrees bit for bit). Keys: (model, dtype, level, fault).
BASELINE_FAILS: dict[tuple[str, str, str, str], str] = {}


def _baseline(name: str, dt: str, level: str, fault: str) -> list[Any]:
    reason = BASELINE_FAILS.get((name, dt, level, fault))
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []


def _params(rows: list[tuple[Any, ...]], fault: str | None = None) -> list[Any]:
    return [pytest.param(*r, marks=_baseline(r[0], r[1], r[2], fault or r[3])) for r in rows]


_CACHE: dict[tuple[Any, ...], list[T.Case]] = {}


def _cases(key: tuple[Any, ...], make: Any) -> list[T.Case]:
    # One recording serves every test of its combination.
    if key not in _CACHE:
        _CACHE[key] = make()
    return _CACHE[key]


def _forward(name: str, dt: str, level: str, kinds: tuple[str, ...], factory: pytest.TempPathFactory) -> list[T.Case]:
    return _cases(("fwd", name, dt, level, kinds), lambda: T.forward_faults(
        name, dt, level, str(factory.mktemp(f"{name}-{dt}-{level}")), kinds))


def _assert_named(c: T.Case) -> None:
    assert c.expected is not None, f"the reference found no effect of the fault: {T.describe(c)}"
    assert c.got == c.expected, T.describe(c)
    assert c.gate_fails, f"--fail-on error passes although the fault is named: {T.describe(c)}"


@pytest.mark.parametrize("name,dt,level,kind", _params([(m, d, lv, k) for m, d, lv, ks in FORWARD for k in ks]))
def test_forward_fault_named_at_its_place(name, dt, level, kind, tmp_path_factory):
    kinds = next(ks for m, d, lv, ks in FORWARD if (m, d, lv) == (name, dt, level))
    cases = _forward(name, dt, level, kinds, tmp_path_factory)
    (c,) = [c for c in cases if c.fault == kind]
    # The fault is real (independently of graphprobe): the compiled model's
    # output moved, and more than the clean control of the same compile.
    assert c.effect is not None and c.effect > 0, f"the fault did not change the output: {T.describe(c)}"
    if c.noise is not None:
        assert c.effect > 10 * c.noise, f"fault {c.effect:.3g} not above the control's noise {c.noise:.3g}"
    _assert_named(c)


@pytest.mark.parametrize("name,dt,level", sorted({(m, d, lv) for m, d, lv, ks in FORWARD if set(ks) & set(SWITCHABLE)
                                                   and set(ks) - {"decomp"}}))
def test_switchable_control_step_is_silent(name, dt, level, tmp_path_factory):
    # The compiled model with every fault wired but neutral (aot_eager: eager's kernels).
    kinds = next(ks for m, d, lv, ks in FORWARD if (m, d, lv) == (name, dt, level))
    (c,) = [c for c in _forward(name, dt, level, kinds, tmp_path_factory) if c.fault == "control"]
    assert c.effect == 0.0, f"the neutral switches changed the output: {c.effect}"
    assert c.outcome == "silent", T.describe(c)


@pytest.mark.parametrize("name,dt,level", _params(GRAD, "grad"))
def test_backward_only_gradient_scale_named(name, dt, level, tmp_path):
    c = T.grad_fault(name, dt, level, str(tmp_path))
    assert c.effect == 0.0, f"the gradient fault changed the forward (loss moved {c.effect})"
    _assert_named(c)


# Missed against inductor even with a language model's loss (the matrix run of
# benchmarks/results/real_model_matrix.md, "Gradient faults against inductor").
_NO_COMPILE = "inductor cannot compile gpt_neox's bfloat16 training step, unwired too (torch 2.13.0 CPU C++ codegen)"
HEAD_GRAD_MISSES: dict[tuple[str, str, str], str] = {
    ("moe", "bf16", "L0"): "the gradient arriving is 0.2 % off in Norm already: the x1.01 output within R x it + the floor",
    ("moe", "bf16", "mix"): "the gradient arriving differs as much as the fault (the router's bfloat16 rounding upstream)",
    ("gpt_neox", "bf16", "L0"): _NO_COMPILE,
    ("gpt_neox", "bf16", "mix"): _NO_COMPILE,
}


@pytest.mark.parametrize("name,dt,level", [
    pytest.param(*r, marks=[pytest.mark.xfail(strict=True, reason=HEAD_GRAD_MISSES[r])] if r in HEAD_GRAD_MISSES else [])
    for r in HEAD_GRAD])
def test_backward_only_gradient_scale_named_against_inductor(name, dt, level, tmp_path, monkeypatch):
    monkeypatch.setattr(T, "SWITCH_BACKEND", "inductor")
    monkeypatch.setattr(T, "LOSS", "head")
    _assert_named(T.grad_fault(name, dt, level, str(tmp_path)))


@pytest.mark.parametrize("name,dt,level", HEAD_TRAIN)
def test_clean_training_steps_with_a_language_model_loss_are_silent(name, dt, level, tmp_path, monkeypatch):
    monkeypatch.setattr(T, "LOSS", "head")
    cases = T.clean_training(name, dt, level, str(tmp_path))
    loud = [T.describe(c) + (f"; {c.message}" if c.message else "") for c in cases if c.outcome != "silent"]
    assert not loud, loud


@pytest.mark.parametrize("name,dt,level", AUTOCAST_TRAIN)
def test_clean_training_steps_under_autocast_are_silent(name, dt, level, tmp_path, monkeypatch):
    monkeypatch.setattr(T, "LOSS", "head")
    monkeypatch.setattr(T, "AUTOCAST", torch.bfloat16)
    cases = T.clean_training(name, dt, level, str(tmp_path))
    loud = [T.describe(c) + (f"; {c.message}" if c.message else "") for c in cases if c.outcome != "silent"]
    assert not loud, loud


@pytest.mark.parametrize("name,dt,level", AUTOCAST_GRAD)
def test_backward_only_gradient_scale_under_autocast_named(name, dt, level, tmp_path, monkeypatch):
    """The gradient the fault scales is bfloat16 under autocast: it is sized as a bfloat16 fault
    (x1.01); the float32 size, x1.001, is under half a bfloat16 ulp and rounds back to the same
    gradient (benchmarks/results/real_model_matrix.md, "Mixed precision")."""
    monkeypatch.setattr(T, "LOSS", "head")
    monkeypatch.setattr(T, "AUTOCAST", torch.bfloat16)
    monkeypatch.setitem(rm.FAULT_SCALE, dt, rm.FAULT_SCALE["bf16"])
    c = T.grad_fault(name, dt, level, str(tmp_path))
    assert c.effect == 0.0, f"the gradient fault changed the forward (loss moved {c.effect})"
    _assert_named(c)


@pytest.mark.parametrize("name,dt,level", _params(CLEAN, "clean"))
def test_clean_inference_pair_is_silent(name, dt, level, tmp_path):
    c = T.clean_inference(name, dt, level, str(tmp_path))
    assert c.outcome == "silent", T.describe(c) + (f"; {c.message}" if c.message else "")


@pytest.mark.parametrize("name,dt,level", _params(TRAIN, "clean-train"))
def test_clean_training_steps_are_silent(name, dt, level, tmp_path):
    cases = T.clean_training(name, dt, level, str(tmp_path))
    assert [c.step for c in cases] == [0, 1]
    loud = [T.describe(c) + (f"; {c.message}" if c.message else "") for c in cases if c.outcome != "silent"]
    assert not loud, loud


def test_reference_names_the_injection_site():
    # The reference on structures known by reading the models: Llama's
    # softmax fault scales the query inside eager_attention_forward, so at
    # L0 the first record that reads it is o_proj (its input), at mix the
    # q @ k^T matmul; a lowering of SiLU first shows in layer 0's act_fn; the
    # MoE flip, after torch.topk, first in the one-hot's cast at mix and in
    # the block's own output at L0.
    e = F.differential_trace("llama", "fp32", "softmax")
    assert (e.place["L0"], e.how["L0"]) == ("Module.layers.1.self_attn.o_proj.Linear.forward.0", "consumer")
    assert e.place["mix"].startswith("Torch.matmul.") and e.how["mix"] == "consumer"
    e = F.differential_trace("llama", "fp32", "lowering")
    assert (e.place["L0"], e.how["L0"]) == ("Module.layers.0.mlp.act_fn.SiLUActivation.forward.0", "exact")
    e = F.differential_trace("moe", "fp32", "routing")
    assert (e.place["L0"], e.how["L0"]) == ("Module.layers.1.moe.MoEBlock.forward.0", "exact")
    assert e.place["mix"].startswith("Tensor.to.") and e.how["mix"] == "consumer"
    # A switched-off fault is no fault: the two traces agree everywhere.
    clean = F.trace_events(*F.build("llama", "fp32"))
    assert F.first_tainted(clean, F.trace_events(*F.build("llama", "fp32")), "mix") == (None, "none")

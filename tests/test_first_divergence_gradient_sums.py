"""Backward rules of the first divergence for gradients that are sums
(issue 35; docs/formats.md, "What explains an entry's outputs"), each from a
false alarm of a clean eager-vs-inductor training step (ConvNeXt, ResNet):

* a cancellation residue's absolute error, added by unrecorded code (a
  mean-pool's backward) into a larger gradient, explains that gradient's;
* a module's parameters_grad records move with what its backward calls
  computed from (the gradient arriving, the saved forward inputs);
* a gradient that is mostly noise moves a linear module's input gradient in
  Norm by the square of its relative L2 error;
* a depthwise convolution's input gradient in bfloat16 is a sum over its
  kernel's taps, with that sum's rounding.

Each has its counterpart: a fault of the size the matrix plants is still
named. Records are computed here in float64 from the tensors themselves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from compare_fixtures import entry
from test_first_divergence_bitwise import rec, run

F32 = "torch.float32"
gen = torch.Generator().manual_seed(11)


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.float64, generator=gen)


def _message(o: Any) -> str | None:
    return o.divergence.message if o.divergence else None


# A pooled final LayerNorm under a loss its scale does not change: the
# gradient of its input is a residue ~1e-6 of the gradient arriving, and the
# two sides' residues differ by ~100 % of their own size.
POOLED = _randn(2, 16) * 0.02
LN_OUT = (POOLED - POOLED.mean(-1, keepdim=True)) / POOLED.std(-1, unbiased=False, keepdim=True)
G_LN = _randn(2, 16) * 0.06
RESIDUE = _randn(2, 16) * 3e-7
RESIDUE_OTHER = RESIDUE + _randn(2, 16) * 3e-7
HIDDEN_GRAD = _randn(2, 16, 4, 4) * 6e-4  # the last hidden state's own gradient


def pooled_head(residue: torch.Tensor, hidden_grad: torch.Tensor = HIDDEN_GRAD, scale: float = 1.0) -> dict[str, Any]:
    """The final LayerNorm (recorded) and the gradient arriving at the last
    block: its own plus the residue spread by the mean-pool's backward over
    4 x 4 positions (not recorded)."""
    g = (hidden_grad + residue[:, :, None, None] / 16) * scale
    return {
        "Module.layernorm.LayerNorm.forward.0": entry([rec(POOLED, F32)], [rec(LN_OUT, F32)]),
        "Module.layernorm.LayerNorm.backward.0": {"input": [rec(G_LN, F32)], "output": [rec(residue, F32)]},
        "Module.stages.1.drop_path.Identity.backward.0": {"input": [rec(g, F32)], "output": [rec(g, F32)]},
    }


def test_a_residue_added_into_a_larger_gradient_by_unrecorded_code_is_rounding(tmp_path: Path) -> None:
    added = float((RESIDUE_OTHER - RESIDUE).norm() / 4 / (HIDDEN_GRAD + RESIDUE[:, :, None, None] / 16).norm())
    assert added > 1e-5, added  # 5x the float32 Sketch floor (2e-6) at least: named before the rule
    o = run(tmp_path, pooled_head(RESIDUE_OTHER), pooled_head(RESIDUE))
    assert o.first_divergence is None, _message(o)


def test_a_fault_in_that_gradient_is_still_named(tmp_path: Path) -> None:
    o = run(tmp_path, pooled_head(RESIDUE_OTHER, scale=1.001), pooled_head(RESIDUE))
    assert o.first_divergence == "Module.stages.1.drop_path.Identity.backward.0", _message(o)
    assert "unrecorded-input" in o.divergence.kinds


# Further down the same backward, code that is not recorded turns that
# residue's absolute error into a gradient that is mostly noise: 30-70 %
# apart by its L2 error (as in a bfloat16 ConvNeXt or ResNet step), at an
# equal Norm, within R x the residue's absolute error.
def mostly_noise(g: torch.Tensor, size: float) -> torch.Tensor:
    """g's variation about its mean turned by `size` of its L2 norm, at its
    own Norm and Mean: only its Sketch sees the change."""
    mean = g.mean()
    g0 = g - mean
    d = _randn(*g.shape)
    d = d - d.mean()
    d = d - (d * g0).sum() / (g0 * g0).sum() * g0
    return mean + (g0 + size * g0.norm() * d / d.norm()) / (1 + size**2) ** 0.5


RESIDUE_ERROR = float((RESIDUE_OTHER - RESIDUE).norm())
ARRIVING = _randn(2, 16, 4, 4)
ARRIVING = ARRIVING * RESIDUE_ERROR / ARRIVING.norm()  # as large as the residue's absolute error
ARRIVING_NOISY = mostly_noise(ARRIVING, 0.5)


# A BatchNorm in training mode: its weight's gradient is the sum over batch
# and space of the gradient arriving times the normalised input.
BN_X = _randn(2, 16, 4, 4)
BN_HAT = (BN_X - BN_X.mean((0, 2, 3), keepdim=True)) / BN_X.std((0, 2, 3), unbiased=False, keepdim=True)


def batch_norm(residue: torch.Tensor, g: torch.Tensor, weight_grad_scale: float = 1.0) -> dict[str, Any]:
    data = pooled_head(residue)
    x = BN_X.clone().requires_grad_(True)
    y = F.batch_norm(x, None, None, training=True, eps=1e-12)
    (dx,) = torch.autograd.grad(y, x, g)
    data["Module.bn.BatchNorm2d.forward.0"] = entry([rec(BN_X, F32)], [rec(BN_HAT, F32)])
    data["Module.bn.BatchNorm2d.backward.0"] = {"input": [rec(g, F32)], "output": [rec(dx, F32)]}
    data["Module.bn.BatchNorm2d.parameters_grad"] = {
        "weight": [rec((g * BN_HAT).sum((0, 2, 3)) * weight_grad_scale, F32)],
        "bias": [rec(g.sum((0, 2, 3)), F32)],
    }
    return data


def _norm_moved(t: dict[str, Any], b: dict[str, Any], key: str, part: str) -> float:
    return abs(t[key][part][0]["Norm"] / b[key][part][0]["Norm"] - 1)


def test_a_parameter_gradient_moves_with_the_gradient_it_sums(tmp_path: Path) -> None:
    t, b = batch_norm(RESIDUE_OTHER, ARRIVING_NOISY), batch_norm(RESIDUE, ARRIVING)
    key = "Module.bn.BatchNorm2d.parameters_grad"
    before = max(_norm_moved(t, b, "Module.bn.BatchNorm2d.backward.0", p) for p in ("input", "output"))
    assert _norm_moved(t, b, key, "weight") > 4 * before + 1e-4, (before, _norm_moved(t, b, key, "weight"))
    o = run(tmp_path, t, b)
    assert o.first_divergence is None, _message(o)


def test_a_parameter_gradient_fault_beyond_what_it_sums_is_named(tmp_path: Path) -> None:
    o = run(tmp_path, batch_norm(RESIDUE_OTHER, ARRIVING, weight_grad_scale=1.01), batch_norm(RESIDUE, ARRIVING))
    assert o.first_divergence == "Module.bn.BatchNorm2d.parameters_grad", _message(o)


# A linear module's backward: its input's gradient is the gradient arriving
# times the weight.
WL = _randn(16, 64) / 4


def down_proj(residue: torch.Tensor, g: torch.Tensor) -> dict[str, Any]:
    data = pooled_head(residue)
    g = g.permute(0, 2, 3, 1)
    data["Module.mlp.down_proj.Linear.backward.0"] = {"input": [rec(g, F32)], "output": [rec(g @ WL, F32)]}
    return data


def test_a_linear_modules_gradient_from_a_gradient_that_is_mostly_noise_is_rounding(tmp_path: Path) -> None:
    t, b = down_proj(RESIDUE_OTHER, ARRIVING_NOISY), down_proj(RESIDUE, ARRIVING)
    key = "Module.mlp.down_proj.Linear.backward.0"
    (gt,), (gb,) = t[key]["input"], b[key]["input"]
    moved_in = max(abs(gt["Norm"] / gb["Norm"] - 1), abs(gt["Mean"] - gb["Mean"]) / (gb["Norm"] / 512**0.5))
    moved_out = _norm_moved(t, b, key, "output")
    assert moved_out > 4 * moved_in + 1e-4, (moved_in, moved_out)  # named on Norm before the rule
    o = run(tmp_path, t, b)
    assert o.first_divergence is None, _message(o)


# A depthwise convolution (16 channels, 7x7) and an ordinary one.
CX = _randn(2, 16, 4, 4)
CG = _randn(2, 16, 4, 4)


def convolution(weight: torch.Tensor, rounding: float) -> dict[str, Any]:
    groups = CX.shape[1] // weight.shape[1]
    pad = weight.shape[-1] // 2
    y = F.conv2d(CX, weight, padding=pad, groups=groups)
    dx = F.conv_transpose2d(CG, weight, padding=pad, groups=groups)
    d = torch.sin(torch.arange(dx.numel(), dtype=torch.float64) * 3.1).reshape(dx.shape)
    dx = dx + rounding * d * dx.norm() / d.norm()
    forward = entry([rec(CX)], [rec(y)])
    forward["parameters"] = {"weight": rec(weight), "bias": rec(torch.zeros(16, dtype=torch.float64))}
    return {"Module.dwconv.Conv2d.forward.0": forward,
            "Module.dwconv.Conv2d.backward.0": {"input": [rec(CG)], "output": [rec(dx)]}}


def test_a_depthwise_convolutions_input_gradient_carries_its_taps_rounding(tmp_path: Path) -> None:
    w = _randn(16, 1, 7, 7) / 7
    o = run(tmp_path, convolution(w, 9e-3), convolution(w, 0.0))  # 1.8x the bfloat16 Sketch floor, inputs equal
    assert o.first_divergence is None, _message(o)


def test_an_ordinary_convolutions_input_gradient_keeps_its_floor(tmp_path: Path) -> None:
    w = _randn(16, 16, 3, 3) / 12
    o = run(tmp_path, convolution(w, 9e-3), convolution(w, 0.0))
    assert o.first_divergence == "Module.dwconv.Conv2d.backward.0", _message(o)
    assert "output" in o.divergence.kinds


# A BatchNorm at a real size (8 x 16 x 32 x 32): its bias's gradient sums
# T = 8192 positions a channel, which eager (double accumulation on a CPU)
# and inductor (float32, blocked) round differently by about float32's ulp x
# sqrt(T) x the sum's condition number.
BIG_X = _randn(8, 16, 32, 32)
BIG_G = _randn(8, 16, 32, 32) * 1e-5


def big_batch_norm(bias_grad: torch.Tensor) -> dict[str, Any]:
    hat = (BIG_X - BIG_X.mean((0, 2, 3), keepdim=True)) / BIG_X.std((0, 2, 3), unbiased=False, keepdim=True)
    return {"Module.bn.BatchNorm2d.forward.0": entry([rec(BIG_X, F32)], [rec(hat, F32)]),
            "Module.bn.BatchNorm2d.backward.0": {"input": [rec(BIG_G, F32)], "output": [rec(BIG_G, F32)]},
            "Module.bn.BatchNorm2d.parameters_grad": {"bias": [rec(bias_grad, F32)]}}


def _accumulation_bar() -> tuple[torch.Tensor, float]:
    """The bias gradient and R x float32's ulp x T x (sqrt(T) RMS(g)) / RMS(bias gradient)."""
    bias = BIG_G.sum((0, 2, 3))
    terms = BIG_G.numel() / bias.numel()
    rms = lambda t: float(t.norm()) / t.numel() ** 0.5  # noqa: E731
    return bias, 4 * 2 ** -23 * terms * terms ** 0.5 * rms(BIG_G) / rms(bias)


def test_a_parameter_gradient_summed_over_many_positions_carries_its_accumulators_rounding(tmp_path: Path) -> None:
    # The target's bias gradient 0.1 % apart by its Sketch (a float32 sum of
    # 8192 terms, rounded otherwise), every record before it equal bit for
    # bit. Before: "Sketch 0.1 %, ... anything recorded before it".
    bias, bar = _accumulation_bar()
    d = _randn(16)
    moved = bias + 1e-3 * d * bias.norm() / d.norm()
    assert 1e-3 < bar, bar
    o = run(tmp_path, big_batch_norm(moved), big_batch_norm(bias))
    assert o.first_divergence is None, _message(o)


def test_a_parameter_gradient_fault_beyond_its_accumulators_rounding_is_named(tmp_path: Path) -> None:
    bias, bar = _accumulation_bar()
    assert 1e-2 > bar, bar  # a x1.01 fault stays beyond R x the rounding at this size
    o = run(tmp_path, big_batch_norm(1.01 * bias), big_batch_norm(bias))
    assert o.first_divergence == "Module.bn.BatchNorm2d.parameters_grad", _message(o)

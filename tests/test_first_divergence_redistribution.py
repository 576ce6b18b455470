"""Noise that redistributes a tensor, not a fault that scales it
(docs/formats.md, "Redistributed noise"). Two clean float32 MoE training
steps under a mean-square loss (the whole backward a residue, 1-10 % apart
by the Sketch) were named: a linear layer's gradient whose Norm moved
further than the arriving gradient's Norm did, and after the first update a
forward output whose Max moved further than its drifted weight's
statistics. Hand-written float32 dumps whose statistics and Sketch are
computed here in float64 (sketch_reference); each case first checks that its
numbers sit between the old rule and the new one, and that a fault of the
size the rule is meant to keep (x1.01) stays beyond the new one."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
from compare_fixtures import entry
from test_first_divergence_training import _sketch_error as sketch_error, grad_entry, rec, run

R = 4.0  # --divergence-ratio's default
AGGREGATE_FLOOR = 1e-4  # float32 Mean/Norm floor (docs/formats.md, noise floor table)
EXTREME_FLOOR = 1e-4  # float32 Max/Min floor

G = torch.Generator().manual_seed(21)
X = torch.randn(8, 32, dtype=torch.float64, generator=G)
W = 0.1 * torch.randn(32, 32, dtype=torch.float64, generator=G)


def unit(v: torch.Tensor) -> torch.Tensor:
    return v / v.norm()


def without(v: torch.Tensor, *basis: torch.Tensor) -> torch.Tensor:
    """v with its components along the (orthonormal) basis removed."""
    for b in basis:
        v = v - (v * b).sum() * b
    return v


def norm_error(t: torch.Tensor, b: torch.Tensor) -> float:
    return abs(float(t.norm()) - float(b.norm())) / float(b.norm())


def mean_error(t: torch.Tensor, b: torch.Tensor) -> float:
    return abs(float(t.mean()) - float(b.mean())) / (float(b.norm()) / math.sqrt(b.numel()))


# -- a linear layer's backward under a redistributed gradient ----------------------

# The residue a normalisation's backward leaves (1e-9: the gradient arriving
# times the forward gain is ~1), and its compiled twin: 1.4 % apart in a
# direction that leaves its own Norm (first order) alone and moves the Norm
# of what the layer's backward makes of it, r @ W, by 0.2 %.
RESIDUE = 1e-9 * torch.randn(8, 32, dtype=torch.float64, generator=G)


def redistributed(s: float, out_norm: float) -> torch.Tensor:
    """RESIDUE moved by ``s`` (relative L2) in a direction orthogonal to
    itself and to the all-ones tensor (its Norm and Mean stay, to first
    order), of which the part that moves |r @ W| moves it by ``out_norm``."""
    basis = [unit(RESIDUE)]
    basis.append(unit(without(torch.ones_like(RESIDUE), *basis)))
    grows = unit(without(RESIDUE @ W @ W.T, *basis))  # moves |r @ W| first, |r| and mean(r) not at all
    other = unit(without(torch.randn(8, 32, dtype=torch.float64, generator=G), *basis, grows))
    eps = s * float(RESIDUE.norm())
    a = out_norm * float((RESIDUE @ W).norm()) ** 2 / (eps * float((RESIDUE @ W @ W.T * grows).sum()))
    return RESIDUE + eps * (a * grows + math.sqrt(1 - a * a) * other)


RESIDUE_T = redistributed(1.4e-2, 2.5e-3)


def residue_then_linear(residue: torch.Tensor, fc_out_scale: float = 1.0) -> dict[str, Any]:
    """A LayerNorm whose backward cancels to ``residue`` (two runs' rounding
    of a sum that is zero in theory), doubled by a multiplication's backward
    (a new tensor at the residue's own size: the residue passed on), then
    the backward of a linear layer that maps it on (2 residue @ W)."""
    g = 1e-2 * torch.ones(8, 32, dtype=torch.float64)
    return {
        "Module.fc.Linear.forward.0": {**entry([rec(X)], [rec(X @ W.T)]), "parameters": {"weight": rec(W)}},
        "Tensor.__mul__.0.forward": entry([rec(X @ W.T)], [rec(2 * X @ W.T)]),
        "Module.norm.LayerNorm.forward.0": entry([rec(2 * X @ W.T)], [rec(X)]),
        "Module.norm.LayerNorm.backward.0": grad_entry([rec(g)], [rec(residue)]),
        "Tensor.__mul__.0.backward": grad_entry([rec(residue)], [rec(2 * residue)]),
        "Module.fc.Linear.backward.0": grad_entry([rec(2 * residue)], [rec(fc_out_scale * (2 * residue @ W))]),
    }


def backward_window(arriving_t: torch.Tensor) -> tuple[float, float, float]:
    """(old bar, new bar, the output's Mean/Norm error) for the linear
    layer's backward; a bar is R x the inputs' part + the floor."""
    s = sketch_error(arriving_t, RESIDUE)
    own = max(norm_error(arriving_t, RESIDUE), mean_error(arriving_t, RESIDUE))
    old = R * max(own, s * s) + AGGREGATE_FLOOR
    new = R * max(own, s * s, s / math.sqrt(RESIDUE.numel())) + AGGREGATE_FLOOR
    out_t, out_b = arriving_t @ W, RESIDUE @ W
    return old, new, max(norm_error(out_t, out_b), mean_error(out_t, out_b))


def test_the_backward_case_sits_between_the_two_rules() -> None:
    old, new, e = backward_window(RESIDUE_T)
    assert old < e < new, (old, e, new)
    # The layer's own Sketch and extremes stay within 4R x the arriving Sketch.
    s = sketch_error(RESIDUE_T, RESIDUE)
    assert sketch_error(RESIDUE_T @ W, RESIDUE @ W) < 4 * R * s


def test_a_redistributed_gradient_moves_a_linear_layers_gradient_norm_unnamed(tmp_path: Path) -> None:
    # Before: "output 0: Norm 0.2 %, ... its inputs'" at Module.fc.Linear.backward.0.
    o = run(tmp_path, residue_then_linear(RESIDUE_T), residue_then_linear(RESIDUE))
    assert o.divergence is None, o.divergence.message


def test_a_scaled_gradient_beyond_the_redistribution_is_still_named(tmp_path: Path) -> None:
    # The same noise, and the layer's backward scales its output by 1.01 on
    # the target: a 1 % Norm, beyond s / sqrt(n) = 0.09 % times R.
    _, new, _ = backward_window(RESIDUE_T)
    assert norm_error(1.01 * (RESIDUE_T @ W), RESIDUE @ W) > new
    o = run(tmp_path, residue_then_linear(RESIDUE_T, fc_out_scale=1.01), residue_then_linear(RESIDUE))
    assert o.first_divergence == "Module.fc.Linear.backward.0", o.divergence and o.divergence.message
    assert o.divergence.kinds == ("output",)


# -- a forward output's extremes after an update ------------------------------------

# The token whose output holds the Max, and the weight row producing it.
Y = X @ W.T
TOKEN, ROW = divmod(int(Y.argmax()), Y.shape[1])


def drifted_weight(s: float) -> torch.Tensor:
    """W with row ROW drifted along that token's input (as Adam's +-lr
    steps on residue gradients leave it): W's relative L2 change is ``s``;
    its own Max and Min elements are left as they were."""
    w = W.clone()
    keep = torch.zeros_like(W, dtype=torch.bool)
    keep.view(-1)[int(W.argmax())] = keep.view(-1)[int(W.argmin())] = True
    step = torch.zeros_like(W)
    step[ROW] = X[TOKEN]
    step[keep] = 0
    return w + s * float(W.norm()) * unit(step)


W_T = drifted_weight(2e-4)


def step1(weight: torch.Tensor) -> dict[str, Any]:
    """A training run's step 1: the forward on a weight the first update
    moved (parameters drift), and its backward."""
    g = 1e-2 * torch.randn(8, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    return {"Module.fc.Linear.forward.0": {**entry([rec(X)], [rec(X @ weight.T)]), "parameters": {"weight": rec(weight)}},
            "Module.fc.Linear.backward.0": grad_entry([rec(g)], [rec(g @ weight)])}


def extreme_error(t: torch.Tensor, b: torch.Tensor) -> float:
    return max(abs(float(t.max()) - float(b.max())) / abs(float(b.max())),
               abs(float(t.min()) - float(b.min())) / abs(float(b.min())))


def test_the_forward_case_sits_between_the_two_rules() -> None:
    s_w = sketch_error(W_T, W)
    weight_classes = max(s_w, extreme_error(W_T, W), norm_error(W_T, W), mean_error(W_T, W))
    assert weight_classes == s_w  # the drifted weight's largest error is its Sketch's
    e = extreme_error(X @ W_T.T, Y)
    assert R * s_w + EXTREME_FLOOR < e < 4 * R * s_w + EXTREME_FLOOR, (s_w, e)
    # The output's Mean/Norm and Sketch stay within what the weight's drift explains.
    assert max(norm_error(X @ W_T.T, Y), mean_error(X @ W_T.T, Y)) < R * s_w + AGGREGATE_FLOOR
    assert sketch_error(X @ W_T.T, Y) < 4 * R * s_w


def test_after_an_update_a_drifted_weight_explains_its_outputs_extremes(tmp_path: Path) -> None:
    # Before: "output 0: Max 0.1 %, ... its inputs'" at step 1.
    o = run(tmp_path, step1(W_T), step1(W), step=1)
    assert o.divergence is None, o.divergence.message


def test_before_any_update_the_same_output_is_named(tmp_path: Path) -> None:
    # At step 0 nothing drifted: the weight, whose Sketch alone moved, is a
    # cause (both runs were given the same parameters), and the output's Max
    # is beyond R x what the call received.
    o = run(tmp_path, step1(W_T), step1(W), step=0)
    assert o.first_divergence == "Module.fc.Linear.forward.0", o.divergence
    assert o.divergence.kinds == ("parameter", "output"), o.divergence
    assert "parameter `weight` differs: Sketch" in o.divergence.message, o.divergence.message

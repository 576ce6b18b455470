"""A product of two tensors amplifies its inputs' drift where its terms cancel
(docs/formats.md, "Products"). |d(AB)| <= |dA| |B| + |A| |dB| in L2 whatever
the shapes, so an output far smaller than |A| |B| may move far more, in
relative terms, than its inputs. A clean bfloat16 PatchTST step 1 had its
attention scores q @ k^T 1.1 % apart by their Norm from queries and keys
0.44 % apart by their Sketch -- under their floor, moved by the keys' bias
after the first update -- and was named. Here the same shape of case in
float32: a key projection whose bias the update moved, queries nearly
orthogonal to the keys. Statistics, Sketches and the bound are computed here
in float64, from the tensors themselves."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
from compare_fixtures import entry
from test_first_divergence_training import _sketch_error as sketch_error, grad_entry, rec, run

R = 4.0  # --divergence-ratio's default
SKETCH_FLOOR = 2e-6  # float32's (docs/formats.md, noise floor table)

G = torch.Generator().manual_seed(7)
X = torch.randn(4, 8, 16, dtype=torch.float64, generator=G)
# The keys' projection maps into the last 8 dimensions, the queries live in
# the first 8 plus a little: q @ k^T is ~1e-2 of |q| |k| (terms that cancel).
WK = torch.zeros(16, 16, dtype=torch.float64)
WK[8:, :] = torch.randn(8, 16, dtype=torch.float64, generator=G) / 4
BK = torch.cat([torch.zeros(8, dtype=torch.float64), 0.1 * torch.randn(8, dtype=torch.float64, generator=G)])
Q = torch.cat([torch.randn(4, 8, 8, dtype=torch.float64, generator=G),
               1e-2 * torch.randn(4, 8, 8, dtype=torch.float64, generator=G)], dim=-1)
# The update moved the bias along the queries' dimensions by ~1e-6 of the
# keys' size (under float32's Sketch floor, 2e-6), as Adam's +-lr moves a
# bias whose gradient is zero in theory.
DRIFT = torch.cat([torch.randn(8, dtype=torch.float64, generator=G), torch.zeros(8, dtype=torch.float64)])


GRAD = 1e-2 * torch.randn(4, 8, 16, dtype=torch.float64, generator=G)


def step(bias: torch.Tensor, scores_scale: float = 1.0) -> dict[str, Any]:
    """A training step's dump (a backward entry: at step 1 its parameters
    carry the update): the keys' projection, its bias the update moved, then
    q @ k^T."""
    k = X @ WK.T + bias
    scores = scores_scale * (Q @ k.transpose(-1, -2))
    return {"Module.k_proj.Linear.forward.0": {**entry([rec(X)], [rec(k)]),
                                               "parameters": {"weight": rec(WK), "bias": rec(bias)}},
            "Torch.matmul.0.forward": entry([rec(Q), rec(k.transpose(-1, -2))], [rec(scores)]),
            "Module.k_proj.Linear.backward.0": grad_entry([rec(GRAD)], [rec(GRAD @ WK)])}


def keys(bias: torch.Tensor) -> torch.Tensor:
    return (X @ WK.T + bias).transpose(-1, -2)


def norm_error(t: torch.Tensor, b: torch.Tensor) -> float:
    return abs(float(t.norm()) - float(b.norm())) / float(b.norm())


BIAS_T = BK + 1.2e-6 * float(keys(BK).norm()) / math.sqrt(32) * DRIFT / float(DRIFT.norm())


def test_the_case_is_what_the_rule_is_for() -> None:
    k_b, k_t = keys(BK), keys(BIAS_T)
    s_b, s_t = Q @ k_b, Q @ k_t
    e_k = sketch_error(k_t, k_b)
    # The keys are within their Sketch floor, the queries equal: before this
    # rule nothing explained the scores.
    assert 0 < e_k < SKETCH_FLOOR, e_k
    # The scores' relative L2 error is beyond what the Sketch class allowed
    # an output before (4R times its inputs' plus its floor): named before.
    assert sketch_error(s_t, s_b) > 4 * R * e_k + SKETCH_FLOOR, (sketch_error(s_t, s_b), e_k)
    # |q k^T| is far below |q| |k|: the terms cancel.
    assert float(s_b.norm()) < 0.05 * float(Q.norm()) * float(k_b.norm())
    # The bound: e_k |k| times the largest Frobenius norm of one matrix of q
    # (q and k have as many matrices as the scores), over |q k^T|.
    q_matrix = max(float(Q[b].norm()) for b in range(4))
    bound = e_k * float(k_b.norm()) * q_matrix / float(s_b.norm())
    assert sketch_error(s_t, s_b) < bound and norm_error(s_t, s_b) < bound, (sketch_error(s_t, s_b), bound)
    # It holds for the tensors themselves: |d(q k^T)| <= |q| |dk|.
    assert float((s_t - s_b).norm()) <= q_matrix * float((k_t - k_b).norm()) * 2


def test_after_an_update_the_amplified_drift_of_a_product_is_no_divergence(tmp_path: Path) -> None:
    # Before: "output 0: Norm ..., its inputs'" at the matmul.
    o = run(tmp_path, step(BIAS_T), step(BK), step=1)
    assert o.divergence is None, o.divergence.message


def test_a_scale_fault_beyond_the_bound_is_named(tmp_path: Path) -> None:
    k_b, k_t = keys(BK), keys(BIAS_T)
    bound = sketch_error(k_t, k_b) * float(k_b.norm()) * max(float(Q[b].norm()) for b in range(4)) \
        / float((Q @ k_b).norm())
    o = run(tmp_path, step(BIAS_T, scores_scale=1 + 3 * bound), step(BK), step=1)
    assert o.first_divergence == "Torch.matmul.0.forward", o.divergence
    assert o.divergence.kinds == ("output",)


def test_a_fault_in_a_product_of_equal_inputs_is_named_after_an_update(tmp_path: Path) -> None:
    # The bias drifted, but the keys' projection is not what the product reads.
    def equal_inputs(bias: torch.Tensor, scale: float) -> dict[str, Any]:
        data = step(bias, scale)
        k = keys(BK)
        data["Torch.matmul.0.forward"] = entry([rec(Q), rec(k)], [rec(scale * (Q @ k))])
        return data
    o = run(tmp_path, equal_inputs(BIAS_T, 1.001), equal_inputs(BK, 1.0), step=1)
    assert o.first_divergence == "Torch.matmul.0.forward", o.divergence


def test_before_any_update_inputs_within_their_floor_explain_nothing(tmp_path: Path) -> None:
    # At step 0 the same keys differ by rounding at most, which the scores'
    # own floor covers: a product beyond it is named (by the bias that
    # differs, a cause before any update, or by the scores).
    o = run(tmp_path, step(BIAS_T), step(BK), step=0)
    assert o.first_divergence is not None


# -- a sum whose terms cancel ----------------------------------------------------

_y = torch.randn(4, 8, 16, dtype=torch.float64, generator=G)
Y = _y - _y.mean(-1, keepdim=True) + 1e-3 * torch.randn(4, 8, 1, dtype=torch.float64, generator=G)
# Drift after the update, 1e-6 of Y's size: a part along the summed
# dimension (what a sum keeps: the sum moves by sqrt(16) times it), the rest
# of random sign (what it averages out). The sum moves by half the bound,
# so that the inputs' Sketch, an estimate from four projections, bounds it.
_d = 0.5 * torch.ones(4, 8, 16, dtype=torch.float64) + torch.randn(4, 8, 16, dtype=torch.float64, generator=G)
Y_T = Y + 1e-6 * float(Y.norm()) * _d / float(_d.norm())


def summed(bias: torch.Tensor, y: torch.Tensor, scale: float = 1.0) -> dict[str, Any]:
    data = step(bias)
    del data["Torch.matmul.0.forward"]  # the drifted bias alone, then the sum
    data["Torch.sum.0.forward"] = entry([rec(y)], [rec(scale * y.sum(-1))])
    return data


def sum_bound(y_t: torch.Tensor, y: torch.Tensor) -> float:
    """e |y| sqrt(m) / |sum|, m = 16 terms an output."""
    return sketch_error(y_t, y) * float(y.norm()) * 16 ** 0.5 / float(y.sum(-1).norm())


def test_a_sum_whose_terms_cancel_is_bounded_by_its_input(tmp_path: Path) -> None:
    out_t, out_b = Y_T.sum(-1), Y.sum(-1)
    assert sketch_error(Y_T, Y) < SKETCH_FLOOR
    # Named before: the sum's Sketch moved beyond 4R times its input's.
    assert sketch_error(out_t, out_b) > 4 * R * sketch_error(Y_T, Y) + SKETCH_FLOOR
    assert sketch_error(out_t, out_b) < sum_bound(Y_T, Y)
    o = run(tmp_path, summed(BIAS_T, Y_T), summed(BK, Y), step=1)
    assert o.divergence is None, o.divergence.message


def test_a_sum_scaled_beyond_the_bound_is_named(tmp_path: Path) -> None:
    o = run(tmp_path, summed(BIAS_T, Y_T, 1 + 3 * sum_bound(Y_T, Y)), summed(BK, Y), step=1)
    assert o.first_divergence == "Torch.sum.0.forward", o.divergence


# -- a convolution whose taps cancel ----------------------------------------------

# A depthwise Laplacian (its taps sum to 0) of a smooth image: the output is
# far smaller than the input times the filter, so the input's drift moves it
# by far more than the input moved.
_lap = torch.tensor([[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]], dtype=torch.float64) / 10
CONV_W = _lap.expand(4, 1, 3, 3).clone()
_grid = torch.linspace(0, 1, 8, dtype=torch.float64)
IMAGE = (1.0 + 0.05 * torch.outer(_grid, _grid)).expand(1, 4, 8, 8).clone() \
    + 1e-3 * torch.randn(1, 4, 8, 8, dtype=torch.float64, generator=G)
_n = torch.randn(1, 4, 8, 8, dtype=torch.float64, generator=G)
IMAGE_T = IMAGE + 1e-6 * float(IMAGE.norm()) * _n / float(_n.norm())


def convolved(bias: torch.Tensor, image: torch.Tensor, scale: float = 1.0) -> dict[str, Any]:
    data = step(bias)
    del data["Torch.matmul.0.forward"]
    out = scale * torch.nn.functional.conv2d(image, CONV_W, groups=4)
    data["Functional.conv2d.0.forward"] = entry([rec(image), rec(CONV_W)], [rec(out)])
    return data


def conv_bound(image_t: torch.Tensor, image: torch.Tensor) -> float:
    """sqrt(k) e |x| M_w / |out|: 9 taps, M_w one filter's Frobenius norm."""
    out = torch.nn.functional.conv2d(image, CONV_W, groups=4)
    return 3 * sketch_error(image_t, image) * float(image.norm()) * float(CONV_W[0].norm()) / float(out.norm())


def test_a_convolution_whose_taps_cancel_is_bounded_by_its_input(tmp_path: Path) -> None:
    out_t = torch.nn.functional.conv2d(IMAGE_T, CONV_W, groups=4)
    out_b = torch.nn.functional.conv2d(IMAGE, CONV_W, groups=4)
    # Named before: the output's Sketch beyond 4R times the input's.
    assert sketch_error(out_t, out_b) > 4 * R * sketch_error(IMAGE_T, IMAGE) + SKETCH_FLOOR
    assert sketch_error(out_t, out_b) < conv_bound(IMAGE_T, IMAGE)
    o = run(tmp_path, convolved(BIAS_T, IMAGE_T), convolved(BK, IMAGE), step=1)
    assert o.divergence is None, o.divergence.message


def test_a_convolution_scaled_beyond_the_bound_is_named(tmp_path: Path) -> None:
    o = run(tmp_path, convolved(BIAS_T, IMAGE_T, 1 + 3 * conv_bound(IMAGE_T, IMAGE)), convolved(BK, IMAGE), step=1)
    assert o.first_divergence == "Functional.conv2d.0.forward", o.divergence

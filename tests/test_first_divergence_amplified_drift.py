"""A map that amplifies drifted data (docs/formats.md, "Drift amplified by a
map"). After an update, a contraction whose terms partly cancel makes its
output's relative L2 error larger than its inputs', and an output's Mean and
Norm move by up to its own relative L2 error: a clean bfloat16 XLNet step 1
had its positional scores (an einsum of queries and relative keys) 9.5 %
apart by the Sketch, Mean 8.1 % of the RMS, from keys 6.8 % apart, and was
named. Here the same shape of case in float32: a Linear whose weight the
update moved, then a matmul with keys that share a direction the drift moved
the data along. Statistics and Sketches computed here in float64."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from compare_fixtures import entry
from test_first_divergence_training import _sketch_error as sketch_error, grad_entry, rec, run

R = 4.0  # --divergence-ratio's default
SKETCH_FLOOR = 2e-6  # float32's Sketch floor (docs/formats.md, noise floor table)
AGGREGATE_FLOOR = 1e-4

G = torch.Generator().manual_seed(31)


def unit(v: torch.Tensor) -> torch.Tensor:
    return v / v.norm()


_c = torch.randn(32, dtype=torch.float64, generator=G)
C = unit(_c - _c.mean())  # the direction the update moved the data along (sums to 0: the weight's Mean stays)
E = unit(torch.randn(32, dtype=torch.float64, generator=G))
X0 = torch.randn(8, 32, dtype=torch.float64, generator=G) + 3.0 * E
W0 = torch.randn(32, 32, dtype=torch.float64, generator=G) / 32 ** 0.5
W = W0 - torch.outer(C, W0.T @ C)  # W^T C = 0: the bench's data has nothing along C
KEYS = torch.randn(16, 32, dtype=torch.float64, generator=G) / 32 ** 0.5 + C  # every key shares a part along C


def drifted(w: torch.Tensor, s: float) -> torch.Tensor:
    """w moved by ``s`` of its norm along C x E, as an update moves a weight
    (Adam's +-lr on every element): orthogonal to w (W^T C = 0), so its Norm
    moves by ~s^2 / 2, its Mean not at all, its Max and Min elements kept."""
    step = torch.outer(C, E)
    step.view(-1)[int(w.argmax())] = step.view(-1)[int(w.argmin())] = 0
    return w + s * float(w.norm()) * step


W_T = drifted(W, 0.005)  # the update moved the weight 0.5 %


def step(weight: torch.Tensor, scores_scale: float = 1.0) -> dict[str, Any]:
    """A training step on ``weight``: the forward, then the Linear's backward
    (a training step's dump: at step 1 its parameters carry the update)."""
    x = X0 @ weight.T
    y = scores_scale * (x @ KEYS.T)
    g = 1e-2 * torch.randn(8, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    return {"Module.fc.Linear.forward.0": {**entry([rec(X0)], [rec(x)]), "parameters": {"weight": rec(weight)}},
            "Torch.matmul.0.forward": entry([rec(x), rec(KEYS)], [rec(y)]),
            "Module.fc.Linear.backward.0": grad_entry([rec(g)], [rec(g @ weight)])}


def mean_error(t: torch.Tensor, b: torch.Tensor) -> float:
    return abs(float(t.mean() - b.mean())) / (float(b.norm()) / b.numel() ** 0.5)


def test_the_case_sits_between_the_two_rules() -> None:
    x, x_t = X0 @ W.T, X0 @ W_T.T
    y, y_t = x @ KEYS.T, x_t @ KEYS.T
    data_error = sketch_error(x_t, x) - SKETCH_FLOOR  # the inputs' Sketch beyond their floor
    # The old rule: after an update, no statistic of a map's output moves
    # further than its inputs' Sketch beyond their floor.
    assert mean_error(y_t, y) > data_error + AGGREGATE_FLOOR, (mean_error(y_t, y), data_error)
    # The new one: the output's Sketch within R of the data's, its Mean
    # within R of its own Sketch.
    assert sketch_error(y_t, y) < R * data_error + SKETCH_FLOOR
    assert mean_error(y_t, y) < R * sketch_error(y_t, y) + AGGREGATE_FLOOR
    # The output amplifies: its relative L2 error is over twice the data's.
    assert float((y_t - y).norm() / y.norm()) > 2 * float((x_t - x).norm() / x.norm())


def test_after_an_update_an_amplified_drift_is_no_divergence(tmp_path: Path) -> None:
    # Before: "output 0: Mean ... its inputs'" at the matmul.
    o = run(tmp_path, step(W_T), step(W), step=1)
    assert o.divergence is None, o.divergence.message


def test_a_scale_fault_beyond_the_drift_is_still_named(tmp_path: Path) -> None:
    o = run(tmp_path, step(W_T, scores_scale=1.2), step(W), step=1)
    assert o.first_divergence == "Torch.matmul.0.forward", o.divergence
    assert o.divergence.kinds == ("output",)


def test_before_any_update_the_same_numbers_are_named(tmp_path: Path) -> None:
    # At step 0 nothing drifted: a weight that differs is a cause.
    o = run(tmp_path, step(W_T), step(W), step=0)
    assert o.first_divergence is not None

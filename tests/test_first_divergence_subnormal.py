"""Subnormal values (docs/formats.md, "Noise floor"): below a dtype's
smallest normal number a value's rounding is absolute, not relative, so the
relative errors of a record are taken of at least that number. A tiny
EfficientNet whose activations had vanished to ~1e-41 (float32) had a
BatchNorm's output 0.46 % apart by its Sketch from inputs equal bit for bit,
and was named. Records computed here in float64."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from compare_fixtures import entry
from test_first_divergence_training import rec, run

FLOAT32_TINY = 2.0 ** -126  # float32's smallest normal number

G = torch.Generator().manual_seed(8)
X = torch.randn(2, 8, 4, 4, dtype=torch.float64, generator=G)
# The target's output 1 % apart from the bench's, in a pseudo-random direction.
D = torch.randn(2, 8, 4, 4, dtype=torch.float64, generator=G)
MOVED = X + 0.01 * D * X.norm() / D.norm()


def norm_layer(x: torch.Tensor, y: torch.Tensor) -> dict[str, Any]:
    return {"Module.bn.BatchNorm2d.forward.0": entry([rec(x)], [rec(y)])}


def test_subnormal_outputs_apart_by_their_rounding_are_not_named(tmp_path: Path) -> None:
    scale = 1e-43  # every element below FLOAT32_TINY
    assert float((scale * X).abs().max()) < FLOAT32_TINY
    o = run(tmp_path, norm_layer(1e-41 * X, scale * MOVED), norm_layer(1e-41 * X, scale * X))
    assert o.divergence is None, o.divergence.message


def test_the_same_change_at_a_normal_scale_is_named(tmp_path: Path) -> None:
    o = run(tmp_path, norm_layer(X, 1e-3 * MOVED), norm_layer(X, 1e-3 * X))
    assert o.first_divergence == "Module.bn.BatchNorm2d.forward.0", o.divergence
    assert o.divergence.kinds == ("output",)


def test_a_normal_value_where_the_bench_holds_zeros_is_named(tmp_path: Path) -> None:
    # The bench's output is exactly 0; the target's 1e-30, far above the
    # smallest normal number: a difference, not underflow.
    zeros = torch.zeros_like(X)
    o = run(tmp_path, norm_layer(X, 1e-30 * X), norm_layer(X, zeros))
    assert o.first_divergence == "Module.bn.BatchNorm2d.forward.0", o.divergence

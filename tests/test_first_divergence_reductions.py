"""A backward output that sums over broadcast dimensions (issue 35, clean
training; docs/formats.md, "First divergence"): the gradient of a routing
weight ``w`` in ``e * w`` is a sum over the features of the incoming
gradient times the saved ``e``. Its Norm moves with ``e``'s relative L2
error (its Sketch), which a redistribution leaves in ``e``'s own Norm almost
unseen: a clean bfloat16 OLMoE under inductor was named there. Records are
computed here in float64 from the tensors themselves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from compare_fixtures import entry
from test_first_divergence_bitwise import rec, run

gen = torch.Generator().manual_seed(3)
E = torch.randn(4, 32, dtype=torch.float64, generator=gen)          # expert outputs (saved for backward)
W = 0.25 + 0.01 * torch.randn(4, 1, dtype=torch.float64, generator=gen)  # routing weights
G0 = torch.randn(4, 32, dtype=torch.float64, generator=gen)
# The gradient arriving, half of its component along E taken out: each row's
# sum is a partial cancellation (0.18 of a random sum's size, not a residue).
G = G0 - 0.5 * (G0 * E).sum(1, keepdim=True) / (E * E).sum(1, keepdim=True) * E


def redistributed(t: torch.Tensor, size: float) -> torch.Tensor:
    """t moved by ``size`` of its L2 norm in a pseudo-random direction."""
    d = torch.sin(torch.arange(t.numel(), dtype=torch.float64) * 12.9898).reshape(t.shape)
    return t + size * d * t.norm() / d.norm()


def routed(e: torch.Tensor, w_grad_scale: float = 1.0) -> dict[str, Any]:
    """``e * w`` forward and backward at mix level; ``w_grad_scale``: a fault
    in the backward that scales the routing weight's gradient only."""
    return {
        "Tensor.__mul__.0.forward": entry([rec(e), rec(W)], [rec(e * W)]),
        "Tensor.__mul__.0.backward": {"input": [rec(G)],
                                      "output": [rec(G * W), rec((G * e).sum(1, keepdim=True) * w_grad_scale)]},
    }


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def test_a_gradient_summed_over_broadcast_dimensions_follows_its_saved_inputs(tmp_path: Path) -> None:
    e = redistributed(E, 4e-3)  # within the bfloat16 Sketch floor (5e-3) upstream
    # What the old rule saw: e's Norm agrees far better than the sum's Norm.
    norm_e = abs(float(e.norm() / E.norm()) - 1)
    gw, gw_bench = (G * e).sum(1), (G * E).sum(1)
    norm_gw = abs(float(gw.norm() / gw_bench.norm()) - 1)
    assert norm_gw > 4 * norm_e + 2e-3, (norm_gw, norm_e)  # beyond R x its inputs' Norm + the bfloat16 floor
    assert rel(gw, gw_bench) < 4 * rel(e, E)  # within R x e's relative L2 error: rounding carried through the sum
    o = run(tmp_path, routed(e), routed(E))
    assert o.first_divergence is None, o.divergence.message if o.divergence else None


def test_a_fault_in_such_a_gradient_is_still_named(tmp_path: Path) -> None:
    # The saved inputs agree: nothing explains a gradient 5 % off.
    o = run(tmp_path, routed(E, w_grad_scale=1.05), routed(E))
    assert o.first_divergence == "Tensor.__mul__.0.backward", o.divergence.message if o.divergence else None


X = torch.randn(128, 8, dtype=torch.float64, generator=gen)  # a layer norm's input, 128 positions
GY = torch.randn(128, 8, dtype=torch.float64, generator=gen) + 0.3  # the gradient arriving


def bfloat16_running_sum(t: torch.Tensor) -> torch.Tensor:
    """Sum over dim 0 with the running sum rounded to bfloat16 at every
    step: an accumulator in the dtype."""
    acc = torch.zeros(t.shape[1], dtype=torch.bfloat16)
    for row in t.to(torch.bfloat16):
        acc = acc + row
    return acc.double()


def normed(bias_grad: torch.Tensor) -> dict[str, Any]:
    """``layer_norm(x, w, b)`` at mix: the backward's outputs are the input's
    gradient and the bias's (a sum of the gradient over the positions)."""
    return {
        "Functional.layer_norm.0.forward": entry([rec(X)], [rec(X)]),
        "Functional.layer_norm.0.backward": {"input": [rec(GY)], "output": [rec(GY), rec(bias_grad)]},
    }


def test_a_bfloat16_sum_over_many_positions_keeps_its_accumulators_rounding(tmp_path: Path) -> None:
    exact, rounded = GY.sum(0), bfloat16_running_sum(GY)
    off = rel(rounded, exact)
    assert off > 5e-3, off  # beyond the bfloat16 Sketch floor: named before, every input equal
    assert off < 5e-3 * (128 ** 0.5), off
    o = run(tmp_path, normed(rounded), normed(exact))
    assert o.first_divergence is None, o.divergence.message if o.divergence else None


def test_a_fault_beyond_that_rounding_is_named(tmp_path: Path) -> None:
    o = run(tmp_path, normed(GY.sum(0) * 1.1), normed(GY.sum(0)))
    assert o.first_divergence == "Functional.layer_norm.0.backward", o.divergence.message if o.divergence else None

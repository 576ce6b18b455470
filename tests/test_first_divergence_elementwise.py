"""Elementwise sums whose terms cancel, and maximum's backward (docs/formats.md,
"Cancellation" and "What explains an entry's outputs"). RWKV's time mixing
subtracts two running maxima that are equal but for an element or two, and
takes the gradient of torch.maximum back through near ties: a clean bfloat16
training step 1 was named at the difference (its Norm, resting on one
element, 24 % apart from terms a few 1e-3 apart) and then at maximum's
backward. A difference of terms recorded in bfloat16 may have been taken
before they were rounded (compiled code fusing the casts: DiffLlama's
lambda). Records computed here in float64, with the statistics of bfloat16
tensors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from compare_fixtures import entry
from test_first_divergence_training import grad_entry, rec, run

BF16 = "torch.bfloat16"
G = torch.Generator().manual_seed(23)
A = torch.randn(1, 32, dtype=torch.float64, generator=G)
B = A.clone()
B[0, 5] -= 0.06  # equal but for one element: a - b rests on it


def noisy(t: torch.Tensor, s: float, seed: int) -> torch.Tensor:
    """t moved by relative L2 ``s`` (another run's bfloat16 rounding)."""
    d = torch.randn(t.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    return t + s * float(t.norm()) * d / float(d.norm())


def difference(a: torch.Tensor, b: torch.Tensor, scale: float = 1.0) -> dict[str, Any]:
    return {"Tensor.__sub__.0.forward": entry([rec(a, BF16), rec(b, BF16)], [rec(scale * (a - b), BF16)])}


def test_a_difference_of_nearly_equal_terms_carries_their_errors(tmp_path: Path) -> None:
    a_t, b_t = noisy(A, 3e-3, 1), noisy(B, 3e-3, 2)
    # The difference moves by far more than its terms, relative to itself.
    assert float(((a_t - b_t) - (A - B)).norm() / (A - B).norm()) > 0.2
    o = run(tmp_path, difference(a_t, b_t), difference(A, B))
    assert o.divergence is None, o.divergence.message


U = 2.0 ** -8  # bfloat16's unit roundoff: half an ulp, relative


def terms_rounding(a: torch.Tensor, b: torch.Tensor) -> float:
    """How far a - b moves, relative to itself, where one side subtracts the
    terms before rounding them to bfloat16: u (|a| + |b|) / |a - b|."""
    return U * float(a.norm() + b.norm()) / float((a - b).norm())


def test_a_difference_whose_terms_agree_is_judged_at_its_own_size(tmp_path: Path) -> None:
    # Beyond what its terms' rounding can move it: named.
    scale = 1 + 2 * terms_rounding(A, B)
    o = run(tmp_path, difference(A, B, scale=scale), difference(A, B))
    assert o.first_divergence == "Tensor.__sub__.0.forward", o.divergence


def test_a_difference_taken_before_its_terms_are_rounded_is_no_divergence(tmp_path: Path) -> None:
    # DiffLlama's lambda: exp(.).to(bfloat16) minus another. Eager subtracts
    # the bfloat16 terms; inductor fuses the casts and subtracts the float32
    # values. Both record the same bfloat16 terms.
    wide_a = torch.tensor([0.96819669008255], dtype=torch.float64)
    wide_b = torch.tensor([1.012948989868164], dtype=torch.float64)
    a, b = wide_a.to(torch.bfloat16).double(), wide_b.to(torch.bfloat16).double()
    eager = (a - b).to(torch.bfloat16).double()
    fused = (wide_a - wide_b).to(torch.bfloat16).double()
    error = float((fused - eager).norm() / eager.norm())
    assert error > 0.02  # 4.7 %: 6x the floor, named before
    assert error < terms_rounding(a, b)

    def sub(out: torch.Tensor) -> dict[str, Any]:
        return {"Tensor.__sub__.0.forward": entry([rec(a, BF16), rec(b, BF16)], [rec(out, BF16)])}

    o = run(tmp_path, sub(fused), sub(eager))
    assert o.divergence is None, o.divergence.message


def test_a_sum_without_cancellation_keeps_its_rule(tmp_path: Path) -> None:
    # A residual add: the terms do not cancel, and x1.05 of it is named
    # whatever the terms' bfloat16 noise.
    x, h = noisy(A, 3e-3, 3), A.flip(1)

    def add(a: torch.Tensor, scale: float = 1.0) -> dict[str, Any]:
        return {"Tensor.__add__.0.forward": entry([rec(a, BF16), rec(h, BF16)], [rec(scale * (a + h), BF16)])}

    o = run(tmp_path, add(x, 1.05), add(A))
    assert o.first_divergence == "Tensor.__add__.0.forward", o.divergence


# torch.maximum(a, b): its backward sends each element's gradient to the
# larger input; near ties go either way.
TIES = B.clone()
TIES[0, :8] = A[0, :8]  # 8 ties
GRAD = torch.randn(1, 32, dtype=torch.float64, generator=G)


def maximum(a: torch.Tensor, b: torch.Tensor, grad_to_a: torch.Tensor) -> dict[str, Any]:
    out = torch.maximum(a, b)
    return {"Torch.maximum.0.forward": entry([rec(a, BF16), rec(b, BF16)], [rec(out, BF16)]),
            "Torch.maximum.0.backward": grad_entry([rec(GRAD, BF16)], [rec(grad_to_a, BF16), rec(GRAD - grad_to_a, BF16)])}


def routed(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.where(a >= b, GRAD, torch.zeros_like(GRAD))


def test_maximums_backward_follows_its_forward_inputs_rounding(tmp_path: Path) -> None:
    a_t = noisy(A, 2e-3, 4)  # the ties broken either way
    assert not torch.equal(routed(a_t, TIES), routed(A, TIES))
    o = run(tmp_path, maximum(a_t, TIES, routed(a_t, TIES)), maximum(A, TIES, routed(A, TIES)))
    assert o.divergence is None, o.divergence.message


def test_maximums_backward_with_equal_forward_inputs_is_named(tmp_path: Path) -> None:
    # The same forward on both sides, and a gradient routed otherwise: a
    # change of code, not rounding.
    o = run(tmp_path, maximum(A, TIES, routed(A, TIES) * 1.1), maximum(A, TIES, routed(A, TIES)))
    assert o.first_divergence == "Torch.maximum.0.backward", o.divergence

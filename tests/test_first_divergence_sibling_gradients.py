"""A parameter gradient of a module that is never called (docs/formats.md,
"Cancellation"; csrc/compare/cancellation.h). WavLM's attention hands its
q/k/v projections' weights and biases to F.multi_head_attention_forward; the
k_proj module itself never runs, so its parameters_grad record had no call
to take a scale from. Its bias gradient is zero in theory (a softmax ignores
a constant shift of the logits): a residue ~1e-7 of q_proj's and v_proj's,
43 % apart between eager and compiled runs, and a clean training step was
named there. It is now judged against its siblings' gradients. Records
computed here in float64."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from compare_fixtures import entry
from test_first_divergence_training import rec, run

G = torch.Generator().manual_seed(17)
TOKENS, D = 16, 32
X = torch.randn(TOKENS, D, dtype=torch.float64, generator=G)
DY = {k: torch.randn(TOKENS, D, dtype=torch.float64, generator=G) for k in "qkv"}
# k's output gradient sums to zero over the tokens in theory; each run
# leaves its own rounding residue, ~1e-7 of the terms, 40 % apart.
DY["k"] -= DY["k"].mean(0)
RESIDUE = 1e-7 * torch.randn(D, dtype=torch.float64, generator=G)
RESIDUE_T = RESIDUE + 0.4 * RESIDUE.norm() / D ** 0.5 * torch.randn(D, dtype=torch.float64, generator=G)


def attention(k_bias_grad: torch.Tensor, k_weight_scale: float = 1.0) -> dict[str, Any]:
    """The attention's forward (the projections' parameters taken as inputs
    of one call) and its three projections' parameters_grad entries."""
    data: dict[str, Any] = {"Module.attn.Attention.forward.0": entry([rec(X)], [rec(X @ X.T)])}
    for k in "qkv":
        weight = DY[k].T @ X * (k_weight_scale if k == "k" else 1.0)
        bias = k_bias_grad if k == "k" else DY[k].sum(0)
        data[f"Module.attn.{k}_proj.Linear.parameters_grad"] = {"weight": [rec(weight)], "bias": [rec(bias)]}
    return data


def test_the_bias_gradient_is_a_residue_of_its_siblings_size() -> None:
    q_rms = float(DY["q"].sum(0).norm()) / D ** 0.5
    assert float(RESIDUE.norm()) / D ** 0.5 < 1e-5 * q_rms
    assert float((RESIDUE_T - RESIDUE).norm() / RESIDUE.norm()) > 0.2


def test_a_residue_gradient_of_a_module_never_called_is_no_divergence(tmp_path: Path) -> None:
    # Before: "bias: Sketch ...%, ... the float32 floor" at k_proj's parameters_grad.
    o = run(tmp_path, attention(RESIDUE_T), attention(RESIDUE), step=0)
    assert o.divergence is None, o.divergence.message


def test_its_weight_gradient_scaled_is_still_named(tmp_path: Path) -> None:
    o = run(tmp_path, attention(RESIDUE, k_weight_scale=1.01), attention(RESIDUE), step=0)
    assert o.first_divergence == "Module.attn.k_proj.Linear.parameters_grad", o.divergence


def test_a_bias_gradient_that_is_no_residue_is_judged_at_its_own_size(tmp_path: Path) -> None:
    # The same 40 % error on a bias gradient of its siblings' size is named.
    big, big_t = 1e7 * RESIDUE, 1e7 * RESIDUE_T
    o = run(tmp_path, attention(big_t), attention(big), step=0)
    assert o.first_divergence == "Module.attn.k_proj.Linear.parameters_grad", o.divergence

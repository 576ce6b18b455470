"""Rules of the first divergence found on held-out architectures (issue 35,
round three: scripts/heldout_round3.py; docs/formats.md, "Few elements",
the `unrecorded-input` row and the integer outputs' paragraph). Each clean
case was named before its rule; each fault next to it is still named.
Records are computed here in float64 (statistics and Sketch) from tensors
built in the test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from compare_fixtures import entry
from test_first_divergence_bitwise import rec
from test_first_divergence_training import grad_entry, run

BF16, I64 = "torch.bfloat16", "torch.int64"
gen = torch.Generator().manual_seed(7)


def rec_int(t: torch.Tensor) -> dict[str, Any]:
    """An integer tensor's record: no Sketch (dump.json writes none for them)."""
    r = rec(t.double(), I64)
    del r["Sketch"]
    return r


def after_update(out_t: torch.Tensor, out_b: torch.Tensor, dtype: str = BF16) -> tuple[dict, dict]:
    """A layer before the case, at a training run's step 1: equal inputs,
    its weight moved by the first update, its output ``out_t`` / ``out_b``
    (where the noise upstream comes from), and a backward call (the step
    records a backward pass). Returns the target's and the bench's entries."""
    w = torch.eye(out_b.shape[-1], dtype=torch.float64)
    sides = []
    for out, drift in ((out_t, 1 + 1e-3), (out_b, 1.0)):
        sides.append({"Module.up.Linear.forward.0": {**entry([rec(out_b, dtype)], [rec(out, dtype)]),
                                                     "parameters": {"weight": rec(w * drift, dtype)}}})
    return sides[0], sides[1]


BACKWARD = {"Module.up.Linear.backward.0": grad_entry([rec(torch.ones(2, 2))], [rec(torch.ones(2, 2))])}


def bf16(t: torch.Tensor) -> torch.Tensor:
    """t rounded to bfloat16 (as float64)."""
    return t.to(torch.bfloat16).double()


def ulp_flips(t: torch.Tensor) -> torch.Tensor:
    """t (bfloat16 values) with every element moved by one bfloat16 ulp,
    alternately up and down: what another correct kernel may round to."""
    flat = t.reshape(-1)
    step = torch.tensor([2.0 ** -7 if i % 2 == 0 else -(2.0 ** -8) for i in range(flat.numel())], dtype=torch.float64)
    return bf16(flat * (1 + step)).reshape(t.shape)


# --- few elements: a router gate [8, 1] ------------------------------------------

H = bf16(torch.randn(8, 32, dtype=torch.float64, generator=gen))
WG = bf16(0.1 * torch.randn(1, 32, dtype=torch.float64, generator=gen))


def gate(h: torch.Tensor, out: torch.Tensor) -> dict[str, Any]:
    """``shared_expert_gate = Linear(32, 1)`` at mix: its input, its weight, its [8, 1] output."""
    return {"Functional.linear.0.forward": entry([rec(h), rec(WG)], [rec(out)])}


def test_a_gate_of_eight_elements_one_ulp_apart_is_rounding(tmp_path: Path) -> None:
    out = bf16(H @ WG.T)
    moved = ulp_flips(out)
    assert abs(float(moved.norm() / out.norm()) - 1) > 2e-3  # beyond the table's bfloat16 aggregate floor
    h = H * (1 + 1e-4 * torch.randn(H.shape, dtype=torch.float64, generator=gen))
    up_t, up_b = after_update(h, H)
    o = run(tmp_path, {**up_t, **gate(h, moved), **BACKWARD}, {**up_b, **gate(H, out), **BACKWARD}, step=1)
    assert o.first_divergence is None, o.divergence.message if o.divergence else None


def test_a_gate_scaled_by_a_fault_is_named(tmp_path: Path) -> None:
    out = bf16(H @ WG.T)
    up_t, up_b = after_update(H, H)
    o = run(tmp_path, {**up_t, **gate(H, out * 1.03), **BACKWARD}, {**up_b, **gate(H, out), **BACKWARD}, step=1)
    assert o.first_divergence == "Functional.linear.0.forward", o.divergence.message if o.divergence else None
    assert "Norm resting on" in o.divergence.message


# --- few elements: x ** 3 of activations whose bulk moved ------------------------

X = bf16(torch.randn(8, 64, dtype=torch.float64, generator=gen))


def cube(x: torch.Tensor, out: torch.Tensor) -> dict[str, Any]:
    return {"Torch.pow.0.forward": entry([rec(x)], [rec(out)])}


def test_a_cube_whose_norm_rests_on_few_elements_follows_its_inputs(tmp_path: Path) -> None:
    # The input's bulk 1 % apart (its largest elements equal), the cube's
    # Norm -- that of a few elements -- moving with the few that moved.
    # As in a clean bfloat16 ALBERT step: the input's bulk 1.2 % apart in
    # relative L2 (small elements, orthogonal to X), its elements ranked 3rd
    # to 20th by size 0.3 % larger, the two largest (its Max and Min) equal,
    # its Norm kept: the cube's Norm, resting on a few large elements, moves.
    flat = X.reshape(-1)
    ranked = flat.abs().argsort(descending=True)
    big, small = ranked[2:20], ranked[100:]
    x = flat.clone()
    x[big] *= 1.003
    x[small] *= torch.sqrt(1 - (x[big] @ x[big] - flat[big] @ flat[big]) / (flat[small] @ flat[small]))
    d = torch.zeros_like(flat)
    d[small] = flat[small] * torch.randn(small.numel(), dtype=torch.float64, generator=gen)
    d -= (d @ x) / (x[small] @ x[small]) * torch.where(d != 0, x, 0.0)
    x += d * (0.012 * flat.norm() / d.norm())
    x = bf16(x).reshape(X.shape)
    assert abs(float(x.norm() / X.norm()) - 1) < 5e-4  # the bulk moved, not the Norm
    out, out_t = bf16(X ** 3), bf16(x ** 3)
    assert abs(float(out_t.norm() / out.norm()) - 1) > 2e-3
    up_t, up_b = after_update(x, X)
    o = run(tmp_path, {**up_t, **cube(x, out_t), **BACKWARD}, {**up_b, **cube(X, out), **BACKWARD}, step=1)
    assert o.first_divergence is None, o.divergence.message if o.divergence else None


def test_a_cube_scaled_by_a_fault_is_named(tmp_path: Path) -> None:
    out = bf16(X ** 3)
    up_t, up_b = after_update(X, X)
    o = run(tmp_path, {**up_t, **cube(X, out * 1.05), **BACKWARD}, {**up_b, **cube(X, out), **BACKWARD}, step=1)
    assert o.first_divergence == "Torch.pow.0.forward", o.divergence.message if o.divergence else None


# --- an input's extremes against the Sketch upstream -----------------------------

K = bf16(torch.randn(4, 8, 8, dtype=torch.float64, generator=gen))


def rotary(k_out: torch.Tensor, k_slice: torch.Tensor) -> dict[str, Any]:
    """k_proj's output (recorded), then ``k[..., :4] * cos`` whose input is a
    slice made by code that is not recorded."""
    cos = torch.ones(8, 4, dtype=torch.float64)
    return {"Functional.linear.0.forward": entry([rec(k_out)], [rec(k_out)]),
            "Tensor.__mul__.0.forward": entry([rec(k_slice), rec(cos)], [rec(k_slice * cos)])}


def test_a_slices_extremes_move_with_the_bulk_upstream(tmp_path: Path) -> None:
    # The keys 1 % apart in relative L2 with their Max and Min equal; the
    # slice's largest element among those that moved: its Max 3 % apart.
    k = K.clone()
    k_t = bf16(k * (1 + 0.01 * torch.randn(k.shape, dtype=torch.float64, generator=gen)))
    for i in (K.reshape(-1).argmax(), K.reshape(-1).argmin()):  # the keys' Max and Min agree
        k_t.reshape(-1)[i] = K.reshape(-1)[i]
    sl, sl_t = k[..., :4].clone(), k_t[..., :4].clone()
    where = sl.reshape(-1).argmax()
    sl_t.reshape(-1)[where] = bf16(sl.reshape(-1)[where] * 1.03)
    sl_t = sl_t.clamp(max=float(sl_t.max()))
    e_max = abs(float(sl_t.max() - sl.max())) / float(sl.abs().max())
    assert e_max > 2.5e-2  # beyond the bfloat16 extreme floor and R x the upstream extremes
    up_t, up_b = after_update(k_t, K)
    o = run(tmp_path, {**up_t, **rotary(k_t, sl_t), **BACKWARD}, {**up_b, **rotary(K, sl), **BACKWARD}, step=1)
    assert o.first_divergence is None, o.divergence.message if o.divergence else None


def test_a_slice_scaled_by_a_fault_is_named(tmp_path: Path) -> None:
    sl = K[..., :4].clone()
    up_t, up_b = after_update(K, K)
    o = run(tmp_path, {**up_t, **rotary(K, sl * 1.05), **BACKWARD}, {**up_b, **rotary(K, sl), **BACKWARD}, step=1)
    assert o.first_divergence == "Tensor.__mul__.0.forward", o.divergence.message if o.divergence else None


# --- a permutation after a router's near tie --------------------------------------

P = torch.softmax(torch.randn(8, 4, dtype=torch.float64, generator=gen), -1)
TOKENS = bf16(torch.randn(8, 32, dtype=torch.float64, generator=gen))


def routed(probs: torch.Tensor, swap: bool) -> dict[str, Any]:
    """Mixtral's router at mix: topk (float in, int out), torch.where over
    expert 0's mask (int in, int out), the tokens gathered for expert 0 into
    its linear. ``swap``: token 3's two slots exchanged (a near tie), which
    leaves topk's indices with the same statistics."""
    values, idx = torch.topk(probs, 2, dim=-1)
    if swap:
        idx = idx.clone()
        idx[3] = idx[3].flip(0)
    mask = torch.nn.functional.one_hot(idx, 4).permute(2, 1, 0)[0]  # [slot, token] of expert 0
    slot, token = torch.where(mask)
    gathered = TOKENS[token]
    return {
        "Torch.topk.0.forward": entry([rec(probs, "torch.float32")],
                                      [rec(values, "torch.float32"), rec_int(idx)]),
        "Torch.where.0.forward": entry([rec_int(mask)], [rec_int(slot), rec_int(token)]),
        "Functional.linear.0.forward": entry([rec(gathered), rec(WG)], [rec(bf16(gathered @ WG.T))]),
    }


def _expert0_token3_in_both_slots() -> None:
    _, idx = torch.topk(P, 2, dim=-1)
    assert 0 in idx[3].tolist() and idx[3].tolist() != idx[3].flip(0).tolist()


def test_a_permutation_after_a_near_tie_is_rounding(tmp_path: Path) -> None:
    # Token 3 must route to expert 0 for the swap to reorder its tokens.
    global P
    P = P.clone()
    P[3] = torch.tensor([0.3, 0.3 - 1e-4, 0.2, 0.2 + 1e-4], dtype=torch.float64)
    _expert0_token3_in_both_slots()
    probs_t = P * (1 + 1e-4 * torch.randn(P.shape, dtype=torch.float64, generator=gen))  # beyond float32 rounding
    target, bench = routed(probs_t, True), routed(P, False)
    t_idx, b_idx = (d["Torch.topk.0.forward"]["output"][1] for d in (target, bench))
    assert all(t_idx[s] == b_idx[s] for s in ("Max", "Min", "Mean", "Norm"))  # the flip is invisible
    up_t, up_b = after_update(probs_t, P, "torch.float32")
    o = run(tmp_path, {**up_t, **target, **BACKWARD}, {**up_b, **bench, **BACKWARD}, step=1)
    assert o.first_divergence is None, o.divergence.message if o.divergence else None


def test_the_same_swap_behind_equal_router_inputs_is_named(tmp_path: Path) -> None:
    global P
    P = P.clone()
    P[3] = torch.tensor([0.3, 0.3 - 1e-4, 0.2, 0.2 + 1e-4], dtype=torch.float64)
    up_t, up_b = after_update(P, P, "torch.float32")
    o = run(tmp_path, {**up_t, **routed(P, True), **BACKWARD}, {**up_b, **routed(P, False), **BACKWARD}, step=1)
    assert o.first_divergence == "Torch.where.0.forward", o.divergence.message if o.divergence else None
    assert "integer output changed" in o.divergence.message

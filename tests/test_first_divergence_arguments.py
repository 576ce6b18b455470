"""A call made with another non-tensor argument (docs/formats.md, "Arguments
without effect"): a clean bfloat16 Persimmon under inductor calls
``scaled_dot_product_attention`` with ``is_causal=False`` and an explicit
causal mask where eager passes ``is_causal=True``; both return the same
values. Named only where what the call returned differs. Records are
computed in float64 from tensors built here, the attention itself in the
test (a reference of its own, not the tool's)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
from compare_fixtures import entry
from test_first_divergence_bitwise import rec
from test_first_divergence_training import run

F32 = "torch.float32"
gen = torch.Generator().manual_seed(11)
Q, K, V = (torch.randn(1, 2, 8, 4, dtype=torch.float64, generator=gen) for _ in range(3))
CAUSAL = torch.ones(8, 8, dtype=torch.bool).tril()


def attention(mask: torch.Tensor | None, scale: float = 1.0) -> torch.Tensor:
    """Causal attention in float64: by an explicit boolean mask, or (None) by
    building the same mask here, as ``is_causal=True`` does."""
    s = (Q @ K.transpose(-1, -2)) / math.sqrt(Q.shape[-1]) * scale
    s = s.masked_fill(~(CAUSAL if mask is None else mask), float("-inf"))
    return torch.softmax(s, dim=-1) @ V


def sdpa(out: torch.Tensor, is_causal: bool) -> dict[str, Any]:
    """``Functional.scaled_dot_product_attention.0.forward`` at mix, as the
    dumper writes it (``attn_mask`` None when not passed), then its consumer."""
    kwargs = {"attn_mask": None, "dropout_p": {"type": "float", "value": 0.0},
              "is_causal": {"type": "bool", "value": is_causal}}
    return {"Functional.scaled_dot_product_attention.0.forward":
            entry([rec(Q, F32), rec(K, F32), rec(V, F32)], [rec(out, F32)], kwargs),
            "Functional.linear.0.forward": entry([rec(out, F32)], [rec(out * 2, F32)])}


def test_another_flag_to_the_same_result_is_no_divergence(tmp_path: Path) -> None:
    eager, compiled = attention(None), attention(CAUSAL)
    assert torch.equal(eager, compiled)
    o = run(tmp_path, sdpa(compiled, False), sdpa(eager, True))
    assert o.first_divergence is None, o.divergence.message if o.divergence else None
    assert o.arguments_without_effect == (
        "Functional.scaled_dot_product_attention.0.forward input is_causal: False vs True",)
    # msprobe's rule keeps its error on the row; --fail-on error does not fail on it.
    assert o.counts.get("error") == 1 and o.errors_within_noise == 1


def test_another_flag_to_another_result_is_named_at_the_call(tmp_path: Path) -> None:
    # The same flag, and a graph-only fault in the call: the softmax's
    # scale x1.001 (the matrix's float32 size), far beyond float32's floor.
    eager, compiled = attention(None), attention(CAUSAL, scale=1.001)
    assert float((compiled - eager).norm() / eager.norm()) > 1e-4
    o = run(tmp_path, sdpa(compiled, False), sdpa(eager, True))
    assert o.first_divergence == "Functional.scaled_dot_product_attention.0.forward"
    assert "is_causal" in o.divergence.message and o.arguments_without_effect == ()


def test_another_flag_with_the_same_data_but_no_recorded_output_is_named(tmp_path: Path) -> None:
    # An in-place call returning None: nothing shows whether the flag
    # changed what it did, so the flag is the divergence.
    def call(flag: bool) -> dict[str, Any]:
        return {"Tensor.clamp_.0.forward": entry([rec(Q, F32)], [], {"inplace": {"type": "bool", "value": flag}})}
    o = run(tmp_path, call(False), call(True))
    assert o.first_divergence == "Tensor.clamp_.0.forward"

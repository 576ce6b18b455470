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


# -- a tensor argument of another shape ----------------------------------------------

def masked_attention(mask: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """Attention with an additive mask whose last dimension may be wider than
    the keys (the extra columns are sliced off inside, as transformers'
    attention does with ``mask[:, :, :, : key.shape[-2]]``)."""
    s = (Q @ K.transpose(-1, -2)) / math.sqrt(Q.shape[-1]) * scale + mask[..., : K.shape[-2]]
    return torch.softmax(s, dim=-1) @ V


def additive_mask(columns: int) -> torch.Tensor:
    """The causal mask as an additive float mask, ``columns`` wide: under
    torch.compile transformers' UMT5 builds it one column wider than eager
    does ([1, 1, 6, 7] against [1, 1, 6, 6]), that column masked."""
    m = torch.full((1, 1, 8, columns), torch.finfo(torch.float32).min, dtype=torch.float64)
    m[..., :8] = torch.where(CAUSAL, 0.0, torch.finfo(torch.float32).min)
    return m


def attention_module(out: torch.Tensor, mask: torch.Tensor) -> dict[str, Any]:
    """L0: the attention module, handed the hidden states and the mask."""
    return {"Module.decoder.attn.Attention.forward.0":
            entry([rec(Q, F32)], [rec(out, F32)], {"attention_mask": rec(mask, F32)}),
            "Module.decoder.out.Linear.forward.0": entry([rec(out, F32)], [rec(out * 2, F32)])}


def test_a_mask_of_another_shape_to_the_same_result_is_no_divergence(tmp_path: Path) -> None:
    # Failed before: "input attention_mask: shape differs: [1, 1, 8, 9] vs [1, 1, 8, 8]".
    wide, narrow = additive_mask(9), additive_mask(8)
    eager, compiled = masked_attention(narrow), masked_attention(wide)
    assert torch.equal(eager, compiled)
    o = run(tmp_path, attention_module(compiled, wide), attention_module(eager, narrow))
    assert o.first_divergence is None, o.divergence.message if o.divergence else None
    assert o.arguments_without_effect == (
        "Module.decoder.attn.Attention.forward.0 input attention_mask: shape [1, 1, 8, 9] vs [1, 1, 8, 8]",)


def test_a_mask_of_another_shape_to_another_result_is_named_at_the_call(tmp_path: Path) -> None:
    wide, narrow = additive_mask(9), additive_mask(8)
    eager, compiled = masked_attention(narrow), masked_attention(wide, scale=1.001)
    assert float((compiled - eager).norm() / eager.norm()) > 1e-4
    o = run(tmp_path, attention_module(compiled, wide), attention_module(eager, narrow))
    assert o.first_divergence == "Module.decoder.attn.Attention.forward.0"
    assert "attention_mask" in o.divergence.message and "shape" in o.divergence.message, o.divergence.message
    assert o.arguments_without_effect == ()


def test_a_tensor_of_another_dtype_is_still_a_hard_difference(tmp_path: Path) -> None:
    # Only the shape is taken as the way a call was made; another dtype is data that changed.
    narrow = additive_mask(8)
    out = masked_attention(narrow)
    target = attention_module(out, narrow)
    target["Module.decoder.attn.Attention.forward.0"]["input_kwargs"]["attention_mask"]["dtype"] = "torch.float16"
    o = run(tmp_path, target, attention_module(out, narrow))
    assert o.first_divergence == "Module.decoder.attn.Attention.forward.0"


def test_tokens_of_another_count_after_a_routing_near_tie_are_not_an_argument(tmp_path: Path) -> None:
    # A router's argmax flips at a near tie (its bfloat16 inputs 1e-4 apart:
    # rounding it explains), so expert 0 receives 3 tokens on one side and 2
    # on the other; its linear's input and output then differ in shape. The
    # shape follows the flip: data, not the way the call was made (a clean
    # bfloat16 Switch Transformers step was named at an expert's linear
    # when any tensor of another shape counted as an argument).
    from test_first_divergence_few_elements import WG, bf16, rec_int
    tokens = bf16(torch.randn(6, 32, dtype=torch.float64, generator=gen))
    probs = torch.softmax(torch.randn(6, 4, dtype=torch.float64, generator=gen), -1)
    probs[2] = torch.tensor([0.3, 0.3 - 1e-5, 0.2, 0.2 + 1e-5], dtype=torch.float64)
    probs_t = probs * (1 + 1e-4 * torch.randn(probs.shape, dtype=torch.float64, generator=gen))
    probs_t[2] = torch.tensor([0.3 - 1e-5, 0.3, 0.2, 0.2 + 1e-5], dtype=torch.float64)

    def routed(p: torch.Tensor) -> dict[str, Any]:
        idx = p.argmax(-1)
        (token,) = torch.where(idx == 0)
        x = tokens[token]
        return {"Torch.argmax.0.forward": entry([rec(p, "torch.bfloat16")], [rec_int(idx)]),
                "Torch.where.0.forward": entry([rec_int(idx == 0)], [rec_int(token)]),
                "Functional.linear.0.forward": entry([rec(x, "torch.bfloat16"), rec(WG, "torch.bfloat16")],
                                                     [rec(bf16(x @ WG.T), "torch.bfloat16")])}
    target, bench = routed(probs_t), routed(probs)
    shapes = [d["Functional.linear.0.forward"]["input_args"][0]["shape"] for d in (target, bench)]
    assert shapes[0] != shapes[1], shapes
    o = run(tmp_path, target, bench)
    assert o.first_divergence is None, o.divergence.message if o.divergence else None
    assert o.arguments_without_effect == ()

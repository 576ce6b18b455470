"""The same values recorded again (issue 35; docs/formats.md, "The same
values recorded again"): a module whose output is its last child's output
holds, in the bench, the same record twice, bit for bit. A graph-only change
between the child's return and the module's (a precision loss applied to the
module's output) shows as the target's two records differing -- named
whatever the floors, where the pair's own noise (inductor's rounding, ~0.1 %
here) hides it from every other rule. Statistics and Sketches are computed
here in float64 (sketch_reference.py); the change in the faulted cases is
0.3 % of the norm, below the bfloat16 Sketch floor (5e-3) and within
R x the noise of the inputs, so none of them was named before the rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from graphprobe.compare import compare
from compare_fixtures import entry, write_dump
from test_first_divergence_bitwise import rec, run
gen = torch.Generator().manual_seed(0)
X = [torch.randn(4, 32, dtype=torch.float64, generator=gen) for _ in range(3)]  # MLP inputs
Y = [torch.randn(4, 16, dtype=torch.float64, generator=gen) for _ in range(3)]  # down_proj outputs


def nudge(t: torch.Tensor, size: float, seed: float) -> torch.Tensor:
    """t moved by ``size`` of its L2 norm in a pseudo-random direction."""
    d = torch.sin(torch.arange(t.numel(), dtype=torch.float64) * seed).reshape(t.shape)
    return t + size * d * t.norm() / d.norm()


def mlps(noise: float = 0.0, changed: dict[int, float] | None = None, bias: bool = False,
         reshaped: bool = False) -> dict[str, Any]:
    """Three layers at L0: mlp.down_proj (input X[k], output Y[k]) inside
    mlp (input X[k], output: down_proj's, the same tensor). ``noise``: the
    target's rounding, one draw per tensor (both records of Y[k] alike);
    ``changed``: layer -> a further change of the MLP's output only;
    ``bias``: the MLP adds 1 to it (a different tensor, in both sides);
    ``reshaped``: the MLP returns it flattened."""
    changed = changed or {}
    data: dict[str, Any] = {}
    for k in range(3):
        x = nudge(X[k], noise, 3.1 + k) if noise else X[k]
        y = nudge(Y[k], noise, 7.7 + k) if noise else Y[k]
        out = y + 1 if bias else y
        if k in changed:
            out = nudge(out, changed[k], 19.3)
        if reshaped:
            out = out.reshape(-1)
        data[f"Module.layers.{k}.mlp.down_proj.Linear.forward.0"] = entry([rec(x)], [rec(y)])
        data[f"Module.layers.{k}.mlp.MLP.forward.0"] = entry([rec(x)], [rec(out)])
    return data


def test_a_module_that_changes_its_childs_output_on_the_target_is_named(tmp_path: Path) -> None:
    o = run(tmp_path, mlps(noise=1e-3, changed={1: 3e-3}), mlps())
    assert o.first_divergence == "Module.layers.1.mlp.MLP.forward.0"
    assert o.divergence is not None and "same-values" in o.divergence.kinds and "output" in o.divergence.kinds
    assert "Module.layers.1.mlp.down_proj.Linear.forward.0" in o.divergence.message


def test_rounding_alone_keeps_the_same_values_the_same(tmp_path: Path) -> None:
    # The target's rounding moves both records of Y alike: nothing changed between them.
    o = run(tmp_path, mlps(noise=1e-3), mlps())
    assert o.first_divergence is None


def test_records_that_differ_in_the_bench_are_not_the_same_values(tmp_path: Path) -> None:
    # The MLP adds a bias on both sides: its output is another tensor, and
    # 0.3 % on it is within the floors.
    o = run(tmp_path, mlps(noise=1e-3, bias=True, changed={1: 3e-3}), mlps(bias=True))
    assert o.first_divergence is None


def test_a_reshaped_output_is_not_compared_with_its_source(tmp_path: Path) -> None:
    o = run(tmp_path, mlps(noise=1e-3, reshaped=True, changed={1: 3e-3}), mlps(reshaped=True))
    assert o.first_divergence is None


def _attention_input_gradient(small: torch.Tensor) -> dict[str, Any]:
    """A self-attention's backward at mix: the value projection's input
    gradient (recorded first), then the module's input gradient: the value
    path's plus the query and key paths' (``small``), rounded to bfloat16."""
    value_path = Y[0].to(torch.bfloat16).double()
    total = (Y[0] + small).to(torch.bfloat16).double()
    return {"Functional.linear.3.backward": {"input": [rec(X[0][:, :16])], "output": [rec(value_path)]},
            "Module.attn.SelfAttention.backward.0": {"input": [rec(X[0][:, :16])], "output": [rec(total)]}}


def test_tiny_terms_that_one_sides_rounding_kept_are_not_a_change(tmp_path: Path) -> None:
    # In the bench the query and key paths' ~1e-6 vanish in bfloat16 (the
    # module's gradient equals the value path's bit for bit); in the target
    # one small element keeps one of them: 1e-5 apart, not a change of the
    # value (a clean bfloat16 ELECTRA step under inductor was named so).
    flat = Y[0].reshape(-1)
    tiny = torch.zeros_like(flat)
    i = int(flat.abs().argmin())
    tiny[i] = flat[i].abs().clamp_min(1e-30) * 2.0 ** -7  # one ulp of the smallest element
    target = _attention_input_gradient(tiny.reshape(Y[0].shape))
    bench = _attention_input_gradient(torch.zeros_like(Y[0]))
    t_out = target["Module.attn.SelfAttention.backward.0"]["output"][0]
    b_out = bench["Module.attn.SelfAttention.backward.0"]["output"][0]
    assert t_out["Norm"] != b_out["Norm"] or t_out["Sketch"] != b_out["Sketch"]  # the target's two records differ
    o = run(tmp_path, target, bench)
    assert o.first_divergence is None, o.divergence.message if o.divergence else None


def test_a_scaled_gradient_passed_on_is_still_named(tmp_path: Path) -> None:
    scaled = _attention_input_gradient(torch.zeros_like(Y[0]))
    out = scaled["Module.attn.SelfAttention.backward.0"]["output"]
    out[0] = rec(Y[0].to(torch.bfloat16).double() * 1.01)
    o = run(tmp_path, scaled, _attention_input_gradient(torch.zeros_like(Y[0])))
    assert o.first_divergence == "Module.attn.SelfAttention.backward.0", o.divergence.message if o.divergence else None


def _reference_of(data: dict[str, Any]) -> dict[str, Any]:
    """The bench's records as a float64 reference dump would hold them."""
    return {name: {part: ([{**r, "dtype": "torch.float64"} for r in v] if isinstance(v, list) else v)
                   for part, v in e.items()} for name, e in data.items()}


def test_a_change_named_by_the_same_values_stands_under_a_float64_referee(tmp_path: Path) -> None:
    # The referee's margin (torch's same(): 3x the bench's distance in
    # bfloat16) cannot see a change at 1.1x the floor; this rule needs no
    # margin: the bench says nothing may change there. (The six bfloat16
    # precision faults of the matrix against inductor were named without
    # --reference and lost with it.)
    t = write_dump(tmp_path / "t" / "dump.json", mlps(noise=1e-3, changed={1: 3e-3}))
    b = write_dump(tmp_path / "b" / "dump.json", mlps())
    ref = write_dump(tmp_path / "r" / "dump.json", _reference_of(mlps()))
    (o,) = compare(t, b, tmp_path / "o", html=False, progress=False, reference=ref).outcomes
    assert o.error is None, o.error
    assert o.referee is not None and o.referee.blamed_entry is None
    assert o.first_divergence == "Module.layers.1.mlp.MLP.forward.0"
    assert "same-values" in o.divergence.kinds and "referee blames nothing" in o.divergence.message
    # Rounding alone: still nothing, with or without the referee.
    t2 = write_dump(tmp_path / "t2" / "dump.json", mlps(noise=1e-3))
    (o,) = compare(t2, b, tmp_path / "o2", html=False, progress=False, reference=ref).outcomes
    assert o.first_divergence is None

"""U in scope (docs/formats.md): the input of a forward module call, moved by
unrecorded code inside its enclosing module, is weighed against what that
module received and its children computed before it, not against the
largest error anywhere upstream. Hand-written float32 dumps whose
statistics and Sketch are computed here in float64 (sketch_reference); each
case first checks that its numbers sit between the two rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from compare_fixtures import entry, write_dump
from test_first_divergence_training import _sketch_error as sketch_error, rec

from graphprobe.compare import compare

FLOOR = 2e-6  # the float32 Sketch floor (docs/formats.md, noise floor table)
R = 4.0  # --divergence-ratio's default

G = torch.Generator().manual_seed(11)
H = torch.randn(8, 32, dtype=torch.float64, generator=G)  # the model's input, equal on both sides
A0 = torch.rand(4, 8, 8, dtype=torch.float64, generator=G)  # layer 0's returned attention weights
H1 = torch.randn(8, 32, dtype=torch.float64, generator=G)  # layer 0's output, layer 1's input
Z = torch.randn(8, 32, dtype=torch.float64, generator=G)  # o_proj's input (the attention's core, unrecorded)
W = 0.1 * torch.randn(32, 32, dtype=torch.float64, generator=G)


def moved(t: torch.Tensor, rel: float) -> torch.Tensor:
    """t scaled so that its Sketch moves by exactly ``rel`` (relative L2
    estimate): the Sketch is linear, so a scale by 1 + s moves it by s times
    the estimate of t's own size."""
    return t * (1 + rel / sketch_error(2 * t, t))


A0_T, H1_T, Z_T = moved(A0, 5e-7), moved(H1, 1.5e-7), moved(Z, 3.2e-6)


def dump(a0: torch.Tensor, h1: torch.Tensor, z: torch.Tensor, enclosing: bool = True,
         enclosing_input: bool = True) -> dict[str, Any]:
    """L0: layer 0's attention (its returned weights noisy), then layer 1's
    q_proj and o_proj, then layer 1's attention itself (it completes after
    its children). Every error below the float32 Sketch floor but o_proj's
    input's."""
    d = {
        "Module.layers.0.attn.Attention.forward.0": entry([rec(H)], [rec(h1), rec(a0)]),
        "Module.layers.1.attn.q_proj.Linear.forward.0": entry([rec(h1)], [rec(h1 @ W.T)]),
        "Module.layers.1.attn.o_proj.Linear.forward.0": entry([rec(z)], [rec(z @ W.T)]),
    }
    if enclosing:
        d["Module.layers.1.attn.Attention.forward.0"] = entry([rec(h1)] if enclosing_input else [], [rec(z @ W.T)])
    return d


def run(tmp_path: Path, target: dict[str, Any], bench: dict[str, Any]):
    t = write_dump(tmp_path / "t.json", target)
    b = write_dump(tmp_path / "b.json", bench)
    (o,) = compare(t, b, tmp_path / "o", html=False, progress=False).outcomes
    assert o.error is None, o.error
    return o


def test_the_case_sits_between_the_two_rules() -> None:
    u_all = max(sketch_error(A0_T, A0), sketch_error(H1_T @ W.T, H1 @ W.T))
    u_scope, e = max(sketch_error(H1_T, H1), sketch_error(H1_T @ W.T, H1 @ W.T)), sketch_error(Z_T, Z)
    # Within R x everything upstream plus the floor, beyond R x the scope plus the floor.
    assert R * u_scope + FLOOR < e < R * u_all + FLOOR, (u_all, u_scope, e)


def test_an_input_beyond_its_enclosing_calls_scope_is_named(tmp_path: Path) -> None:
    # Before U in scope: no first divergence (layer 0's weights, which layer
    # 1's attention never reads, set the bar).
    o = run(tmp_path, dump(A0_T, H1_T, Z_T), dump(A0, H1, Z))
    assert o.first_divergence == "Module.layers.1.attn.o_proj.Linear.forward.0", o.divergence and o.divergence.message
    assert o.divergence.kinds == ("unrecorded-input",)
    assert "what Module.layers.1.attn.Attention.forward.0 received and computed before it" in o.divergence.message


def test_without_the_enclosing_calls_record_everything_upstream_counts(tmp_path: Path) -> None:
    o = run(tmp_path, dump(A0_T, H1_T, Z_T, enclosing=False), dump(A0, H1, Z, enclosing=False))
    assert o.divergence is None, o.divergence.message


def test_an_enclosing_input_recorded_on_one_side_leaves_the_scope_unknown(tmp_path: Path) -> None:
    o = run(tmp_path, dump(A0_T, H1_T, Z_T, enclosing_input=False), dump(A0, H1, Z))
    assert o.first_divergence != "Module.layers.1.attn.o_proj.Linear.forward.0", o.divergence.message


def test_the_scope_explains_what_the_enclosing_call_received(tmp_path: Path) -> None:
    # Layer 1's input 1e-6 apart (under its floor): unrecorded code inside
    # the attention may carry 4x that; silent.
    h1_t = moved(H1, 1e-6)
    assert sketch_error(Z_T, Z) < R * sketch_error(h1_t, H1) + FLOOR
    o = run(tmp_path, dump(A0_T, h1_t, Z_T), dump(A0, H1, Z))
    assert o.divergence is None, o.divergence.message


def test_after_an_update_the_scopes_sketch_bounds_an_inputs_norm(tmp_path: Path) -> None:
    # A training step 1 (a backward recorded, step folders): v_proj's weight
    # drifted 3 % by the first update, so V is ~3 % apart by its Sketch and
    # far less by its Norm; the attention's unrecorded P @ V moves o_proj's
    # input Norm 1.3 % (a clean DistilBERT step: 1.3 % from V 3 % / 0.07 %).
    # Within R x the scope's Sketch, beyond R x its Norm: named before the
    # Sketch bounded an input's Mean/Norm after an update.
    g = torch.Generator().manual_seed(7)
    wv = 0.1 * torch.randn(32, 32, dtype=torch.float64, generator=g)
    wv_t = wv + 0.03 * float(wv.norm()) / 32 * torch.randn(32, 32, dtype=torch.float64, generator=g)
    v, v_t = H1 @ wv.T, H1 @ wv_t.T
    z_t = 1.013 * Z
    norm_e = lambda t, b: abs(float(t.norm()) - float(b.norm())) / float(b.norm())  # noqa: E731
    u_norm, u_sketch = norm_e(v_t, v), sketch_error(v_t, v)
    assert R * u_norm + 1e-4 < norm_e(z_t, Z) < R * u_sketch, (u_norm, u_sketch)

    def dump(w: torch.Tensor, vv: torch.Tensor, z: torch.Tensor) -> dict[str, Any]:
        return {
            "Module.layers.1.attn.v_proj.Linear.forward.0": {**entry([rec(H1)], [rec(vv)]),
                                                             "parameters": {"weight": rec(w)}},
            "Module.layers.1.attn.o_proj.Linear.forward.0": entry([rec(z)], [rec(z @ W.T)]),
            "Module.layers.1.attn.Attention.forward.0": entry([rec(H1)], [rec(z @ W.T)]),
            "Module.layers.1.attn.o_proj.Linear.backward.0": {"input": [rec(Z)], "output": [rec(Z @ W)]},
        }

    t = write_dump(tmp_path / "t" / "step1" / "rank0" / "dump.json", dump(wv_t, v_t, z_t))
    b = write_dump(tmp_path / "b" / "step1" / "rank0" / "dump.json", dump(wv, v, Z))
    (o,) = compare(t, b, tmp_path / "o", html=False, progress=False).outcomes
    assert o.error is None, o.error
    assert o.parameters_after_update, "not read as a training step 1"
    assert o.divergence is None, o.divergence.message

"""Two backward rules of the first divergence (issue 35; docs/formats.md,
"The same values recorded again" and "What explains an entry's outputs"):

* a gradient a backward call receives that the bench holds bit for bit as an
  earlier backward call's output (the same gradient passed on) and that the
  target changed between the two by more than half an ulp is named, however
  noisy the pair already is;
* the input gradient of a ReLU follows its forward input's rounding by the
  gradient's whole size where an element sits at the kink: explained.

Records are computed here in float64 from the tensors themselves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from compare_fixtures import entry
from test_first_divergence_bitwise import rec, run

gen = torch.Generator().manual_seed(5)
G = torch.randn(8, 32, dtype=torch.float64, generator=gen)       # the residual stream's gradient
W = torch.randn(64, 32, dtype=torch.float64, generator=gen) / 8  # a linear's weight (out 32, in 64)
V = torch.randn(8, 32, dtype=torch.float64, generator=gen)       # an unrelated noisy gradient upstream


def redistributed(t: torch.Tensor, size: float, seed: float = 12.9898) -> torch.Tensor:
    d = torch.sin(torch.arange(t.numel(), dtype=torch.float64) * seed).reshape(t.shape)
    return t + size * d * t.norm() / d.norm()


def passed_on(g_arriving: torch.Tensor, noisy: bool, rounding: float = 0.0) -> dict[str, Any]:
    """Upstream a backward call whose gradient (Norm 0.15 % off, within the
    bfloat16 floor 2e-3) comes out 0.5 % off when ``noisy``: the pair's
    noise U; the residual add passes G on to both its inputs; the linear
    that produced one of them receives ``g_arriving``. ``rounding``: the
    target's rounding of G, alike in both of its records."""
    g = redistributed(G, rounding, 3.3) if rounding else G
    v_in, v_out = (V * 1.0015, V * 2 * 1.005) if noisy else (V, V * 2)
    return {
        "Tensor.pow.0.backward": {"input": [rec(v_in)], "output": [rec(v_out)]},
        "Tensor.__add__.0.backward": {"input": [rec(g)], "output": [rec(g), rec(g)]},
        "Functional.linear.0.backward": {"input": [rec(g_arriving)], "output": [rec(g_arriving @ W.T)]},
    }


def test_a_gradient_changed_between_two_records_of_it_is_named(tmp_path: Path) -> None:
    o = run(tmp_path, passed_on(G * 1.01, True), passed_on(G, False))
    assert o.first_divergence == "Functional.linear.0.backward", o.divergence.message if o.divergence else None
    assert set(o.divergence.kinds) >= {"same-values", "unrecorded-input"}
    assert "Tensor.__add__.0.backward" in o.divergence.message


def test_the_same_change_is_within_the_noise_without_the_rule(tmp_path: Path) -> None:
    # The bench's two records differ (another tensor): only the noise rules
    # apply, and 1 % sits within R x the 0.5 % upstream.
    bench = passed_on(G, False)
    bench["Tensor.__add__.0.backward"]["output"][0] = rec(G * 1.5)
    bench["Tensor.__add__.0.backward"]["output"][1] = rec(G * 1.5)
    target = passed_on(G * 1.01, True)
    target["Tensor.__add__.0.backward"]["output"][0] = rec(G * 1.5)
    target["Tensor.__add__.0.backward"]["output"][1] = rec(G * 1.5)
    o = run(tmp_path, target, bench)
    assert o.first_divergence is None, o.divergence.message if o.divergence else None


def test_rounding_that_moves_both_records_alike_is_not_named(tmp_path: Path) -> None:
    g = redistributed(G, 1e-3, 3.3)
    o = run(tmp_path, passed_on(g, True, rounding=1e-3), passed_on(G, False))
    assert o.first_divergence is None, o.divergence.message if o.divergence else None


def test_a_gradient_rounded_again_by_another_kernel_is_not_named(tmp_path: Path) -> None:
    # A compiled backward may compute one gradient in two kernels, each
    # rounding it to bfloat16 from its own float32 sum: the linear's record
    # 0.14 % apart from the add's (a clean RegNet under inductor), within half
    # a bfloat16 ulp (3.9e-3) and within R x the 0.5 % upstream. Before: named
    # as a change between the two records (beyond 1/64 ulp, 1.2e-4).
    g = redistributed(G, 1.4e-3, 3.3)
    e = float((g - G).norm() / G.norm())
    assert 2 ** -7 / 64 < e < 2 ** -7 / 2, e
    o = run(tmp_path, passed_on(g, True), passed_on(G, False))
    assert o.first_divergence is None, o.divergence.message if o.divergence else None


X = torch.randn(8, 64, dtype=torch.float64, generator=gen)
GY = torch.randn(8, 64, dtype=torch.float64, generator=gen)


def relu(x: torch.Tensor, scale: float = 1.0) -> dict[str, Any]:
    return {
        "Functional.relu.0.forward": entry([rec(x)], [rec(x.clamp_min(0))]),
        "Functional.relu.0.backward": {"input": [rec(GY)], "output": [rec(GY * (x > 0) * scale)]},
    }


def test_a_relu_gradient_that_follows_an_element_across_the_kink_is_rounding(tmp_path: Path) -> None:
    x = X.clone()
    i = int(x.abs().argmin())
    x_t = x.clone()
    x_t.view(-1)[i] = -x.view(-1)[i]  # rounding put the element nearest 0 on the other side
    x_t.view(-1)[i + 1] *= 1 + 1e-3
    flipped = float(((GY * (x_t > 0)) - (GY * (x > 0))).norm() / (GY * (x > 0)).norm())
    assert flipped > 1e-2, flipped  # twice the bfloat16 Sketch floor (5e-3): named before the rule
    o = run(tmp_path, relu(x_t), relu(x))
    assert o.first_divergence is None, o.divergence.message if o.divergence else None


def test_a_relu_gradient_fault_with_equal_inputs_is_named(tmp_path: Path) -> None:
    o = run(tmp_path, relu(X, scale=1.05), relu(X))
    assert o.first_divergence == "Functional.relu.0.backward", o.divergence.message if o.divergence else None


GL = torch.randn(16, 32, dtype=torch.float64, generator=gen)      # the gradient arriving at down_proj
WL = torch.randn(32, 64, dtype=torch.float64, generator=gen) / 6  # down_proj's weight (out 32, in 64)


def down_proj(g: torch.Tensor, scale: float = 1.0) -> dict[str, Any]:
    """A Linear's backward at L0: its input's gradient is g @ W."""
    return {"Module.mlp.down_proj.Linear.backward.0": {"input": [rec(g)], "output": [rec(g @ WL * scale)]}}


def test_a_linear_modules_gradient_scaled_inside_its_inputs_rounding_is_named(tmp_path: Path) -> None:
    g = redistributed(GL, 3e-3)  # bfloat16 rounding of the gradient arriving: Sketch 0.3 %, its Norm far less
    assert abs(float(g.norm() / GL.norm()) - 1) < 3e-4
    o = run(tmp_path, down_proj(g, scale=1.01), down_proj(GL))
    assert o.first_divergence == "Module.mlp.down_proj.Linear.backward.0", o.divergence.message if o.divergence else None
    assert "output" in o.divergence.kinds


def test_a_linear_modules_gradient_carrying_its_inputs_rounding_is_not_named(tmp_path: Path) -> None:
    g = redistributed(GL, 3e-3)
    o = run(tmp_path, down_proj(g), down_proj(GL))
    assert o.first_divergence is None, o.divergence.message if o.divergence else None


def test_another_modules_gradient_keeps_the_sketch_bound(tmp_path: Path) -> None:
    # Not a linear module (an MLP: its gradient may move with the whole
    # relative error of what arrives): the same 1 % stays within 4 x 0.3 %.
    g = redistributed(GL, 3e-3)
    rename = lambda d: {k.replace("down_proj.Linear", "MLP"): v for k, v in d.items()}  # noqa: E731
    o = run(tmp_path, rename(down_proj(g, scale=1.01)), rename(down_proj(GL)))
    assert o.first_divergence is None, o.divergence.message if o.divergence else None

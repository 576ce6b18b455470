"""An input holding a mask value says nothing through its Sketch
(docs/formats.md, "The Sketch class"). Attention scores plus a causal mask of
-1e10 (LongT5) have a Norm and a Sketch that are the mask's: equal on both
sides, so the Sketch error of the masked scores is ~1e-5 while the scores
themselves differ by bfloat16 rounding. A clean bfloat16 LongT5 step 1 had
the softmax of such scores 0.92 % apart by its Sketch, "150x its inputs'",
and was named. Statistics and Sketches computed here in float64."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from compare_fixtures import entry
from test_first_divergence_training import _sketch_error as sketch_error, rec, run

BF16 = "torch.bfloat16"
R = 4.0  # --divergence-ratio's default
SKETCH_FLOOR = 5e-3  # bfloat16's

G = torch.Generator().manual_seed(11)
SCORES = 6.0 * torch.randn(2, 4, 8, 8, dtype=torch.float64, generator=G)
MASK = torch.triu(torch.full((8, 8), -1e10, dtype=torch.float64), diagonal=1)
_noise = torch.randn(SCORES.shape, dtype=torch.float64, generator=G)
SCORES_T = SCORES + 4e-3 * float(SCORES.norm()) * _noise / float(_noise.norm())  # within the Sketch floor


def attention(scores: torch.Tensor, mask: torch.Tensor, softmax_scale: float = 1.0) -> dict[str, Any]:
    """The scores as the model's first record, the mask added, a softmax."""
    masked = scores + mask
    return {"Tensor.float.0.forward": entry([rec(scores, BF16)], [rec(scores, BF16)]),
            "Tensor.__add__.0.forward": entry([rec(scores, BF16), rec(mask)], [rec(masked)]),
            "Functional.softmax.0.forward": entry([rec(masked)], [rec(torch.softmax(softmax_scale * masked, -1))])}


def test_the_masked_scores_sketch_hides_the_scores_error() -> None:
    masked_t, masked_b = SCORES_T + MASK, SCORES + MASK
    p_t, p_b = torch.softmax(masked_t, -1), torch.softmax(masked_b, -1)
    # The masked scores agree by their Sketch: the mask is most of them.
    assert sketch_error(masked_t, masked_b) < 1e-6
    # Their softmax does not: beyond 4R times that, within 4R times the
    # scores' own error upstream.
    assert sketch_error(p_t, p_b) > R * 4 * sketch_error(masked_t, masked_b) + SKETCH_FLOOR
    assert sketch_error(p_t, p_b) < R * 4 * sketch_error(SCORES_T, SCORES)


def test_a_softmax_of_masked_scores_is_weighed_against_the_scores(tmp_path: Path) -> None:
    # Before: "output 0: Sketch ..., Nx its inputs'" at the softmax.
    o = run(tmp_path, attention(SCORES_T, MASK), attention(SCORES, MASK), step=0)
    assert o.divergence is None, o.divergence.message


def test_a_softmax_scale_fault_behind_a_mask_is_named(tmp_path: Path) -> None:
    o = run(tmp_path, attention(SCORES, MASK, softmax_scale=1.1), attention(SCORES, MASK), step=0)
    assert o.first_divergence == "Functional.softmax.0.forward", o.divergence


def test_a_small_additive_mask_keeps_the_inputs_sketch(tmp_path: Path) -> None:
    # -10 is no mask value: the input's own Sketch still explains its softmax,
    # and the noise beyond it is named.
    small = torch.triu(torch.full((8, 8), -10.0, dtype=torch.float64), diagonal=1)
    o = run(tmp_path, attention(SCORES, small, softmax_scale=1.1), attention(SCORES, small), step=0)
    assert o.first_divergence == "Functional.softmax.0.forward", o.divergence

"""An API call inside a module, on a parameter that drifted, after an update
(docs/formats.md, "U in scope"). A clean bfloat16 YOLOS training step 1 was
named at ``F.interpolate`` of its position embeddings: unrecorded code slices
and reshapes the parameter, which the first AdamW step moved (4.5 % apart by
the Sketch), and the parameter is recorded only later, as the input of the
module that completes next and as its owner's parameter. Records are
computed here in float64 from tensors built in the test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from compare_fixtures import entry
from test_first_divergence_few_elements import BACKWARD, bf16
from test_first_divergence_training import _sketch_error as sketch_error
from test_first_divergence_training import rec, run

BF16 = "torch.bfloat16"
R = 4.0  # --divergence-ratio's default
SKETCH_FLOOR = 5e-3  # bfloat16's

G = torch.Generator().manual_seed(23)
X = bf16(torch.randn(1, 16, 32, dtype=torch.float64, generator=G))  # patch embeddings
W = torch.eye(32, dtype=torch.float64)
POS = bf16(0.02 * torch.randn(1, 17, 32, dtype=torch.float64, generator=G))  # cls + 16 patches
# Adam's first step moves every element by about lr, its sign from the
# gradient: residue-sized gradients give the two runs other signs here and there.
_signs = torch.where(torch.rand(POS.shape, generator=G) < 0.1, -1.0, 1.0).double()
POS_T = bf16(POS + 1e-3 * _signs)
POS_B = bf16(POS + 1e-3 * torch.ones_like(POS))


def patches(pos: torch.Tensor) -> torch.Tensor:
    """What unrecorded code hands ``F.interpolate``: the patch rows, as a grid."""
    return pos[:, 1:, :].transpose(1, 2).reshape(1, 32, 4, 4)


def step(pos: torch.Tensor, grid: torch.Tensor) -> dict[str, Any]:
    """mix, step 1: the patch embedding (agrees), the interpolation (API call, then its module, which was
    handed the parameter), the embeddings module that owns the parameter, and a
    backward call (the step records a backward pass)."""
    up = F.interpolate(grid, size=(2, 2), mode="bilinear", align_corners=False)
    pos_out = torch.cat([pos[:, :1, :], up.flatten(2).transpose(1, 2)], dim=1)
    out = torch.cat([X[:, :1, :] * 0, X], dim=1)[:, :5, :] + pos_out
    return {"Module.embeddings.patches.Linear.forward.0": {**entry([rec(X, BF16)], [rec(X, BF16)]),
                                                           "parameters": {"weight": rec(W, BF16)}},
            "Functional.interpolate.0.forward": entry([rec(grid, BF16)], [rec(bf16(up), BF16)]),
            "Module.embeddings.interpolation.Interpolate.forward.0": entry([rec(pos, BF16)],
                                                                           [rec(bf16(pos_out), BF16)]),
            "Module.embeddings.Embeddings.forward.0": {**entry([rec(X, BF16)], [rec(bf16(out), BF16)]),
                                                       "parameters": {"position_embeddings": rec(pos, BF16)}},
            **BACKWARD}


def test_the_case_is_what_yolos_showed() -> None:
    drift = sketch_error(POS_T, POS_B)
    grid_error = sketch_error(patches(POS_T), patches(POS_B))
    # The parameter moved beyond the bfloat16 Sketch floor; the grid carries
    # the same drift, which nothing walked before it explains.
    assert drift > SKETCH_FLOOR and grid_error > R * 0 + SKETCH_FLOOR
    assert grid_error < R * drift + SKETCH_FLOOR


def test_an_api_call_on_a_drifted_parameter_of_the_module_it_runs_in_is_no_cause(tmp_path: Path) -> None:
    # Failed before: "input 0: Sketch ...: the error came from code that is not recorded".
    o = run(tmp_path, step(POS_T, patches(POS_T)), step(POS_B, patches(POS_B)), step=1)
    assert o.first_divergence is None, o.divergence.message if o.divergence else None


def test_a_grid_scaled_by_unrecorded_code_is_still_named(tmp_path: Path) -> None:
    grid_t = bf16(1.5 * patches(POS_T))
    assert sketch_error(grid_t, patches(POS_B)) > R * sketch_error(POS_T, POS_B) + SKETCH_FLOOR
    o = run(tmp_path, step(POS_T, grid_t), step(POS_B, patches(POS_B)), step=1)
    assert o.first_divergence == "Functional.interpolate.0.forward", o.divergence.message if o.divergence else None
    assert "input 0" in o.divergence.message


def test_before_any_update_the_drift_is_a_cause(tmp_path: Path) -> None:
    # At step 0 nothing has drifted: parameters that differ are causes.
    o = run(tmp_path, step(POS_T, patches(POS_T)), step(POS_B, patches(POS_B)), step=0)
    assert o.first_divergence is not None

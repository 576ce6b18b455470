"""Calls paired by their records where the two programs call an API a
different number of times (docs/formats.md, "Matching";
csrc/compare/call_alignment.h). Under torch.compile, transformers' BioGPT
builds its attention mask with a few tensor ops eager mode skips, among them
one more Tensor.__add__; exact names then paired every later __add__ with the
bench's next one, and a clean bfloat16 training step was named at the
embeddings' sum. Records computed here in float64."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import torch
from compare_fixtures import entry
from test_first_divergence_training import rec, run

G = torch.Generator().manual_seed(21)
EMB = torch.randn(1, 8, 32, dtype=torch.float64, generator=G)
POS = torch.randn(1, 8, 32, dtype=torch.float64, generator=G)
MASK = torch.randn(1, 1, 8, 8, dtype=torch.float64, generator=G)
W = [torch.randn(32, 32, dtype=torch.float64, generator=G) / 6 for _ in range(3)]


def program(extra_mask_add: bool, fault: float = 1.0) -> dict[str, Any]:
    """Embeddings summed, then three residual blocks (Functional.linear, a
    residual __add__ each); with ``extra_mask_add`` one more __add__ first (a
    mask: another shape, as compiled BioGPT makes); ``fault`` scales
    the second block's linear output on this side only."""
    data: dict[str, Any] = {}
    adds = 0

    def add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        nonlocal adds
        y = a + b
        data[f"Tensor.__add__.{adds}.forward"] = entry([rec(a), rec(b)], [rec(y)])
        adds += 1
        return y

    if extra_mask_add:
        add(MASK, torch.zeros_like(MASK))
    h = add(EMB, POS)
    for i, w in enumerate(W):
        y = h @ w.T * (fault if i == 1 else 1.0)
        data[f"Functional.linear.{i}.forward"] = entry([rec(h), rec(w)], [rec(y)])
        h = add(h, y)
    return data


def csv_pairs(out: Path) -> dict[str, str]:
    (path,) = out.glob("compare_result_*.csv")
    with path.open() as f:
        return {r["NPU Name"]: r["Bench Name"] for r in csv.DictReader(f)}


def test_an_extra_call_in_the_target_does_not_shift_the_pairs(tmp_path: Path) -> None:
    o = run(tmp_path, program(extra_mask_add=True), program(extra_mask_add=False))
    assert o.divergence is None, o.divergence.message
    pairs = csv_pairs(tmp_path / "o")
    assert pairs["Tensor.__add__.0.forward.output.0"] == "N/A"  # the mask's add: the bench has none
    assert pairs["Tensor.__add__.1.forward.output.0"] == "Tensor.__add__.0.forward.output.0"
    assert pairs["Tensor.__add__.4.forward.output.0"] == "Tensor.__add__.3.forward.output.0"
    (note,) = [n for n in o.notes if "Tensor.__add__.forward" in n]
    assert "5 calls in the target, 4 in the bench" in note, note


def test_an_extra_call_in_the_bench_does_not_shift_the_pairs(tmp_path: Path) -> None:
    o = run(tmp_path, program(extra_mask_add=False), program(extra_mask_add=True))
    assert o.divergence is None, o.divergence.message
    assert csv_pairs(tmp_path / "o")["Tensor.__add__.0.forward.output.0"] == "Tensor.__add__.1.forward.output.0"


def test_a_fault_after_the_extra_call_is_still_named(tmp_path: Path) -> None:
    o = run(tmp_path, program(extra_mask_add=True, fault=1.01), program(extra_mask_add=False))
    assert o.first_divergence == "Functional.linear.1.forward", o.divergence
    assert o.divergence.kinds == ("output",)


def test_the_same_calls_on_both_sides_keep_their_exact_pairs(tmp_path: Path) -> None:
    # Nothing unpaired: no alignment, no note, names paired as they are.
    o = run(tmp_path, program(extra_mask_add=True), program(extra_mask_add=True))
    assert o.divergence is None and not o.notes, (o.divergence, o.notes)
    pairs = csv_pairs(tmp_path / "o")
    assert all(t == b for t, b in pairs.items()), pairs

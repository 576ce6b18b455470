"""The models the benchmark runs: a transformer at three sizes and an MLP.

The transformer is the demo's model (``graphprobe.demo.model``: embedding,
pre-norm blocks of attention and MLP, final norm, head), which the package
keeps stable; sizes grow in width, depth and sequence length so that the
growth of the recording cost with model size shows.

Example::

    spec = MODELS["transformer-m"]
    model, x = spec.build(torch.device("cpu")), spec.make_input(torch.device("cpu"))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from graphprobe.demo.model import DemoTransformer

__all__ = ["MODELS", "ModelSpec", "MLPStack"]


class MLPStack(nn.Module):
    """``depth`` Linear + GELU pairs: few, large tensors per module."""

    def __init__(self, dim: int, depth: int) -> None:
        super().__init__()
        self.layers = nn.Sequential(*(nn.Sequential(nn.Linear(dim, dim), nn.GELU()) for _ in range(depth)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


@dataclass(frozen=True)
class ModelSpec:
    """A model and its input, built on demand on a device."""

    name: str
    description: str
    factory: Callable[[], nn.Module]
    input_factory: Callable[[torch.Generator], torch.Tensor]

    def build(self, device: torch.device) -> nn.Module:
        torch.manual_seed(0)
        return self.factory().eval().to(device)

    def make_input(self, device: torch.device) -> torch.Tensor:
        return self.input_factory(torch.Generator().manual_seed(0)).to(device)


def _transformer(name: str, vocab: int, dim: int, heads: int, blocks: int, batch: int, seq: int) -> ModelSpec:
    return ModelSpec(
        name=name,
        description=f"transformer dim {dim}, {blocks} blocks, {heads} heads, vocab {vocab}, tokens {batch}x{seq}",
        factory=lambda: DemoTransformer(vocab=vocab, dim=dim, heads=heads, layers=blocks),
        input_factory=lambda g: torch.randint(0, vocab, (batch, seq), generator=g),
    )


def _mlp(name: str, dim: int, depth: int, batch: int) -> ModelSpec:
    return ModelSpec(
        name=name,
        description=f"MLP {depth} x (Linear {dim}->{dim} + GELU), batch {batch}",
        factory=lambda: MLPStack(dim, depth),
        input_factory=lambda g: torch.randn(batch, dim, generator=g),
    )


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        _transformer("transformer-s", vocab=256, dim=64, heads=4, blocks=2, batch=2, seq=32),
        _transformer("transformer-m", vocab=512, dim=256, heads=8, blocks=4, batch=2, seq=64),
        _transformer("transformer-l", vocab=1024, dim=512, heads=8, blocks=4, batch=2, seq=128),
        _mlp("mlp", dim=1024, depth=4, batch=64),
        _mlp("mlp-tiny", dim=16, depth=2, batch=4),  # --smoke
    )
}
"""Every model by name; :mod:`benchmarks.suite` picks the set for a run."""

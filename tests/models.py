"""Small models shared by the tests.

The transformer is the package's one definition (``graphprobe.demo.model``),
built with attention written out operator by operator and the final norm
applied twice: the tests count the L1 records of the attention and the
repeated calls of one module.
"""

from __future__ import annotations

import torch
from torch import nn

from graphprobe.demo.model import DemoTransformer


def make_transformer(seed: int = 0, vocab: int = 64, dim: int = 32, heads: int = 4, blocks: int = 2) -> DemoTransformer:
    """The tests' transformer: the global RNG seeded with ``seed`` (the tests draw their inputs after it), eval mode."""
    torch.manual_seed(seed)
    return DemoTransformer(vocab=vocab, dim=dim, heads=heads, layers=blocks, attention="explicit",
                           norm_twice=True).eval()


class Small(nn.Module):
    """Linear -> ReLU -> Linear: the smallest model with three L0 records."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))

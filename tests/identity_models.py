"""Models on which a compiler reorders probes, for the record-identity tests.

Each has parts without data dependencies between them (inductor schedules
such ops in an order of its own) and shapes that test the pairing of inputs
and outputs: a module called twice, a module whose input is created inside
its parent's forward, keyword inputs, tuple outputs.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn


class Rot(nn.Module):
    """Rotary tables from positions (issue #13's reproduction)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("inv", torch.arange(8.0))

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        f = pos[..., None].float() * self.inv
        return f.cos().to(x.dtype), f.sin().to(x.dtype)


class RotaryNet(nn.Module):
    """The reproduction of issue #13: 12 L1 records in eager, 15 under inductor before the fix."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.rot = Rot()
        self.lin = nn.Linear(16, 16)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.emb(ids)
        pos = torch.arange(ids.shape[1])[None]  # created inside the forward
        c, s = self.rot(h, pos)
        return self.lin(h) * c.sum() + s.sum()


class Tower(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, x: torch.Tensor, *, scale: float = 1.0, gate: torch.Tensor | None = None) -> torch.Tensor:
        y = self.down(F.gelu(self.up(x))) * scale
        return y if gate is None else y * torch.sigmoid(gate)


class TwoTowers(nn.Module):
    """Two independent branches, one shared norm called twice, keyword inputs."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.left = Tower(width)
        self.right = Tower(width)
        self.norm = nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.left(x, gate=x.mean(-1, keepdim=True), scale=0.5)
        b = self.right(x.flip(-1), scale=2.0)
        return self.norm(a) + self.norm(b).relu()


def tiny_llama() -> nn.Module:
    """A third-party implementation: transformers' Llama with a tiny config and
    random weights (attention, rotary embeddings, RMSNorm, SiLU MLP)."""
    from transformers import LlamaConfig, LlamaModel

    cfg = LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, attn_implementation="eager",
    )
    return LlamaModel(cfg).eval()


def inputs_for(name: str, steps: int) -> list[Any]:
    gen = torch.Generator().manual_seed(1)
    if name in ("rotary", "llama"):
        return [torch.randint(0, 50, (2, 8), generator=gen) for _ in range(steps)]
    return [torch.randn(3, 16, generator=gen) for _ in range(steps)]


MODELS: dict[str, Callable[[], nn.Module]] = {
    "rotary": RotaryNet,
    "towers": TwoTowers,
    "llama": tiny_llama,
}

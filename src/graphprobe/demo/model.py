"""The demo's model: a small transformer with fixed random weights (no download).

The one transformer definition of the project: the demo, the benchmarks
(``benchmarks/models.py``) and the tests (``tests/models.py``) build it.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

#: How attention is computed: ``"sdpa"``, one causal
#: ``scaled_dot_product_attention`` call (the demo); ``"explicit"``,
#: ``q @ k^T``, scale, softmax and ``@ v`` written out, without a mask (each
#: operator its own L1 record: the tests count them).
AttentionForm = Literal["sdpa", "explicit"]


class SelfAttention(nn.Module):
    """Multi-head self-attention with a fused QKV projection."""

    def __init__(self, dim: int, heads: int, attention: AttentionForm = "sdpa") -> None:
        super().__init__()
        if attention not in ("sdpa", "explicit"):
            raise ValueError(f"SelfAttention: attention={attention!r}; allowed are 'sdpa' and 'explicit'")
        self.heads = heads
        self.attention = attention
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        if self.attention == "sdpa":
            y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = (q @ k.transpose(-1, -2)) / (d // self.heads) ** 0.5
            y = scores.softmax(dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, s, d))


class FeedForward(nn.Module):
    """Linear, GELU, Linear."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.up = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.act(self.up(x)))


class Block(nn.Module):
    """Pre-norm transformer block."""

    def __init__(self, dim: int, heads: int, attention: AttentionForm = "sdpa") -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = SelfAttention(dim, heads, attention)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = FeedForward(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class DemoTransformer(nn.Module):
    """Token embedding, a few blocks, final norm and LM head.

    ``attention`` as :data:`AttentionForm`; ``norm_twice`` applies the final
    norm a second time (one module called twice per forward, as the tests
    need). The defaults are the demo's model.
    """

    def __init__(self, vocab: int = 256, dim: int = 64, heads: int = 4, layers: int = 3,
                 attention: AttentionForm = "sdpa", norm_twice: bool = False) -> None:
        super().__init__()
        self.vocab = vocab
        self.norm_twice = norm_twice
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Block(dim, heads, attention) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        x = self.norm(x)
        return self.head(self.norm(x) if self.norm_twice else x)


def build_demo_model(seed: int = 0) -> DemoTransformer:
    """The demo model with weights drawn from a fixed seed."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = DemoTransformer()
    return model.eval()


def demo_inputs(steps: int, batch: int = 2, seq: int = 16, vocab: int = 256, seed: int = 1) -> list[torch.Tensor]:
    """Token batches, one per step, from a fixed seed."""
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (batch, seq), generator=gen) for _ in range(steps)]

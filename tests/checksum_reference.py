"""The summary_mode "md5" checksum computed independently, with numpy from a
tensor's bytes (docs/formats.md, "Checksums"), and a one-module model whose
L0 record holds a tensor's bits as input and output."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

_M64 = (1 << 64) - 1


def _fmix64(k: np.ndarray) -> np.ndarray:
    k = k ^ (k >> np.uint64(33))
    k = k * np.uint64(0xFF51AFD7ED558CCD)
    k = k ^ (k >> np.uint64(33))
    k = k * np.uint64(0xC4CEB9FE1A85EC53)
    return k ^ (k >> np.uint64(33))


def reference_checksum(t: torch.Tensor) -> str | None:
    """docs/formats.md's checksum from the tensor's bytes: words of the
    element size (8 bytes for 16-byte elements), word j with bits w adds
    fmix64(w ^ (j + 1) * 0x9E3779B97F4A7C15), summed modulo 2^64."""
    if t.numel() == 0:
        return None
    raw = t.detach().cpu().resolve_conj().contiguous().view(torch.uint8).numpy().tobytes()
    size = min(t.element_size(), 8)
    words = np.frombuffer(raw, dtype={1: "<u1", 2: "<u2", 4: "<u4", 8: "<u8"}[size]).astype(np.uint64)
    j = np.arange(1, len(words) + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        total = int(_fmix64(words ^ (j * np.uint64(0x9E3779B97F4A7C15))).sum(dtype=np.uint64)) & _M64
    return f"{total:016x}"


class Pass(nn.Module):
    """Returns a copy of its input: one L0 record whose input and output
    hold the same bits."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.clone()


class Wrap(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.p = Pass()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.p(x)

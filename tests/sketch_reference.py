"""An independent implementation of graphprobe's "Sketch" statistic
(docs/formats.md, "Sketch"), in numpy with float64 accumulation, for tests.

Written from the definition in the docs, not from the C++ code: element i of
the tensor in row-major order, group g = i // 16, lane l = i % 16,
h = fmix64((g + 1) * 0xD1B54A32D192ED03 mod 2**64); projection k takes the
element with sign -1 when bit 4*l + k of h is set.
"""

from __future__ import annotations

import math

import numpy as np
import torch

_KEY = np.uint64(0xD1B54A32D192ED03)
_C1 = np.uint64(0xFF51AFD7ED558CCD)
_C2 = np.uint64(0xC4CEB9FE1A85EC53)


def _fmix64(k: np.ndarray) -> np.ndarray:
    k = k ^ (k >> np.uint64(33))
    k = k * _C1
    k = k ^ (k >> np.uint64(33))
    k = k * _C2
    return k ^ (k >> np.uint64(33))


def signs(n: int) -> np.ndarray:
    """The (4, n) matrix of +-1 signs of the first n elements."""
    i = np.arange(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        h = _fmix64((i // np.uint64(16) + np.uint64(1)) * _KEY)
    shift = (i % np.uint64(16)) * np.uint64(4)
    out = np.empty((4, n), dtype=np.float64)
    for k in range(4):
        bit = (h >> (shift + np.uint64(k))) & np.uint64(1)
        out[k] = 1.0 - 2.0 * bit.astype(np.float64)
    return out


def sketch(x: torch.Tensor) -> list[float]:
    """The four signed sums of x's elements (row-major), in float64."""
    v = x.detach().to("cpu", torch.float64).contiguous().reshape(-1).numpy()
    return [float(math.fsum(row)) for row in signs(v.size) * v]


def relative_l2(t: torch.Tensor, b: torch.Tensor) -> float:
    """|t - b|_2 / |b|_2 in float64: what the Sketch's error estimates."""
    t64, b64 = t.detach().double(), b.detach().double()
    return float(torch.linalg.vector_norm(t64 - b64) / torch.linalg.vector_norm(b64))

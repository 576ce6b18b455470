"""A module whose functions the custom_api tests wrap (tests/test_custom_api.py)."""

from __future__ import annotations

import torch


def scale_add(x: torch.Tensor, y: torch.Tensor, *, alpha: float = 1.0, bias: torch.Tensor | None = None):
    """x * alpha + y (+ bias): one output tensor."""
    out = x * alpha + y
    if bias is not None:
        out = out + bias
    return out


def split_pair(x: torch.Tensor):
    """Two output tensors (exact float ops: inductor's kernels give the same bits as eager)."""
    return x * 2, x - 1


class Ops:
    """Methods of each kind, wrapped through the class."""

    @staticmethod
    def twice(x: torch.Tensor) -> torch.Tensor:
        """2x."""
        return x * 2

    @classmethod
    def thrice(cls, x: torch.Tensor) -> torch.Tensor:
        """3x."""
        return x * 3


NOT_CALLABLE = 3


def ident(value):
    """Returns its argument: called with and without tensors."""
    return value

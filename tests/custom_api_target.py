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


class Net(torch.nn.Module):
    """A linear layer, then the two custom APIs (one called with keywords).
    The APIs are read from this module's globals at each call, so wrapping
    ``custom_api_target.split_pair`` at ``start()`` reaches these calls."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        a, b = split_pair(h)
        return scale_add(a, b, alpha=0.5, bias=h)


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

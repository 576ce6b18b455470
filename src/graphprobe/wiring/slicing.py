"""``statistics.slice``: statistics over a slice of each probed tensor.

msprobe's rule (``slice_by_config``, python/msprobe/core/common/utils.py),
reproduced exactly:

* every rule sets the index of its dimension ``dim`` to
  ``begin:end`` (Python slicing: negative values count from the end,
  out-of-range values are clamped, ``begin >= end`` gives an empty slice);
* rules apply in order; rules on different dimensions combine; a later
  rule on the same dimension replaces the earlier one;
* a rule whose ``dim`` is not a dimension of the tensor (``dim >= ndim``;
  every rule for a 0-d tensor) is skipped, and so is a rule whose ``size``
  differs from the tensor's length in ``dim`` (the length before any
  slicing);
* a tensor no rule applies to is recorded whole.

One departure, where msprobe's eager rule has no counterpart: inside a
compiled graph, a length that depends on the data (the output of
``nonzero`` or of a boolean mask: an unbacked size) is unknown when the
graph is traced, so a rule with ``size`` on that dimension is skipped for it
rather than raising in the user's forward.

The slice is a view (basic indexing), taken in the wiring right before the
probe op: under ``torch.compile`` it is traced into the graph, so the
statistics are computed on the device from the slice, with no host sync. The
record's ``shape`` is the slice's, as msprobe records it (its ``acl_stat``
takes the sliced tensor). The tensor task saves tensors whole (msprobe's
graph mode slices statistics only), so :func:`install` is called for the
statistics task only.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import guard_or_false

__all__ = ["SliceWiring", "install", "sliced"]

# The installed rules, as (dim, size, begin, end) tuples of constants: read by
# traced code, so dynamo guards on their values.
_rules: tuple[tuple[int, int | None, int, int | None], ...] = ()


def install(rules: tuple[Any, ...]) -> None:
    """Sets the rules (``SliceRule``s of the config) the probes apply."""
    global _rules
    _rules = tuple(r.as_tuple() for r in rules)


def sliced(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """``tensors`` with the installed rules applied (the list itself when
    there are none)."""
    if not _rules:
        return tensors
    return [_slice_one(t, _rules) for t in tensors]


def _slice_one(tensor: torch.Tensor, rules: tuple[tuple[int, int | None, int, int | None], ...]) -> torch.Tensor:
    ndim = tensor.dim()
    index: list[slice] = [slice(None)] * ndim
    applies = False
    for dim, size, begin, end in rules:
        if dim >= ndim:
            continue
        # guard_or_false: a length known at trace time (static, or dynamic and
        # then guarded on) is compared as it is; a data-dependent one (the
        # output of nonzero or a boolean mask inside a compiled graph) cannot
        # be, and comparing it would raise inside the user's forward, so it
        # never matches `size` (docs/limitations.md).
        if size is not None and not guard_or_false(tensor.shape[dim] == size):
            continue
        index[dim] = slice(begin, end)
        applies = True
    if not applies:
        return tensor
    return tensor[tuple(index)]


class SliceWiring:
    """The installed rules, as one item of a dumper's wiring: :meth:`remove`
    uninstalls them."""

    def __init__(self, rules: tuple[Any, ...]) -> None:
        install(rules)

    def remove(self) -> None:
        """Uninstalls the rules: later probes record whole tensors."""
        install(())

"""Why rows with the same name on both sides stayed unmatched.

A record named alike on both sides is left unpaired when its kind differs:
transformers passes ``attention_mask=None`` to a Llama run eagerly and a
tensor under ``torch.compile``, so both sides hold
``...forward.0.input.attention_mask``, one a ``null`` and one a tensor, and
the engine pairs neither. The summary says so instead of leaving the
unmatched count unexplained (``graphprobe compare``'s summary,
compare/summary.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["KIND_WORDS", "SameNameUnmatched", "same_name_unmatched"]

#: What each kind of same-name unmatched row is, in the summary's words.
KIND_WORDS = {
    "none-vs-tensor": "None on one side, a tensor on the other",
    "value-vs-tensor": "a non-tensor value on one side, a tensor on the other",
    "other": "the same name on both sides, with records that cannot be paired",
}

# Dtype cells of records that are not tensors although their type is torch's.
_NOT_TENSORS = {"torch.Size", "torch.dtype", "torch.device"}


@dataclass(frozen=True, slots=True)
class SameNameUnmatched:
    """Unmatched rows of one kind whose name is on both sides: ``rows``
    rows in all (both sides), ``names`` distinct names, one ``example`` name
    with the type each side holds there (``None`` for a ``null``)."""

    kind: str
    rows: int
    names: int
    example: str
    target_type: str
    bench_type: str


def _type(dtype: Any) -> str:
    """A side's record, as the summary names it: ``None`` (a ``null``), a
    tensor's dtype, or a value's type."""
    if dtype is None or dtype == "N/A":
        return "None"
    text = str(dtype)
    # A value's dtype cell is its class as msprobe writes it: "<class 'int'>".
    if text.startswith("<class '") and text.endswith("'>"):
        return text[8:-2]
    return text


def _is_tensor(dtype: Any) -> bool:
    return isinstance(dtype, str) and dtype.startswith("torch.") and dtype not in _NOT_TENSORS


def _kind(target_dtype: Any, bench_dtype: Any) -> str:
    tensors = (_is_tensor(target_dtype), _is_tensor(bench_dtype))
    if tensors not in ((True, False), (False, True)):
        return "other"
    value = bench_dtype if tensors[0] else target_dtype
    return "none-vs-tensor" if _type(value) == "None" else "value-vs-tensor"


def same_name_unmatched(result: Any) -> tuple[SameNameUnmatched, ...]:
    """The unmatched rows of an engine result whose name is on both sides,
    grouped by kind (in ``KIND_WORDS``' order); () when every unmatched row's
    name is on one side only. Reads only the unmatched rows whose name an
    unmatched row of the other side holds too (the engine picks them), and
    only when there are some."""
    if not result.counts.get("unmatched", 0):
        return ()
    target: dict[str, Any] = {}
    bench: dict[str, Any] = {}
    rows: dict[str, int] = {}
    for match, name, dtype in result.unmatched_rows(both_sides=True):
        (target if match == "unmatched-target" else bench).setdefault(name, dtype)
        rows[name] = rows.get(name, 0) + 1
    groups: dict[str, list[str]] = {}
    for name in target.keys() & bench.keys():
        groups.setdefault(_kind(target[name], bench[name]), []).append(name)
    out = []
    for kind in KIND_WORDS:
        names = sorted(groups.get(kind, ()))
        if names:
            out.append(SameNameUnmatched(kind, sum(rows[n] for n in names), len(names), names[0], _type(target[names[0]]),
                                         _type(bench[names[0]])))
    return tuple(out)

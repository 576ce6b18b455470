"""The rank that disagrees: tensors that must be bit-identical on every rank
of a process group (data-parallel replicas' parameters after the optimizer
step, gradients after the all-reduce) compared by checksum every step
(docs/history.md, "Replicas").

Each rank hashes its tensors with graphprobe's 64-bit checksum
(docs/formats.md, "Checksums": the value ``statistics.summary_mode: "md5"``
writes, here computed with torch ops on the tensor's own device) and
all-gathers 8 bytes per tensor, plus 8 bytes for the list of names (so two
ranks that hold different tensors are told apart from a corrupted one). A
tensor whose checksum differs from the majority's names its rank(s); with no
majority (2 against 2) every rank of the tensor is named.

Only the ranks of ``group`` are compared: pass the data-parallel group, not
the world, when tensor- or pipeline-parallel shards hold different values.
"""

from __future__ import annotations

import hashlib
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["Disagreement", "ReplicaChecker", "ReplicaMismatch", "tensor_checksum", "tensor_checksums"]

_M64 = (1 << 64) - 1


def _signed(v: int) -> int:
    v &= _M64
    return v - (1 << 64) if v >= 1 << 63 else v


_GOLD = _signed(0x9E3779B97F4A7C15)
_C1 = _signed(0xFF51AFD7ED558CCD)
_C2 = _signed(0xC4CEB9FE1A85EC53)
_CHUNK = 1 << 20  # words hashed at once: bounds the int64 temporaries to ~8 MiB each


def _shr33(k: torch.Tensor) -> torch.Tensor:
    # Logical shift on int64: torch's >> is arithmetic (it copies the sign bit).
    return (k >> 33) & ((1 << 31) - 1)


def _fmix64(k: torch.Tensor) -> torch.Tensor:
    # int64 products wrap modulo 2^64, which is the uint64 arithmetic of csrc/stats/checksum.h.
    k = k ^ _shr33(k)
    k = k * _C1
    k = k ^ _shr33(k)
    k = k * _C2
    return k ^ _shr33(k)


def _words(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes as int64 words of its element size (8-byte words for
    16-byte elements), zero-extended."""
    t = t.detach().resolve_conj().resolve_neg().contiguous().reshape(-1)
    size = t.element_size()
    if size >= 8:
        return t.view(torch.int64)
    if size == 4:
        return t.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    if size == 2:
        return t.view(torch.int16).to(torch.int64) & 0xFFFF
    return t.view(torch.uint8).to(torch.int64)


def tensor_checksum(t: torch.Tensor) -> torch.Tensor:
    """graphprobe's 64-bit checksum of ``t``'s bits as a 0-d int64 tensor on
    ``t``'s device (no host synchronisation): word j (from 1) with bits w adds
    fmix64(w ^ j * 0x9E3779B97F4A7C15), summed modulo 2^64; 0 for an empty
    tensor. ``format(v & (2**64 - 1), "016x")`` is dump.json's ``md5``."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"tensor_checksum: expected a torch.Tensor, got {type(t).__name__}")
    if t.layout != torch.strided:
        raise ValueError(f"tensor_checksum: only strided tensors are hashed, got layout {t.layout}")
    words = _words(t)
    total = torch.zeros((), dtype=torch.int64, device=t.device)
    for start in range(0, words.numel(), _CHUNK):
        w = words[start:start + _CHUNK]
        j = torch.arange(start + 1, start + 1 + w.numel(), dtype=torch.int64, device=t.device)
        total = total + _fmix64(w ^ (j * _GOLD)).sum()
    return total


def tensor_checksums(tensors: Iterable[torch.Tensor]) -> torch.Tensor:
    """The checksums of ``tensors`` as one int64 vector (on the first one's device)."""
    sums = [tensor_checksum(t) for t in tensors]
    if not sums:
        return torch.zeros(0, dtype=torch.int64)
    device = sums[0].device
    return torch.stack([s.to(device) for s in sums])


@dataclass(frozen=True)
class Disagreement:
    """A rank whose tensor differs from the other replicas'."""

    step: int
    rank: int  # global rank
    tensor: str
    checksum: int
    majority: int | None  # None: no value held by more than half the ranks

    def __str__(self) -> str:
        m = "no majority" if self.majority is None else f"majority {self.majority & _M64:016x}"
        return f"step {self.step}: rank {self.rank} disagrees on {self.tensor} ({self.checksum & _M64:016x}, {m})"


class ReplicaMismatch(RuntimeError):
    """Raised by :meth:`ReplicaChecker.check` (``on_mismatch="raise"``) on every rank of the group."""

    def __init__(self, found: list[Disagreement]) -> None:
        self.disagreements = found
        more = f" (and {len(found) - 5} more)" if len(found) > 5 else ""
        super().__init__("replicas disagree: " + "; ".join(map(str, found[:5])) + more)


_ON_MISMATCH = ("raise", "warn", "return")


class ReplicaChecker:
    """Compares tensors that must be identical across the ranks of ``group``.

    ``tensors``: a module (its parameters, by name, at each check), or a
    callable returning ``(name, tensor)`` pairs (e.g. gradients:
    ``lambda: [(n, p.grad) for n, p in model.named_parameters()]``).
    ``group``: the process group of replicas (default: the world).
    Call :meth:`check` at the same point of every step on every rank of the
    group (it is a collective), e.g. after ``optimizer.step()``.
    """

    def __init__(self, tensors: torch.nn.Module | Callable[[], Iterable[tuple[str, torch.Tensor]]],
                 group: Any = None, on_mismatch: str = "raise") -> None:
        import torch.distributed as dist

        if on_mismatch not in _ON_MISMATCH:
            raise ValueError(f"ReplicaChecker: on_mismatch {on_mismatch!r} is not one of {list(_ON_MISMATCH)}")
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("ReplicaChecker: torch.distributed is not initialised (call init_process_group first)")
        if isinstance(tensors, torch.nn.Module):
            module = tensors
            self._tensors: Callable[[], Iterable[tuple[str, torch.Tensor]]] = lambda: (
                (n, p.detach()) for n, p in module.named_parameters())
        elif callable(tensors):
            self._tensors = tensors
        else:
            raise TypeError(f"ReplicaChecker: tensors must be a torch.nn.Module or a callable returning "
                            f"(name, tensor) pairs, got {type(tensors).__name__}")
        self.group = group
        self.on_mismatch = on_mismatch
        self.ranks: list[int] = dist.get_process_group_ranks(group or dist.group.WORLD)
        self._step = 0
        self.found: list[Disagreement] = []

    def check(self, step: int | None = None) -> list[Disagreement]:
        """Hashes, all-gathers and compares this step's tensors; returns the
        disagreements (the same list on every rank). ``step`` defaults to a
        count of calls from 0."""
        import torch.distributed as dist

        step = self._step if step is None else int(step)
        self._step = step + 1
        pairs = [(n, t) for n, t in self._tensors() if t is not None]
        names = [n for n, _ in pairs]
        ident = int.from_bytes(hashlib.blake2b("\0".join(names).encode(), digest_size=8).digest(), "little")
        local = torch.cat([torch.tensor([_signed(ident)], dtype=torch.int64),
                           tensor_checksums(t for _, t in pairs).cpu()])
        # NCCL gathers device tensors only; gloo host ones.
        device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend(self.group) == "nccl" \
            else torch.device("cpu")
        local = local.to(device)
        sizes = [torch.zeros(1, dtype=torch.int64, device=device) for _ in self.ranks]
        dist.all_gather(sizes, torch.tensor([local.numel()], dtype=torch.int64, device=device), group=self.group)
        if len({int(s) for s in sizes}) != 1:
            counts = ", ".join(f"rank {r}: {int(s) - 1}" for r, s in zip(self.ranks, sizes))
            raise ValueError(f"ReplicaChecker step {step}: the ranks hold different numbers of tensors ({counts}); "
                             "is the group the data-parallel replicas?")
        gathered = [torch.empty_like(local) for _ in self.ranks]
        dist.all_gather(gathered, local, group=self.group)
        table = torch.stack(gathered).cpu().tolist()  # [rank][0: names, 1..: checksums]
        if len({row[0] for row in table}) != 1:
            raise ValueError(f"ReplicaChecker step {step}: the ranks hold tensors of different names; "
                             "is the group the data-parallel replicas?")
        found = []
        for i, name in enumerate(names, start=1):
            column = [row[i] for row in table]
            if len(set(column)) == 1:
                continue
            value, count = Counter(column).most_common(1)[0]
            majority = value if count * 2 > len(column) else None
            found += [Disagreement(step, rank, name, v, majority) for rank, v in zip(self.ranks, column)
                      if majority is None or v != majority]
        self.found += found
        if found and self.on_mismatch == "raise":
            raise ReplicaMismatch(found)
        if found and self.on_mismatch == "warn":
            warnings.warn(str(ReplicaMismatch(found)), RuntimeWarning, stacklevel=2)
        return found

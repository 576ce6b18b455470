"""Corrections to inductor bugs that graphprobe's probes bring to light.

A probe is an opaque operator, so wiring a model changes how inductor fuses
the code around it. That can route a model into an inductor code path the
unwired model never takes. When such a path is broken in the installed
torch, the model crashes or computes wrong numbers only because it was
wired, and a probe must never break the model. The corrections here are the
upstream fixes, applied in this process only, to torch versions that lack
them; each one only changes code that was wrong before.

* pytorch/pytorch#191837 (fixed by pytorch/pytorch#191861, after torch
  2.13): in a 2-D tiled CPU kernel, an accumulating store (``index_put``
  with ``accumulate=True``, the backward of an indexing: a rotary
  embedding's ``cos[position_ids]``) applies the tile's inner offset twice
  when more than one thread runs the kernel. The scatter writes out of
  bounds: glibc aborts ("double free or corruption") or a later kernel finds
  an invalid storage. Found on a bfloat16 Falcon training step wired at L1.
* A vectorized CPU kernel's accumulating store whose index does not move
  with the vectorized loop (every lane adds into one element: the backward
  of a pooling window gathered along that loop) fails to compile:
  ``CppVecKernel.store`` asserts that the index is a vector
  (``assert isinstance(index, CppCSEVariable) and index.is_vec``), a case
  its review left open (pytorch/pytorch#131314: "it is still possible that
  the index is a scalar"). The index is broadcast to every lane, which
  ``atomic_add_vec`` adds one by one. Found on a bfloat16 MobileViT training
  step in train mode wired at L1 and mix (torch 2.13); not fixed upstream
  as far as we know, so applied to every torch whose code matches.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import torch

__all__ = ["install", "installed"]

_installed: list[str] = []


def installed() -> list[str]:
    """The upstream issues whose fixes are applied in this process."""
    return list(_installed)


def install() -> None:
    """Applies the fixes this torch lacks; idempotent."""
    if "pytorch#191837" not in _installed and _fix_tile2d_atomic_add():
        _installed.append("pytorch#191837")
    if "atomic-add-scalar-index" not in _installed and _fix_atomic_add_scalar_index():
        _installed.append("atomic-add-scalar-index")


def _torch_before(major: int, minor: int) -> bool:
    parts = torch.__version__.split("+")[0].split(".")
    try:
        return (int(parts[0]), int(parts[1])) < (major, minor)
    except (IndexError, ValueError):
        return False  # a version we cannot read: leave inductor as it is


def _parallel_atomic_add(kernel: Any, mode: Any) -> bool:
    """Whether ``CppVecKernel.store`` takes its parallel ``atomic_add`` path
    for this store (the condition both fixes below hook into)."""
    from torch._inductor import config

    return mode == "atomic_add" and bool(config.cpp.dynamic_threads or kernel.num_threads != 1)


def _fix_tile2d_atomic_add() -> bool:
    if not _torch_before(2, 14):
        return False
    try:
        from torch._inductor import config
        from torch._inductor.codegen.cpp import CppTile2DKernel, CppVecKernel
    except ImportError:
        return False
    needed = ("store", "need_vec_transpose", "rename_indexing", "transform_indexing")
    if not all(hasattr(CppTile2DKernel, name) for name in needed) or not hasattr(config.cpp, "dynamic_threads"):
        return False  # not the code the fix was written for
    original: Callable[..., Any] = CppTile2DKernel.store

    @functools.wraps(original)
    def store(self: Any, name: str, index: Any, value: Any, mode: Any = None) -> Any:
        # The parallel atomic_add path of CppVecKernel.store turns the index
        # into a value with ops.index_expr, which applies transform_indexing
        # itself: hand it the untransformed index (pytorch#191861).
        if _parallel_atomic_add(self, mode) and not self.need_vec_transpose(self.rename_indexing(index)):
            return CppVecKernel.store(self, name, index, value, mode)
        return original(self, name, index, value, mode)

    CppTile2DKernel.store = store
    return True


def _fix_atomic_add_scalar_index() -> bool:
    try:
        from torch._inductor import config
        from torch._inductor.codegen.common import DeferredLine
        from torch._inductor.codegen.cpp import DTYPE_TO_CPP, CppVecKernel, cexpr_index
        from torch._inductor.virtualized import V, ops
    except ImportError:
        return False
    needed = ("store", "broadcast", "rename_indexing", "_try_get_const_stride", "_get_num_vectors")
    if not all(hasattr(CppVecKernel, name) for name in needed) or not hasattr(config.cpp, "dynamic_threads"):
        return False  # not the code the fix was written for
    original: Callable[..., Any] = CppVecKernel.store

    @functools.wraps(original)
    def store(self: Any, name: str, index: Any, value: Any, mode: Any = None) -> Any:
        # Only CppVecKernel itself: the 2-D tiled kernel transforms its
        # indices in index_expr (the fix above) and is left as it is.
        if not _parallel_atomic_add(self, mode) or type(self) is not CppVecKernel:
            return original(self, name, index, value, mode)
        renamed = self.rename_indexing(index)
        if self._try_get_const_stride(renamed, self.itervars[self.tiling_idx]) != 0:
            return original(self, name, index, value, mode)
        # The index is the same for every lane: upstream's code path with
        # the scalar index broadcast to a vector of indices.
        if not value.is_vec:
            value = self.broadcast(value)
        var = self.args.output(name)
        dtype = V.graph.get_dtype(name)
        n_src, n_idx = self._get_num_vectors(dtype), self._get_num_vectors(torch.int64)
        lanes = ops.index_expr(renamed, torch.int64).value
        if not lanes.is_vec:
            lanes = self.broadcast(lanes)
        tail = f", {cexpr_index(self.tail_size)}" if self.tail_size else ""
        line = f"atomic_add_vec<{DTYPE_TO_CPP[dtype]}, {n_idx}, {n_src}>({var}, {lanes}, {value}{tail});"
        self.stores.writeline(DeferredLine(name, line))
        return None

    CppVecKernel.store = store
    return True

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


def _torch_before(major: int, minor: int) -> bool:
    parts = torch.__version__.split("+")[0].split(".")
    try:
        return (int(parts[0]), int(parts[1])) < (major, minor)
    except (IndexError, ValueError):
        return False  # a version we cannot read: leave inductor as it is


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
        parallel_atomic = mode == "atomic_add" and (config.cpp.dynamic_threads or self.num_threads != 1)
        if parallel_atomic and not self.need_vec_transpose(self.rename_indexing(index)):
            return CppVecKernel.store(self, name, index, value, mode)
        return original(self, name, index, value, mode)

    CppTile2DKernel.store = store
    return True

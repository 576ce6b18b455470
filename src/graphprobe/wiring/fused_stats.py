"""Statistics fused into inductor's code.

An opaque probe makes inductor materialise the probed
tensor and read it a second time, and splits the fused chain around it —
which costs time and can change the model's own rounding. So dynamo inserts
``graphprobe::record_stats_fusable`` where fusing is allowed (switched on,
statistics task; decided while tracing, so that the choice is part of the
graph and of every compile-cache key), and for inductor only
that probe becomes ordinary reductions (max, min, sum, sum of
squares, NaN count over the tensor widened to float64), which inductor fuses
into the loops that produce the tensor, plus ``graphprobe::record_values``,
a tiny side-effecting op that writes the five numbers into the record
table. Other backends (eager, ``aot_eager``), CUDA graph capture of eager
code and the tensor task keep the opaque kernel.

Off by default: ``GRAPHPROBE_FUSED_STATS=1`` (at import) or
:func:`set_enabled` switches it on for graphs traced from then on.
"""

from __future__ import annotations

import os
import threading

import torch

__all__ = ["ENV_SWITCH", "enabled", "install", "set_enabled"]

ENV_SWITCH = "GRAPHPROBE_FUSED_STATS"
"""Environment variable read at import: ``1`` switches fused statistics on
(default off: on this project's CPU benchmarks they cost several times the
compile time and were not faster; see benchmarks/results)."""

# The dtypes whose statistics the fused path computes; others (integers,
# bool, float8, complex) keep the opaque kernel.
_FUSED_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
_FUSED_DEVICES = ("cpu", "cuda")

_lock = threading.Lock()
_installed = False
_enabled = os.environ.get(ENV_SWITCH, "0").strip() == "1"


def enabled() -> bool:
    """Whether graphs traced from now on may fuse their statistics.

    Read by dynamo inside the traced probe code, so that dynamo guards on
    it: flipping the switch recompiles instead of reusing a graph built the
    other way."""
    return _enabled


def set_enabled(on: bool) -> None:
    """Switches fused statistics on or off for graphs traced from now on
    (the environment variable sets the value at import)."""
    global _enabled
    _enabled = bool(on)


def install() -> None:
    """Registers the decomposition and the lowering with inductor, once.

    Called while dynamo traces a fusable probe, not at import: importing
    inductor takes seconds.
    """
    global _installed
    with _lock:
        if _installed:
            return
        from torch._inductor import decomposition, lowering
        from torch._library.utils import get_layout_constraint_tag

        fusable = torch.ops.graphprobe.record_stats_fusable.default
        decomposition.register_decomposition(fusable)(_decompose)
        # Where the decomposition declines, the op stays and needs the
        # fallback inductor would otherwise make itself, which it refuses to
        # make for an op that has a decomposition.
        lowering.make_fallback(
            fusable,
            layout_constraint=lowering.tag_to_layout_constraint(
                get_layout_constraint_tag(fusable, with_default=True)
            ),
            warn=False,
            override_decomp=True,
        )
        lowering.register_lowering(torch.ops.graphprobe.widen_as_stored.default, type_promotion_kind=None)(
            _lower_widen_as_stored
        )
        # Inductor caches a copy of its table; a copy made before this
        # registration would not see it.
        if hasattr(decomposition, "fast_random_decomps"):
            decomposition.fast_random_decomps.cache_clear()
        _installed = True


def _fusable(x: torch.Tensor) -> bool:
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    return (
        x.dtype in _FUSED_DTYPES
        and x.device.type in _FUSED_DEVICES
        # amax/amin of an empty tensor is an error; the opaque kernel records it.
        and statically_known_true(x.numel() > 0)
    )


def _decompose(x: torch.Tensor, site: int, index: int) -> object:
    if not _fusable(x):
        return NotImplemented  # inductor keeps the opaque op
    wide = torch.ops.graphprobe.widen_as_stored(x)
    nan = torch.isnan(wide)
    inf = float("inf")
    # Same order as the columns of a row (csrc/engine/row.h); NaN is left out
    # of max and min and counted, as the opaque kernels do.
    values = torch.stack(
        [
            torch.where(nan, -inf, wide).amax(),
            torch.where(nan, inf, wide).amin(),
            wide.sum(),
            (wide * wide).sum(),
            nan.sum(dtype=torch.float64),
        ]
    )
    torch.ops.graphprobe.record_values(values, site, index, x.dtype, x.shape)
    return None


def _lower_widen_as_stored(x):  # type: ignore[no-untyped-def]
    from torch._inductor import ir
    from torch._inductor.virtualized import ops

    dtype = x.get_dtype()
    load = x.make_loader()

    def inner(index):  # type: ignore[no-untyped-def]
        value = load(index)
        # use_compute_types=False: round to x's dtype for real, as storing x
        # would, instead of reusing the float32 value the kernel carries.
        stored = ops.to_dtype(value, dtype, use_compute_types=False)
        return ops.to_dtype(stored, torch.float64)

    return ir.Pointwise.create(device=x.get_device(), dtype=torch.float64, inner_fn=inner, ranges=x.get_size())

"""Statistics fused into inductor's code.

An opaque probe makes inductor materialise the probed
tensor and read it a second time, and splits the fused chain around it —
which costs time and can change the model's own rounding. So dynamo inserts
``graphprobe::record_stats_fusable`` where fusing is allowed (switched on,
statistics task; decided while tracing, so that the choice is part of the
graph and of every compile-cache key). Inductor lowers that probe, where
its tensor comes out of a loop that inductor generates, into ordinary
reductions (max, min and NaN count in float32, sum and sum of squares in
float64), which it fuses into that loop, plus ``graphprobe::record_values``,
a tiny side-effecting op that writes the five numbers into the record
table; where the tensor is a graph input or an extern kernel's output (a
matmul), it must be read again anyway and the opaque kernel does that
fastest. Other backends (eager, ``aot_eager``), CUDA graph capture of eager
code and the tensor task keep the opaque kernel.

Off by default: ``GRAPHPROBE_FUSED_STATS=1`` (at import) or
:func:`set_enabled` switches it on for graphs traced from then on.
"""

from __future__ import annotations

import os
import threading

import torch

__all__ = ["ENV_SWITCH", "FORM", "enabled", "install", "set_enabled"]

ENV_SWITCH = "GRAPHPROBE_FUSED_STATS"
"""Environment variable read at import: ``1`` switches fused statistics on
(default off: on this project's CPU benchmarks they cost about twice the
compile time and were not faster; see benchmarks/results)."""

FORM = 3
"""The version of :func:`_lower_fusable`, passed to every fusable probe. It
is a constant in the traced graph, and inductor's on-disk caches key on the
graph, not on this module's code: bump it whenever the lowering changes what
the compiled code computes, or code compiled by the earlier lowering is
reused. (1 was a decomposition that fused every probe; 2 summed in
float32.)"""

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
    """Registers the lowerings with inductor, once.

    Called while dynamo traces a fusable probe, not at import: importing
    inductor takes seconds.
    """
    global _installed
    with _lock:
        if _installed:
            return
        from torch._inductor import lowering
        from torch._library.utils import get_layout_constraint_tag

        fusable = torch.ops.graphprobe.record_stats_fusable.default
        # A lowering, not a decomposition: only at lowering time is it known
        # what produces the probed tensor (see _lower_fusable).
        lowering.add_layout_constraint(
            fusable, lowering.tag_to_layout_constraint(get_layout_constraint_tag(fusable, with_default=True))
        )
        lowering.register_lowering(fusable, type_promotion_kind=None)(_lower_fusable)
        _installed = True


def _fusable(x) -> bool:  # type: ignore[no-untyped-def]
    from torch._inductor.virtualized import V

    return (
        x.get_dtype() in _FUSED_DTYPES
        and x.get_device().type in _FUSED_DEVICES
        # amax/amin of an empty tensor is an error; the opaque kernel records it.
        and V.graph.sizevars.statically_known_gt(x.get_numel(), 0)
    )


def _made_by_generated_loop(x) -> bool:  # type: ignore[no-untyped-def]
    """Whether inductor generates the loop that produces ``x`` (a pointwise
    or reduction kernel, possibly seen through a view), so that reductions
    over ``x`` can join that loop. A graph input (a weight, the model's
    input) or the output of an extern kernel (a matmul, a convolution,
    attention) has to be read again whatever happens, and the opaque kernel
    reads faster than a generated reduction (measured in
    benchmarks/results/cpu.md)."""
    from torch._inductor import ir

    data = x.data
    while isinstance(data, ir.BaseView):
        data = data.data
    if isinstance(data, ir.StorageBox):
        data = data.data
    return isinstance(data, (ir.Loops, ir.ComputedBuffer)) and not isinstance(data, ir.TemplateBuffer)


def _lower_fusable(x, site: int, index: int, form: int):  # type: ignore[no-untyped-def]
    from torch._inductor.lowering import fallback_handler, lowerings

    if not (_fusable(x) and _made_by_generated_loop(x)):
        opaque = fallback_handler(torch.ops.graphprobe.record_stats_fusable.default, add_to_fallback_set=False)
        return opaque(x, site, index, form)
    from torch._inductor.virtualized import V

    aten = torch.ops.aten
    # max, min and the NaN count are exact in the tensor's compute dtype
    # (float32, float64 for float64 tensors). The sums are accumulated in
    # float64, as the opaque kernels finish theirs: in float32 the sum of an
    # attention mask of finfo.min values overflows to -inf, and squares of
    # values below 2**-63 vanish (a transformers llama's mask showed it).
    acc = torch.float64 if x.get_dtype() == torch.float64 else torch.float32
    v = _as_stored(x, acc)
    wide = _as_stored(x, torch.float64) if acc != torch.float64 else v
    # v != v rather than isnan: inductor's CPU code vectorises the
    # comparison, isnan went element by element.
    nan = lowerings[aten.ne.Tensor](v, v)
    where = lowerings[aten.where.self]
    total = lowerings[aten.sum.default]
    inf = float("inf")
    count = torch.int32 if V.graph.sizevars.statically_known_lt(x.get_numel(), 2**31) else torch.int64
    # Same order as the columns of a row (csrc/engine/row.h); NaN is left out
    # of max and min and counted, as the opaque kernels do.
    parts = [
        lowerings[aten.amax.default](where(nan, -inf, v)),
        lowerings[aten.amin.default](where(nan, inf, v)),
        total(wide),
        total(lowerings[aten.mul.Tensor](wide, wide)),
        total(nan, dtype=count),
    ]
    values = _gather(parts, x.get_device())
    record = fallback_handler(torch.ops.graphprobe.record_values.default, add_to_fallback_set=False)
    record(values, site, index, x.get_dtype(), list(x.get_size()))
    return None


def _gather(parts, device):  # type: ignore[no-untyped-def]
    """The five 0-d results as one float64 vector (inductor's cat lowering
    wants an FX node of its own)."""
    from torch._inductor import ir
    from torch._inductor.virtualized import ops

    loaders = [p.make_loader() for p in parts]

    def load(k: int):  # type: ignore[no-untyped-def]
        return ops.to_dtype(loaders[k]([]), torch.float64)

    def inner(index):  # type: ignore[no-untyped-def]
        position = ops.index_expr(index[0], torch.int64)
        value = load(len(loaders) - 1)
        for k in range(len(loaders) - 2, -1, -1):
            value = ops.where(ops.eq(position, ops.constant(k, torch.int64)), load(k), value)
        return value

    return ir.Pointwise.create(device=device, dtype=torch.float64, inner_fn=inner, ranges=[len(parts)])


def _as_stored(x, acc: torch.dtype):  # type: ignore[no-untyped-def]
    """``x`` rounded to its own dtype, as storing it would round it, then
    converted (exactly) to the accumulation dtype ``acc``."""
    from torch._inductor import ir
    from torch._inductor.virtualized import ops

    dtype = x.get_dtype()
    load = x.make_loader()

    def inner(index):  # type: ignore[no-untyped-def]
        value = load(index)
        # use_compute_types=False: round to x's dtype for real, as storing x
        # would, instead of reusing the float32 value the kernel carries.
        stored = ops.to_dtype(value, dtype, use_compute_types=False)
        return ops.to_dtype(stored, acc)

    return ir.Pointwise.create(device=x.get_device(), dtype=acc, inner_fn=inner, ranges=x.get_size())

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

FORM = 5
"""The version of :func:`_lower_fusable`, passed to every fusable probe. It
is a constant in the traced graph, and inductor's on-disk caches key on the
graph, not on this module's code: bump it whenever the lowering changes what
the compiled code computes, or code compiled by the earlier lowering is
reused. (1 was a decomposition that fused every probe; 2 summed in
float32; 3 had no Sketch.)"""

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
        # The Sketch (docs/formats.md), in the same loop: four more sums.
        *[total(part) for part in _sketch_terms(x, wide)],
    ]
    values = _gather(parts, x.get_device())
    record = fallback_handler(torch.ops.graphprobe.record_values.default, add_to_fallback_set=False)
    record(values, site, index, x.get_dtype(), list(x.get_size()))
    return None


# The Sketch's constants: csrc/stats/sketch.h (the key) and
# csrc/stats/checksum.h (fmix64's multipliers).
_SKETCH_KEY = 0xD1B54A32D192ED03
_FMIX_C1 = 0xFF51AFD7ED558CCD
_FMIX_C2 = 0xC4CEB9FE1A85EC53
_SKETCH_GROUP = 16  # elements per hash: 16 lanes x 4 sign bits
_LOW32 = (1 << 32) - 1


class _Int64Ops:
    """What :func:`_sketch_hash` computes with, on non-negative int64 values
    below 2**63: inductor's ``ops`` (below) or torch tensors (the tests)."""

    def __init__(self, ops) -> None:  # type: ignore[no-untyped-def]
        self._ops = ops

    def const(self, value: int):  # type: ignore[no-untyped-def]
        return self._ops.constant(value, torch.int64)

    def add(self, a, b):  # type: ignore[no-untyped-def]
        return self._ops.add(a, b)

    def mul(self, a, c: int):  # type: ignore[no-untyped-def]
        return self._ops.mul(a, self.const(c))

    def mask(self, a, m: int):  # type: ignore[no-untyped-def]
        return self._ops.bitwise_and(a, self.const(m))

    def shr(self, a, s: int):  # type: ignore[no-untyped-def]
        return self._ops.bitwise_right_shift(a, self.const(s))

    def xor(self, a, b):  # type: ignore[no-untyped-def]
        return self._ops.bitwise_xor(a, b)


def _mul_limbs(o, hi, lo, c: int):  # type: ignore[no-untyped-def]
    """(hi, lo) * c mod 2**64, the 64-bit value as two 32-bit limbs held in
    int64s. Products of a limb and a 16-bit piece of c stay below 2**48, so
    no step overflows int64: inductor's C++ is compiled without -fwrapv, and
    gcc folded a wrapping int64 product of the plain formulation into
    INT64_MAX (a wrong Sketch on small tensors; found while writing this)."""
    c0, c1, c2, c3 = (c >> 16 * j & 0xFFFF for j in range(4))
    p1 = o.mul(lo, c1)
    t = o.add(o.mul(lo, c0), o.mul(o.mask(p1, 0xFFFF), 1 << 16))
    carry = o.add(o.shr(t, 32), o.shr(p1, 16))
    # The high limb takes lo * (c's high half) and hi * (c's low half),
    # each modulo 2**32, and the carry out of the low limb.
    high = o.add(o.mul(lo, c2), o.mul(o.mask(o.mul(lo, c3), 0xFFFF), 1 << 16))
    high = o.add(high, o.add(o.mul(hi, c0), o.mul(o.mask(o.mul(hi, c1), 0xFFFF), 1 << 16)))
    return o.mask(o.add(high, carry), _LOW32), o.mask(t, _LOW32)


def _sketch_hash(o, group_plus_one):  # type: ignore[no-untyped-def]
    """fmix64((g + 1) * key) of csrc/stats/sketch.h as its (high, low) 32-bit
    limbs, from g + 1 (an int64 below 2**63) with the operations of ``o``."""
    hi, lo = o.shr(group_plus_one, 32), o.mask(group_plus_one, _LOW32)
    hi, lo = _mul_limbs(o, hi, lo, _SKETCH_KEY)
    for c in (_FMIX_C1, _FMIX_C2, None):
        lo = o.xor(lo, o.shr(hi, 1))  # x ^= x >> 33: the high limb's bits 1..31 into the low limb
        if c is not None:
            hi, lo = _mul_limbs(o, hi, lo, c)
    return hi, lo


def _sketch_terms(x, wide):  # type: ignore[no-untyped-def]
    """The four tensors whose sums are the Sketch (docs/formats.md):
    ``wide`` (x in float64, rounded as stored) with element i (row-major)
    negated where bit ``4 * (i % 16) + k`` of the group's hash is set.

    The hashes are a buffer of their own, [groups, 2] int64 (the low and the
    high 32 bits), made by a small kernel before the fused loop, so that the
    ~70 integer operations of a hash are spent per 16 elements, not per
    element; the fused loop loads the lane's limb and tests one bit per
    projection. (Inductor may still inline the buffer into a small loop.)"""
    from torch._inductor import ir
    from torch._inductor.virtualized import ops
    from torch.utils._sympy.functions import FloorDiv, ModularIndexing

    device = x.get_device()
    size = list(x.get_size())
    groups = FloorDiv(x.get_numel() + (_SKETCH_GROUP - 1), _SKETCH_GROUP)
    o = _Int64Ops(ops)

    def group_hash(index):  # type: ignore[no-untyped-def]
        hi, lo = _sketch_hash(o, ops.index_expr(index[0] + 1, torch.int64))
        return ops.where(ops.eq(ops.index_expr(index[1], torch.int64), o.const(0)), lo, hi)

    hashes = ir.Pointwise.create(device=device, dtype=torch.int64, inner_fn=group_hash, ranges=[groups, 2])
    hashes.realize()
    load_hash = hashes.make_loader()
    load = wide.make_loader()
    strides = ir.FlexibleLayout.contiguous_strides(size)

    def term(k: int):  # type: ignore[no-untyped-def]
        # Over the flat row-major index i, the range inductor flattens the
        # other reductions' loops to, so that they share one loop: over x's
        # own dims the group and lane expressions kept the loop from being
        # flattened, and the Sketch was a second loop reading x again.
        def inner(index):  # type: ignore[no-untyped-def]
            (i,) = index
            coords = [ModularIndexing(i, stride, n) for stride, n in zip(strides, size)]
            # Lanes 0..7 take their bits from the low limb, 8..15 from the high.
            limb = load_hash([FloorDiv(i, _SKETCH_GROUP), ModularIndexing(i, _SKETCH_GROUP // 2, 2)])
            shift = ops.index_expr(4 * ModularIndexing(i, 1, _SKETCH_GROUP // 2) + k, torch.int64)
            bit = o.mask(ops.bitwise_right_shift(limb, shift), 1)
            value = load(coords)
            return ops.where(ops.eq(bit, o.const(0)), value, ops.neg(value))

        return ir.Pointwise.create(device=device, dtype=torch.float64, inner_fn=inner, ranges=[x.get_numel()])

    return [term(k) for k in range(4)]


def _gather(parts, device):  # type: ignore[no-untyped-def]
    """The 0-d results as one float64 vector (inductor's cat lowering
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

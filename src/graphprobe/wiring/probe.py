"""Turns one part of a call (its inputs when it opens, its output when it
closes) into probe ops, one per tensor, each carrying the part's identity.

This code runs in eager mode on every call, and under ``torch.compile`` or
CUDA graph capture once, while tracing or capturing: it only *inserts*
``graphprobe::record_stats``; the op itself then runs on every execution.

Identity is fixed here, at insertion, never rebuilt from the order in which
a backend later runs the probes (inductor reorders ops without a data
dependency): :func:`_register` describes the part to the engine — the places
of its tensors, its non-tensor values — and gets a *site* id; every probe of
the part carries ``(site, index)``. While dynamo traces, ``_register`` is
executed for real (``assume_constant_result``) and its result becomes a
constant of the graph, so compiled code keeps the ids of its trace. See
csrc/identity/call_registry.h for how calls are paired, numbered and
ordered.

The walk is written for dynamo to trace without graph breaks: plain
recursion over tuples, lists and dicts, building tuples of constants.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch._subclasses.functional_tensor import FunctionalTensor
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from graphprobe._ops import _C, record_stats, record_stats_fusable
from graphprobe.wiring import fused_stats, shared_probes, slicing

__all__ = ["MAX_DEPTH", "as_output_tuple", "matches", "new_session", "probe_inputs", "probe_output", "safe_text"]

MAX_DEPTH = 32
"""Nesting levels of tuples, lists and dicts the walk descends into; a value
deeper than that is recorded by its type only (no tensor probed inside)."""

# Tensor classes that need no unwrapping (the common case, checked first).
_PLAIN = (torch.Tensor, torch.nn.Parameter)

# torch.Tensor's own __torch_dispatch__ (a C function: the class attribute is
# the same object on every access); a subclass that overrides it has another.
_NO_DISPATCH = torch._C._disabled_torch_dispatch_impl
_TRACING_TENSORS = (FakeTensor, FunctionalTensor)

# The marker probed for a part without tensors (see _probe), in eager mode.
_MARKER = torch.empty(0)

# Non-tensor leaves whose values are written into dump.json.
_VALUE_TYPES = (bool, int, float, str, type(None))

# How a part was inserted (csrc/identity/call_registry.h, InsertMode).
_EAGER, _TRACED, _CAPTURED = 0, 1, 2

# Compiled code keeps the site ids of its trace, and stop() forgets every site
# (csrc/identity/call_registry.h): such code would run probes that record
# nothing. Each stop() takes a new number here, and traced code hands it to
# _register, so dynamo guards on it: code traced under an earlier dumper
# recompiles with fresh sites instead.
_session = 0


def new_session() -> None:
    """Makes graphs traced until now recompile (``stop()``)."""
    global _session
    _session += 1


_Place = tuple[str, ...]
_Leaf = tuple[_Place, int, str, Any]


def safe_text(s: str) -> str:
    """``s`` with lone surrogates escaped (``\\udc80``): they cannot be
    encoded as UTF-8 and must not make a wired model fail."""
    if s.isascii():
        return s
    return s.encode("utf-8", "backslashreplace").decode("utf-8")


_COMPRESSED_LAYOUTS = (torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc)


def _recordable(value: torch.Tensor) -> torch.Tensor | None:
    """The dense tensor whose statistics a probe records for ``value``; None
    when there is none (the value is then described by its type only).

    A probe must never break the model, and the record kernels read dense
    (strided) tensors only. msprobe's choices are followed:

    * a ``DTensor`` (FSDP2, tensor parallelism): its local shard
      (``to_local()``: this rank's statistics and the shard's shape);
    * a nested tensor (jagged or strided): its packed components
      (``values()``);
    * a sparse tensor (COO, CSR, CSC, BSR, BSC): its stored values;
    * an MKL-DNN tensor: its dense copy.

    A tensor subclass with its own ``__torch_dispatch__`` (torchao's
    quantized and float8 tensors, other wrapper subclasses; also a DTensor's
    local shard of one) has none: the probe op would reach that
    ``__torch_dispatch__``, which may not support it and raise inside the
    user's forward. Its inner tensors may be packed data (quantized values,
    scales) rather than the values the model computes with, so they are not
    recorded either. Subclasses that only override ``__torch_function__``
    (``nn.Parameter``, most user subclasses) are recorded as tensors.
    """
    if type(value).__name__ == "DTensor" and hasattr(value, "_local_tensor"):
        # The attribute, not to_local(): dynamo traces it without a graph break.
        value = value._local_tensor
    if value.is_nested:  # a jagged one is a wrapper subclass, whose values() are plain
        return value.values()
    if type(value) not in _PLAIN and _has_own_dispatch(value):
        return None
    layout = value.layout
    if layout == torch.strided:
        return value
    if layout == torch.sparse_coo:
        return value._values()
    if layout in _COMPRESSED_LAYOUTS:
        return value.values()
    if layout == torch._mkldnn:  # type: ignore[attr-defined]
        return value.to_dense()
    return None


def _has_own_dispatch(value: torch.Tensor) -> bool:
    """Whether ``value``'s class overrides ``__torch_dispatch__`` (a wrapper
    subclass: every op on it, a probe's included, runs its Python code).
    Tracing tensors are not: a FakeTensor or FunctionalTensor runs the
    probe's fake kernel, which is how a trace outside dynamo (non-strict
    export, torchair's npugraph_ex) keeps the probes."""
    if isinstance(value, _TRACING_TENSORS):
        return False
    if is_traceable_wrapper_subclass(value):
        return True
    return getattr(type(value), "__torch_dispatch__", _NO_DISPATCH) is not _NO_DISPATCH


_Extras = tuple[tuple[str, str], ...]


def _dtensor_fields(value: torch.Tensor) -> _Extras:
    """A DTensor's record fields beyond the local shard's statistics:
    ``placements`` as msprobe writes them (``[{"Shard": {"dim": 0}}]``,
    ``{"Replicate": {}}``, ``{"Partial": {"reduce_op": "sum"}}``) and
    ``global_shape``, the shape of the whole tensor. JSON text built by hand:
    dynamo traces this without a graph break."""
    parts = []
    for p in value.placements:  # type: ignore[attr-defined]
        if p.is_shard():
            parts.append('{"Shard": {"dim": ' + str(int(p.dim)) + "}}")
        elif p.is_replicate():
            parts.append('{"Replicate": {}}')
        elif p.is_partial():
            op = str(p.reduce_op)
            parts.append('{"Partial": {"reduce_op": "' + (op if op.isidentifier() else "unknown") + '"}}')
    shape = "[" + ", ".join(str(int(d)) for d in value.shape) + "]"
    return (("placements", "[" + ", ".join(parts) + "]"), ("global_shape", shape))


def _tensor_type(value: torch.Tensor) -> str:
    """How a tensor without recordable values is described (its class and
    layout): a type other than ``torch.Tensor``, so that readers take it as a
    non-tensor value."""
    return f"{type(value).__module__}.{type(value).__name__}({str(value.layout)})"


def _walk(
    value: Any, place: _Place, depth: int, tensors: list[torch.Tensor], places: list[_Place], orders: list[int],
    leaves: list[_Leaf], extras: list[_Extras],
) -> None:
    order = len(orders) + len(leaves)  # argument order across tensors and leaves
    if isinstance(value, torch.Tensor):
        plain = type(value) in _PLAIN and value.layout == torch.strided and not value.is_nested
        shown = value if plain else _recordable(value)
        if shown is None:
            leaves.append((place, order, _tensor_type(value), None))
            return
        if not plain and type(value).__name__ == "DTensor" and hasattr(value, "placements"):
            extras.extend(() for _ in range(len(tensors) - len(extras)))
            extras.append(_dtensor_fields(value))
        tensors.append(shown)
        places.append(place)
        orders.append(order)
    elif depth >= MAX_DEPTH and isinstance(value, (tuple, list, dict)):
        leaves.append((place, order, type(value).__name__, None))
    elif isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            _walk(item, place + (str(i),), depth + 1, tensors, places, orders, leaves, extras)
    elif isinstance(value, dict):
        for key, item in value.items():
            _walk(item, place + (safe_text(str(key)),), depth + 1, tensors, places, orders, leaves, extras)
    elif isinstance(value, str):
        leaves.append((place, order, type(value).__name__, safe_text(value)))
    elif isinstance(value, _VALUE_TYPES):
        leaves.append((place, order, type(value).__name__, value))
    else:
        leaves.append((place, order, type(value).__name__, None))


def _mode() -> int:
    if torch.compiler.is_compiling():
        return _TRACED
    if torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing():
        return _CAPTURED
    # An NPU graph (torch.npu.NPUGraph) asks the NPU's runtime: the core
    # package never imports torch_npu.
    if _C.privateuse1_capturing():
        return _CAPTURED
    return _EAGER


def _trace_program(slot: str = "_graphprobe_program") -> int:
    """The engine's number for the trace under way: one per dynamo trace, so
    that the calls of one compiled graph are ordered by their positions.
    ``slot`` names the attribute of the tracing context that holds it: the
    backward probes of a trace keep a number of their own (wiring/backward.py)."""
    ctx = torch._guards.TracingContext.try_get()
    if ctx is None:
        return int(_C.new_program())
    program = getattr(ctx, slot, None)
    if program is None:
        program = int(_C.new_program())
        setattr(ctx, slot, program)
    return program


@torch._dynamo.assume_constant_result
def _register(
    opening: bool, entry: str, places: tuple[_Place, ...], orders: tuple[int, ...], requires_grad: tuple[bool, ...],
    leaves: tuple[_Leaf, ...], mode: int, session: int, extras: tuple[_Extras, ...] = (),
) -> int:
    """Registers one part of a call and returns its site. Executed (not
    traced) by dynamo, once per trace: its result is a constant of the graph.
    ``session`` is unused here: passing it makes dynamo guard on it."""
    program = 0
    if mode == _TRACED:
        program = _trace_program()
        shared_probes.install()
    register = _C.open_call if opening else _C.close_call
    return int(register(entry, places, orders, requires_grad, leaves, mode, program, extras))


@torch._dynamo.assume_constant_result
def _fusion_allowed() -> bool:
    """Whether the task lets inductor fuse the statistics of the probes being
    traced (wiring/fused_stats.py): the tensor task needs the tensors.
    Executed, not traced: a constant of the graph."""
    allowed = _C.tensor_staging() is None
    if allowed:
        fused_stats.install()
    return allowed


def _probe(opening: bool, entry: str, parts: tuple[tuple[str, Any], ...]) -> int:
    tensors: list[torch.Tensor] = []
    places: list[_Place] = []
    orders: list[int] = []
    leaves: list[_Leaf] = []
    extras: list[_Extras] = []  # per tensor, up to the last one that has any
    for part, value in parts:
        if isinstance(value, dict):
            for key, item in value.items():
                _walk(item, (part, safe_text(str(key))), 1, tensors, places, orders, leaves, extras)
        else:
            for i, item in enumerate(value):
                _walk(item, (part, str(i)), 1, tensors, places, orders, leaves, extras)
    requires_grad = tuple(t.requires_grad for t in tensors)
    tensors = slicing.sliced(tensors)  # statistics.slice: views, traced into the graph
    mode = _mode()
    site = _register(
        opening, entry, tuple(places), tuple(orders), requires_grad, tuple(leaves), mode, _session, tuple(extras))
    if not tensors:
        # A part without tensors (ints in and out; a tensor deeper than
        # MAX_DEPTH) still needs a row to show that it ran: one empty marker
        # tensor at index 0, which the engine records as "ran" without a
        # tensor record (csrc/identity/call_assembly.cpp).
        tensors = [torch.empty(0) if mode == _TRACED else _MARKER]
    if mode == _TRACED:
        # The switch is read here, in traced code, so that dynamo guards on it.
        # Graph nodes: they run on every execution.
        if fused_stats.enabled() and _fusion_allowed():
            for i, tensor in enumerate(tensors):
                record_stats_fusable(tensor, site, i, fused_stats.FORM)
        else:
            for i, tensor in enumerate(tensors):
                record_stats(tensor, site, i)
    elif tensors:
        _C.record_part(site, tensors)  # runs now: one call, no dispatcher per tensor
    return site


def probe_inputs(
    entry: str, args: tuple[Any, ...], kwargs: dict[str, Any], parameters: dict[str, Any] | None = None
) -> int:
    """Opens a call of ``entry`` (a name template with ``{n}`` for the call
    index) and probes its positional and keyword inputs, and a module's own
    ``parameters`` (msprobe's ``parameters`` part) when given. Returns the
    site of the inputs (the call's identity; an L1 backward call links to
    it, wiring/api_backward.py)."""
    parts: tuple[tuple[str, Any], ...] = (("input_args", args), ("input_kwargs", kwargs))
    if parameters is not None:
        parts += (("parameters", parameters),)
    return _probe(True, entry, parts)


def probe_output(entry: str, output: Any) -> None:
    """Closes the latest open call of ``entry`` and probes its output (a
    single value is listed as a one-element list)."""
    _probe(False, entry, (("output", as_output_tuple(output)),))


def as_output_tuple(output: Any) -> Any:
    """msprobe lists a call's output as a list even when it is one value."""
    return output if isinstance(output, (tuple, list)) else (output,)


def matches(name: str, keywords: tuple[str, ...]) -> bool:
    """``statistics.list`` filtering: case-insensitive substring of the name."""
    if not keywords:
        return True
    lowered = name.lower()
    return any(k in lowered for k in keywords)

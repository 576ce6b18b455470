"""Probes of one tensor share one reduction in inductor's code.

At L0 a module's output is usually the next module's input, and the
embedding's output is also the first block's and its first norm's input: the
same tensor is probed two or three times (42 of the 139 probes of the
benchmark's transformer-m). Inductor lowers ``graphprobe::record_stats`` here:
the first probe of an FX value in a graph reads it; every later probe of the
same value becomes ``graphprobe::record_mirror``, which reads nothing and has
the engine collect the first probe's row under its own record too
(csrc/engine/engine.h, ``Engine::record_mirror``).

What decides: the FX node and the writes into its memory before the probe.
Functionalization makes every in-place update of the model's code a new
node, but inductor's post-grad passes (``reinplace_inplaceable_ops``) turn
updates through an index or a view (``idx[0, 0] = 7``, ``index_put``) back
into mutations of the tensor's memory and point every later use at the
tensor's own node: one node is then two values, before and after the
update, and a probe after it must read again (issue #35: the records of
the updated routing indices held the indices before the update). The
decision is made from the graph alone, so it is the same on every compile
and in every compile cache. Eager mode, ``aot_eager`` and CUDA graph
capture of eager code never reach this lowering and read every probe.
"""

from __future__ import annotations

import bisect
import threading
from typing import Any

import torch

__all__ = ["install"]

_lock = threading.Lock()
_installed = False


def install() -> None:
    """Registers the lowering with inductor, once. Called while dynamo traces
    a probe, not at import: importing inductor takes seconds."""
    global _installed
    with _lock:
        if _installed:
            return
        from torch._inductor import lowering

        op = torch.ops.graphprobe.record_stats.default
        # As inductor's own fallback for an op without a lowering (make_fallback).
        lowering.add_needs_realized_inputs(op)
        lowering.register_lowering(op, type_promotion_kind=None)(_lower)
        _installed = True


def _lower(x: Any, site: int, index: int) -> None:
    from torch._inductor.lowering import fallback_handler
    from torch._inductor.virtualized import V

    source = _first_probe_of_value(V.graph, site, index)
    if source is None:
        fallback_handler(torch.ops.graphprobe.record_stats.default, add_to_fallback_set=False)(x, site, index)
    else:
        fallback_handler(torch.ops.graphprobe.record_mirror.default, add_to_fallback_set=False)(x, site, index, *source)
    return None


def _first_probe_of_value(graph: Any, site: int, index: int) -> tuple[int, int] | None:
    """(site, index) of an earlier probe of the value that the probe being
    lowered reads, in this graph; None for the first probe of a value.

    An earlier probe of the same FX node holds the same value only when
    nothing wrote into that node's memory between the two probes: inductor's
    post-grad passes make its functional graph mutate again
    (``reinplace_inplaceable_ops`` turns ``x[0, 0] = 7``'s
    ``select_scatter`` and ``index_put`` into in-place ops on ``x`` and
    points every later use of the update's result at ``x``'s node). So the
    key is the node and the writes into its storage that precede the probe
    (:func:`_writes_before`)."""
    node = graph.current_node
    if node is None or node.target is not torch.ops.graphprobe.record_stats.default or not node.args:
        return None
    value = node.args[0]
    if not isinstance(value, torch.fx.Node):
        return None
    try:
        version = _writes_before(graph, value, node)
    except Exception:  # torch internals changed: read the probe, never guess
        return None
    if version is None:
        return None
    first: dict[tuple[torch.fx.Node, tuple[int, int]], tuple[int, int]] = graph.__dict__.setdefault(
        "_graphprobe_first_probe", {}
    )
    source = first.setdefault((value, version), (site, index))
    return None if source == (site, index) else source


class _Writes:
    """Where an FX graph writes into memory: for each storage (of the fake
    tensors in the nodes' ``meta["val"]``; a view shares its base's), the
    graph positions of the nodes that write into it, and the positions of
    nodes whose writes cannot be placed (counted as writes into every
    storage)."""

    def __init__(self, fx_graph: torch.fx.Graph) -> None:
        self.position: dict[torch.fx.Node, int] = {}
        self.by_storage: dict[Any, list[int]] = {}
        self.anywhere: list[int] = []
        for i, node in enumerate(fx_graph.nodes):
            self.position[node] = i
            written = _written_nodes(node)
            if written is None:
                self.anywhere.append(i)
                continue
            for target in written:
                storage = _storage(target)
                if storage is None:
                    self.anywhere.append(i)
                    break
                self.by_storage.setdefault(storage, []).append(i)


def _writes_before(graph: Any, value: torch.fx.Node, probe: torch.fx.Node) -> tuple[int, int] | None:
    """How many writes into ``value``'s memory (and writes that may land
    anywhere) the graph makes before ``probe``; None when that is unknown."""
    fx_graph = probe.graph
    writes = graph.__dict__.get("_graphprobe_writes")
    if writes is None or writes[0] is not fx_graph:
        writes = (fx_graph, _Writes(fx_graph))
        graph.__dict__["_graphprobe_writes"] = writes
    table = writes[1]
    at = table.position.get(probe)
    storage = _storage(value)
    if at is None or storage is None:
        return None
    return bisect.bisect_left(table.by_storage.get(storage, ()), at), bisect.bisect_left(table.anywhere, at)


# Targets of call_function nodes that compute numbers or pick a tuple's item
# and write no tensor (operator.getitem, SymInt arithmetic).
_PURE_MODULES = ("_operator", "operator", "math", "builtins")


def _written_nodes(node: torch.fx.Node) -> list[torch.fx.Node] | None:
    """The nodes whose memory ``node`` writes into ([] for none); None when
    that cannot be told (a higher-order op, an unknown callable)."""
    if node.op != "call_function":
        return []
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        schema = target._schema
        if not schema.is_mutable:
            return []
        written: list[torch.fx.Node] = []
        for i, argument in enumerate(schema.arguments):
            info = argument.alias_info
            if info is None or not info.is_write:
                continue
            given = node.args[i] if not argument.kwarg_only and i < len(node.args) else node.kwargs.get(argument.name)
            items = given if isinstance(given, (list, tuple)) else (given,)
            for item in items:
                if isinstance(item, torch.fx.Node):
                    written.append(item)
                elif item is not None:
                    return None
        return written
    if getattr(target, "__module__", None) in _PURE_MODULES or getattr(target, "__name__", "").startswith(
        ("sym_", "_sym_")
    ):
        return []
    return None


def _storage(node: torch.fx.Node) -> Any:
    """An identity of the memory that ``node``'s tensor lives in (shared by
    its views), or None."""
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or not torch._C._has_storage(val):
        return None
    return val.untyped_storage()._cdata

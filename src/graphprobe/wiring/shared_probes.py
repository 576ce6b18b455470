"""Probes of one tensor share one reduction in inductor's code.

At L0 a module's output is usually the next module's input, and the
embedding's output is also the first block's and its first norm's input: the
same tensor is probed two or three times (42 of the 139 probes of the
benchmark's transformer-m). Inductor lowers ``graphprobe::record_stats`` here:
the first probe of an FX value in a graph reads it; every later probe of the
same value becomes ``graphprobe::record_mirror``, which reads nothing and has
the engine collect the first probe's row under its own record too
(csrc/engine/engine.h, ``Engine::record_mirror``).

Why the FX value decides: inductor's graph is functional, so one FX node is
one value for the whole graph (an in-place update in the model's code is a
new node there), and a probe reads it once per execution as the first one
does. The decision is made from the graph alone, so it is the same on every
compile and in every compile cache. Eager mode, ``aot_eager`` and CUDA graph
capture of eager code never reach this lowering and read every probe.
"""

from __future__ import annotations

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
    lowered reads, in this graph; None for the first probe of a value."""
    node = graph.current_node
    if node is None or node.target is not torch.ops.graphprobe.record_stats.default or not node.args:
        return None
    value = node.args[0]
    if not isinstance(value, torch.fx.Node):
        return None
    first: dict[torch.fx.Node, tuple[int, int]] = graph.__dict__.setdefault("_graphprobe_first_probe", {})
    source = first.setdefault(value, (site, index))
    return None if source == (site, index) else source

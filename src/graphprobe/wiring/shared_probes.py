"""Probes of one tensor share one reduction in inductor's code.

At L0 a module's output is usually the next module's input, and the
embedding's output is also the first block's and its first norm's input: the
same tensor is probed two or three times (38 of the 139 probes of the
benchmark's transformer). Inductor lowers ``graphprobe::record_stats`` here:
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

        lowering.register_lowering(torch.ops.graphprobe.record_stats.default, type_promotion_kind=None)(_lower)
        _installed = True


def _lower(x: Any, site: int, index: int) -> None:
    from torch._inductor.lowering import fallback_handler
    from torch._inductor.virtualized import V

    node = V.graph.current_node
    value = node.args[0] if node is not None and node.args else None
    first = None
    if isinstance(value, torch.fx.Node):
        probed = V.graph.__dict__.setdefault("_graphprobe_probed", {})
        first = probed.setdefault(value, (site, index))
        if first == (site, index):
            first = None
    if first is None:
        fallback_handler(torch.ops.graphprobe.record_stats.default, add_to_fallback_set=False)(x, site, index)
    else:
        fallback_handler(torch.ops.graphprobe.record_mirror.default, add_to_fallback_set=False)(x, site, index, *first)
    return None

"""Ascend NPU support: registers the NPU's device runtime with the engine.

The NPU runtime lives in the optional extension ``graphprobe._C_npu``, built
only where ``torch_npu`` imports (setup.py). This module never imports
``torch_npu`` itself: it acts only when the user's program already has
(``"torch_npu" in sys.modules``), when graphprobe loads and again at
``AclGraphDumper.start()`` (torch_npu imported after graphprobe).

It also refuses torchair's GE mode (``torch.compile`` with torchair's
``max-autotune`` mode) with a clear error: GE compiles every node to Ascend
IR and cannot host the host function the probes need; use torchair's
``reduce-overhead`` mode (npugraph_ex, ACL graphs) instead.
"""

from __future__ import annotations

import sys
import warnings

__all__ = ["GE_MODE_MESSAGE", "ensure_runtime"]

GE_MODE_MESSAGE = (
    "graphprobe: torchair's GE mode (mode='max-autotune') cannot run graphprobe's probes: it compiles every "
    "node to Ascend IR and cannot host a host function. Compile with torchair's mode='reduce-overhead' "
    "(npugraph_ex, ACL graphs), or dump in eager mode."
)

_registered = False


def ensure_runtime() -> bool:
    """Registers the NPU runtime if torch_npu is loaded; returns whether one
    is registered. Without ``graphprobe._C_npu`` (graphprobe built where
    torch_npu did not import) nothing is registered and an NPU tensor that
    reaches a probe raises an error saying how to rebuild; CPU models still
    work."""
    global _registered
    if _registered:
        return True
    if "torch_npu" not in sys.modules:
        return False
    # The extension itself, not graphprobe._ops (which imports this module):
    # _ops has loaded it, or reported a broken install, before any caller.
    from graphprobe import _C

    try:
        from graphprobe import _C_npu  # type: ignore[attr-defined]
    except ImportError:
        return False
    _C_npu.register_runtime(_C.runtime_registrar())
    _refuse_ge_mode()
    _registered = True
    return True


def _refuse_ge_mode() -> None:
    """A torchair GE converter for each probe op that raises GE_MODE_MESSAGE:
    torchair calls converters only in GE mode."""
    try:
        from torchair._ge_concrete_graph.fx2ge_converter import register_fx_node_ge_converter  # type: ignore
    except ImportError:
        return  # no torchair: no GE mode to refuse
    import torch

    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError(GE_MODE_MESSAGE)

    try:
        for op in (torch.ops.graphprobe.record_stats.default, torch.ops.graphprobe.save.default):
            register_fx_node_ge_converter(op)(refuse)
    except Exception as exc:  # torchair's private API moved: GE mode then fails with torchair's own error
        warnings.warn(f"graphprobe: could not register the GE-mode refusal with torchair ({exc})", RuntimeWarning)

"""Loads the native engine and prepares its operators for torch.compile.

Importing ``graphprobe._C`` registers the ``torch.ops.graphprobe`` operators
(from C++ static initialisers). Their fake kernels are the C++ ``Meta``
kernels; here they are additionally marked side-effectful, so that neither
FX's dead-code elimination nor inductor's scheduler drops a probe whose
(empty) result nobody uses.
"""

from __future__ import annotations

import torch

try:
    from graphprobe import _C  # noqa: F401  (import registers the ops)
except ImportError as exc:  # pragma: no cover - exercised only by broken installs
    raise ImportError(
        "graphprobe's native engine (graphprobe._C) could not be loaded: "
        f"{exc}. Build it against the installed torch with "
        "`pip install --no-build-isolation .` (or `-e .` for development)."
    ) from exc

from torch.fx.node import has_side_effect

record_stats = torch.ops.graphprobe.record_stats.default
record_stats_fusable = torch.ops.graphprobe.record_stats_fusable.default
record_mirror = torch.ops.graphprobe.record_mirror.default
record_values = torch.ops.graphprobe.record_values.default
save = torch.ops.graphprobe.save.default

for _op in (record_stats, record_stats_fusable, record_mirror, record_values, save):
    has_side_effect(_op)

# The NPU's runtime, when the program runs on torch_npu (never imported here).
from graphprobe import npu as _npu  # noqa: E402

_npu.ensure_runtime()

__all__ = ["record_mirror", "record_stats", "record_stats_fusable", "record_values", "save", "_C"]

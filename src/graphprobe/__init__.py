"""graphprobe: precision debugging for PyTorch models that run in graph mode.

Records statistics (and, with ``acl_save``, whole tensors) *inside* CUDA
graphs and ``torch.compile`` graphs, on every replay, with msprobe's API
names, configuration keys and file formats.

Attributes are imported on first use, so that ``graphprobe compare`` (which
needs only the dumps) starts without loading torch.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"
"""The package version (also what ``graphprobe --version`` prints)."""

__all__ = [
    "AclGraphDumper",
    "ConfigError",
    "DumpConfig",
    "DumpWriteError",
    "GraphDumper",
    "acl_save",
    "flush",
    "load_config",
    "reference_dump",
    "save",
]

_LAZY = {
    "AclGraphDumper": "graphprobe.dumper",
    "GraphDumper": "graphprobe.dumper",
    "DumpWriteError": "graphprobe.dumper",
    "ConfigError": "graphprobe.config",
    "DumpConfig": "graphprobe.config",
    "load_config": "graphprobe.config",
    "acl_save": "graphprobe.saving",
    "save": "graphprobe.saving",
    "flush": "graphprobe.writer",
    "reference_dump": "graphprobe.reference",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'graphprobe' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

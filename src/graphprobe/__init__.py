"""graphprobe: precision debugging for PyTorch models that run in graph mode.

Records statistics (and, with ``acl_save``, whole tensors) *inside* CUDA
graphs and ``torch.compile`` graphs, on every replay, with msprobe's API
names, configuration keys and file formats.
"""

from __future__ import annotations

from graphprobe.config import ConfigError, DumpConfig, load_config
from graphprobe.dumper import AclGraphDumper, GraphDumper

__all__ = [
    "AclGraphDumper",
    "ConfigError",
    "DumpConfig",
    "GraphDumper",
    "load_config",
]

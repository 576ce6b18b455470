"""graphprobe: precision debugging for PyTorch models that run in graph mode.

Records statistics (and, with ``acl_save``, whole tensors) *inside* CUDA
graphs and ``torch.compile`` graphs, on every replay, with msprobe's API
names, configuration keys and file formats.
"""

from __future__ import annotations

from graphprobe.config import ConfigError, DumpConfig, load_config
from graphprobe.dumper import AclGraphDumper, GraphDumper

# `graphprobe.save` is the function (msprobe's alias of acl_save); it shadows
# the submodule of the same name: use `from graphprobe.save import ...`.
from graphprobe.save import acl_save, flush, save  # noqa: E402  (isort: skip)

__all__ = [
    "AclGraphDumper",
    "ConfigError",
    "DumpConfig",
    "GraphDumper",
    "acl_save",
    "flush",
    "load_config",
    "save",
]

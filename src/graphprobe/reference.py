"""A float64 reference dump: the referee of ``graphprobe compare --reference``.

Example::

    import graphprobe

    graphprobe.reference_dump(model, (tokens,), "dump_fp64", level="L0")
    # graphprobe compare dump_compiled dump_eager --reference dump_fp64

The recipe, by hand: ``copy.deepcopy(model).double()``, every floating
input cast to ``torch.float64``, run eagerly (no torch.compile) under
``torch.no_grad()`` with an ``AclGraphDumper`` of the same config (level,
scope, list) as the dumps it referees, one ``step()``, then ``stop()``.
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from graphprobe.dumper import AclGraphDumper

__all__ = ["reference_dump"]


def _to_float64(value: Any) -> Any:
    """Floating tensors (nested in tuples, lists and dicts) as float64; the rest unchanged."""
    if isinstance(value, torch.Tensor):
        return value.to(torch.float64) if value.is_floating_point() else value
    if isinstance(value, tuple):
        return tuple(_to_float64(v) for v in value)
    if isinstance(value, list):
        return [_to_float64(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_float64(v) for k, v in value.items()}
    return value


def reference_dump(model: torch.nn.Module, inputs: Any, dump_path: str | os.PathLike[str], *, level: str = "L0",
                   kwargs: dict[str, Any] | None = None, **config: Any) -> Path:
    """Dumps one eager float64 run of ``model`` (a deep copy, ``.double()``;
    ``model`` itself is not changed) on ``inputs`` (a tensor or a tuple of
    positional arguments; floating tensors are cast to float64, integer ones
    kept) to ``dump_path``, with the dumper config ``{"dump_path",
    "level", **config}`` -- use the same level and options as the dumps it
    referees, so that the record names agree. Returns ``dump_path``.

    Raises:
        TypeError: ``model`` is not a ``torch.nn.Module``.
        whatever the dumper raises for a bad config (it names the field).
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"reference_dump: model must be a torch.nn.Module, got {type(model).__name__}")
    reference = copy.deepcopy(model).double()
    args = _to_float64(inputs if isinstance(inputs, tuple) else (inputs,))
    kw = _to_float64(kwargs or {})
    path = Path(dump_path)
    with tempfile.TemporaryDirectory(prefix="graphprobe_reference_") as tmp:
        cfg = Path(tmp) / "config.json"
        cfg.write_text(json.dumps({**config, "dump_path": str(path), "level": level}), encoding="utf-8")
        dumper = AclGraphDumper(str(cfg))
        dumper.start(reference)
        try:
            with torch.no_grad():
                reference(*args, **kw)
            dumper.step()
        finally:
            dumper.stop()
    return path

"""The config.json files diagnose hands to the user's script through
``$GRAPHPROBE_CONFIG``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from graphprobe.output_files import write_text_atomic

__all__ = ["write_config"]


def write_config(path: Path, dump_path: Path, level: str, modules: list[str] | None = None,
                 replay: bool = False, save_inputs: bool = False, backward: bool = False) -> Path:
    """Writes a statistics config: ``level``, records of ``modules`` (their
    dotted paths, submodules included; None: every module) and, with
    ``replay``, replay of the same modules (``backward``: their backward too)."""
    data: dict[str, Any] = {"task": "statistics", "dump_path": str(dump_path), "level": level, "rank": []}
    if modules:
        data["statistics"] = {"list": list(modules)}
    if replay:
        section: dict[str, Any] = {"save_inputs": save_inputs}
        if backward:
            section["backward"] = True
        if modules:
            section["list"] = list(modules)
        data["replay"] = section
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(str(path), json.dumps(data, indent=1))
    return path

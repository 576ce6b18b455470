"""Reading the replay files the dumper writes (``step{N}/{pid|rank}/replay.json``;
the format is in docs/diagnose.md, "Replay")."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ModuleVerdict", "ReplayFormatError", "find_replays", "read_replay", "worst"]

_STEP = re.compile(r"step(\d+)$")


class ReplayFormatError(ValueError):
    """A replay.json that is not in the documented format (names the file and the field)."""


@dataclass
class ModuleVerdict:
    """One module's replayed call, as the dumper judged it; ``step`` and
    ``file`` say where it was read. The errors are the largest over the
    call's outputs (None when no output has one)."""

    module: str
    entry: str
    verdict: str
    reason: str
    step: int | None
    file: str
    outputs: list[dict[str, Any]] = field(default_factory=list)
    #: ``inputs_file`` as replay.json has it (relative to its folder; the entry's file name with odd characters
    #: replaced, or ``not written: ...``); None when the inputs were not saved.
    inputs_file: str | None = None

    def inputs_path(self) -> Path | None:
        """The saved inputs of this call: an existing file inside the
        replay.json's folder, else None."""
        if not self.inputs_file or self.inputs_file.startswith("not written"):
            return None
        leaf = Path(self.file).parent
        path = leaf / self.inputs_file
        try:
            inside = leaf.resolve() in path.resolve().parents
        except OSError:
            return None
        return path if inside and path.is_file() else None

    def error(self, key: str) -> float | None:
        """The largest ``key`` (``local_error``, ``eager_local_error``,
        ``float64_error``, ``floor``) over the outputs."""
        vals = [o.get(key) for o in self.outputs]
        nums = [float(v) for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
        nums = [v for v in nums if not math.isnan(v)]
        return max(nums) if nums else None


VERDICTS = ("creates", "inherits", "not judged")


def read_replay(path: Path, step: int | None = None) -> list[ModuleVerdict]:
    """The modules of one replay.json, in call order."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ReplayFormatError(f"{path}: cannot be read as JSON: {e}") from e
    if not isinstance(data, dict) or not isinstance(data.get("modules"), list):
        raise ReplayFormatError(f"{path}: expected an object with a list 'modules'")
    out = []
    for i, m in enumerate(data["modules"]):
        if not isinstance(m, dict):
            raise ReplayFormatError(f"{path}: modules[{i}] is {type(m).__name__}, expected an object")
        for key in ("module", "entry", "verdict"):
            if not isinstance(m.get(key), str):
                raise ReplayFormatError(f"{path}: modules[{i}].{key} is {m.get(key)!r}, expected a string")
        if m["verdict"] not in VERDICTS:
            raise ReplayFormatError(f"{path}: modules[{i}].verdict is {m['verdict']!r}; allowed: {', '.join(VERDICTS)}")
        outputs = m.get("outputs", [])
        if not isinstance(outputs, list) or not all(isinstance(o, dict) for o in outputs):
            raise ReplayFormatError(f"{path}: modules[{i}].outputs is not a list of objects")
        inputs_file = m.get("inputs_file")
        out.append(ModuleVerdict(m["module"], m["entry"], m["verdict"], str(m.get("reason", "")), step, str(path),
                                 outputs, inputs_file if isinstance(inputs_file, str) else None))
    return out


def find_replays(dump_root: Path) -> list[tuple[int, Path]]:
    """Every ``step{N}/*/replay.json`` under ``dump_root``, by step."""
    found = []
    if not dump_root.is_dir():
        return found
    for step_dir in dump_root.iterdir():
        m = _STEP.match(step_dir.name)
        if not m or not step_dir.is_dir():
            continue
        for leaf in sorted(step_dir.iterdir()):
            f = leaf / "replay.json"
            if f.is_file():
                found.append((int(m.group(1)), f))
    return sorted(found)


def worst(calls: list[ModuleVerdict]) -> ModuleVerdict | None:
    """The call of one module to report: a "creates" one with the largest
    local error, else the first "not judged" one (a call that could not be
    judged may hold the error: the module is not counted as inheriting),
    else the first."""
    if not calls:
        return None
    creates = [c for c in calls if c.verdict == "creates"]
    if creates:
        return max(creates, key=lambda c: c.error("local_error") or 0.0)
    unjudged = [c for c in calls if c.verdict == "not judged"]
    return unjudged[0] if unjudged else calls[0]

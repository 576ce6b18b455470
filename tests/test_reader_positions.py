"""Line and column numbers in the compare reader's messages: the reader
counts lines with a vectorised count (json_reader.cpp, locate) instead of a
branch per byte; the numbers must stay those of the text, computed here
from the text itself (the reference)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from graphprobe.compare.native import native


def _line_col(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def _doc(rng: random.Random, entries: int, indent: int | None) -> str:
    data = {f"Module.m{i}.Linear.forward.0": {"output": [{"type": "torch.Tensor", "dtype": "torch.float32",
                                                           "shape": [rng.randint(1, 9)], "Max": rng.random(),
                                                           "Min": 0.0, "Mean": 0.5, "Norm": 1.0}]}
            for i in range(entries)}
    return json.dumps({"task": "statistics", "data": data}, indent=indent)


@pytest.mark.parametrize("seed", range(6))
def test_malformed_json_is_reported_at_its_line_and_column(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    text = _doc(rng, 200, rng.choice([None, 1, 2]))
    # An invalid token in place of a statistic's value somewhere in the file.
    spots = [i for i in range(len(text)) if text.startswith('"Min": ', i)]
    at = rng.choice(spots) + len('"Min": ')
    bad = text[:at] + "@" + text[at + 1:]
    path = tmp_path / "bad.json"
    path.write_text(bad)
    eng = native()
    with pytest.raises(eng.DumpFormatError) as e:
        eng.compare_files(str(path), str(path))
    line, col = _line_col(bad, at)
    assert f"{path}:{line}:{col}:" in str(e.value), (str(e.value), line, col)


@pytest.mark.parametrize("indent", [None, 1])
def test_a_repeated_entry_is_reported_at_its_line(tmp_path: Path, indent: int | None) -> None:
    rng = random.Random(7)
    text = _doc(rng, 120, indent)
    # The 100th entry written again at the end of "data".
    name = "Module.m99.Linear.forward.0"
    start = text.index(f'"{name}"')
    end = text.index('"Module.m100.Linear.forward.0"')
    entry = text[start:end].rstrip().rstrip(",").rstrip()
    close = text.rindex("}", 0, text.rindex("}"))  # the end of "data"
    doubled = text[:close].rstrip() + ",\n" + entry + "\n" + text[close:]
    again = doubled.rindex(f'"{name}"')
    path = tmp_path / "dup.json"
    path.write_text(doubled)
    result = native().compare_files(str(path), str(path))
    note = next(n for n in result.notes if "appears" in n)  # (target and bench: the same file)
    line, _ = _line_col(doubled, again)
    assert f"again at line {line})" in note, (note, line)

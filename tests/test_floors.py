"""The floors (docs/architecture.md): no include or import runs upward, no import circle.

scripts/check_floors.py holds the floor tables; the C++ and Python halves are
checked separately. The checker itself is tested on a small made-up tree with
one upward include, one upward import and one circle, placed by hand.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _checker():
    spec = importlib.util.spec_from_file_location("check_floors", ROOT / "scripts" / "check_floors.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_floors"] = module
    spec.loader.exec_module(module)
    return module


def test_no_cpp_include_runs_upward():
    assert _checker().check("cpp", ROOT) == []


def test_no_python_import_runs_upward_or_in_a_circle():
    assert _checker().check("python", ROOT) == []


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_checker_finds_upward_includes_imports_and_circles(tmp_path):
    # engine is floor 4, record floor 0: record including engine runs upward.
    _write(tmp_path / "csrc/record/row.h", '#pragma once\n#include "engine/engine.h"\n')
    _write(tmp_path / "csrc/engine/engine.h", '#pragma once\n#include "record/row.h"\n')
    # _ops (2) importing dumper (4) runs upward; _text <-> output_files (both 0) is a circle.
    pkg = tmp_path / "src/graphprobe"
    _write(pkg / "__init__.py", "")
    _write(pkg / "_ops.py", "def f():\n    from graphprobe import dumper\n")
    _write(pkg / "dumper.py", "from graphprobe import _ops\n")
    _write(pkg / "_text.py", "from . import output_files\n")
    _write(pkg / "output_files.py", "import graphprobe._text\n")
    _write(pkg / "config.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from graphprobe import cli\n")
    _write(pkg / "cli.py", "")
    check = _checker().check
    assert check("cpp", tmp_path) == [
        "cpp: upward: record/row.h (floor 0) -> engine/engine.h (floor 4)",
        "cpp: circle: engine/engine.h <-> record/row.h",
    ]
    assert check("python", tmp_path) == [
        "python: upward: graphprobe._ops (floor 2) -> graphprobe.dumper (floor 4)",
        "python: circle: graphprobe._ops <-> graphprobe.dumper",
        "python: circle: graphprobe._text <-> graphprobe.output_files",
    ]

"""Issue 40 item 11: compare/outcome.py and compare/referee.py share their
types through compare/verdicts.py and never import each other."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

COMPARE = Path(__file__).resolve().parents[1] / "src" / "graphprobe" / "compare"


def _imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at top level or not (TYPE_CHECKING blocks, functions)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


@pytest.mark.parametrize("module, other", [("outcome", "referee"), ("referee", "outcome")])
def test_neither_module_imports_the_other(module: str, other: str) -> None:
    imported = _imported_modules(COMPARE / f"{module}.py")
    assert f"graphprobe.compare.{other}" not in imported
    assert not any(m.startswith(f"graphprobe.compare.{other}.") for m in imported)


def test_the_shared_module_imports_nothing_of_graphprobe() -> None:
    assert not any(m.startswith("graphprobe") for m in _imported_modules(COMPARE / "verdicts.py"))


@pytest.mark.parametrize("module", ["graphprobe.compare.outcome", "graphprobe.compare.referee",
                                    "graphprobe.compare.verdicts"])
def test_each_module_imports_alone_in_a_fresh_interpreter(module: str) -> None:
    code = (f"import {module} as m, sys\n"
            "from graphprobe.compare.verdicts import Divergence, Verdict\n"
            "assert getattr(m, 'Divergence', Divergence) is Divergence\n"
            "assert getattr(m, 'Verdict', Verdict) is Verdict\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr

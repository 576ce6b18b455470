#!/usr/bin/env python3
"""Checks that includes and imports only go down the floors.

The code is built in floors (docs/architecture.md, "The floors"): a file may
include or import files of its own floor and the floors below, never above,
and no group of modules may import each other in a circle. The tables below
declare the floor of every C++ folder under csrc/ and of every Python module
under src/graphprobe/ (the longest matching prefix wins).

C++: every ``#include "folder/file.h"`` line under csrc/. Python: every
``import graphprobe...`` / ``from graphprobe... import ...`` / relative import
under src/graphprobe/, found with ``ast`` (inside functions too, since a lazy
import still depends), except those under ``if TYPE_CHECKING:``.

Usage: scripts/check_floors.py [--lang cpp|python|all] [--root DIR]
Prints each upward include or import and each circle; exits 1 if any.
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

# ----------------------------------------------------------------- C++ floors
# csrc/<folder> -> floor. Lower floors know nothing of higher ones.
CPP_FLOORS: dict[str, int] = {
    # 0: what every layer shares. Record types (Row, TensorRow, Leaf,
    # CallRecord, ValueKind, dtype names, dump.json key names), general
    # helpers (Immortal), files.
    "record": 0,
    "util": 0,
    "fs": 0,
    # The engine's precompiled header: torch's and the standard headers
    # only, given to every file of _C by the build (-include), none of ours.
    "pch": 0,
    # Vendored third-party headers (Dragonbox: the CSV's shortest doubles),
    # which include nothing of ours.
    "third_party": 0,
    # 1: serializers (JSON, .pt, dump.json), statistics kernels, capture status.
    "format": 1,
    "stats": 1,
    "capture": 1,
    # 2: call identity, device runtimes, the compare engines.
    "identity": 2,
    "runtime": 2,
    "compare": 2,
    "compare_tensors": 2,
    # 3: the file writer.
    "writer": 3,
    # 4: the record store.
    "engine": 4,
    # 5: the op registrations and the NPU module.
    "ops": 5,
    "npu": 5,
    # 6: the Python bindings.
    "python": 6,
    # 7: the C++ unit tests.
    "tests": 7,
}

# -------------------------------------------------------------- Python floors
# Module name (or package prefix) -> floor.
PY_FLOORS: dict[str, int] = {
    # 0: the native modules and helpers that import nothing of graphprobe.
    "graphprobe._C": 0,
    "graphprobe._C_npu": 0,
    "graphprobe._compare": 0,
    "graphprobe._text": 0,
    "graphprobe._cli_types": 0,
    "graphprobe.output_files": 0,
    "graphprobe.install_hint": 0,
    # 1: configuration, dump folders, module-name checks, compile caches, the NPU runtime's
    # registration (it loads graphprobe._C_npu).
    "graphprobe.config": 1,
    "graphprobe.config_sections": 1,
    "graphprobe.config_grads": 1,
    "graphprobe.config_checksum": 1,
    "graphprobe.aclgraph_layout": 1,
    "graphprobe.dump_folder": 1,
    "graphprobe.module_names": 1,
    "graphprobe.dynamo_cache": 1,
    "graphprobe.npu": 1,
    "graphprobe.replay.config": 1,
    "graphprobe.config_env": 1,
    # 2: the op definitions (they register the NPU runtime on load), the
    # writer's lifecycle, acl_save.
    "graphprobe._ops": 2,
    "graphprobe.writer": 2,
    "graphprobe.saving": 2,
    # 3: the probe wiring and the compare package.
    "graphprobe.wiring": 3,
    "graphprobe.compare": 3,
    "graphprobe.replay": 3,
    # 4: the dumper.
    "graphprobe.dumper": 4,
    # 5: the commands.
    "graphprobe.compare.command": 5,
    "graphprobe.demo": 5,
    "graphprobe.reference": 5,
    "graphprobe.diagnose": 5,
    # the long-run history (Parquet files, queries, the flight recorder):
    # reads what dumps and the dumper write, never imported below.
    "graphprobe.history": 5,
    # 6: the command line (and the package face, PY_PACKAGE_FACE).
    "graphprobe.cli": 6,
    # 7: python -m graphprobe.
    "graphprobe.__main__": 7,
}
# The package itself (src/graphprobe/__init__.py): its attributes load lazily
# from every floor, so it sits on the top floor below __main__, with the
# command line (which reads its version). Exact name only: a module
# missing from PY_FLOORS is reported, not placed here by its prefix.
PY_PACKAGE_FACE = ("graphprobe", 6)

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def _floor(table: dict[str, int], name: str, sep: str) -> int | None:
    best: tuple[int, int] | None = None
    for key, floor in table.items():
        if name == key or name.startswith(key + sep):
            if best is None or len(key) > best[0]:
                best = (len(key), floor)
    return None if best is None else best[1]


def cpp_edges(root: Path) -> dict[str, set[str]]:
    """csrc-relative file -> the csrc-relative files it includes."""
    csrc = root / "csrc"
    edges: dict[str, set[str]] = {}
    for path in sorted(csrc.rglob("*")):
        if path.suffix not in {".h", ".cuh", ".cpp", ".cu"}:
            continue
        rel = path.relative_to(csrc).as_posix()
        out = edges.setdefault(rel, set())
        for line in path.read_text(errors="replace").splitlines():
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            if "/" not in target:  # "check.h": beside the including file
                target = f"{Path(rel).parent.as_posix()}/{target}"
            out.add(target)
    return edges


def _module_name(src: Path, path: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            t = node.test
            name = t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else ""
            if name == "TYPE_CHECKING":
                for sub in node.body:
                    for n in ast.walk(sub):
                        if hasattr(n, "lineno"):
                            lines.add(n.lineno)
    return lines


def py_edges(root: Path) -> dict[str, set[str]]:
    """Module -> the graphprobe modules it imports."""
    src = root / "src"
    pkg_root = src / "graphprobe"
    files = sorted(pkg_root.rglob("*.py"))
    modules = {_module_name(src, p) for p in files}
    native = {"graphprobe._C", "graphprobe._C_npu", "graphprobe._compare"}
    known = modules | native

    def resolve(base: str, name: str | None) -> str:
        """`from base import name`: the submodule when there is one."""
        if name and f"{base}.{name}" in known:
            return f"{base}.{name}"
        return base

    edges: dict[str, set[str]] = {}
    for path in files:
        mod = _module_name(src, path)
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        tree = ast.parse(path.read_text(), filename=str(path))
        skip = _type_checking_lines(tree)
        out = edges.setdefault(mod, set())
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == "graphprobe" or alias.name.startswith("graphprobe."):
                        out.add(alias.name)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                if not (base == "graphprobe" or base.startswith("graphprobe.")):
                    continue
                for alias in node.names:
                    out.add(resolve(base, alias.name))
        out.discard(mod)
    return edges


def upward(edges: dict[str, set[str]], table: dict[str, int], key) -> tuple[list[str], list[str]]:
    """Upward edges, and files/modules the table does not place."""
    bad: list[str] = []
    unplaced: set[str] = set()
    for src, targets in sorted(edges.items()):
        f_src = key(table, src)
        if f_src is None:
            unplaced.add(src)
            continue
        for dst in sorted(targets):
            f_dst = key(table, dst)
            if f_dst is None:
                unplaced.add(dst)
            elif f_dst > f_src:
                bad.append(f"{src} (floor {f_src}) -> {dst} (floor {f_dst})")
    return bad, sorted(unplaced)


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def _cpp_key(table: dict[str, int], rel: str) -> int | None:
    return table.get(rel.split("/", 1)[0]) if "/" in rel else None


def _py_key(table: dict[str, int], mod: str) -> int | None:
    if mod == PY_PACKAGE_FACE[0]:
        return PY_PACKAGE_FACE[1]
    return _floor(table, mod, ".")


def check(lang: str, root: Path) -> list[str]:
    """Every violation of `lang` ("cpp" or "python") as a line of text."""
    if lang == "cpp":
        edges, table, key = cpp_edges(root), CPP_FLOORS, _cpp_key
        # A folder's files may include each other; circles are between files.
    else:
        edges, table, key = py_edges(root), PY_FLOORS, _py_key
    problems: list[str] = []
    bad, unplaced = upward(edges, table, key)
    problems += [f"{lang}: upward: {b}" for b in bad]
    problems += [f"{lang}: not in the floor table: {u}" for u in unplaced]
    problems += [f"{lang}: circle: {' <-> '.join(c)}" for c in circles(edges)]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lang", choices=["cpp", "python", "all"], default="all")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args(argv)
    langs = ["cpp", "python"] if args.lang == "all" else [args.lang]
    problems = [p for lang in langs for p in check(lang, args.root)]
    for p in problems:
        print(p)
    if not problems:
        print(f"check_floors: ok ({', '.join(langs)})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

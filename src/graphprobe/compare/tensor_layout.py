"""Compare reads msprobe's aclgraph tensor layout (no dump.json) as well as
the dump.json layout: :func:`prepare_sides` rewrites each side that holds
aclgraph-layout process folders into a mirror the dump.json compare reads.

An aclgraph-layout process folder (``pid{P}``/``rank{R}`` holding
``dump_tensor_data/`` or ``tensor_data/`` of ``{api}.{call}.{io}[.{i}].pt``
files and no dump.json; graphprobe/aclgraph_layout.py) becomes, in the
mirror, a folder with a ``dump.json`` built from its file names and a link
``dump_tensor_data`` to its tensor folder; dump.json-layout folders are
linked as they are. Rows then pair by name as for any tensor dump, and the
real-data metrics (compare/tensors.py) read the files:

* a file's entry is ``{api}.forward.{n}`` for ``Module.*`` APIs and
  ``{api}.{n}.forward`` for the others (the dump.json names of the same
  calls); ``n`` is the position of the file's call index among that API's
  call indices in the folder (0, 1, ...), because msprobe counts calls from
  ``start()`` over all steps, and only calls that saved a tensor;
* ``input.{i}`` → ``input_args[i]`` (nested ``input.{i}.{j}``),
  ``input_kwargs.{key}`` → ``input_kwargs[key]``, ``output`` and
  ``output.{i}`` → ``output[0]`` and ``output[i]``, ``parameters.{name}``
  (graphprobe's files) → ``parameters[name]``; positions without a file
  (non-tensor arguments) are ``null``;
* each record's dtype, shape, Max, Min, Mean and Norm are computed from the
  file (float64; Bool: Max = any, Min = all); ``requires_grad`` is not in the
  layout and is left out, so it is not compared;
* entries are ordered by their files' modification times (the order they
  were written in), then by name.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import warnings
from pathlib import Path
from typing import Any

from graphprobe.aclgraph_layout import ACLGRAPH_TENSOR_DIRS, entry_api, parse_file_name, safe_file_stem
from graphprobe.compare.pairing import PairingError

__all__ = ["aclgraph_tensor_dir", "build_dump_json", "prepare_sides"]

_DUMP = "dump.json"
_DATA_DIR = "dump_tensor_data"
#: The list positions (``null`` places) one folder's file names may open
#: beyond its files: a name such as ``f.0.input.999999999.pt`` would make
#: the mirror a list of a billion nulls.
MAX_EMPTY_POSITIONS = 1 << 20


def aclgraph_tensor_dir(folder: Path) -> Path | None:
    """The tensor folder of ``folder`` when it is an aclgraph-layout process
    folder (no dump.json, a tensor folder holding a file of the layout)."""
    if (folder / _DUMP).exists():
        return None
    for name in ACLGRAPH_TENSOR_DIRS:
        d = folder / name
        if d.is_dir():
            try:
                names = os.listdir(d)
            except OSError:
                continue
            if any(parse_file_name(n) is not None for n in names):
                return d
    return None


def _tensor_record(path: Path, torch: Any) -> dict[str, Any] | None:
    """A dump.json tensor record computed from one file; None when the file
    does not hold one tensor (then it is listed as a file that cannot be read)."""
    unreadable = {"type": "torch.Tensor", "dtype": "unknown", "shape": [], "Max": None, "Min": None, "Mean": None,
                  "Norm": None, "data_name": path.name}
    try:
        # A FIFO or device named like a tensor file would block the read or never end: not opened.
        if not stat.S_ISREG(path.stat().st_mode):
            return unreadable
        t = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001  an unreadable file: compare names it when reading it
        return unreadable
    if not isinstance(t, torch.Tensor):
        return None
    record: dict[str, Any] = {"type": "torch.Tensor", "dtype": str(t.dtype), "shape": list(t.shape),
                              "Max": None, "Min": None, "Mean": None, "Norm": None}
    if t.numel() and not t.is_complex():
        if t.dtype == torch.bool:
            record["Max"], record["Min"] = bool(t.any()), bool(t.all())
        elif not t.is_floating_point():
            d = t.to(torch.float64)
            record.update(Max=int(t.max()), Min=int(t.min()), Mean=float(d.mean()), Norm=float(d.norm()))
        else:
            try:
                d = t.to(torch.float64)
            except (RuntimeError, TypeError):  # float8 / float4 without a cast on this build
                d = None
            if d is not None:
                record.update(Max=float(d.max()), Min=float(d.min()), Mean=float(d.mean()), Norm=float(d.norm()))
    record["data_name"] = path.name
    return record


def _put(container: Any, keys: tuple[str, ...], value: Any, as_list: bool, budget: list[int]) -> Any:
    """Places ``value`` at ``keys`` in nested lists (digit keys of a list
    part) or dicts; returns the container. ``budget[0]``: the empty
    positions still allowed (:data:`MAX_EMPTY_POSITIONS`); the caller checks
    it before placing."""
    if not keys:
        return value
    key = keys[0]
    if as_list and _is_position(key):
        container = container if isinstance(container, list) else []
        i = int(key)
        budget[0] -= max(0, i - len(container))
        container.extend([None] * (i + 1 - len(container)))
        container[i] = _put(container[i], keys[1:], value, True, budget)
        return container
    container = container if isinstance(container, dict) else {}
    container[key] = _put(container.get(key), keys[1:], value, as_list, budget)
    return container


def _is_position(key: str) -> bool:
    """A list position in a file name: ASCII digits only (``"²"`` is a
    digit to ``str.isdigit`` but not to ``int``)."""
    return key.isascii() and key.isdigit()


def _positions(suffix: tuple[str, ...]) -> int:
    """The most empty list positions placing a file of ``suffix`` can open."""
    return sum(int(k) if len(k) < 20 else MAX_EMPTY_POSITIONS + 1 for k in suffix if _is_position(k))


def build_dump_json(tensor_dir: Path) -> dict[str, Any]:
    """The dump.json document of one aclgraph-layout tensor folder."""
    import torch  # reading .pt files needs torch; only aclgraph-layout dumps get here

    files = []
    not_utf8 = []
    for name in sorted(os.listdir(tensor_dir)):
        if not _is_utf8(name):
            # dump.json (and the engine that reads it) holds UTF-8 only: such
            # a name would fail the whole folder's mirror.
            not_utf8.append(name)
            continue
        parsed = parse_file_name(name)
        if parsed is None:
            continue
        try:
            mtime = (tensor_dir / name).stat().st_mtime_ns
        except OSError:
            continue
        files.append((parsed, name, mtime))
    calls: dict[str, list[int]] = {}
    for parsed, _, _ in files:
        calls.setdefault(parsed.api, []).append(parsed.call)
    position = {(api, call): i for api, found in calls.items() for i, call in enumerate(sorted(set(found)))}
    entries: dict[str, dict[str, Any]] = {}
    written: dict[str, int] = {}
    budget = [MAX_EMPTY_POSITIONS]
    for parsed, name, mtime in files:
        if parsed.io in ("input", "output") and _positions(parsed.suffix) > budget[0]:
            raise PairingError(f"{tensor_dir / name}: its name places a tensor at list position "
                               f"{'.'.join(parsed.suffix)}, which with the folder's other names would leave more "
                               f"than {MAX_EMPTY_POSITIONS} positions without a file; allowed: file names of "
                               "msprobe's aclgraph layout, {api}.{call}.{input|input_kwargs|output}[.{i}].pt, whose "
                               "positions are those of a call's arguments")
        n = position[(parsed.api, parsed.call)]
        entry = f"{parsed.api}.forward.{n}" if parsed.api.startswith("Module.") else f"{parsed.api}.{n}.forward"
        record = _tensor_record(tensor_dir / name, torch)
        if record is None:
            continue
        parts = entries.setdefault(entry, {})
        written[entry] = min(written.get(entry, mtime), mtime)
        if parsed.io == "input":
            parts["input_args"] = _put(parts.get("input_args"), parsed.suffix or ("0",), record, True, budget)
        elif parsed.io == "output":
            parts["output"] = _put(parts.get("output"), parsed.suffix or ("0",), record, True, budget)
        else:
            key = "input_kwargs" if parsed.io == "input_kwargs" else "parameters"
            parts[key] = _put(parts.get(key), parsed.suffix or ("0",), record, False, budget)
    for parts in entries.values():
        parts.setdefault("input_args", [])
        parts.setdefault("input_kwargs", {})
        parts.setdefault("output", [])
    order = sorted(entries, key=lambda e: (written[e], e))
    if not_utf8:
        shown = ", ".join(_shown(n) for n in not_utf8[:5]) + (f" and {len(not_utf8) - 5} more"
                                                              if len(not_utf8) > 5 else "")
        warnings.warn(f"compare: {_shown(str(tensor_dir))}: skipped {len(not_utf8)} file(s) whose name is not valid "
                      f"UTF-8 ({shown}); their tensors are not compared: rename them to compare them",
                      RuntimeWarning, stacklevel=2)
    return {"task": "tensor", "level": "mix", "framework": "pytorch", "dump_data_dir": _shown(str(tensor_dir)),
            "data": {e: entries[e] for e in order}}


def _is_utf8(name: str) -> bool:
    """False for a name whose bytes are not UTF-8 (Python holds them as lone
    surrogates)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(name: str) -> str:
    """A name for messages and dump.json: bytes that are not UTF-8 written
    as ``\\xff``, control characters escaped (no raw escape reaches a
    terminal)."""
    text = os.fsencode(name).decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _mirror_process(folder: Path, tensor_dir: Path, into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    doc = build_dump_json(tensor_dir)
    (into / _DUMP).write_text(json.dumps(doc, indent=1), encoding="utf-8")
    os.symlink(tensor_dir.resolve(), into / _DATA_DIR)


def _tensors_only(value: Any, with_file: bool = True) -> Any:
    """A dump.json part as the aclgraph layout can hold it: tensor records
    (with a ``data_name`` when ``with_file``) without ``requires_grad``,
    every other value ``null``."""
    if isinstance(value, dict) and "type" in value and not isinstance(value.get("type"), dict):
        if "dtype" not in value or (with_file and "data_name" not in value):
            return None
        return {k: v for k, v in value.items() if k != "requires_grad"}
    # Trailing list positions and keys without a tensor are left out, as a
    # folder of files cannot show them.
    if isinstance(value, list):
        items = [_tensors_only(v, with_file) for v in value]
        while items and items[-1] is None:
            items.pop()
        return items
    if isinstance(value, dict):
        kept = {k: _tensors_only(v, with_file) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v is not None}
    return None


def _holds_data_name(value: Any) -> bool:
    """True when a dump.json part holds a tensor record with a file."""
    if isinstance(value, dict):
        return "data_name" in value or any(_holds_data_name(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_data_name(v) for v in value)
    return False


def _calls_with_tensors(data: dict[str, Any]) -> dict[str, Any]:
    """dump.json's calls as the aclgraph layout numbers them: calls without
    a tensor file left out, the others numbered 0, 1, ... in call order per
    file stem (the API's name with characters outside ``[A-Za-z0-9._-]``
    replaced, which is what an aclgraph file holds); entries of other forms
    (backward) kept; tensors only; the order of ``data`` kept.

    A statistics dump (no record names a file) keeps its tensor records: the
    aclgraph side's statistics, computed from its files, are compared with
    them (the statistics compare; no real-data metrics)."""
    with_file = _holds_data_name(data)
    entries: list[tuple[str, tuple[str, int] | None, dict[str, Any]]] = []
    for entry, parts in data.items():
        if not isinstance(parts, dict):
            continue
        parts = {part: _tensors_only(v, with_file) for part, v in parts.items()}
        named = entry_api(entry)
        if named is None or any(parts.values()):
            entries.append((entry, named, parts))
    counts: dict[str, int] = {}
    out: dict[str, Any] = {}
    for entry, named, parts in entries:
        if named is not None:
            api = safe_file_stem(named[0])
            m = counts.get(api, 0)
            counts[api] = m + 1
            entry = f"{api}.forward.{m}" if entry.startswith("Module.") else f"{api}.{m}.forward"
        out[entry] = parts
    return out


def _mirror_dump_json(folder: Path, into: Path) -> None:
    """A dump.json-layout folder compared with an aclgraph-layout one: only
    what both layouts hold is compared (tensors; not requires_grad, not
    non-tensor values)."""
    into.mkdir(parents=True, exist_ok=True)
    with open(folder / _DUMP, encoding="utf-8") as f:
        doc = json.load(f)
    data = doc.get("data")
    if isinstance(data, dict):
        doc["data"] = _calls_with_tensors(data)
    (into / _DUMP).write_text(json.dumps(doc), encoding="utf-8")
    if (folder / _DATA_DIR).exists():
        os.symlink((folder / _DATA_DIR).resolve(), into / _DATA_DIR)


def _children(path: Path) -> list[Path]:
    try:
        return sorted(p for p in path.iterdir() if p.is_dir())
    except OSError:
        return []


def _mirror(path: Path, into: Path, depth: int) -> None:
    """Mirrors ``path`` (a process, step or root folder) into ``into``."""
    tensor_dir = aclgraph_tensor_dir(path)
    if tensor_dir is not None:
        _mirror_process(path, tensor_dir, into)
        return
    if (path / _DUMP).is_file():
        try:
            _mirror_dump_json(path, into)
            return
        except (OSError, ValueError):  # unreadable: the compare reads the original and names the error
            shutil.rmtree(into, ignore_errors=True)
    if (path / _DUMP).is_file() or depth == 0:
        into.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(path.resolve(), into)
        return
    into.mkdir(parents=True, exist_ok=True)
    for child in _children(path):
        if child.name not in ACLGRAPH_TENSOR_DIRS:
            _mirror(child, into / child.name, depth - 1)


def _has_aclgraph_folder(path: Path, depth: int) -> bool:
    if aclgraph_tensor_dir(path) is not None:
        return True
    if depth == 0 or (path / _DUMP).is_file():
        return False
    return any(_has_aclgraph_folder(c, depth - 1) for c in _children(path) if c.name not in ACLGRAPH_TENSOR_DIRS)


def prepare_sides(target: str | os.PathLike[str], bench: str | os.PathLike[str],
                  workdir: str | os.PathLike[str] | None = None) -> tuple[str, str]:
    """``target`` and ``bench`` unchanged, or, when either holds
    aclgraph-layout process folders (a dump root, a step folder, a process
    folder or its tensor folder), both replaced by mirrors: aclgraph-layout folders with a
    dump.json built from their files, dump.json-layout ones with their
    tensors only (what the aclgraph layout holds). The mirrors go under
    ``workdir``, by default a temporary folder removed when the process
    exits."""
    # The tensor folder itself (step0/pid1/dump_tensor_data) stands for its process folder.
    sides = [p.parent if p.name in ACLGRAPH_TENSOR_DIRS and aclgraph_tensor_dir(p.parent) == p else p
             for p in (Path(target), Path(bench))]
    if not any(p.is_dir() and _has_aclgraph_folder(p, 2) for p in sides):
        return os.fspath(target), os.fspath(bench)
    if workdir is None:
        import atexit  # imported here: only aclgraph-layout dumps get a mirror
        import tempfile

        workdir = tempfile.mkdtemp(prefix="graphprobe-aclgraph-")
        atexit.register(shutil.rmtree, workdir, True)
    out = []
    for side, p in zip(("target", "bench"), sides):
        if not p.is_dir():
            out.append(os.fspath(p))
            continue
        mirror = Path(workdir) / side / (p.resolve().name or "root")
        _mirror(p, mirror, depth=2)
        out.append(str(mirror))
    return out[0], out[1]

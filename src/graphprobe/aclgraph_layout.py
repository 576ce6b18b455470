"""msprobe's aclgraph_dump tensor layout (``tensor.layout: "aclgraph"``).

msprobe's ``AclGraphDumper`` with ``task: "tensor"`` writes no dump.json;
each tensor is a file in the process folder's tensor folder::

    dump_path/step{N}/{pid{P}|rank{R}}/dump_tensor_data/{api}.{call}.{io}[.{i}].pt

read from python/msprobe/pytorch/aclgraph_dumper.py (``_collect``,
``_collect_custom_api``, ``_step_tensor_data_dir``) and
ccsrc/aclgraph_dump/aclgraph_dump.cpp (``build_indexed_tensor_path``,
``get_call_index``):

* ``{api}``: ``Module.{path}.{Class}`` for a module, the API's name for an
  API, the path's last component for a ``custom_api``; characters other than
  ``[A-Za-z0-9._-]`` become ``_`` (``_safe_file_stem``).
* ``{call}``: the API's call index, counted per ``{api}`` (the file stem,
  as ``get_call_index`` is given it) from ``start()``
  and never reset by ``step()`` (the counter lives in the C++ extension and
  only the statistics task clears it): step 0 holds ``linear.0.*``, step 1
  ``linear.1.*`` (the guide's example shows the same). A call takes an index
  when its first tensor is saved (``is_call_start``), so a call without
  tensors (or run while the switch is off) takes none.
* ``{io}[.{i}]``: ``input.{i}`` (positional arguments, nested ones
  ``input.{i}.{j}``), ``input_kwargs.{key}``, ``output`` for a result that is
  one tensor and ``output.{i}`` for a tuple or list.
* The folder: msprobe's code writes ``dump_tensor_data`` (its
  ``Const.DUMP_TENSOR_DATA``); its guide says ``tensor_data``. graphprobe
  writes the code's name and reads both.

graphprobe records what the dump.json layout records and then files it this
way (:func:`convert_process_folder`, run by ``step()``): a module's own
parameters, which msprobe's aclgraph dumper does not save, keep their files as
``{api}.{call}.parameters.{name}.pt``; statistics, non-tensor values and
``requires_grad`` are not kept (there is no dump.json).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

__all__ = [
    "ACLGRAPH_TENSOR_DIRS",
    "AclgraphName",
    "CallCounter",
    "convert_process_folder",
    "entry_api",
    "parse_file_name",
    "safe_file_stem",
]

#: The tensor folder's name: msprobe's code (written) and its guide (read too).
ACLGRAPH_TENSOR_DIRS = ("dump_tensor_data", "tensor_data")
_WRITTEN_DIR = ACLGRAPH_TENSOR_DIRS[0]
_SAFE = re.compile(r"[^A-Za-z0-9._-]")
_MODULE_ENTRY = re.compile(r"(Module\..+)\.forward\.(0|[1-9][0-9]*)")
_API_ENTRY = re.compile(r"(.+)\.(0|[1-9][0-9]*)\.forward")
# The call index and the part; the rightmost match wins (module paths may
# hold ".0.output." themselves: encoder.layer.0.output.dense).
_IO = re.compile(r"\.(0|[1-9][0-9]*)\.(input_kwargs|input|output|parameters)(?=\.|$)")


def safe_file_stem(text: str) -> str:
    """msprobe's ``_safe_file_stem``: characters outside ``[A-Za-z0-9._-]`` become ``_``."""
    return _SAFE.sub("_", text)


def entry_api(entry: str) -> tuple[str, int] | None:
    """A dump.json entry name as msprobe's aclgraph dumper names the API and
    the call: ``Module.a.Linear.forward.3`` → ``("Module.a.Linear", 3)``,
    ``Functional.linear.3.forward`` → ``("Functional.linear", 3)``; None for
    anything else (a backward entry)."""
    m = _MODULE_ENTRY.fullmatch(entry) or _API_ENTRY.fullmatch(entry)
    return (m.group(1), int(m.group(2))) if m else None


class AclgraphName:
    """A parsed ``{api}.{call}.{io}[.{suffix}].pt`` file name."""

    __slots__ = ("api", "call", "io", "suffix")

    def __init__(self, api: str, call: int, io: str, suffix: tuple[str, ...]) -> None:
        self.api, self.call, self.io, self.suffix = api, call, io, suffix


def parse_file_name(name: str) -> AclgraphName | None:
    """Reads a file name of the layout; None if it is not one."""
    if not name.endswith(".pt"):
        return None
    stem = name[:-3]
    found = None
    for found in _IO.finditer(stem):
        pass
    if found is None or found.start() == 0:
        return None
    rest = stem[found.end():]
    suffix = tuple(rest[1:].split(".")) if rest else ()
    return AclgraphName(stem[: found.start()], int(found.group(1)), found.group(2), suffix)


class CallCounter:
    """msprobe's call indices: per API name, counted from ``start()`` over
    the steps written (a discarded step, ``step(dump=False)``, counts no
    calls)."""

    def __init__(self) -> None:
        self._next: dict[str, int] = {}

    def advance(self, calls: dict[str, int]) -> dict[str, int]:
        """Takes one step's number of calls (with files) per API; returns
        each API's offset for this step."""
        offsets = {api: self._next.get(api, 0) for api in calls}
        for api, count in calls.items():
            self._next[api] = offsets[api] + count
        return offsets


def _records(value: Any, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    """(place, record) of every tensor record with a file, in order."""
    out: list[tuple[tuple[str, ...], dict[str, Any]]] = []
    if isinstance(value, dict) and "data_name" in value and "type" in value:
        if value.get("data_name"):
            out.append((path, value))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out.extend(_records(item, path + (str(i),)))
    elif isinstance(value, dict):
        for key, item in value.items():
            out.extend(_records(item, path + (str(key),)))
    return out


def _renames(doc: dict[str, Any], counter: CallCounter) -> list[tuple[str, str]]:
    """(data_name, aclgraph file name) of every tensor file of one dump.json.

    Calls are counted per file stem (the API's name after
    :func:`safe_file_stem`), as msprobe's ``get_call_index`` counts them per
    the name it is given, which is already the stem: two modules whose paths
    differ only in a character the stem replaces (``ModuleDict`` keys
    ``"a b"`` and ``"a_b"``) take indices 0 and 1 of one counter, in call
    order, instead of both writing ``....0.*``."""
    calls: list[tuple[str, dict[str, Any]]] = []  # (stem, parts) in call order (dump.json's order)
    for entry, parts in (doc.get("data") or {}).items():
        named = entry_api(entry)
        if named is None or not isinstance(parts, dict):
            continue
        if any(_records(parts.get(p), ()) for p in ("input_args", "input_kwargs", "output", "parameters")):
            calls.append((safe_file_stem(named[0]), parts))  # only calls with a file take an index (msprobe)
    counts: dict[str, int] = {}
    for stem, _ in calls:
        counts[stem] = counts.get(stem, 0) + 1
    offsets = counter.advance(counts)
    out = []
    for stem, parts in calls:
        prefix = f"{stem}.{offsets[stem]}"
        offsets[stem] += 1
        for part, io in (("input_args", "input"), ("input_kwargs", "input_kwargs"), ("output", "output"),
                         ("parameters", "parameters")):
            value = parts.get(part)
            if value is None:
                continue
            # msprobe names a result that is one tensor "output", without an index.
            single = part == "output" and isinstance(value, list) and len(value) == 1
            for place, record in _records(value, ()):
                tail = "" if single and place == ("0",) else "".join("." + safe_file_stem(p) for p in place)
                out.append((record["data_name"], f"{prefix}.{io}{tail}.pt"))
    return out


def convert_process_folder(folder: str, counter: CallCounter) -> list[str]:
    """Turns one process folder written in the dump.json layout
    (``dump.json`` + ``dump_tensor_data/``) into the aclgraph layout: the
    files renamed, dump.json removed. Returns the failures (file and reason);
    a file that cannot be renamed keeps its dump.json name, and dump.json is
    then kept too, so that nothing is lost."""
    doc_path = os.path.join(folder, "dump.json")
    try:
        with open(doc_path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as exc:
        return [f"{doc_path}: cannot be read to rename its tensor files to msprobe's aclgraph names: {exc}"]
    data_dir = os.path.join(folder, _WRITTEN_DIR)
    staging = os.path.join(folder, ".aclgraph_names")
    errors: list[str] = []
    renames = _renames(doc, counter)
    if not renames:
        return _remove_dump_json(doc_path, errors)
    # Into a fresh folder first: an aclgraph name may equal a dump.json name
    # not yet moved.
    try:
        os.makedirs(staging, exist_ok=True)
    except OSError as exc:
        return [f"{staging}: cannot be made to rename the tensor files to msprobe's aclgraph names: "
                f"{exc.strerror or exc}; the step keeps its dump.json layout"]
    moved = []
    taken: set[str] = set()
    for old, new in renames:
        if new in taken:  # two places whose stems coincide (input_kwargs keys "a b" and "a_b")
            errors.append(f"{os.path.join(data_dir, old)}: cannot be renamed to {new}: another file of this step "
                          "already has that name (the names differ only in characters outside [A-Za-z0-9._-], "
                          "which msprobe's names replace by '_'); it keeps its dump.json name")
            continue
        try:
            os.rename(os.path.join(data_dir, old), os.path.join(staging, new))
            moved.append(new)
            taken.add(new)
        except OSError as exc:
            errors.append(f"{os.path.join(data_dir, old)}: cannot be renamed to {new}: {exc.strerror or exc}")
    try:
        leftover = os.listdir(data_dir)
        if not leftover:
            os.rmdir(data_dir)
            os.rename(staging, data_dir)
        else:  # files of failed renames stay under their dump.json names
            for new in moved:
                os.rename(os.path.join(staging, new), os.path.join(data_dir, new))
            os.rmdir(staging)
    except OSError as exc:
        errors.append(f"{data_dir}: cannot be replaced by {staging}: {exc.strerror or exc}")
    if not errors:
        return _remove_dump_json(doc_path, errors)
    return errors


def _remove_dump_json(doc_path: str, errors: list[str]) -> list[str]:
    """Removes dump.json once every file has its aclgraph name; a failure is
    one more error (step() raises it as DumpWriteError, never an OSError)."""
    try:
        os.unlink(doc_path)
    except OSError as exc:
        errors.append(f"{doc_path}: cannot be removed after its files were renamed to msprobe's aclgraph names: "
                      f"{exc.strerror or exc}")
    return errors

"""Names: a record's entry name to its module path and class."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EntryName", "parse_entry", "selector", "within"]


@dataclass(frozen=True)
class EntryName:
    """An entry name split up: ``kind`` ("Module" or an API kind such as
    "Functional"), ``module`` (the dotted path for a Module entry, None
    otherwise) and ``cls`` (the module's class, None otherwise)."""

    entry: str
    kind: str
    module: str | None
    cls: str | None


def parse_entry(entry: str) -> EntryName:
    """``Module.layers.0.mlp.act.ReLU.forward.0`` -> module
    ``layers.0.mlp.act``, class ``ReLU``; an API entry
    (``Functional.relu.0``) has neither."""
    kind, _, rest = entry.partition(".")
    if kind != "Module":
        return EntryName(entry, kind, None, None)
    parts = rest.rsplit(".", 3)  # path, Class, forward, call index
    if len(parts) == 4 and parts[2] in ("forward", "backward"):
        return EntryName(entry, kind, parts[0], parts[1])
    if len(parts) == 3 and parts[1] in ("forward", "backward"):  # the root module: Class.forward.N
        return EntryName(entry, kind, "", parts[0])
    return EntryName(entry, kind, None, None)


def within(module: str, ancestor: str) -> bool:
    """Whether the dotted path ``module`` is ``ancestor`` or below it
    (``""``, the root, holds everything)."""
    return ancestor == "" or module == ancestor or module.startswith(ancestor + ".")


def selector(module: str, entry: str) -> str:
    """The ``statistics.list``/``replay.list`` item that selects ``module``
    and not its neighbours: those lists match substrings of
    ``{path}.{Class}``, so the path alone (``layers.1``) also selects
    ``layers.10`` and the module's submodules; with its class
    (``layers.1.Block``) it selects the module itself (and only a module of
    that class whose path ends with this one besides). Falls back to the path
    when the entry names no class."""
    cls = parse_entry(entry).cls
    return f"{module}.{cls}" if module and cls else module

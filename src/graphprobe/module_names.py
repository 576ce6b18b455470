"""The check ``start()`` makes on a model's module and class names before
anything is wired: they become record names, which the C++ engine reads as
C strings."""

from __future__ import annotations

import torch

from graphprobe._text import first_unsafe

__all__ = ["check_module_names"]


def check_module_names(model: torch.nn.Module) -> None:
    """Refuses module and class names holding a control character (NUL, ESC,
    newline ...): the C++ engine reads names as C strings, so a NUL would cut
    the name and two records would share one file.

    Each module is visited once, so a module graph with a cycle (a module
    registered as a child of its own descendant) cannot recurse forever; a
    record name is a path of child names, so checking every child name of
    every module checks every name."""
    seen: set[int] = set()
    todo: list[tuple[str, torch.nn.Module]] = [("", model)]
    while todo:
        path, module = todo.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        _check_name("class name", type(module).__name__)
        for key, child in module._modules.items():
            if child is None:
                continue
            _check_name("module name", f"{path}.{key}" if path else key, key)
            todo.append((f"{path}.{key}" if path else key, child))


def _check_name(what: str, text: str, part: str | None = None) -> None:
    bad = first_unsafe(text if part is None else part, ("Cc",))
    if bad is not None:
        at = bad[0] + (len(text) - len(part) if part is not None else 0)
        raise ValueError(f"AclGraphDumper.start: {what} {text!r} holds a control character ({bad[1]} at "
                         f"index {at}); record names cannot hold one: rename the submodule")

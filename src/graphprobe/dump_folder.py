"""Checks ``start()`` makes before anything is wired: the dump folder and the
module names that become record names."""

from __future__ import annotations

import os

import torch

from graphprobe._text import first_unsafe

__all__ = ["check_module_names", "prepare_dump_path"]


def prepare_dump_path(dump_path: str) -> str:
    """Creates ``dump_path`` (mode 0750) and returns it as an absolute path,
    so that the writer thread and the tensor task's staging folder do not
    follow a later ``os.chdir()``. Errors name the field and what is there."""
    full = os.path.abspath(dump_path)
    shown = f"config field 'dump_path': {dump_path!r}" + (f" ({full})" if full != dump_path else "")
    if os.path.islink(full) and not os.path.exists(full):
        raise FileNotFoundError(f"{shown} is a symbolic link to {os.readlink(full)!r}, which does not exist")
    if os.path.exists(full) and not os.path.isdir(full):
        raise NotADirectoryError(f"{shown} exists and is not a folder; give a folder path")
    try:
        os.makedirs(full, mode=0o750, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise NotADirectoryError(f"{shown}: a parent of it is a file, not a folder") from None
    except PermissionError:
        raise PermissionError(f"{shown} cannot be created: permission denied") from None
    if not os.access(full, os.W_OK | os.X_OK):
        raise PermissionError(f"{shown} is not writable")
    return full


def check_module_names(model: torch.nn.Module) -> None:
    """Refuses module and class names holding a control character (NUL, ESC,
    newline ...): the C++ engine reads names as C strings, so a NUL would cut
    the name and two records would share one file."""
    for name, module in model.named_modules(remove_duplicate=False):
        for what, text in (("module name", name), ("class name", type(module).__name__)):
            bad = first_unsafe(text, ("Cc",))
            if bad is not None:
                raise ValueError(f"AclGraphDumper.start: {what} {text!r} holds a control character ({bad[1]} at "
                                 f"index {bad[0]}); record names cannot hold one: rename the submodule")

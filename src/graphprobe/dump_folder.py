"""Checks ``start()`` makes before anything is wired: the dump folder and the
module names that become record names."""

from __future__ import annotations

import errno
import os
import re
import shutil

import torch

from graphprobe._text import first_unsafe

__all__ = ["STAGING_PREFIX", "check_module_names", "prepare_dump_path", "remove_stale_staging", "step_folders"]

STAGING_PREFIX = ".staging_pid"
"""The tensor task stages tensors in ``dump_path/.staging_pid{P}`` (P: the
dumping process) until ``step()`` moves them to their record names."""

_STEP_FOLDER = re.compile(r"step[0-9]+")


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
    except OSError as exc:
        # A read-only file system, a path longer than the system allows once
        # made absolute (PATH_MAX), no space for the folder, ...
        reason = exc.strerror or str(exc)
        if exc.errno == errno.ENAMETOOLONG:
            reason += f" (the absolute path is {len(full.encode())} bytes)"
        raise type(exc)(exc.errno, f"{shown} cannot be created: {reason}") from None
    if not os.access(full, os.W_OK | os.X_OK):
        raise PermissionError(f"{shown} is not writable")
    return full


def step_folders(dump_path: str) -> list[str]:
    """The ``step{N}`` folders already in ``dump_path``, in step order."""
    try:
        names = [e.name for e in os.scandir(dump_path) if _STEP_FOLDER.fullmatch(e.name) and e.is_dir()]
    except OSError:
        return []
    return sorted(names, key=lambda n: int(n[4:]))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # a process of another user
    except (OverflowError, OSError):
        return False
    return True


def remove_stale_staging(dump_path: str) -> list[str]:
    """Removes the tensor task's staging folders that a killed process left in
    ``dump_path`` (SIGKILL, a crash: nothing ran to remove them): those whose
    process no longer exists. A live process's folder (another dumper writing
    into the same ``dump_path``) is kept. Returns the folders removed."""
    removed = []
    try:
        entries = list(os.scandir(dump_path))
    except OSError:
        return removed
    for entry in entries:
        pid_text = entry.name[len(STAGING_PREFIX):]
        if not entry.name.startswith(STAGING_PREFIX) or not (pid_text.isascii() and pid_text.isdigit()):
            continue
        pid = int(pid_text)
        if pid == os.getpid() or _pid_alive(pid) or not entry.is_dir(follow_symlinks=False):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    return removed


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

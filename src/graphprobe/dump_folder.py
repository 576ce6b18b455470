"""The dump folder ``start()`` prepares before anything is wired: created,
its step folders listed, stale staging folders of dead processes removed.
The module names are checked in :mod:`graphprobe.module_names`."""

from __future__ import annotations

import errno
import os
import re
import shutil

from graphprobe.output_files import DIR_MODE

__all__ = ["STAGING_PREFIX", "prepare_dump_path", "remove_stale_staging", "step_folders"]

STAGING_PREFIX = ".staging_pid"
"""The tensor task stages tensors in ``dump_path/.staging_pid{P}`` (P: the
dumping process) until ``step()`` moves them to their record names."""

_STEP_FOLDER = re.compile(r"step[0-9]+")


def prepare_dump_path(dump_path: str) -> str:
    """Creates ``dump_path`` (mode ``output_files.DIR_MODE``) and returns it as an absolute path,
    so that the writer thread and the tensor task's staging folder do not
    follow a later ``os.chdir()``. Errors name the field and what is there."""
    full = os.path.abspath(dump_path)
    shown = f"config field 'dump_path': {dump_path!r}" + (f" ({full})" if full != dump_path else "")
    if os.path.islink(full) and not os.path.exists(full):
        raise FileNotFoundError(f"{shown} is a symbolic link to {os.readlink(full)!r}, which does not exist")
    if os.path.exists(full) and not os.path.isdir(full):
        raise NotADirectoryError(f"{shown} exists and is not a folder; give a folder path")
    try:
        os.makedirs(full, mode=DIR_MODE, exist_ok=True)
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

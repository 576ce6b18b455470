"""The dump folder ``start()`` prepares before anything is wired: created,
its step folders listed, stale staging folders of dead processes of this
host removed.
The module names are checked in :mod:`graphprobe.module_names`."""

from __future__ import annotations

import errno
import fcntl
import os
import re
import secrets
import shutil
import socket

from graphprobe.output_files import DIR_MODE

__all__ = [
    "STAGING_LOCK", "STAGING_PREFIX", "host_tag", "make_staging", "prepare_dump_path", "release_staging",
    "remove_stale_staging", "step_folders",
]

STAGING_PREFIX = ".staging_pid"
"""The tensor task stages tensors in ``dump_path/.staging_pid{P}_{R}_{HOST}``
(:func:`make_staging`) until ``step()`` moves them to their record names."""

STAGING_LOCK = "lock"
"""The file in a staging folder whose ``fcntl.lockf`` lock its process holds
while the folder is in use (the C++ writer clears only ``slot*`` files)."""

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


def host_tag() -> str:
    """This host's name as it appears in staging folder names: the characters
    ``[A-Za-z0-9.-]`` of ``socket.gethostname()`` (others become ``-``), at
    most 64 of them."""
    name = re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname())[:64]
    return name or "unknown-host"


# Staging folders this process made, and the open lock file of each: the
# lockf lock lives as long as the descriptor. POSIX record locks belong to the
# process, and closing *any* descriptor of the file drops them, so this
# process never opens the lock file of one of its own folders again.
_held: dict[str, int] = {}


def make_staging(dump_path: str) -> str:
    """Creates the tensor task's staging folder in ``dump_path`` and returns
    its path: ``.staging_pid{P}_{R}_{HOST}`` (P: this process, R: 8 random
    hex digits, HOST: :func:`host_tag`), with ``STAGING_LOCK`` inside it
    locked (``fcntl.lockf``) until :func:`release_staging`.

    The folder is made and locked under a name that
    :func:`remove_stale_staging` ignores, then renamed: it is never seen
    unlocked. Pids alone do not name a process once ``dump_path`` is shared
    by several hosts or containers (pid 1 in every Kubernetes pod)."""
    final = os.path.join(dump_path, f"{STAGING_PREFIX}{os.getpid()}_{secrets.token_hex(4)}_{host_tag()}")
    making = os.path.join(dump_path, f".making{os.path.basename(final)}")
    os.mkdir(making, DIR_MODE)
    fd = -1
    try:
        fd = os.open(os.path.join(making, STAGING_LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            # A file system without locks (ENOLCK): the folder stays unlocked,
            # and remove_stale_staging, which cannot lock it either, keeps it.
            if exc.errno not in _NO_LOCKS:
                raise
        os.rename(making, final)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        shutil.rmtree(making, ignore_errors=True)
        raise
    _held[final] = fd
    return final


def release_staging(path: str) -> None:
    """Drops the lock of a staging folder made by :func:`make_staging` (after
    the folder is removed, or to let another process remove it)."""
    fd = _held.pop(path, None)
    if fd is not None:
        os.close(fd)


_NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS)

_STAGING_NAME = re.compile(r"([0-9]+)_[0-9a-f]{8}_(.+)")


def _lock_free(folder: str) -> bool:
    """Whether no process holds the lock of a staging folder of this host
    (the lock is taken and dropped again). A folder without a lock file, or
    one that cannot be opened, counts as held: it is kept."""
    try:
        fd = os.open(os.path.join(folder, STAGING_LOCK), os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # EAGAIN/EACCES: a live process holds it
        return False
    finally:
        os.close(fd)  # drops the lock, if taken
    return True


def remove_stale_staging(dump_path: str) -> list[str]:
    """Removes the tensor task's staging folders that a killed process left in
    ``dump_path`` (SIGKILL, a crash: nothing ran to remove them). Returns the
    folders removed.

    Only folders of this host are considered (the host is in the name,
    :func:`make_staging`), and of those only the ones whose lock no process
    holds: a lock is released by the kernel when its process dies, whatever
    the pid namespace, and locks are taken only between processes of one
    host, where every file system grants them consistently. Folders of other
    hosts sharing ``dump_path`` are left alone: they may be live, and no pid
    or lock here can tell. A folder named ``.staging_pid{P}`` alone (made by
    a dumper that names no host) is removed when no process ``P`` exists
    here, as before."""
    removed: list[str] = []
    try:
        entries = list(os.scandir(dump_path))
    except OSError:
        return removed
    host = host_tag()
    for entry in entries:
        if not entry.name.startswith(STAGING_PREFIX) or entry.path in _held:
            continue
        rest = entry.name[len(STAGING_PREFIX):]
        named = _STAGING_NAME.fullmatch(rest)
        if named is not None:
            if named.group(2) != host or int(named.group(1)) == os.getpid():
                continue  # another host's, or this process's own (its lock must not be touched)
            if not entry.is_dir(follow_symlinks=False) or not _lock_free(entry.path):
                continue
        else:
            if not (rest.isascii() and rest.isdigit()):
                continue
            pid = int(rest)
            if pid == os.getpid() or _pid_alive(pid) or not entry.is_dir(follow_symlinks=False):
                continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    return removed

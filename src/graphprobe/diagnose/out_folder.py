"""diagnose's OUT folder: its mark, its lock and the manifest of the files
diagnose wrote into it.

The mark ``OUT/.graphprobe_diagnose`` is a regular file created with
``O_CREAT|O_EXCL|O_NOFOLLOW`` (a link planted under that name is refused,
never written through). It is also the lock: diagnose holds an exclusive
``flock`` on it while it runs (a second diagnose into the same OUT is
refused, naming the holder's pid; the kernel drops the lock of a process
that died, so a stale one is taken over), and at the end it holds the
manifest (path, size, sha256) of every file diagnose wrote. A later
diagnose removes only the listed files that are unchanged, and refuses,
removing nothing, when OUT holds anything else."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

from graphprobe.diagnose.owned_files import OwnedFilesError, clear_owned, manifest, parse_manifest

__all__ = ["MARK", "OWN_ENTRIES", "OutFolder", "OutFolderError", "prepare_out"]

#: The mark diagnose leaves in OUT: only a folder holding it is ever cleared.
MARK = ".graphprobe_diagnose"
#: What diagnose writes into OUT (besides the mark).
OWN_ENTRIES = ("runs", "logs", "compare", "repro", "diagnosis.json", "summary.txt", "report.html")
_NOTE = "graphprobe diagnose output folder: a later diagnose into it replaces the files listed here (if unchanged)"
_FILE_MODE = 0o640


class OutFolderError(ValueError):
    """OUT cannot be used: it holds files that are not an earlier
    diagnose's, its mark is not a regular file, or another diagnose is
    writing into it. Nothing in it was changed."""


def _show(names: list[str]) -> str:
    return ", ".join(repr(n) for n in names[:5]) + (" ..." if len(names) > 5 else "")


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


class OutFolder:
    """A prepared, locked OUT (see the module docstring). :meth:`finish`
    writes the manifest and releases the lock."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    def _write(self, files: list[dict[str, Any]]) -> None:
        assert self._fd is not None
        data = json.dumps({"note": _NOTE, "pid": os.getpid(), "files": files}, indent=1).encode()
        os.lseek(self._fd, 0, os.SEEK_SET)
        os.ftruncate(self._fd, 0)
        os.write(self._fd, data + b"\n")

    def finish(self) -> None:
        """Writes the manifest of everything under :data:`OWN_ENTRIES`
        and releases the lock (closes the mark)."""
        if self._fd is None:
            return
        try:
            self._write(manifest(self.path, OWN_ENTRIES))
        finally:
            self.close()

    def close(self) -> None:
        """Releases the lock without writing the manifest."""
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None


def _open_mark(out: Path) -> int:
    """The mark, opened read-write without following a link: created
    (``O_EXCL``) when absent; a link or a special file under its name is
    refused."""
    mark = out / MARK
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # NONBLOCK: a FIFO under the name never blocks
    for _ in range(2):
        try:
            return os.open(mark, flags | os.O_CREAT | os.O_EXCL, _FILE_MODE)
        except FileExistsError:
            pass
        try:
            fd = os.open(mark, flags)
        except FileNotFoundError:  # removed between the two opens: create it again
            continue
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise OutFolderError(f"-o {out}: {MARK} in it is a symbolic link (to {os.readlink(mark)!r}); "
                                     "diagnose does not follow links it did not make: nothing was changed (remove "
                                     "the link, or choose another folder)") from None
            raise
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OutFolderError(f"-o {out}: {MARK} in it is not a regular file; nothing was changed (remove it, "
                                 "or choose another folder)")
        return fd
    raise OutFolderError(f"-o {out}: {MARK} keeps disappearing (another process is changing the folder)")


def prepare_out(out: Path) -> OutFolder:
    """Creates OUT with its mark, or clears an earlier diagnose's OUT (its
    runs' dumps would otherwise sit next to this run's and be paired with
    them), and locks it. Refuses (:class:`OutFolderError`), changing
    nothing: a folder that is not empty and has no mark (whatever its
    entries are called: a user's own ``runs/`` or ``logs/`` is not
    diagnose's); a mark that is a link or not a regular file; an OUT another
    diagnose holds; a marked folder holding anything diagnose did not write
    or a file it wrote that changed since (a ``repro.py`` the user edited)."""
    import fcntl

    from graphprobe.output_files import make_dirs

    if os.path.lexists(out) and not out.is_dir():
        raise OutFolderError(f"-o {out}: exists and is not a folder")
    if out.is_dir():
        names = sorted(os.listdir(out))
        if names and MARK not in names:
            raise OutFolderError(f"-o {out}: the folder is not empty ({_show(names)}) and is not an earlier "
                                 f"diagnose's (no {MARK} in it); nothing was removed: choose a new or empty folder")
    make_dirs(out)
    fd = _open_mark(out)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                pid = json.loads(_read_all(fd).decode("utf-8", "replace")).get("pid")
            except (ValueError, AttributeError, OSError):
                pid = None
            who = f"pid {pid}" if isinstance(pid, int) else "another process"
            raise OutFolderError(f"-o {out}: OUT is in use by {who} (a diagnose writing into it); nothing was "
                                 "changed: wait for it to end, or choose another folder") from None
        except OSError as e:  # a file system without flock (ENOLCK, some NFS): go on without the lock, and say so
            import warnings

            warnings.warn(f"graphprobe diagnose: -o {out}: cannot lock {MARK} ({e.strerror}): a second diagnose "
                          "into this folder at the same time would not be refused", RuntimeWarning, stacklevel=2)
        try:
            old = json.loads(_read_all(fd).decode("utf-8"))
        except (ValueError, UnicodeDecodeError):  # empty (new), or an older diagnose's text mark: nothing listed
            old = {}
        listed = parse_manifest(old.get("files") if isinstance(old, dict) else None)
        other = [n for n in sorted(os.listdir(out)) if n not in OWN_ENTRIES and n != MARK]
        if other:
            raise OutFolderError(f"-o {out}: the folder holds files that are not an earlier diagnose's "
                                 f"({_show(other)}); nothing was removed: choose a new or empty folder")
        try:
            clear_owned(out, OWN_ENTRIES, listed, f"-o {out}")
        except OwnedFilesError as e:
            raise OutFolderError(f"{e} (diagnose removes only the files it wrote, unchanged)") from None
        folder = OutFolder(out, fd)
        folder._write([])
        return folder
    except BaseException:
        os.close(fd)
        raise

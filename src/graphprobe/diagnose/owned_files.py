"""What a tool wrote into an output folder, so that a later run removes only
that: a manifest (path, size, sha256) of every regular file under some
entries of the folder, and a clear that removes the listed files that are
unchanged, and refuses, removing nothing, when anything else is there (a
``repro.py`` the user edited, a note saved beside it, a link).

Used by ``graphprobe diagnose`` (its OUT) and by the scripts under
``examples/`` (their ``--out``)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["OwnedFilesError", "claim_out", "clear_owned", "manifest", "parse_manifest", "read_listing", "record_out",
           "write_listing"]


class OwnedFilesError(ValueError):
    """The folder holds files the manifest does not list, or listed files
    that changed since; nothing was removed. ``files`` names them (relative
    to the folder)."""

    def __init__(self, message: str, files: list[str]) -> None:
        super().__init__(message)
        self.files = files


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _walk(root: Path, names: Iterable[str]) -> tuple[list[str], list[str]]:
    """(regular files, other entries: links, fifos, ...) under ``root/name``
    for each name, relative to ``root``, never following a link."""
    files: list[str] = []
    others: list[str] = []
    for name in names:
        top = root / name
        try:
            st = os.lstat(top)
        except FileNotFoundError:
            continue
        if stat.S_ISREG(st.st_mode):
            files.append(name)
            continue
        if not stat.S_ISDIR(st.st_mode):
            others.append(name)
            continue
        for folder, dirs, leaves in os.walk(top, followlinks=False):
            for d in list(dirs):
                if os.path.islink(os.path.join(folder, d)):  # a link to a folder: an entry, never walked into
                    dirs.remove(d)
                    leaves.append(d)
            for leaf in leaves:
                full = os.path.join(folder, leaf)
                rel = os.path.relpath(full, root)
                (files if stat.S_ISREG(os.lstat(full).st_mode) else others).append(rel)
    return sorted(files), sorted(others)


def manifest(root: Path, names: Iterable[str]) -> list[dict[str, Any]]:
    """Every regular file under ``root/name`` for each of ``names`` (the
    name itself when it is a file): ``{"path": relative path, "size",
    "sha256"}``. Links and other special files are not listed (a later
    :func:`clear_owned` refuses them)."""
    files, _ = _walk(root, names)
    out = []
    for rel in files:
        p = root / rel
        try:
            out.append({"path": rel, "size": os.lstat(p).st_size, "sha256": _sha256(p)})
        except OSError:  # removed while listed: nothing to list
            continue
    return out


def parse_manifest(data: Any) -> list[dict[str, Any]]:
    """The well-formed items of a manifest read back from JSON (anything
    else is dropped: an unlisted file is refused, never removed)."""
    if not isinstance(data, list):
        return []
    return [m for m in data if isinstance(m, dict) and isinstance(m.get("path"), str)
            and isinstance(m.get("size"), int) and isinstance(m.get("sha256"), str)]


def _show(files: list[str], limit: int = 8) -> str:
    return ", ".join(repr(f) for f in files[:limit]) + (f" and {len(files) - limit} more" if len(files) > limit else "")


def clear_owned(root: Path, names: Iterable[str], listed: list[dict[str, Any]], what: str) -> None:
    """Removes the files under ``root/name`` (each of ``names``) that
    ``listed`` (a :func:`manifest` of an earlier run) holds with the same
    size and sha256, then the folders left empty. Raises
    :class:`OwnedFilesError` before removing anything when there is any
    other entry (a file not listed, a listed file that changed, a link);
    ``what`` names the folder in the message."""
    names = list(names)
    files = _check(root, names, listed, what)
    for rel in files:
        os.unlink(root / rel)
    for name in names:
        top = root / name
        if not top.is_dir() or top.is_symlink():
            continue
        for folder, _dirs, _files in os.walk(top, topdown=False, followlinks=False):
            try:
                os.rmdir(folder)  # only when empty: a file that arrived meanwhile stays
            except OSError:
                pass


def _check(root: Path, names: list[str], listed: list[dict[str, Any]], what: str) -> list[str]:
    """The files :func:`clear_owned` may remove; raises when anything else is there."""
    files, others = _walk(root, names)
    known = {m["path"]: m for m in listed}
    foreign = list(others)
    for rel in files:
        m = known.get(rel)
        try:
            same = m is not None and os.lstat(root / rel).st_size == m["size"] and _sha256(root / rel) == m["sha256"]
        except OSError:
            same = False
        if not same:
            foreign.append(rel)
    if foreign:
        foreign.sort()
        raise OwnedFilesError(
            f"{what}: holds {len(foreign)} file(s) an earlier run did not write or that changed since it wrote "
            f"them ({_show(foreign)}); nothing was removed: move them out (or remove them), or choose another "
            "folder", foreign)
    return files


def read_listing(marker: Path) -> list[dict[str, Any]]:
    """The manifest held by a marker file (JSON ``{"files": [...]}``);
    ``[]`` for an empty or older marker. A link or a special file under the
    marker's name is refused (:class:`OwnedFilesError`), never followed."""
    try:
        fd = os.open(marker, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return []
    except OSError as e:
        raise OwnedFilesError(f"{marker}: cannot be read without following a link ({e.strerror}); nothing was "
                              "removed", [marker.name]) from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OwnedFilesError(f"{marker}: is not a regular file; nothing was removed", [marker.name])
        data = f.read()
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return []
    return parse_manifest(parsed.get("files") if isinstance(parsed, dict) else None)


def write_listing(marker: Path, files: list[dict[str, Any]]) -> None:
    """Writes ``files`` (a :func:`manifest`) into the marker, through a
    temporary file renamed onto it (a link under its name is replaced, its
    target untouched)."""
    from graphprobe.output_files import write_text_atomic

    write_text_atomic(marker, json.dumps({"note": "written by graphprobe: a later run removes the files listed "
                                          "here, if unchanged, and nothing else", "files": files}, indent=1) + "\n")


def claim_out(out: str | os.PathLike[str], names: Iterable[str], marker: str, remove: bool = True) -> None:
    """Prepares an example's ``--out``: a new or empty folder is marked; a
    folder marked by an earlier run has the files that run listed removed
    (unchanged ones only; :func:`clear_owned`); anything else under
    ``names`` (a user's file, an edited one, a link) or a folder that is not
    empty and has no marker raises :class:`OwnedFilesError`, nothing
    removed. ``remove=False`` only checks (every rank of a job checks, one
    removes). Call :func:`record_out` when the run is done."""
    from graphprobe.output_files import make_dirs

    root = Path(out)
    names = list(names)
    if os.path.lexists(root) and not root.is_dir():
        raise OwnedFilesError(f"--out {out}: exists and is not a folder; allowed: a new or empty folder, or one an "
                              "earlier run of this example wrote", [str(out)])
    entries = sorted(os.listdir(root)) if root.is_dir() else []
    if entries and marker not in entries:
        raise OwnedFilesError(f"--out {out}: the folder holds files this example did not write and a run would "
                              "remove or overwrite some; allowed: a new or empty folder, or one an earlier run of "
                              "this example wrote", entries)
    listed = read_listing(root / marker) if entries else []
    if not remove:
        _check(root, names, listed, f"--out {out}")
        return
    clear_owned(root, names, listed, f"--out {out}")
    make_dirs(root)
    write_listing(root / marker, [])


def record_out(out: str | os.PathLike[str], names: Iterable[str], marker: str) -> None:
    """Lists the files now under ``names`` in ``out``'s marker (what a later
    :func:`claim_out` may remove)."""
    write_listing(Path(out) / marker, manifest(Path(out), names))

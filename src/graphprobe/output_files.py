"""One rule for the permissions of every file and folder graphprobe writes:
folders 0750, files 0640, less the umask (the C++ writers use the same:
``csrc/fs/atomic_file.h``). Dumps and reports describe a model's internals;
they are not world-readable by default."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

__all__ = ["DIR_MODE", "FILE_MODE", "NAME_MAX", "make_dirs", "temporary_name", "write_text_atomic"]

DIR_MODE = 0o750
FILE_MODE = 0o640


#: The longest file name (bytes) Linux file systems take; temporary names
#: are kept within it.
NAME_MAX = 255
_tmp_count = itertools.count()


def make_dirs(path: str | os.PathLike[str]) -> None:
    """Creates ``path`` and its missing parents with :data:`DIR_MODE`.
    (``os.makedirs`` gives only the last folder ``mode``; the parents it
    creates get 0777 less the umask.)"""
    target = Path(os.path.abspath(path))
    missing = []
    for folder in (target, *target.parents):
        if folder.is_dir():
            break
        missing.append(folder)
    for folder in reversed(missing):
        try:
            os.mkdir(folder, DIR_MODE)
        except FileExistsError:
            if not folder.is_dir():
                raise
    if not target.is_dir():  # a file where a folder must be: the error names it
        os.makedirs(target, mode=DIR_MODE, exist_ok=True)


def temporary_name(target: Path) -> Path:
    """A name beside ``target`` for its temporary file, unique to this
    process and call, that fits :data:`NAME_MAX` however long the final name
    is: the final name is cut (on a character boundary) to make room for the
    ``.tmp.<pid>.<n>`` suffix."""
    suffix = f".tmp.{os.getpid()}.{next(_tmp_count)}".encode()
    name = os.fsencode(target.name)
    room = NAME_MAX - len(suffix)
    if len(name) > room:
        name = name[:room]
        # Drop a UTF-8 character the cut split: find where the last one starts.
        start = len(name) - 1
        while start > 0 and (name[start] & 0xC0) == 0x80:
            start -= 1
        lead = name[start]
        size = 1 if lead < 0xC0 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
        if len(name) - start < size:
            name = name[:start]
    return target.with_name(os.fsdecode(name + suffix))


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Writes ``text`` (UTF-8) to ``path`` with :data:`FILE_MODE`, through a
    temporary file renamed into place: readers never see half a file."""
    target = Path(path)
    tmp = temporary_name(target)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())  # on disk before the name points at it (a crash leaves old or new)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise

"""One rule for the permissions of every file and folder graphprobe writes:
folders 0750, files 0640, less the umask (the C++ writers use the same:
``csrc/fs/atomic_file.h``). Dumps and reports describe a model's internals;
they are not world-readable by default."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DIR_MODE", "FILE_MODE", "make_dirs", "write_text_atomic"]

DIR_MODE = 0o750
FILE_MODE = 0o640


def make_dirs(path: str | os.PathLike[str]) -> None:
    """Creates ``path`` and its missing parents with :data:`DIR_MODE`."""
    os.makedirs(path, mode=DIR_MODE, exist_ok=True)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Writes ``text`` (UTF-8) to ``path`` with :data:`FILE_MODE`, through a
    temporary file renamed into place: readers never see half a file."""
    target = Path(path)
    tmp = target.with_name(f"{target.name}.tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise

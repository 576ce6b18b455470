"""Output file names that no other compare can take: ``compare()`` claims
each CSV/HTML name by creating it exclusively before writing it.

Two compares started in the same second (msprobe's names carry a timestamp
to the second) would otherwise write the same names and the later would
replace the earlier's files. A claimed name is an empty file until the
result is renamed over it; a pair that fails gives its claims back.
"""

from __future__ import annotations

import os
from pathlib import Path

from graphprobe.output_files import make_dirs

__all__ = ["claim_names", "release_names", "write_failure"]

_MAX_TRIES = 10_000


def _claim(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o640)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def claim_names(folder: Path, rank: str, stamp: str, html: bool) -> tuple[Path, Path | None]:
    """Creates and returns ``compare_result_{rank}_{stamp}.csv`` (and the
    report's ``.html``) in ``folder``; when either name is taken, the first
    free ``{stamp}_{k}`` (k = 1, 2, ...) instead. Never returns a name that
    existed before the call."""
    make_dirs(folder)  # 0750, as every folder graphprobe makes
    for k in range(_MAX_TRIES):
        tag = stamp if k == 0 else f"{stamp}_{k}"
        csv = folder / f"compare_result_{rank}_{tag}.csv"
        report = folder / f"compare_report_{rank}_{tag}.html" if html else None
        if not _claim(csv):
            continue
        if report is not None and not _claim(report):
            csv.unlink()
            continue
        return csv, report
    raise FileExistsError(f"{folder}: compare_result_{rank}_{stamp}_k.csv is taken for every k < {_MAX_TRIES}")


def release_names(*paths: Path | None) -> None:
    """Removes claimed names that received no result (empty files only)."""
    for p in paths:
        if p is None:
            continue
        try:
            if p.stat().st_size == 0:
                p.unlink()
        except FileNotFoundError:
            pass


def write_failure(label: str, csv: Path, report: Path | None, error: BaseException) -> str:
    """The message for a pair whose results could not be written (a full
    disk, a vanished folder, a name the file system refuses): the pair, the
    cause, and the CSV when it was complete before the report failed (it is
    kept; the empty claims are given back by :func:`release_names`).
    Any other exception is named by its type."""
    if not isinstance(error, OSError):  # not a write: say what it was
        return f"{label}: {type(error).__name__}: {error}"
    try:
        kept = csv.stat().st_size > 0
    except OSError:
        kept = False
    what = f"cannot write its report (the CSV {csv} was written)" if kept else "cannot write its results"
    return f"{label}: {what}: {error}"

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

__all__ = ["claim_names", "release_names"]

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

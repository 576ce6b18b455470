"""Writes the history: rows -> Parquet, one folder per rank, one file per N
steps (docs/history.md, "Layout").

    HIST/rank00003/steps000000100-000000199.parquet

A reader picks ranks by folder and steps by file name (and, inside a file,
by the row groups' step statistics: rows are sorted by step), so a query
about 10 steps of 2 ranks opens 2 files of 1,024 x (steps / N).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from graphprobe.history.records import STATS, StepRows, read_dump_json
from graphprobe.install_hint import history_install_command

__all__ = ["FILE_RE", "RANK_RE", "HistoryWriter", "build_history", "file_name", "rank_dir", "schema"]

RANK_RE = re.compile(r"rank(\d{5,})$")
FILE_RE = re.compile(r"steps(\d{9,})-(\d{9,})\.parquet$")


def rank_dir(rank: int) -> str:
    """The folder name of ``rank``'s files."""
    return f"rank{rank:05d}"


def file_name(first: int, last: int) -> str:
    """The file name of steps ``first``..``last`` (inclusive)."""
    return f"steps{first:09d}-{last:09d}.parquet"


def schema() -> Any:
    """The pyarrow schema of a history file."""
    import pyarrow as pa

    return pa.schema([
        ("step", pa.int64()), ("rank", pa.int32()), ("ord", pa.int32()),
        ("record", pa.string()), ("dtype", pa.string()),
        *[(s, pa.float64()) for s in STATS],
        ("checksum", pa.int64()),
    ])


def _require_pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(f"graphprobe's history needs pyarrow ({exc}): "
                          f"install it with {history_install_command()}") from exc
    return pyarrow


class HistoryWriter:
    """Collects one rank's steps and writes them every ``every`` steps.

    ``append()`` takes a step's rows; once ``every`` steps are held they are
    written as one Parquet file (to a temporary name, then renamed, so a
    reader never sees half a file). ``close()`` writes what is left. Writes
    happen on the caller's thread: an error is raised to the caller.
    """

    def __init__(self, path: str | os.PathLike[str], rank: int, every: int = 100) -> None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"HistoryWriter: every must be an int >= 1 (steps per file), got {every!r}")
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise ValueError(f"HistoryWriter: rank must be an int >= 0, got {rank!r}")
        self._pa = _require_pyarrow()
        self.path = Path(path)
        self.rank = rank
        self.every = every
        self._held: list[StepRows] = []
        self.files: list[Path] = []
        self._last_step: int | None = None

    def append(self, rows: StepRows) -> None:
        """Adds one step (steps must come in increasing order)."""
        if rows.rank != self.rank:
            raise ValueError(f"HistoryWriter for rank {self.rank}: got rows of rank {rows.rank}")
        if self._last_step is not None and rows.step <= self._last_step:
            raise ValueError(f"HistoryWriter: step {rows.step} after step {self._last_step}: steps must increase")
        self._last_step = rows.step
        self._held.append(rows)
        if len(self._held) >= self.every:
            self.write()

    def write(self) -> Path | None:
        """Writes the held steps now (nothing when none is held); returns the file."""
        if not self._held:
            return None
        pa = self._pa
        import pyarrow.parquet as pq

        steps, ords, records, dtypes, checks = [], [], [], [], []
        stats: dict[str, list[float | None]] = {s: [] for s in STATS}
        for r in self._held:
            n = len(r)
            steps += [r.step] * n
            ords += range(n)
            records += r.record
            dtypes += r.dtype
            checks += r.checksum
            for s in STATS:
                stats[s] += r.stats[s]
        table = pa.table({"step": steps, "rank": [self.rank] * len(steps), "ord": ords, "record": records,
                          "dtype": dtypes, **stats, "checksum": checks}, schema=schema())
        folder = self.path / rank_dir(self.rank)
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / file_name(self._held[0].step, self._held[-1].step)
        tmp = folder / f".{final.name}.tmp{os.getpid()}"
        # Row groups of ~64k rows: the step column's min/max per group lets a
        # reader skip groups; smaller groups cost more metadata than they save.
        pq.write_table(table, tmp, compression="zstd", row_group_size=65536, use_dictionary=["record", "dtype"])
        os.replace(tmp, final)
        self._held = []
        self.files.append(final)
        return final

    def close(self) -> None:
        """Writes the steps still held."""
        self.write()


_STEP_RE = re.compile(r"step(\d+)$")
_RANK_DIR_RE = re.compile(r"(rank|pid)(\d+)$")


def _step_folders(dump_root: Path) -> list[tuple[int, Path]]:
    if not dump_root.is_dir():
        raise FileNotFoundError(f"history build: DUMP_ROOT {str(dump_root)!r} is not a folder")
    found = []
    for entry in dump_root.iterdir():
        m = _STEP_RE.match(entry.name)
        if m and entry.is_dir():
            found.append((int(m.group(1)), entry))
    if not found:
        raise ValueError(f"history build: no step{{N}} folders in {str(dump_root)!r} "
                         "(expected dump_path/step{N}/rank{R}/dump.json, as AclGraphDumper writes)")
    return sorted(found)


def build_history(dump_root: str | os.PathLike[str], out: str | os.PathLike[str], every: int = 100) -> dict[str, int]:
    """Converts ``dump_root/step{N}/{rank{R}|pid{P}}/dump.json`` into a history in ``out``.

    A single ``pid{P}`` folder per step is rank 0; several pid folders in one
    step cannot be told apart as ranks and are refused. Returns counts
    (``steps``, ``ranks``, ``rows``, ``files``).
    """
    root = Path(dump_root)
    per_rank: dict[int, list[tuple[int, Path]]] = {}
    for step, folder in _step_folders(root):
        subs = [(m.group(1), int(m.group(2)), e) for e in folder.iterdir()
                if (m := _RANK_DIR_RE.match(e.name)) and (e / "dump.json").is_file()]
        pids = [s for s in subs if s[0] == "pid"]
        if len(pids) > 1:
            raise ValueError(f"history build: {folder} holds {len(pids)} pid folders "
                             f"({', '.join(sorted(p[2].name for p in pids))}): ranks cannot be told apart; "
                             "record with torch.distributed initialised (rank{R} folders)")
        for kind, number, path in subs:
            rank = 0 if kind == "pid" else number
            per_rank.setdefault(rank, []).append((step, path / "dump.json"))
    if not per_rank:
        raise ValueError(f"history build: no step{{N}}/rank{{R}}/dump.json under {str(root)!r}")
    rows = files = 0
    steps: set[int] = set()
    for rank in sorted(per_rank):
        writer = HistoryWriter(out, rank, every=every)
        for step, path in sorted(per_rank[rank]):
            r = read_dump_json(path, step, rank)
            rows += len(r)
            steps.add(step)
            writer.append(r)
        writer.close()
        files += len(writer.files)
    return {"steps": len(steps), "ranks": len(per_rank), "rows": rows, "files": files}

"""The questions of a long run, answered with DuckDB over the history's
Parquet files (docs/history.md, "Queries").

* :func:`first_anomaly` -- the first (step, rank, record) whose value leaves
  its own history (rules.py), in order of step, then program order within
  the step (``ord``), then rank.
* :func:`movers` -- the records that moved most between two steps.
* :func:`record_over_steps` -- one record's statistic over steps, across ranks.

Only the files of the ranks and steps asked about are opened
(:func:`history_files`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphprobe.history.records import STATS
from graphprobe.history.rules import AnomalyRule
from graphprobe.history.writer import FILE_RE, RANK_RE
from graphprobe.install_hint import history_install_command

__all__ = ["Anomaly", "Mover", "ReplicaRow", "StepStat", "connect", "first_anomaly", "history_files", "history_ranks",
           "movers", "record_over_steps", "replica_mismatches"]


@dataclass(frozen=True)
class Anomaly:
    """Where a record first left its history."""

    step: int
    rank: int
    ord: int
    record: str
    kind: str  # "nonfinite" or "deviation"
    value: float | None
    mean_prev: float | None
    std_prev: float | None
    n_prev: int

    def key(self) -> tuple[int, int, str, str]:
        """(step, rank, record, kind): what two engines must agree on exactly."""
        return (self.step, self.rank, self.record, self.kind)


@dataclass(frozen=True)
class Mover:
    """A record's change between two steps on one rank; ``rel`` = |b - a| / |a|
    (0 when equal, inf when a is 0 or either is not finite)."""

    rank: int
    record: str
    a: float
    b: float
    rel: float


@dataclass(frozen=True)
class StepStat:
    """One record's statistic at one step, over the ranks that hold it."""

    step: int
    ranks: int
    min: float | None
    mean: float | None
    max: float | None
    nonfinite: int


@dataclass(frozen=True)
class ReplicaRow:
    """A rank whose checksum of a record differs from the other replicas' at a step."""

    step: int
    rank: int
    record: str
    checksum: int
    majority: int | None  # None: no checksum held by more than half the ranks


def history_ranks(hist: str | os.PathLike[str]) -> list[int]:
    """The ranks that have a folder in the history, ascending."""
    root = Path(hist)
    if not root.is_dir():
        raise FileNotFoundError(f"history {str(root)!r} is not a folder (make one with: graphprobe history build)")
    ranks = sorted(int(m.group(1)) for e in root.iterdir() if (m := RANK_RE.match(e.name)) and e.is_dir())
    if not ranks:
        raise ValueError(f"history {str(root)!r} holds no rank{{R}} folders: not a graphprobe history")
    return ranks


def history_files(hist: str | os.PathLike[str], ranks: list[int] | None = None,
                  first_step: int | None = None, last_step: int | None = None) -> list[str]:
    """The files holding ``ranks`` (default: all) and steps in
    [``first_step``, ``last_step``] (default: all), chosen by name."""
    root = Path(hist)
    wanted = history_ranks(root) if ranks is None else ranks
    files = []
    for rank in wanted:
        folder = root / f"rank{rank:05d}"
        if not folder.is_dir():
            raise ValueError(f"history {str(root)!r}: no rank {rank} (ranks: {_span(history_ranks(root))})")
        for e in sorted(folder.iterdir()):
            m = FILE_RE.match(e.name)
            if not m:
                continue
            lo, hi = int(m.group(1)), int(m.group(2))
            if (first_step is not None and hi < first_step) or (last_step is not None and lo > last_step):
                continue
            files.append(str(e))
    return files


def _span(values: list[int]) -> str:
    return f"{values[0]}..{values[-1]} ({len(values)})" if values else "none"


def connect(threads: int | None = None, memory_limit: str | None = None) -> Any:
    """An in-memory DuckDB connection (``threads``/``memory_limit`` as DuckDB's settings)."""
    try:
        import duckdb
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(f"graphprobe history queries need duckdb ({exc}): "
                          f"install it with {history_install_command()}") from exc
    con = duckdb.connect(":memory:")
    # Its progress bar writes to stdout, between the answers (and into a pipe's reader).
    con.execute("SET enable_progress_bar = false")
    if threads is not None:
        con.execute(f"SET threads = {int(threads)}")
    if memory_limit is not None:
        con.execute("SET memory_limit = ?", [memory_limit])
    return con


def _check_stat(stat: str) -> str:
    if stat not in STATS:
        raise ValueError(f"stat {stat!r} is not one of {list(STATS)}")
    return stat


_NONFINITE = " OR ".join(f"NOT isfinite({s})" for s in STATS)


#: Rows per window query when ``rank_batch`` is not given: DuckDB's memory
#: for the window grows with the rows it sorts (~1.1 GB peak for 7.7 M rows).
BATCH_ROWS = 4_000_000


def _auto_batch(hist: str | os.PathLike[str], rank: int) -> int:
    """Ranks per window query, from rank ``rank``'s row count (Parquet footers only)."""
    import pyarrow.parquet as pq

    rows = sum(pq.ParquetFile(f).metadata.num_rows for f in history_files(hist, [rank]))
    return max(1, BATCH_ROWS // max(1, rows))


def first_anomaly(hist: str | os.PathLike[str], rule: AnomalyRule | None = None, ranks: list[int] | None = None,
                  rank_batch: int | None = None, con: Any = None, deviation: bool = True) -> Anomaly | None:
    """The first value that leaves its record's history, or None.

    Two passes: the first non-finite value (a column scan), then the
    deviation rule's window over the steps up to it only (the window looks
    backwards, so later steps cannot change the answer), ``rank_batch``
    ranks at a time (a record's window never crosses ranks), which bounds
    DuckDB's memory; by default as many ranks as hold about
    :data:`BATCH_ROWS` rows. ``deviation=False``: the first non-finite
    value only (one scan).
    """
    rule = rule or AnomalyRule()
    con = con or connect()
    all_ranks = history_ranks(hist) if ranks is None else ranks
    files = history_files(hist, all_ranks)
    if not files:
        return None
    best: Anomaly | None = None
    row = con.execute(
        f"SELECT step, rank, ord, record, {rule.stat} FROM read_parquet(?) WHERE {_NONFINITE} "
        "ORDER BY step, ord, rank LIMIT 1", [files]).fetchone()
    if row is not None:
        best = Anomaly(int(row[0]), int(row[1]), int(row[2]), row[3], "nonfinite", row[4], None, None, 0)
    last = best.step if best else None
    if not deviation:
        return best
    if rank_batch is None:
        rank_batch = _auto_batch(hist, all_ranks[0])
    elif isinstance(rank_batch, bool) or not isinstance(rank_batch, int) or rank_batch < 1:
        raise ValueError(f"first_anomaly: rank_batch must be an int >= 1, got {rank_batch!r}")
    x = rule.stat
    for i in range(0, len(all_ranks), rank_batch):
        batch = history_files(hist, all_ranks[i:i + rank_batch], last_step=last)
        if not batch:
            continue
        where = "" if last is None else f"WHERE step <= {int(last)}"
        sql = f"""
            WITH src AS (
                SELECT step, rank, ord, record, {x} AS x,
                       CASE WHEN isfinite({x}) THEN {x} END AS fx
                FROM read_parquet(?) {where}),
            judged AS (
                SELECT step, rank, ord, record, x,
                       avg(fx) OVER w AS mean_prev, stddev_samp(fx) OVER w AS std_prev, count(fx) OVER w AS n_prev
                FROM src
                WINDOW w AS (PARTITION BY rank, record ORDER BY step
                             ROWS BETWEEN {rule.window} PRECEDING AND 1 PRECEDING))
            SELECT step, rank, ord, record, x, mean_prev, std_prev, n_prev FROM judged
            WHERE isfinite(x) AND n_prev >= {rule.min_history}
              AND abs(x - mean_prev) > greatest({float(rule.k)!r} * std_prev, {float(rule.rtol)!r} * abs(mean_prev))
            ORDER BY step, ord, rank LIMIT 1"""
        row = con.execute(sql, [batch]).fetchone()
        if row is None:
            continue
        cand = Anomaly(int(row[0]), int(row[1]), int(row[2]), row[3], "deviation", row[4], row[5], row[6],
                       int(row[7]))
        if best is None or (cand.step, cand.ord, cand.rank) < (best.step, best.ord, best.rank):
            best = cand
            last = best.step
    return best


_REL = """CASE WHEN NOT isfinite(a) OR NOT isfinite(b) THEN 'inf'::DOUBLE
               WHEN a = b THEN 0.0
               WHEN a = 0 THEN 'inf'::DOUBLE
               ELSE abs(b - a) / abs(a) END"""


def movers(hist: str | os.PathLike[str], step_a: int, step_b: int, stat: str = "Norm", top: int = 20,
           ranks: list[int] | None = None, con: Any = None) -> list[Mover]:
    """The ``top`` (rank, record) pairs whose ``stat`` changed most,
    relatively, from ``step_a`` to ``step_b`` (ties: by rank, then record)."""
    _check_stat(stat)
    con = con or connect()
    lo, hi = min(step_a, step_b), max(step_a, step_b)
    files = history_files(hist, ranks, lo, hi)
    if not files:
        raise ValueError(f"history {os.fspath(hist)!r}: no file holds steps {lo}..{hi}")
    rows = con.execute(f"""
        WITH a AS (SELECT rank, record, {stat} AS a FROM read_parquet($files) WHERE step = $sa),
             b AS (SELECT rank, record, {stat} AS b FROM read_parquet($files) WHERE step = $sb)
        SELECT rank, record, a, b, {_REL} AS rel FROM a JOIN b USING (rank, record)
        WHERE a IS NOT NULL AND b IS NOT NULL
        ORDER BY rel DESC, rank, record LIMIT $top""",
        {"files": files, "sa": int(step_a), "sb": int(step_b), "top": int(top)}).fetchall()
    return [Mover(int(r[0]), r[1], r[2], r[3], r[4]) for r in rows]


def record_over_steps(hist: str | os.PathLike[str], record: str, stat: str = "Norm", ranks: list[int] | None = None,
                      first_step: int | None = None, last_step: int | None = None, con: Any = None) -> list[StepStat]:
    """``record``'s ``stat`` at each step: min, mean and max over the ranks
    (finite values), and how many ranks held a non-finite one. Raises
    ValueError naming similar records when ``record`` is not in the history."""
    _check_stat(stat)
    con = con or connect()
    files = history_files(hist, ranks, first_step, last_step)
    if not files:
        raise ValueError(f"history {os.fspath(hist)!r}: no files for these ranks and steps")
    lo = -(1 << 62) if first_step is None else int(first_step)
    hi = (1 << 62) if last_step is None else int(last_step)
    rows = con.execute(f"""
        SELECT step, count(*) AS ranks,
               min(CASE WHEN isfinite({stat}) THEN {stat} END),
               avg(CASE WHEN isfinite({stat}) THEN {stat} END),
               max(CASE WHEN isfinite({stat}) THEN {stat} END),
               count(*) FILTER (WHERE NOT isfinite({stat}))
        FROM read_parquet($files) WHERE record = $record AND step BETWEEN $lo AND $hi
        GROUP BY step ORDER BY step""", {"files": files, "record": record, "lo": lo, "hi": hi}).fetchall()
    if not rows:
        names = [r[0] for r in con.execute(
            "SELECT DISTINCT record FROM read_parquet($files) WHERE jaro_winkler_similarity(record, $r) > 0.8 "
            "ORDER BY jaro_winkler_similarity(record, $r) DESC LIMIT 5", {"files": files[:1], "r": record}).fetchall()]
        hint = f"; similar: {', '.join(names)}" if names else ""
        raise ValueError(f"record {record!r} is not in history {os.fspath(hist)!r}{hint}")
    return [StepStat(int(r[0]), int(r[1]), r[2], r[3], r[4], int(r[5])) for r in rows]


def replica_mismatches(hist: str | os.PathLike[str], ranks: list[int] | None = None, like: str = "%",
                       limit: int = 100, con: Any = None) -> list[ReplicaRow]:
    """The ranks whose checksum (summary_mode "md5") of a record differs from
    the majority's among ``ranks`` (the replicas: one data-parallel group;
    default all ranks) at the same step, for records matching the SQL
    pattern ``like`` (e.g. ``'%.parameters.%'``); with no majority every rank
    of that record is listed. Ordered by step, rank, record; at most ``limit``."""
    con = con or connect()
    files = history_files(hist, ranks)
    if not files:
        raise ValueError(f"history {os.fspath(hist)!r}: no files for these ranks")
    rows = con.execute("""
        WITH c AS (SELECT step, rank, record, checksum FROM read_parquet($files)
                   WHERE checksum IS NOT NULL AND record LIKE $like),
        m AS (SELECT step, record, checksum, count(*) AS n FROM c GROUP BY step, record, checksum),
        g AS (SELECT step, record, arg_max(checksum, n) AS top_value, max(n) AS top, sum(n) AS total FROM m
              GROUP BY step, record HAVING count(*) > 1)
        SELECT c.step, c.rank, c.record, c.checksum, CASE WHEN 2 * g.top > g.total THEN g.top_value END
        FROM c JOIN g USING (step, record)
        WHERE NOT (2 * g.top > g.total) OR c.checksum <> g.top_value
        ORDER BY c.step, c.rank, c.record LIMIT $limit""",
        {"files": files, "like": like, "limit": int(limit)}).fetchall()
    return [ReplicaRow(int(r[0]), int(r[1]), r[2], int(r[3]), None if r[4] is None else int(r[4])) for r in rows]

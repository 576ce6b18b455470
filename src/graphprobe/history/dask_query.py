"""The queries of query.py on Dask: one partition per rank (a record's window
never crosses ranks, so the anomaly rule needs no shuffle), the same answers
as DuckDB's (tests/test_history_dask.py). For a cluster, pass a
``distributed.Client``'s scheduler or run under ``with Client(...)``
(docs/history.md, "Dask").

Parquet's null (an empty tensor's statistics) and NaN are told apart when
the files are read (a null is not an anomaly, as in SQL).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from graphprobe.history.query import Anomaly, Mover, StepStat, history_files, history_ranks
from graphprobe.history.records import STATS
from graphprobe.history.rules import AnomalyRule
from graphprobe.install_hint import history_install_command

__all__ = ["first_anomaly", "movers", "rank_frame", "record_over_steps"]


def _read_rank(part: tuple[str, int, int | None, int | None, tuple[int, ...] | None, str | None]) -> Any:
    """One rank's rows as pandas, with ``null_{stat}`` columns (Parquet null)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    hist, rank, lo, hi, steps, record = part
    files = history_files(hist, [rank], lo, hi)
    from graphprobe.history.writer import schema

    if not files:
        table = schema().empty_table()
    else:
        filters = []
        if steps is not None:
            filters.append(("step", "in", list(steps)))
        if lo is not None:
            filters.append(("step", ">=", lo))
        if hi is not None:
            filters.append(("step", "<=", hi))
        if record is not None:
            filters.append(("record", "=", record))
        table = pa.concat_tables([pq.read_table(f, filters=filters or None, schema=schema()) for f in files])
    for s in STATS:
        table = table.append_column(f"null_{s}", pc.is_null(table[s]))
    return table.to_pandas()


def rank_frame(hist: str | os.PathLike[str], ranks: list[int] | None = None, first_step: int | None = None,
               last_step: int | None = None, steps: tuple[int, ...] | None = None, record: str | None = None) -> Any:
    """The history as a dask DataFrame, one partition per rank."""
    try:
        import dask.dataframe as dd
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(f"graphprobe's Dask queries need dask[dataframe] ({exc}): "
                          f"install it with {history_install_command()}") from exc
    ranks = history_ranks(hist) if ranks is None else ranks
    parts = [(os.fspath(hist), r, first_step, last_step, steps, record) for r in ranks]
    meta = _read_rank((os.fspath(hist), ranks[0], 0, -1, None, None)).iloc[:0]
    return dd.from_map(_read_rank, parts, meta=meta, enforce_metadata=False)


def _nonfinite(df: Any) -> Any:
    bad = np.zeros(len(df), dtype=bool)
    for s in STATS:
        bad |= ~np.isfinite(df[s].to_numpy(dtype=float, na_value=np.nan)) & ~df[f"null_{s}"].to_numpy(dtype=bool)
    return bad


def _judge(df: Any, rule: AnomalyRule, deviation: bool = True) -> Any:
    """The rows of one rank's frame that the rule flags, with their window."""
    import pandas as pd

    cols = ["step", "rank", "ord", "record", "kind", "x", "mean_prev", "std_prev", "n_prev"]
    if len(df) == 0:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in zip(cols, ["int64", "int32", "int32", "object",
                                                                        "object", "float64", "float64", "float64",
                                                                        "int64"])})
    df = df.sort_values(["record", "step"], kind="stable").reset_index(drop=True)
    x = df[rule.stat].to_numpy(dtype=float, na_value=np.nan)
    fx = pd.Series(np.where(np.isfinite(x), x, np.nan))
    prev = fx.groupby(df["record"].to_numpy()).shift(1)
    roll = prev.groupby(df["record"].to_numpy()).rolling(rule.window, min_periods=1)
    mean = roll.mean().reset_index(level=0, drop=True).sort_index().to_numpy()
    std = roll.std(ddof=1).reset_index(level=0, drop=True).sort_index().to_numpy()
    count = roll.count().reset_index(level=0, drop=True).sort_index().to_numpy()
    count = np.nan_to_num(count).astype(np.int64)
    with np.errstate(invalid="ignore"):
        dev = (np.isfinite(x) & (count >= rule.min_history)
               & (np.abs(x - mean) > np.maximum(rule.k * std, rule.rtol * np.abs(mean))))
    bad = _nonfinite(df)
    flagged = bad | (dev & deviation)
    out = pd.DataFrame({"step": df["step"][flagged], "rank": df["rank"][flagged], "ord": df["ord"][flagged],
                        "record": df["record"][flagged], "kind": np.where(bad[flagged], "nonfinite", "deviation"),
                        "x": x[flagged], "mean_prev": mean[flagged], "std_prev": std[flagged],
                        "n_prev": count[flagged]})
    return out.sort_values(["step", "ord", "rank"]).head(1)


def first_anomaly(hist: str | os.PathLike[str], rule: AnomalyRule | None = None, ranks: list[int] | None = None,
                  scheduler: Any = None, deviation: bool = True) -> Anomaly | None:
    """query.first_anomaly on Dask (``scheduler``: as dask's ``compute``)."""
    rule = rule or AnomalyRule()
    ddf = rank_frame(hist, ranks)
    meta = _judge(ddf._meta, rule)
    found = ddf.map_partitions(_judge, rule, deviation, meta=meta).compute(scheduler=scheduler)
    if len(found) == 0:
        return None
    r = found.sort_values(["step", "ord", "rank"]).iloc[0]
    nonfinite = r["kind"] == "nonfinite"
    return Anomaly(int(r["step"]), int(r["rank"]), int(r["ord"]), str(r["record"]), str(r["kind"]),
                   None if np.isnan(r["x"]) and not nonfinite else float(r["x"]),
                   None if nonfinite else float(r["mean_prev"]), None if nonfinite else float(r["std_prev"]),
                   0 if nonfinite else int(r["n_prev"]))


def movers(hist: str | os.PathLike[str], step_a: int, step_b: int, stat: str = "Norm", top: int = 20,
           ranks: list[int] | None = None, scheduler: Any = None) -> list[Mover]:
    """query.movers on Dask."""
    import dask.dataframe as dd

    if stat not in STATS:
        raise ValueError(f"stat {stat!r} is not one of {list(STATS)}")
    ddf = rank_frame(hist, ranks, steps=(int(step_a), int(step_b)))
    ddf = ddf[~ddf[f"null_{stat}"]]
    a = ddf[ddf["step"] == step_a][["rank", "record", stat]].rename(columns={stat: "a"})
    b = ddf[ddf["step"] == step_b][["rank", "record", stat]].rename(columns={stat: "b"})
    df = dd.merge(a, b, on=["rank", "record"]).compute(scheduler=scheduler)
    av, bv = df["a"].to_numpy(dtype=float), df["b"].to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(~np.isfinite(av) | ~np.isfinite(bv), np.inf,
                       np.where(av == bv, 0.0, np.where(av == 0, np.inf, np.abs(bv - av) / np.abs(av))))
    df = df.assign(rel=rel).sort_values(["rel", "rank", "record"], ascending=[False, True, True]).head(top)
    return [Mover(int(r.rank), str(r.record), float(r.a), float(r.b), float(r.rel)) for r in df.itertuples()]


def record_over_steps(hist: str | os.PathLike[str], record: str, stat: str = "Norm", ranks: list[int] | None = None,
                      first_step: int | None = None, last_step: int | None = None,
                      scheduler: Any = None) -> list[StepStat]:
    """query.record_over_steps on Dask."""
    if stat not in STATS:
        raise ValueError(f"stat {stat!r} is not one of {list(STATS)}")
    ddf = rank_frame(hist, ranks, first_step, last_step, record=record)
    df = ddf[["step", stat, f"null_{stat}"]].compute(scheduler=scheduler)
    if len(df) == 0:
        raise ValueError(f"record {record!r} is not in history {os.fspath(hist)!r}")
    x = df[stat].to_numpy(dtype=float, na_value=np.nan)
    null = df[f"null_{stat}"].to_numpy(dtype=bool)
    df = df.assign(fx=np.where(np.isfinite(x), x, np.nan), bad=~np.isfinite(x) & ~null)
    g = df.groupby("step")
    agg = g.agg(ranks=("step", "size"), lo=("fx", "min"), avg=("fx", "mean"), hi=("fx", "max"), bad=("bad", "sum"))

    def opt(v: float) -> float | None:
        return None if np.isnan(v) else float(v)

    return [StepStat(int(s), int(r.ranks), opt(r.lo), opt(r.avg), opt(r.hi), int(r.bad))
            for s, r in agg.sort_index().iterrows()]

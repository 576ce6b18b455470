"""Dask answers the history's questions exactly as DuckDB does, on the same
Parquet files (a LocalCluster with threads, and the synchronous scheduler)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")
pytest.importorskip("dask.dataframe")

from graphprobe.history import dask_query as dq  # noqa: E402
from graphprobe.history import query as q  # noqa: E402
from graphprobe.history.rules import AnomalyRule  # noqa: E402
from history_reference import first_anomaly_ref, synthetic  # noqa: E402

PLANTS = [
    {(31, 3, 5): 1e3},
    {(31, 3, 5): 1e3, (12, 0, 9): float("-inf")},
    {(40, 1, 0): 0.0, (40, 2, 0): float("nan")},
    {},
]


def _same_anomaly(a: q.Anomaly | None, b: q.Anomaly | None) -> None:
    assert (a is None) == (b is None)
    if a is None or b is None:
        return
    assert a.key() == b.key() and a.ord == b.ord and a.n_prev == b.n_prev
    for x, y in ((a.value, b.value), (a.mean_prev, b.mean_prev), (a.std_prev, b.std_prev)):
        assert (x is None and y is None) or x == pytest.approx(y, rel=1e-12, nan_ok=True)


@pytest.mark.parametrize("seed", range(len(PLANTS)))
def test_dask_equals_duckdb(tmp_path: Path, seed: int) -> None:
    synthetic(tmp_path, ranks=4, steps=50, records=12, seed=seed, every=16, plant=PLANTS[seed])
    rule = AnomalyRule(k=5.0, window=12, min_history=4)
    a = q.first_anomaly(tmp_path, rule)
    _same_anomaly(a, dq.first_anomaly(tmp_path, rule, scheduler="sync"))
    nf = q.first_anomaly(tmp_path, rule, deviation=False)
    _same_anomaly(nf, dq.first_anomaly(tmp_path, rule, scheduler="sync", deviation=False))
    assert nf is None or nf.kind == "nonfinite"
    assert (nf is None) == all(v == v and abs(v) != float("inf") for v in PLANTS[seed].values())
    assert (None if a is None else a.key()) == first_anomaly_ref(
        synthetic(tmp_path / "again", ranks=4, steps=50, records=12, seed=seed, every=16, plant=PLANTS[seed]),
        rule.k, rule.window, rule.min_history, rule.rtol)
    for sa, sb in ((10, 40), (39, 40), (0, 49)):
        m1, m2 = q.movers(tmp_path, sa, sb, top=15), dq.movers(tmp_path, sa, sb, top=15, scheduler="sync")
        assert [(m.rank, m.record) for m in m1] == [(m.rank, m.record) for m in m2]
        assert [m.rel for m in m1] == pytest.approx([m.rel for m in m2], rel=1e-12)
    name = "Module.m5.Linear.forward.0.output.0"
    s1 = q.record_over_steps(tmp_path, name, ranks=[1, 3], first_step=5, last_step=45)
    s2 = dq.record_over_steps(tmp_path, name, ranks=[1, 3], first_step=5, last_step=45, scheduler="sync")
    assert [(s.step, s.ranks, s.nonfinite) for s in s1] == [(s.step, s.ranks, s.nonfinite) for s in s2]
    for x, y in zip(s1, s2):
        for u, v in ((x.min, y.min), (x.mean, y.mean), (x.max, y.max)):
            assert (u is None and v is None) or u == pytest.approx(v, rel=1e-12)


def test_dask_local_cluster(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    synthetic(tmp_path, ranks=3, steps=30, records=6, plant={(22, 2, 4): 1e4})
    with distributed.LocalCluster(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None) as c, \
            distributed.Client(c) as client:
        got = dq.first_anomaly(tmp_path, scheduler=client)
        movers = dq.movers(tmp_path, 21, 22, top=3, scheduler=client)
    _same_anomaly(q.first_anomaly(tmp_path), got)
    assert got is not None and got.key() == (22, 2, "Module.m4.Linear.forward.0.output.0", "deviation")
    assert [(m.rank, m.record) for m in movers] == [(m.rank, m.record) for m in q.movers(tmp_path, 21, 22, top=3)]


def test_cli_engine_dask_prints_duckdbs_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from graphprobe.cli import main

    synthetic(tmp_path, ranks=2, steps=25, records=4, plant={(20, 1, 2): float("inf")})
    outs = []
    for engine in ("duckdb", "dask"):
        assert main(["history", "query", str(tmp_path), "--first-anomaly", "--k", "50", "--engine", engine]) == 1
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] and "step 20, rank 1, Module.m2.Linear.forward.0.output.0: nonfinite" in outs[0]

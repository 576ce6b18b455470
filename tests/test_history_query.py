"""graphprobe history: build from dump.json folders, the DuckDB queries, the
CLI and the HTML report, against references computed here in float64."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")

from graphprobe.cli import main  # noqa: E402
from graphprobe.history import query as q  # noqa: E402
from graphprobe.history.rules import AnomalyRule  # noqa: E402
from history_reference import first_anomaly_ref, synthetic  # noqa: E402


@pytest.fixture(scope="module")
def trained_dump(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[float]]:
    """A tiny model trained 8 steps under AclGraphDumper (L0, md5), and the
    float64 norm of layer 0's weight at each step's forward, computed here."""
    d = tmp_path_factory.mktemp("dump")
    code = f"""
import json, torch
from torch import nn
from graphprobe import AclGraphDumper
json.dump({{"task": "statistics", "level": "L0", "dump_path": {str(d / 'dump')!r},
            "statistics": {{"summary_mode": "md5"}}}}, open({str(d / 'c.json')!r}, "w"))
torch.manual_seed(0)
m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
opt = torch.optim.SGD(m.parameters(), lr=0.1)
dp = AclGraphDumper({str(d / 'c.json')!r}); dp.start(m)
norms = []
for s in range(8):
    norms.append(float(m[0].weight.detach().double().norm()))
    m(torch.randn(3, 4)).square().mean().backward(); opt.step(); opt.zero_grad(); dp.step()
dp.stop()
print(json.dumps(norms))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return d / "dump", json.loads(out.stdout.strip().splitlines()[-1])


def test_build_and_record_match_float64(trained_dump: tuple[Path, list[float]], tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    dump, norms = trained_dump
    assert main(["history", "build", str(dump), "-o", str(tmp_path / "h"), "--every", "3"]) == 0
    assert "8 steps, 1 ranks" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "h" / "rank00000").iterdir()) == [
        "steps000000000-000000002.parquet", "steps000000003-000000005.parquet", "steps000000006-000000007.parquet"]
    series = q.record_over_steps(tmp_path / "h", "Module.0.Linear.forward.0.parameters.weight")
    assert [s.step for s in series] == list(range(8))
    for s, ref in zip(series, norms):
        assert s.ranks == 1 and s.nonfinite == 0
        assert s.mean == pytest.approx(ref, rel=2e-6)
    # Only steps 3..5 are read: one file.
    assert len(q.history_files(tmp_path / "h", first_step=3, last_step=5)) == 1


@pytest.mark.parametrize("plant,expected_kind", [
    ({(23, 2, 4): 1e3}, "deviation"),
    ({(23, 2, 4): 1e3, (17, 1, 6): float("nan")}, "nonfinite"),
    ({(30, 0, 1): float("inf"), (30, 0, 0): 1e4}, "deviation"),  # same step: the earlier ord (0) first
    ({}, None),
])
def test_first_anomaly_matches_brute_force(tmp_path: Path, plant: dict, expected_kind: str | None) -> None:
    truth = synthetic(tmp_path, ranks=3, steps=40, records=8, plant=plant)
    rule = AnomalyRule(k=6.0, window=10, min_history=5, rtol=1e-3)
    ref = first_anomaly_ref(truth, rule.k, rule.window, rule.min_history, rule.rtol)
    got = q.first_anomaly(tmp_path, rule, rank_batch=2)
    assert (None if got is None else got.key()) == ref
    assert (None if ref is None else ref[3]) == expected_kind


def test_movers_match_reference(tmp_path: Path) -> None:
    truth = synthetic(tmp_path, ranks=2, steps=12, records=6, plant={(9, 1, 3): 50.0, (5, 0, 2): 0.0})
    got = q.movers(tmp_path, 4, 9, top=50)
    ref = []
    for (rank, record), series in truth.items():
        a, b = series[4][2], series[9][2]
        ref.append((-(math.inf if a == 0 else abs(b - a) / abs(a)), rank, record))
    ref.sort()
    assert [(m.rank, m.record) for m in got] == [(r[1], r[2]) for r in ref]
    assert [m.rel for m in got] == pytest.approx([-r[0] for r in ref], rel=1e-12)
    assert got[0].record == "Module.m3.Linear.forward.0.output.0" and got[0].rank == 1


def test_cli_query_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    synthetic(tmp_path / "h", ranks=2, steps=30, records=5, plant={(21, 1, 2): float("nan")})
    assert main(["history", "query", str(tmp_path / "h"), "--first-anomaly"]) == 1
    assert "step 21, rank 1, Module.m2.Linear.forward.0.output.0: nonfinite" in capsys.readouterr().out
    assert main(["history", "query", str(tmp_path / "h"), "--first-anomaly", "--ranks", "0"]) == 0
    capsys.readouterr()
    assert main(["history", "query", str(tmp_path / "h"), "--record", "Module.m2.Linear.forward.0.output.0",
                 "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[21]["nonfinite"] == 1 and rows[21]["ranks"] == 2
    assert main(["history", "report", str(tmp_path / "h"), "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert page.count("<svg") == 2 and "<script" not in page and "http://" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    assert "step 21, rank 1" in page


def test_cli_errors_name_the_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "query", str(tmp_path / "none"), "--first-anomaly"]) == 2
    assert "is not a folder" in capsys.readouterr().err
    synthetic(tmp_path / "h", ranks=1, steps=3, records=2)
    assert main(["history", "query", str(tmp_path / "h"), "--record", "nope", "--ranks", "0"]) == 2
    assert "record 'nope' is not in history" in capsys.readouterr().err
    assert main(["history", "query", str(tmp_path / "h"), "--first-anomaly", "--ranks", "7"]) == 2
    assert "no rank 7" in capsys.readouterr().err
    assert main(["history", "build", str(tmp_path / "h"), "-o", str(tmp_path / "x")]) == 2
    assert "no step{N} folders" in capsys.readouterr().err
    with pytest.raises(ValueError, match="window must be an int >= 2"):
        AnomalyRule(window=1)


def _write_dump(path: Path, values: dict[str, float]) -> None:
    path.mkdir(parents=True)
    data = {name: {"input_args": [], "input_kwargs": {}, "output": [
        {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": v, "Min": v, "Mean": v, "Norm": v,
         "requires_grad": False}]} for name, v in values.items()}
    (path / "dump.json").write_text(json.dumps({"task": "statistics", "level": "L0", "data": data}))


def test_build_ranks_nan_and_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "dump"
    for step in range(12):
        for rank in (0, 1):
            v = 1.0 + 0.01 * ((step * 7 + rank) % 5)
            _write_dump(root / f"step{step}" / f"rank{rank}",
                        {"Module.a.Linear.forward.0": v, "Module.b.Linear.forward.0": float("nan") if
                         (step, rank) == (9, 1) else 2 * v})
    assert main(["history", "build", str(root), "-o", str(tmp_path / "h"), "--every", "5"]) == 0
    assert "12 steps, 2 ranks, 48 rows, 6 files" in capsys.readouterr().out
    found = q.first_anomaly(tmp_path / "h")
    assert found.key() == (9, 1, "Module.b.Linear.forward.0.output.0", "nonfinite") and found.ord == 1
    _write_dump(root / "step3" / "pid11", {"Module.a.Linear.forward.0": 1.0})
    _write_dump(root / "step3" / "pid12", {"Module.a.Linear.forward.0": 1.0})
    assert main(["history", "build", str(root), "-o", str(tmp_path / "h2")]) == 2
    assert "step3 holds 2 pid folders (pid11, pid12)" in capsys.readouterr().err
    for pid in ("pid11", "pid12"):
        shutil.rmtree(root / "step3" / pid)
    (root / "step4" / "rank0" / "dump.json").write_text('{"task": "statistics"}')
    assert main(["history", "build", str(root), "-o", str(tmp_path / "h3")]) == 2
    assert "step4/rank0/dump.json: no 'data' object" in capsys.readouterr().err


def test_replica_mismatches_in_the_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from graphprobe.history.records import STATS, StepRows
    from graphprobe.history.writer import HistoryWriter

    # Ranks 0 and 2 hold one replica, 1 and 3 another (their checksums differ by design);
    # rank 2's "w1" differs from rank 0's at step 6 only.
    for rank in range(4):
        w = HistoryWriter(tmp_path, rank, every=4)
        for step in range(10):
            r = StepRows(step, rank)
            for name in ("w0", "w1"):
                r.record.append(f"Module.l.Linear.forward.0.parameters.{name}")
                r.dtype.append("torch.float32")
                for s in STATS:
                    r.stats[s].append(1.0)
                c = hash((step, name, rank % 2)) & 0xFFFF
                r.checksum.append(c + 1 if (rank, step, name) == (2, 6, "w1") else c)
            w.append(r)
        w.close()
    assert q.replica_mismatches(tmp_path, ranks=[1, 3]) == []
    got = q.replica_mismatches(tmp_path, ranks=[0, 2], like="%parameters%")
    # 2 ranks, 2 values: no majority, both named.
    assert [(g.step, g.rank, g.record, g.majority) for g in got] == [
        (6, 0, "Module.l.Linear.forward.0.parameters.w1", None), (6, 2, "Module.l.Linear.forward.0.parameters.w1", None)]
    assert main(["history", "query", str(tmp_path), "--replicas", "--ranks", "1,3"]) == 0
    assert "replicas agree" in capsys.readouterr().out
    # Over the world the two groups differ on every record of every step (2 against 2).
    assert len(q.replica_mismatches(tmp_path, limit=1000)) == 10 * 2 * 4

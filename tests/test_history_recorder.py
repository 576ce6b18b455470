"""FlightRecorder: a planted anomaly (a weight set to NaN, a gradient x100)
fires a trigger at its step; that step's full dump and the ones before it
stay on disk, the others are deleted; the history query names the step and
the record."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from torch import nn

pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")

from graphprobe import AclGraphDumper  # noqa: E402
from graphprobe.history import query as q  # noqa: E402
from graphprobe.history.recorder import FlightRecorder  # noqa: E402
from graphprobe.history.rules import AnomalyRule  # noqa: E402


def _train(tmp_path: Path, steps: int, plant: str, at: int, compile_backend: str | None = None,
           keep: int = 3, after: int = 1, explicit_at: int | None = None,
           background: bool = True) -> tuple[FlightRecorder, Path]:
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"task": "statistics", "level": "L0", "dump_path": str(tmp_path / "dump")}))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    dumper = AclGraphDumper(str(cfg))
    dumper.start(model)
    run = torch.compile(model, backend=compile_backend) if compile_backend else model
    rec = FlightRecorder(dumper, tmp_path / "hist", every=8, keep=keep, after=after,
                         rule=AnomalyRule(k=6.0, window=10, min_history=5), background=background)
    gen = torch.Generator().manual_seed(1)
    try:
        for step in range(steps):
            if plant == "nan" and step == at:
                with torch.no_grad():
                    model[2].weight[1, 4] = float("nan")
            loss = run(torch.randn(8, 6, generator=gen)).square().mean()
            (loss * (100.0 if plant == "grad" and step == at else 1.0)).backward()
            opt.step()
            opt.zero_grad()
            rec.step(loss=loss.detach())
            if step == explicit_at:
                rec.trigger("test")
        rec.close()
    finally:
        dumper.stop()
    return rec, tmp_path


def _steps_on_disk(root: Path) -> list[int]:
    return sorted(int(p.name[4:]) for p in (root / "dump").iterdir() if p.name.startswith("step"))


def test_nan_weight_triggers_and_keeps_dumps(tmp_path: Path) -> None:
    rec, root = _train(tmp_path, steps=24, plant="nan", at=17)
    first = rec.triggers[0]
    assert (first.step, first.kind) == (17, "nonfinite")
    assert first.record.startswith("Module.2.Linear.forward.0.")
    # Step 17, the 3 before it and 1 after stay; the last `keep` steps stay (no later step judged them yet).
    kept = _steps_on_disk(root)
    assert {14, 15, 16, 17, 18} <= set(kept) and not {0, 1, 10, 13} & set(kept)
    assert (root / "dump" / "step17").is_dir() and any((root / "dump" / "step17").glob("*/dump.json"))
    found = q.first_anomaly(root / "hist", AnomalyRule(k=6.0, window=10, min_history=5))
    assert (found.step, found.record, found.kind) == (17, first.record, "nonfinite")
    lines = (root / "hist" / "triggers_rank00000.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["step"] == 17


def test_gradient_x100_triggers_deviation(tmp_path: Path) -> None:
    rec, root = _train(tmp_path, steps=26, plant="grad", at=20)
    first = rec.triggers[0]
    assert first.step == 20 and first.kind == "deviation"
    assert ".backward." in first.record or ".parameters_grad." in first.record
    # Reference in float64: the judged gradient Norm against its previous 10 values.
    series = q.record_over_steps(root / "hist", first.record)
    prev = [s.mean for s in series if 10 <= s.step < 20]
    mean = math.fsum(prev) / len(prev)
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in prev) / (len(prev) - 1))
    assert abs(series[20].mean - mean) > 6 * std
    found = q.first_anomaly(root / "hist", AnomalyRule(k=6.0, window=10, min_history=5))
    assert (found.step, found.record) == (20, first.record)
    assert 20 in _steps_on_disk(root) and 17 in _steps_on_disk(root) and 5 not in _steps_on_disk(root)


def test_compiled_nan_and_explicit_trigger(tmp_path: Path) -> None:
    rec, root = _train(tmp_path, steps=14, plant="nan", at=9, compile_backend="aot_eager", keep=2, after=0,
                       explicit_at=4)
    assert [(t.step, t.kind, t.reason) for t in rec.triggers[:1]] == [(4, "explicit", "test")]
    assert (rec.triggers[1].step, rec.triggers[1].kind) == (9, "nonfinite")
    assert {2, 3, 4, 7, 8, 9} <= set(_steps_on_disk(root)) and not {0, 1, 5, 6} & set(_steps_on_disk(root))


def test_bad_arguments_are_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="keep must be an int >= 0, got -1"):
        FlightRecorder(object(), tmp_path, keep=-1)
    with pytest.raises(ValueError, match="start the dumper first"):
        FlightRecorder(AclGraphDumper(), tmp_path)


def test_reading_on_the_recorder_thread_gives_the_callers_answers(tmp_path: Path) -> None:
    """The same run read on the recorder's thread and on the caller's: the same triggers, history rows
    and dumps kept (issue 39: the reading moved off the caller's thread)."""
    import pyarrow.parquet as pq

    runs = {}
    for background in (True, False):
        (tmp_path / str(background)).mkdir()
        rec, root = _train(tmp_path / str(background), steps=24, plant="grad", at=17, explicit_at=6,
                           background=background)
        table = pq.read_table(sorted((root / "hist").rglob("*.parquet"))).to_pylist()
        runs[background] = (rec.triggers, table, _steps_on_disk(root),
                            (root / "hist" / "triggers_rank00000.jsonl").read_text())
    assert runs[True] == runs[False]
    assert [t.step for t in runs[True][0]][:2] == [6, 17]


def test_a_failed_step_is_raised_on_the_callers_thread_and_later_ones_still_come(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from graphprobe.history import recorder as recorder_module

    real = recorder_module.read_dump_json

    def failing(path, step, rank):  # type: ignore[no-untyped-def]
        if step == 3:
            raise ValueError("planted: step 3 unreadable")
        return real(path, step, rank)

    monkeypatch.setattr(recorder_module, "read_dump_json", failing)
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"task": "statistics", "level": "L0", "dump_path": str(tmp_path / "dump")}))
    model = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
    dumper = AclGraphDumper(str(cfg))
    dumper.start(model)
    threads: list[threading.Thread] = []
    rec = FlightRecorder(dumper, tmp_path / "hist", every=4, keep=1, after=0, rule=None,
                         on_trigger=lambda t: threads.append(threading.current_thread()))
    returned: dict[int, list[int]] = {}
    try:
        for step in range(8):
            model(torch.ones(2, 4))
            try:
                returned[step] = [t.step for t in rec.step()]
            except ValueError as exc:
                assert "planted: step 3" in str(exc)
                returned[step] = ["raised"]  # type: ignore[list-item]
            if step in (3, 5):
                rec.trigger(f"at {step}")  # the step just ended
        returned[8] = [t.step for t in rec.close()]
    finally:
        dumper.stop()
    # Step k is handed over by the call ending step k + 1 and delivered by the call ending step k + 2.
    assert returned == {0: [], 1: [], 2: [], 3: [], 4: [], 5: ["raised"], 6: [], 7: [5], 8: []}
    assert [t.reason for t in rec.triggers] == ["at 5"]  # step 3's trigger failed with its step, raised
    assert threads == [threading.main_thread()]
    rows = pq_steps(tmp_path / "hist")
    assert rows == [0, 1, 2, 4, 5, 6, 7]


def pq_steps(hist: Path) -> list[int]:
    import pyarrow.parquet as pq

    return sorted({r["step"] for f in hist.rglob("*.parquet") for r in pq.read_table(f).to_pylist()})


def _kept_records(root: Path) -> list[dict]:
    """Every tensor record of the dumps kept on disk (forward inputs and outputs, parameters)."""
    out = []
    for path in sorted((root / "dump").glob("step*/*/dump.json")):
        for entry in json.loads(path.read_text())["data"].values():
            for part in entry.values():
                for rec in part if isinstance(part, list) else part.values() if isinstance(part, dict) else []:
                    if isinstance(rec, dict) and rec.get("type") == "torch.Tensor":
                        out.append(rec)
    return out


@pytest.mark.parametrize("sketch", [False, True])
def test_the_sketch_is_off_while_recording_unless_asked_for(tmp_path: Path, sketch: bool) -> None:
    """Issue 39: on the CPU the Sketch is a second pass over every tensor and most of what leaving the
    recorder on costs, so FlightRecorder turns it off by default; ``sketch=True`` keeps the dumper's
    setting, and close() gives the dumper its own setting back."""
    from sketch_reference import sketch as sketch_of

    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"task": "statistics", "level": "L0", "dump_path": str(tmp_path / "dump")}))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 40), nn.Tanh(), nn.Linear(40, 3))
    dumper = AclGraphDumper(str(cfg))
    dumper.start(model)
    x = torch.randn(8, 6)
    try:
        rec = FlightRecorder(dumper, tmp_path / "hist", keep=0, after=0, rule=None, sketch=sketch)
        model(x)
        rec.step()
        rec.trigger("keep it")
        model(x)
        rec.step()
        rec.close()
        kept = _kept_records(tmp_path)
        assert kept and all(r["dtype"] == "torch.float32" for r in kept)
        assert all(("Sketch" in r) == sketch for r in kept), [sorted(r) for r in kept]
        # After close() the dumper records with its own setting (statistics.sketch true) again.
        dumper.step(dump=False)
        out = model(x)
        dumper.step()
        dumper.flush()
    finally:
        dumper.stop()
    last = max((tmp_path / "dump").glob("step*/*/dump.json"), key=lambda p: int(p.parent.parent.name[4:]))
    data = json.loads(last.read_text())["data"]
    got = data["Module.2.Linear.forward.0"]["output"][0]["Sketch"]
    want = sketch_of(out.detach().double())
    assert got == pytest.approx(want, rel=1e-6, abs=1e-6)

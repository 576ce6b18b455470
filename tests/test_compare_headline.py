"""The first line of a many-pair compare's summary: the first divergence of
all pairs -- earliest step, then earliest position in execution order, then
lowest rank -- with its record (issue 38: a thousand ranks in one answer).
The dumps are written with a divergence planted at known places (the
reference): an output off by 1 % from one entry on, in one rank."""

from __future__ import annotations

from pathlib import Path

from benchmarks.compare_ranks import write_rank

from graphprobe.compare import compare
from graphprobe.compare.summary import format_summary

ENTRIES = 16


def _root(tmp_path: Path, ranks: int, planted: dict[tuple[int, int], int]) -> tuple[Path, Path]:
    for side in ("t", "b"):
        for step in range(2):
            for rank in range(ranks):
                bad = planted.get((step, rank)) if side == "t" else None
                write_rank(tmp_path / side / f"step{step}" / f"rank{rank}" / "dump.json", step * 1000 + rank, ENTRIES,
                           bad)
    return tmp_path / "t", tmp_path / "b"


def _headline(tmp_path: Path, ranks: int, planted: dict[tuple[int, int], int]) -> str:
    t, b = _root(tmp_path, ranks, planted)
    run = compare(t, b, tmp_path / "out", html=False, progress=False, jobs=2)
    return format_summary(run, 5).splitlines()[0]


def _entry(i: int) -> str:
    return f"Module.layers.{i}.Linear.forward.0"


def test_the_earliest_position_wins_within_a_step(tmp_path: Path) -> None:
    line = _headline(tmp_path, 6, {(1, 4): 9, (1, 2): 5, (1, 5): 5})
    assert line == (f"first divergence: step1/rank2, {_entry(5)} (entry #5, record {_entry(5)}.output.0); "
                    "3 of 12 pairs diverge")


def test_the_earliest_step_wins_over_an_earlier_position(tmp_path: Path) -> None:
    line = _headline(tmp_path, 3, {(1, 0): 2, (0, 2): 11})
    assert line == (f"first divergence: step0/rank2, {_entry(11)} (entry #11, record {_entry(11)}.output.0); "
                    "2 of 6 pairs diverge")


def test_no_divergence_says_so(tmp_path: Path) -> None:
    assert _headline(tmp_path, 2, {}) == "first divergence: none in 4 pairs"

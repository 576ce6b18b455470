"""Which folders compare pairs (issue 36): rank folders by rank number only
(item 9), and ``--pid-pairing order`` by pid, never by time (a planted bug
that sorted by dump.json time passed the suite). No torch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from compare_fixtures import cli, simple_model_dump, write_dump

from graphprobe.compare.pairing import PairingError, pair_paths


def dump(path: Path, scale: float = 1.0) -> Path:
    return write_dump(path / "dump.json", simple_model_dump(scale, 0 if scale != 1.0 else None))


# -- item 9: rank folders pair by rank number only ----------------------------------

@pytest.mark.parametrize("level", ["root", "step"])
def test_one_rank_folder_per_side_of_different_ranks_is_refused(tmp_path: Path, capsys, level: str) -> None:
    dump(tmp_path / "t" / "step0" / "rank0")
    dump(tmp_path / "b" / "step0" / "rank3")
    t, b = (tmp_path / "t", tmp_path / "b") if level == "root" else (tmp_path / "t" / "step0", tmp_path / "b" / "step0")
    with pytest.raises(PairingError, match="paired by rank number") as e:
        pair_paths(t, b)
    assert "TARGET holds only rank0, BENCH only rank3" in str(e.value)
    for extra in ([], ["--fail-on", "unmatched"]):
        code, out, err = cli(capsys, "compare", str(t), str(b), "-o", str(tmp_path / "o"), "-q", *extra)
        assert code == 2, out
        assert "rank folders are paired by rank number" in err and "rank0" in err and "rank3" in err
    assert not list((tmp_path / "o").rglob("compare_result_*.csv"))


def test_a_step_whose_ranks_differ_is_unmatched_beside_steps_that_pair(tmp_path: Path, capsys) -> None:
    dump(tmp_path / "t" / "step0" / "rank0")
    dump(tmp_path / "b" / "step0" / "rank0")
    dump(tmp_path / "t" / "step1" / "rank0")
    dump(tmp_path / "b" / "step1" / "rank3", scale=3.0)  # would be an error row if paired with rank0
    pairing = pair_paths(tmp_path / "t", tmp_path / "b")
    assert [p.label for p in pairing.pairs] == ["step0/rank0"]
    assert sorted((u.side, u.what) for u in pairing.unpaired) == [("bench", "step1/rank3"), ("target", "step1/rank0")]
    args = ["compare", str(tmp_path / "t"), str(tmp_path / "b"), "-o", str(tmp_path / "o"), "--no-report", "-q"]
    code, out, err = cli(capsys, *args)
    assert code == 0, err
    assert "step1/rank3" in out.split("without a partner:")[1]
    code, _, err = cli(capsys, *args, "--fail-on", "unmatched")
    assert code == 1 and "step1/rank0" in err and "step1/rank3" in err


def test_two_rank_folders_passed_by_hand_are_the_pair_asked_for(tmp_path: Path) -> None:
    # Data-parallel replicas: comparing rank0 with rank3 is a choice the user can make.
    t = dump(tmp_path / "t" / "step0" / "rank0").parent
    b = dump(tmp_path / "b" / "step0" / "rank3").parent
    for args in ((t, b), (t / "dump.json", b / "dump.json")):
        (pair,) = pair_paths(*args).pairs
        assert (pair.target.parent.name, pair.bench.parent.name) == ("rank0", "rank3")


def test_same_ranks_still_pair(tmp_path: Path) -> None:
    for side in ("t", "b"):
        dump(tmp_path / side / "step0" / "rank2")
    (pair,) = pair_paths(tmp_path / "t", tmp_path / "b").pairs
    assert pair.process == "rank2" and not pair_paths(tmp_path / "t", tmp_path / "b").unpaired


# -- --pid-pairing order: by pid, not by time ---------------------------------------

def test_pid_pairing_order_is_by_pid_even_when_written_out_of_pid_order(tmp_path: Path) -> None:
    # Each side's higher pid was written first: time order and pid order disagree.
    stamps = {"t": {10: 2_000, 20: 1_000, 30: 3_000}, "b": {3: 3_000, 4: 1_000}}
    for side, pids in stamps.items():
        for pid, t in pids.items():
            p = dump(tmp_path / side / "step0" / f"pid{pid}")
            os.utime(p, (1_000_000_000 + t, 1_000_000_000 + t))
    pairing = pair_paths(tmp_path / "t", tmp_path / "b", "order")
    pairs = [(p.target.parent.name, p.bench.parent.name) for p in pairing.pairs]
    assert pairs == [("pid10", "pid3"), ("pid20", "pid4")]
    (u,) = pairing.unpaired
    assert u.side == "target" and u.path.name == "pid30"  # the highest pid, not the newest or the oldest

"""Compare against careless folder layouts and failing output (issue 28):
look-alike step/rank folders (D7), two runs into one dump_path (D10), the
modes of the output folders (D14), failed output writes (D15), long file
names (D16), NUL in names (D20), a closed stdout (D22), -o inside a dump
(D23), and --fail-on unmatched on a missing partner. No torch.

Attack list (each test names its item):
  D7   step01 + step1, rank01 + rank1, step\\u0661 (Arabic-Indic one), "step1\\n": never read as step/rank 1,
       never silently dropped: listed without a partner, naming the canonical folder they clash with
  D10  a step folder holding the pid folders of two runs: refused, listing them (issue 31 item 1); with
       --pid-pairing newest the newest is paired, the older listed as an older run;
       --fail-on unmatched fails
  D14  per-step output folders and created parents are 0750 less the umask
  D15  a CSV or HTML write that fails: no 0-byte file left, the pair's failure reported, the other pairs kept
       (serially and in worker processes)
  D16  a 255-byte output name writes (temporary names fit NAME_MAX)
  D20  a NUL in an entry name reaches neither the CSV nor the HTML as a raw NUL byte
  D22  `graphprobe compare ... | head -1`: no traceback, exit 141 (killed by SIGPIPE, as Unix tools are)
  D23  -o inside a step folder: that step folder still compares afterwards
  survivor: --fail-on unmatched fails on a rank or a step without a partner
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from compare_fixtures import cli, entry, read_csv, simple_model_dump, tensor, write_dump

import graphprobe.compare.runner as gpc
from graphprobe.compare.pairing import pair_paths
from graphprobe.output_files import make_dirs, temporary_name, write_text_atomic

SRC = Path(__file__).resolve().parents[1] / "src"


def umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old


def dump(path: Path, scale: float = 1.0) -> Path:
    return write_dump(path / "dump.json", simple_model_dump(scale, 0 if scale != 1.0 else None))


# -- D7: look-alike step and rank folders ----------------------------------------

@pytest.mark.parametrize("odd", ["step01", "step\u0661", "step1\n", "step\uff11"])
def test_lookalike_step_folders_are_reported_not_merged(tmp_path: Path, odd: str) -> None:
    # The canonical step1 diverges; the look-alike would pass. Before the fix the
    # two were both "step 1" and one was dropped without a word.
    dump(tmp_path / "t" / "step0" / "pid1")
    dump(tmp_path / "t" / "step1" / "pid1", scale=3.0)
    dump(tmp_path / "t" / odd / "pid1")
    for s in (0, 1):
        dump(tmp_path / "b" / f"step{s}" / "pid2")
    pairing = pair_paths(tmp_path / "t", tmp_path / "b")
    assert sorted((p.step, p.target.parent.parent.name) for p in pairing.pairs) == [(0, "step0"), (1, "step1")]
    (odd_entry,) = [u for u in pairing.unpaired if u.path.name == odd]
    assert odd_entry.side == "target"
    assert ascii(odd) in odd_entry.what and "step1 is here too" in odd_entry.what
    run = gpc.compare(tmp_path / "t", tmp_path / "b", tmp_path / "o", progress=False, html=False)
    assert [o.pair.step for o in run.outcomes] == [0, 1]
    assert run.total("error") > 0  # the canonical step1 (the diverging one) was compared


def test_lookalike_without_a_canonical_twin_is_still_reported(tmp_path: Path, capsys) -> None:
    dump(tmp_path / "t" / "step0" / "pid1")
    dump(tmp_path / "t" / "step07" / "pid1")
    dump(tmp_path / "b" / "step0" / "pid2")
    args = ["compare", str(tmp_path / "t"), str(tmp_path / "b"), "-o", str(tmp_path / "o"), "--no-report", "-q"]
    code, out, err = cli(capsys, *args)
    assert code == 0, err
    assert "'step07' (not a folder name the dumper writes: it would write step7;" in out
    code, _, err = cli(capsys, *args, "--fail-on", "unmatched")
    assert code == 1 and "step07" in err


@pytest.mark.parametrize("odd", ["rank01", "rank\u0661", "pid01"])
def test_lookalike_process_folders_are_reported_not_merged(tmp_path: Path, odd: str) -> None:
    canonical = "rank1" if odd.startswith("rank") else "pid1"
    for side in ("t", "b"):
        dump(tmp_path / side / "step0" / "rank0")
        dump(tmp_path / side / "step0" / canonical)
    dump(tmp_path / "t" / "step0" / odd, scale=3.0)
    pairing = pair_paths(tmp_path / "t" / "step0", tmp_path / "b" / "step0")
    assert {p.target.parent.name for p in pairing.pairs} == {"rank0", canonical}
    (u,) = [u for u in pairing.unpaired if u.path.name == odd]
    assert f"{canonical} is here too" in u.what


def test_only_lookalike_folders_is_an_error_naming_them(tmp_path: Path, capsys) -> None:
    dump(tmp_path / "t" / "step0" / "rank0")
    dump(tmp_path / "b" / "step0" / "rank\u0660")
    code, _, err = cli(capsys, "compare", str(tmp_path / "t" / "step0"), str(tmp_path / "b" / "step0"),
                       "-o", str(tmp_path / "o"))
    assert code == 2
    assert "not a graphprobe/msprobe dump" in err and "'rank\\u0660'" in err and "rank0" in err


# -- D10: two runs into one dump_path ----------------------------------------------

def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    """Target step0 holds an old run (pid900, passes) and a newer one (pid100,
    diverges): pids are not in run order. Bench: one run."""
    old = dump(tmp_path / "t" / "step0" / "pid900")
    new = dump(tmp_path / "t" / "step0" / "pid100", scale=3.0)
    os.utime(old, (1_000_000_000, 1_000_000_000))
    os.utime(new, (1_000_000_100, 1_000_000_100))
    dump(tmp_path / "b" / "step0" / "pid5")
    return tmp_path / "t", tmp_path / "b"


def test_two_runs_in_one_step_pair_the_newest_and_say_so(tmp_path: Path, capsys) -> None:
    t, b = two_runs(tmp_path)
    pairing = pair_paths(t, b, "newest")
    (pair,) = pairing.pairs
    assert pair.target.parent.name == "pid100"  # the newer run, though its pid is lower
    (u,) = pairing.unpaired
    assert u.side == "target" and u.path.name == "pid900"
    assert "an older run" in u.what and "pid100" in u.what and "--pid-pairing newest" in u.what
    args = ["compare", str(t), str(b), "-o", str(tmp_path / "o"), "--no-report", "-q", "--pid-pairing", "newest"]
    code, out, err = cli(capsys, *args)
    assert code == 0, err
    assert "step0/pid900 (an older run" in out.split("without a partner:")[1]
    assert "error" in out  # the newer run's divergence is what was compared
    code, _, err = cli(capsys, *args, "--fail-on", "unmatched")
    assert code == 1 and "pid900" in err


def test_equal_numbers_of_processes_pair_by_pid_when_asked(tmp_path: Path) -> None:
    for side, pids in (("t", (10, 20)), ("b", (3, 4))):
        for pid in pids:
            dump(tmp_path / side / "step0" / f"pid{pid}")
    pairing = pair_paths(tmp_path / "t", tmp_path / "b", "order")
    pairs = [(p.target.parent.name, p.bench.parent.name) for p in pairing.pairs]
    assert pairs == [("pid10", "pid3"), ("pid20", "pid4")]
    assert not pairing.unpaired


# -- survivor: --fail-on unmatched on a missing partner ----------------------------

@pytest.mark.parametrize("missing", ["rank", "step"])
def test_fail_on_unmatched_fails_on_a_missing_partner(tmp_path: Path, capsys, missing: str) -> None:
    for side, ranks in (("t", [0, 1]), ("b", [0] if missing == "rank" else [0, 1])):
        for r in ranks:
            dump(tmp_path / side / "step0" / f"rank{r}")
    if missing == "step":
        dump(tmp_path / "t" / "step1" / "rank0")
    args = ["compare", str(tmp_path / "t"), str(tmp_path / "b"), "-o", str(tmp_path / "o"), "--no-report", "-q"]
    code, _, err = cli(capsys, *args, "--fail-on", "unmatched")
    assert code == 1, err
    assert "without a partner" in err and ("step0/rank1" if missing == "rank" else "step1") in err
    # A step that recorded nothing writes no folder: a missing partner is a
    # side that recorded nothing there, which --fail-on error does not pass.
    assert cli(capsys, *args, "--fail-on", "error")[0] == 1


# -- D14: modes of the output folders ---------------------------------------------

def test_output_folders_are_0750(tmp_path: Path) -> None:
    for side in ("t", "b"):
        for s in (0, 1):
            dump(tmp_path / side / f"step{s}" / "rank0")
    out = tmp_path / "new" / "deeper" / "out"
    old = os.umask(0o022)
    try:
        gpc.compare(tmp_path / "t", tmp_path / "b", out, progress=False)
    finally:
        os.umask(old)
    for folder in (tmp_path / "new", tmp_path / "new" / "deeper", out, out / "step0", out / "step1"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o750, folder


def test_make_dirs_gives_every_created_parent_0750(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        make_dirs(tmp_path / "a" / "b" / "c")
    finally:
        os.umask(old)
    for folder in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "c"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o750, folder


# -- D15: failed output writes ------------------------------------------------------

def _roots(tmp_path: Path, ranks: int = 3) -> tuple[Path, Path]:
    for side in ("t", "b"):
        for r in range(ranks):
            dump(tmp_path / side / "step0" / f"rank{r}")
    return tmp_path / "t", tmp_path / "b"


_real_compare_pair = gpc.compare_pair


def _csv_fails_for_rank1(pair, csv_path, report_path, **kw):  # noqa: ANN001, ANN201  (module level: workers pickle it)
    if pair.rank == "1":  # a name the file system refuses: the C++ writer's rename fails
        csv_path = csv_path.parent / ("x" * 300 + ".csv")
    return _real_compare_pair(pair, csv_path, report_path, **kw)


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("what", ["html", "csv"])
def test_a_failed_output_write_is_reported_per_pair_and_leaves_no_empty_file(tmp_path: Path, monkeypatch,
                                                                              jobs: int, what: str) -> None:
    t, b = _roots(tmp_path)
    out = tmp_path / "o"
    if what == "html":
        real = gpc.write_text_atomic

        def failing(path, text):  # noqa: ANN001
            if "compare_report_1_" in str(path):
                raise OSError(28, "No space left on device", str(path))
            real(path, text)

        monkeypatch.setattr(gpc, "write_text_atomic", failing)
    else:
        monkeypatch.setattr(gpc, "compare_pair", _csv_fails_for_rank1)
    run = gpc.compare(t, b, out, progress=False, jobs=jobs)
    by_rank = {o.pair.rank: o for o in run.outcomes}
    assert by_rank["1"].error.startswith("step0/rank1: cannot write")
    assert ("No space left" if what == "html" else "File name too long") in by_rank["1"].error
    for r in ("0", "2"):
        assert by_rank[r].error is None and by_rank[r].csv_path.stat().st_size > 0
        assert by_rank[r].report_path.stat().st_size > 0
    empty = [p.name for p in out.rglob("*") if p.is_file() and p.stat().st_size == 0]
    assert empty == []
    assert not list(out.rglob("compare_report_1_*"))


def test_a_failed_write_in_the_cli_exits_2_naming_the_pair(tmp_path: Path, capsys, monkeypatch) -> None:
    t, b = _roots(tmp_path, ranks=2)
    real = gpc.write_text_atomic

    def failing(path, text):  # noqa: ANN001
        if "compare_report_0_" in str(path):
            raise OSError(28, "No space left on device", str(path))
        real(path, text)

    monkeypatch.setattr(gpc, "write_text_atomic", failing)
    code, out, err = cli(capsys, "compare", str(t), str(b), "-o", str(tmp_path / "o"), "-j", "1", "-q")
    assert code == 2
    assert "step0/rank0" in err and "No space left on device" in err
    assert "step0/rank1" in out  # the other pair's summary line is kept


# -- D16: long file names -------------------------------------------------------

@pytest.mark.parametrize("length", [250, 255])
def test_write_text_atomic_takes_any_legal_name(tmp_path: Path, length: int) -> None:
    name = "n" * (length - 5) + ".html"
    write_text_atomic(tmp_path / name, "x")
    assert (tmp_path / name).read_text() == "x"
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_write_text_atomic_cuts_a_multibyte_name_on_a_character(tmp_path: Path) -> None:
    name = "é" * 125 + ".txt"  # 254 bytes
    write_text_atomic(tmp_path / name, "y")
    assert (tmp_path / name).read_text() == "y" and len(list(tmp_path.iterdir())) == 1


@pytest.mark.parametrize("char", ["a", "\u00e9", "\u20ac", "\U0001f600"])
@pytest.mark.parametrize("length", [1, 230, 240, 250, 255])
def test_temporary_names_fit_name_max_and_cut_on_a_character(tmp_path: Path, char: str, length: int) -> None:
    width = len(char.encode())
    name = char * max(1, length // width)
    tmp = temporary_name(tmp_path / name).name
    raw = tmp.encode()  # raises if a character was cut in two (a lone surrogate)
    assert len(raw) <= 255
    stem = tmp[: tmp.index(".tmp.")]
    assert name.startswith(stem) and (stem == name or len(name.encode()) + len(raw) - len(stem.encode()) > 255)


def test_csv_writer_takes_a_255_byte_name(tmp_path: Path) -> None:
    from graphprobe import _compare

    t = dump(tmp_path / "t")
    name = "c" * 251 + ".csv"
    _compare.compare_files(str(t), str(t)).write_csv(str(tmp_path / name))
    assert len(read_csv(tmp_path / name)) == 6


# -- D20: NUL in entry names --------------------------------------------------------

def test_nul_in_an_entry_name_is_escaped_in_csv_and_html(tmp_path: Path) -> None:
    name = "Module.a\u0000b.Linear.forward.0"
    data = {name: entry([tensor(1.0)], [tensor(2.0)])}
    t = write_dump(tmp_path / "t.json", data)
    b = write_dump(tmp_path / "b.json", data)
    run = gpc.compare(t, b, tmp_path / "o", progress=False)
    (o,) = run.outcomes
    for path in (o.csv_path, o.report_path):
        raw = path.read_bytes()
        assert b"\x00" not in raw, path.name
        assert b"Module.a\\u0000b.Linear.forward.0" in raw, path.name
    assert read_csv(o.csv_path)[0]["NPU Name"] == "Module.a\\u0000b.Linear.forward.0.input.0"


# -- D22: a closed stdout -----------------------------------------------------------

def test_compare_into_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    # 3000 entries and --top 3000: a summary far larger than a pipe's buffer,
    # so the writes after the reader has gone fail for sure.
    data = {f"Module.layers.{i}.Linear.forward.0": entry([tensor(1.0)], [tensor(1.0 + i)]) for i in range(3000)}
    t = write_dump(tmp_path / "t.json", data)
    b = write_dump(tmp_path / "b.json", {k: entry([tensor(1.0)], [tensor(1.0)]) for k in data})
    script = textwrap.dedent(f"""
        import subprocess, sys
        p = subprocess.Popen([sys.executable, "-m", "graphprobe", "compare", {str(t)!r}, {str(b)!r},
                              "-o", {str(tmp_path / "o")!r}, "--no-report", "-q", "--top", "3000"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdout.readline()
        p.stdout.close()  # what `| head -1` does
        err = p.stderr.read().decode()
        print(p.wait())
        print(err)
    """)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    code, _, err = done.stdout.partition("\n")
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err, err
    assert int(code) == 141, (code, err)  # 128 + SIGPIPE: what a shell reports for a tool killed by it


# -- D23: -o inside a step folder ---------------------------------------------------

def test_output_inside_a_step_folder_leaves_it_comparable(tmp_path: Path, capsys) -> None:
    for side in ("t", "b"):
        for s in (0, 1):
            dump(tmp_path / side / f"step{s}" / "pid7")
    step0 = tmp_path / "t" / "step0"
    # Two roots compared into a folder inside a step of the target: per-step
    # output folders step0/ and step1/ appear inside t/step0.
    code, _, err = cli(capsys, "compare", str(tmp_path / "t"), str(tmp_path / "b"), "-o", str(step0), "-q")
    assert code == 0, err
    assert (step0 / "step0").is_dir() and (step0 / "step1").is_dir()
    # Before the fix: t/step0 now looked like a dump root whose steps hold nothing.
    code, out, err = cli(capsys, "compare", str(step0), str(tmp_path / "b" / "step0"), "-o", str(tmp_path / "o2"), "-q")
    assert code == 0, err
    assert len(list((tmp_path / "o2").glob("compare_result_pid7_*.csv"))) == 1
    # And the roots still compare step by step.
    code, _, err = cli(capsys, "compare", str(tmp_path / "t"), str(tmp_path / "b"), "-o", str(tmp_path / "o3"),
                       "-q", "--fail-on", "unmatched")
    assert code == 0, err

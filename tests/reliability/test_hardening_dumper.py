"""The dumper and acl_save against careless users and faulty machines (issue
17): names and paths C++ cannot hold, os.chdir(), tensor filing failures,
rank ranges, config gaps, symlinked acl_save folders, step()'s argument."""

from __future__ import annotations

import json
import os
import unicodedata
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import graphprobe
from graphprobe.config import MAX_RANK, ConfigError, ConfigValueError, parse_config, parse_ranks
from graphprobe.dumper import DumpWriteError, current_rank

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
UNSAFE = ("Cc", "Cf", "Cs", "Zl", "Zp")
unsafe_char = st.characters(whitelist_categories=UNSAFE)


# -- item 1: NUL and control characters never reach C++ ----------------------

@SETTINGS
@given(bad=unsafe_char, at=st.integers(0, 6))
def test_acl_save_refuses_unsafe_characters_in_the_path(tmp_path: Path, bad: str, at: int) -> None:
    name = "act.pt"
    path = str(tmp_path) + "/" + name[:at] + bad + name[at:]
    with pytest.raises(ValueError, match=r"acl_save: path .* \(U\+[0-9A-F]{4,6} at index \d+\)") as info:
        graphprobe.acl_save(torch.ones(2), path)
    assert f"U+{ord(bad):04X}" in str(info.value)
    graphprobe.flush()
    assert list(tmp_path.iterdir()) == []  # nothing written, under no name


def test_module_name_with_a_control_character_is_refused_at_start(write_config, tmp_path: Path) -> None:
    model = torch.nn.Sequential()
    model.add_module("a\0b", torch.nn.ReLU())
    model.add_module("a", torch.nn.ReLU())
    dumper = graphprobe.AclGraphDumper(write_config(task="tensor"))
    with pytest.raises(ValueError, match=r"module name 'a\\x00b' holds a control character \(U\+0000 at index 1\)"):
        dumper.start(model)
    assert not (tmp_path / "dump").exists() or not any((tmp_path / "dump").iterdir())


# -- item 2: a relative dump_path survives os.chdir() -------------------------

@pytest.mark.parametrize("task", ["statistics", "tensor"])
def test_relative_dump_path_is_fixed_at_start(tmp_path: Path, monkeypatch, task: str) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (first / "config.json").write_text(json.dumps({"dump_path": "rel_dump", "task": task}))
    monkeypatch.chdir(first)
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    dumper = graphprobe.AclGraphDumper("config.json")
    dumper.start(model)
    model(torch.ones(1, 2))
    dumper.step()
    os.chdir(second)
    for _ in range(2):
        model(torch.ones(1, 2))
        dumper.step()
    dumper.stop()  # raises if any step was written elsewhere or failed
    steps = sorted(p.name for p in (first / "rel_dump").iterdir() if p.name.startswith("step"))
    assert steps == ["step0", "step1", "step2"]
    assert list(second.iterdir()) == []
    if task == "tensor":
        (folder,) = (first / "rel_dump" / "step2").glob("*/dump_tensor_data")
        assert sorted(p.name for p in folder.iterdir()) == [
            f"Module.0.Linear.forward.0.{part}.pt" for part in ("input.0", "output.0", "parameters.bias",
                                                                 "parameters.weight")]
        assert torch.equal(torch.load(folder / "Module.0.Linear.forward.0.input.0.pt"), torch.ones(1, 2))
        assert not list((first / "rel_dump").glob(".staging*"))  # the staging folder was found and removed


# -- item 3: a tensor that cannot be filed is an error, with errno -------------

def test_tensor_filing_failure_raises_with_the_file_and_errno(write_config, tmp_path: Path) -> None:
    long = "m" * 300  # a record file name over 255 bytes: rename() fails with ENAMETOOLONG
    model = torch.nn.Sequential()
    model.add_module(long, torch.nn.ReLU())
    dumper = graphprobe.AclGraphDumper(write_config(task="tensor"))
    dumper.start(model)
    try:
        model(torch.ones(2))
        dumper.step()  # the files are moved by the writer thread: the failure is not known yet
        with pytest.raises(DumpWriteError, match=r"(?s)2 write\(s\) failed.*cannot move the staged tensor "
                                                 r".*slot\d\.pt' there: File name too long \(errno 36\)"):
            dumper.flush()
        assert dumper.lost_records == 2  # the input and the output of the ReLU
        (folder,) = (tmp_path / "dump" / "step0").glob("*")
        (record,) = json.loads((folder / "dump.json").read_text())["data"].values()
        assert "data_name" not in json.dumps(record)  # the statistics are kept, without a file name
        model(torch.ones(2))
        dumper.step(dump=False)  # still usable; nothing else is reported
        dumper.flush()
    finally:
        dumper.stop()


# -- item 6: rank ranges stay ranges -------------------------------------------

def test_huge_rank_ranges_are_kept_as_ranges_and_bounded() -> None:
    cfg = parse_config({"dump_path": "d", "rank": ["0-99999999", "5", 2**31 - 1]})
    assert cfg.ranks == (range(0, 100_000_000), range(2**31 - 1, 2**31))
    assert cfg.selects_rank(99_999_999) and cfg.selects_rank(2**31 - 1) and not cfg.selects_rank(100_000_000)
    for bad in (["0-999999999999"], [2**40], ["9" * 5000]):
        with pytest.raises(ConfigValueError, match=r"'rank\[0\]'.*at most 2147483647"):
            parse_config({"dump_path": "d", "rank": bad})


@SETTINGS
@given(st.lists(st.one_of(st.integers(0, 40), st.tuples(st.integers(0, 40), st.integers(0, 40))), max_size=6))
def test_rank_ranges_select_exactly_the_listed_ranks(items) -> None:
    field, expected = [], set()
    for it in items:
        if isinstance(it, int):
            field.append(it)
            expected.add(it)
        else:
            lo, hi = sorted(it)
            field.append(f"{lo}-{hi}")
            expected.update(range(lo, hi + 1))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ranges = parse_ranks(field)
    assert {r for rg in ranges for r in rg} == expected
    assert all(a.stop < b.start for a, b in zip(ranges, ranges[1:]))  # sorted, disjoint, merged


# -- item 11: config gaps ------------------------------------------------------

@pytest.mark.parametrize("value", ["²", "١", "3-²", "0x3"])
def test_non_ascii_digit_ranks_are_clear_errors(value: str) -> None:
    with pytest.raises(ConfigValueError, match=r"config field 'rank\[0\]'"):
        parse_config({"dump_path": "d", "rank": [value]})


def test_rank_environment_variable_is_checked(monkeypatch) -> None:
    monkeypatch.setenv("RANK", "²")
    with pytest.raises(ConfigValueError, match=r"environment variable RANK: got '²'"):
        current_rank()
    monkeypatch.setenv("RANK", "3")
    assert current_rank() == 3


@SETTINGS
@given(bad=unsafe_char)
def test_dump_path_refuses_unsafe_characters(bad: str) -> None:
    with pytest.raises(ConfigValueError, match=rf"config field 'dump_path'.*U\+{ord(bad):04X}"):
        parse_config({"dump_path": f"out{bad}dir"})


def test_dump_path_that_is_a_file_or_a_dangling_link(write_config, tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "file").write_text("x")
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    model = torch.nn.Sequential(torch.nn.ReLU())
    cases = [("file", NotADirectoryError, "exists and is not a folder"),
             ("dangling", FileNotFoundError, "symbolic link to .*nowhere.* which does not exist"),
             ("file/sub", NotADirectoryError, "a parent of it is a file")]
    for path, error, message in cases:
        dumper = graphprobe.AclGraphDumper(write_config(dump_path=str(tmp_path / path)))
        with pytest.raises(error, match=rf"config field 'dump_path': .*{message}"):
            dumper.start(model)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert parse_config({"dump_path": "~/x"}).dump_path == str(tmp_path / "home" / "x")
    with pytest.raises(ConfigValueError, match="'~'"):
        parse_config({"dump_path": "~no_such_user_hopefully/x"})


# -- item 13: acl_save numbering follows the real folder ---------------------

def test_acl_save_through_a_symlinked_folder_continues_the_numbering(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "link")
    values = [torch.full((2,), float(i)) for i in range(4)]
    for i, v in enumerate(values):
        graphprobe.acl_save(v, str((real if i % 2 else tmp_path / "link") / "act.pt"))
    graphprobe.flush()
    for i, v in enumerate(values):
        assert torch.equal(torch.load(real / f"act_{i}.pt"), v), i
    assert sorted(p.name for p in real.iterdir()) == [f"act_{i}.pt" for i in range(4)]


# -- also weak: step(dump=...) is type-checked ---------------------------------

def test_step_dump_must_be_a_bool(write_config) -> None:
    model = torch.nn.Sequential(torch.nn.ReLU())
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    try:
        model(torch.ones(1))
        for value in ("no", 0, None):
            with pytest.raises(TypeError, match=rf"step: dump must be a bool, got {value!r}"):
                dumper.step(dump=value)
        dumper.step(dump=False)
        assert dumper.step_number == 0
    finally:
        dumper.stop()


def test_config_errors_are_config_errors() -> None:
    for doc in ({"dump_path": "a\u0085b"}, {"dump_path": "a\u202eb"}, {"dump_path": "a\ud800b"}):
        with pytest.raises(ConfigError):
            parse_config(doc)
    assert unicodedata.category("\u0085") == "Cc" and unicodedata.category("\u202e") == "Cf"


# -- item 10 (reader side): what the dumper writes, compare reads -------------

def test_compare_reads_a_dump_of_a_deeply_nested_output(write_config, read_step, tmp_path: Path, capsys) -> None:
    from graphprobe.cli import main

    class Deep(torch.nn.Module):
        def forward(self, x: torch.Tensor):
            out: object = x * 2
            for _ in range(300):
                out = [out]
            return out

    model = torch.nn.Sequential(Deep())
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    try:
        model(torch.ones(2))
        dumper.step()
    finally:
        dumper.stop()
    read_step(str(tmp_path / "dump"), 0)
    root = str(tmp_path / "dump")
    # A copy as the bench: a dump compared with itself fails --fail-on (issue 40 item 8).
    import shutil

    bench = shutil.copytree(root, str(tmp_path / "bench"))
    code = main(["compare", root, bench, "-o", str(tmp_path / "o"), "--no-report", "-q", "--fail-on", "warning"])
    _, err = capsys.readouterr()
    assert code == 0, err


# -- staging folders on a dump_path shared by hosts and pid namespaces --------

_HOLD_STAGING = r"""
import sys
from graphprobe.dump_folder import make_staging
print(make_staging(sys.argv[1]), flush=True)
sys.stdin.read()  # holds the folder's lock until its stdin closes (or it is killed)
"""


def _staging_child(dump: Path):
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", _HOLD_STAGING, str(dump)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    path = proc.stdout.readline().strip()
    assert path, proc.stderr.read()
    return proc, Path(path)


def test_staging_cleanup_keeps_other_hosts_and_live_locks_and_removes_dead_ones(tmp_path: Path) -> None:
    from graphprobe.dump_folder import STAGING_LOCK, host_tag, make_staging, release_staging, remove_stale_staging

    dump = tmp_path / "dump"
    dump.mkdir()
    # Another host's folder: no pid or lock here can tell whether it is live, so
    # it is kept even when its pid does not exist here and its lock is free.
    other = dump / f".staging_pid999999_0123abcd_{host_tag()}x"
    other.mkdir()
    (other / STAGING_LOCK).write_text("")
    # This host's folder held by a live process (in another pid namespace its
    # pid could be anything, 1 here): kept while the lock is held.
    live_proc, live = _staging_child(dump)
    # This host's folder of a killed process whose pid exists again (pid 1 is
    # always alive): the free lock, not the pid, says it is stale.
    dead_proc, dead = _staging_child(dump)
    dead_proc.kill()
    dead_proc.wait()
    assert dead.is_dir()  # what a kill leaves
    reused = dump / f".staging_pid1_89abcdef_{host_tag()}"
    reused.mkdir()
    (reused / STAGING_LOCK).write_text("")
    own = make_staging(str(dump))  # this process's own folder: its lock must not be touched
    try:
        removed = remove_stale_staging(str(dump))
        assert sorted(removed) == sorted([str(dead), str(reused)])
        assert other.is_dir() and live.is_dir() and os.path.isdir(own) and not dead.exists()
        assert remove_stale_staging(str(dump)) == []  # the own folder's lock is still held
        live_proc.stdin.close()  # the live process ends: its folder is stale now
        live_proc.wait(timeout=60)
        assert remove_stale_staging(str(dump)) == [str(live)]
        assert other.is_dir() and os.path.isdir(own)
    finally:
        live_proc.kill()
        release_staging(own)

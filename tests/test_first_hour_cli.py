"""Issue 40 items 8 and 9: a dump compared with itself is said to be one,
and usage errors lead with the error line."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from compare_fixtures import cli, simple_model_dump, write_dump

WARNING = "graphprobe compare: warning: TARGET and BENCH are the same"


def _dump(tmp_path: Path) -> Path:
    return write_dump(tmp_path / "run" / "dump.json", simple_model_dump())


@pytest.mark.parametrize("how", ["same folder", "same file", "symlinked folder", "file and its folder"])
def test_a_dump_compared_with_itself_is_said_to_be_one(tmp_path: Path, capsys: Any, how: str) -> None:
    dump = _dump(tmp_path)
    target, bench = {
        "same folder": (dump.parent, dump.parent),
        "same file": (dump, dump),
        "symlinked folder": (dump.parent, tmp_path / "link"),
        "file and its folder": (dump, dump.parent),
    }[how]
    if how == "symlinked folder":
        os.symlink(dump.parent, tmp_path / "link")
    out = str(tmp_path / "out")
    code, _, err = cli(capsys, "compare", str(target), str(bench), "-o", out, "-q", "--no-report")
    assert code == 0, err
    assert WARNING in err and "the dump is compared with itself" in err
    # --fail-on (the CI use): exit 1, with the reason.
    code, _, err = cli(capsys, "compare", str(target), str(bench), "-o", out, "-q", "--no-report", "--fail-on", "error")
    assert code == 1
    assert "--fail-on error: TARGET and BENCH are the same" in err


def test_two_copies_of_one_dump_are_not_the_same_dump(tmp_path: Path, capsys: Any) -> None:
    dump = _dump(tmp_path)
    copy = write_dump(tmp_path / "copy" / "dump.json", simple_model_dump())
    code, _, err = cli(capsys, "compare", str(dump.parent), str(copy.parent), "-o", str(tmp_path / "out"), "-q",
                       "--no-report", "--fail-on", "error")
    assert code == 0, err
    assert WARNING not in err


@pytest.mark.parametrize("args, error", [
    (["compare", "only-one"], "graphprobe compare: error: BENCH is missing"),
    (["compare", "a", "b", "--top", "x"], "graphprobe compare: error: argument --top: expected an integer, got 'x'"),
    (["compare", "a", "b", "--fail-on", "info"], "graphprobe compare: error: argument --fail-on: invalid choice"),
    (["nosuchcommand"], "graphprobe: error: argument COMMAND: invalid choice: 'nosuchcommand'"),
    (["demo", "--no-such-flag"], "graphprobe: error: unrecognized arguments: --no-such-flag"),
])
def test_usage_errors_lead_with_the_error_then_one_usage_line(capsys: Any, args: list[str], error: str) -> None:
    code, _, err = cli(capsys, *args)
    assert code == 2
    lines = err.splitlines()
    assert lines[0].startswith(error)
    assert lines[1].startswith("usage: graphprobe") and len(lines) <= 3
    assert lines[-1].startswith("all options: graphprobe") and lines[-1].endswith("--help")

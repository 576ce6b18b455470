"""Issue 40 items 5 and 6: the summary's counts cannot be misread as adding
up to more rows than there are, and unmatched rows named alike on both sides
(None eagerly, a tensor compiled) are said to be what they are. Hand-written
dumps: 2 entries, 7 rows (5 paired, one name on each side unpaired)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from compare_fixtures import cli, entry, read_csv, tensor, write_dump

MASK = "Module.model.LlamaModel.forward.0.input.attention_mask"


def _dump(mask: Any) -> dict[str, Any]:
    kwargs = {"x": tensor(1.0)} if mask == "absent" else {"attention_mask": mask, "x": tensor(1.0)}
    return {"Module.model.LlamaModel.forward.0": entry([tensor(2.0)], [tensor(3.0)], kwargs=kwargs),
            "Module.lm.Linear.forward.0": entry([tensor(3.0)], [tensor(4.0)])}


def _compare(tmp_path: Path, capsys: Any, target_mask: Any, bench_mask: Any, *flags: str) -> tuple[list[str], str]:
    write_dump(tmp_path / "t" / "dump.json", _dump(target_mask))
    write_dump(tmp_path / "b" / "dump.json", _dump(bench_mask))
    code, out, err = cli(capsys, "compare", str(tmp_path / "t"), str(tmp_path / "b"), "-o", str(tmp_path / "out"),
                         "-q", "--no-report", *flags)
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("rank0"))
    return row.split()[1:5], out


def test_unmatched_rows_also_counted_as_pass_are_set_apart_and_explained(tmp_path: Path, capsys: Any) -> None:
    cells, out = _compare(tmp_path, capsys, tensor(5.0, dtype="torch.int64"), None)
    (csv_path,) = (tmp_path / "out").glob("compare_result_*.csv")
    rows = read_csv(csv_path)
    assert len(rows) == 7 and sum(r["Match"] != "matched" for r in rows) == 2
    # msprobe's verdicts: every row has a Result (the unmatched ones pass), so
    # pass + warning + error is every row, and unmatched is shown apart.
    assert cells == ["7", "0", "0", "(2)"]
    assert "(N) under unmatched: rows without a partner, already counted under their Result" in out
    assert "pass + warning + error = all rows" in out


def test_with_graphprobe_verdicts_the_four_counts_add_up_to_the_rows(tmp_path: Path, capsys: Any) -> None:
    cells, out = _compare(tmp_path, capsys, tensor(5.0, dtype="torch.int64"), None, "--graphprobe-verdicts")
    assert cells == ["5", "0", "0", "2"]
    assert sum(int(c) for c in cells) == 7
    assert "(N) under unmatched" not in out


@pytest.mark.parametrize("target_mask, bench_mask, words, types", [
    (tensor(5.0, dtype="torch.int64"), None, "None on one side, a tensor on the other", "target torch.int64, bench None"),
    (None, tensor(5.0, dtype="torch.bool"), "None on one side, a tensor on the other", "target None, bench torch.bool"),
    ({"type": "int", "value": 3}, tensor(5.0), "a non-tensor value on one side, a tensor on the other",
     "target int, bench torch.float32"),
])
def test_same_name_unmatched_rows_are_said_to_be_what_they_are(tmp_path: Path, capsys: Any, target_mask: Any,
                                                               bench_mask: Any, words: str, types: str) -> None:
    _cells, out = _compare(tmp_path, capsys, target_mask, bench_mask)
    line = next(line for line in out.splitlines() if line.startswith("unmatched:"))
    assert line.startswith(f"unmatched: 2 rows are 1 name on both sides, {words} (e.g. {MASK}: {types})")
    assert line.endswith("they are not compared")


def test_unmatched_rows_on_one_side_only_get_no_such_line(tmp_path: Path, capsys: Any) -> None:
    cells, out = _compare(tmp_path, capsys, tensor(5.0, dtype="torch.int64"), "absent")
    assert cells == ["6", "0", "0", "(1)"]
    assert not re.search(r"^unmatched:", out, re.M)

"""The --xlsx workbook against what a workbook can hold (issue 36, items 8
and 16): characters XML cannot hold, and cells longer than Excel's 32,767
characters. The expected cells are the CSV's, decoded with openpyxl's own
reading of the format's ``_xHHHH_`` escape (never graphprobe's)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from compare_fixtures import cli, entry, tensor, write_dump

openpyxl = pytest.importorskip("openpyxl")
from openpyxl.utils.escape import unescape  # noqa: E402  (the format's escape, read as Excel reads it)

from graphprobe.compare.workbook import write_workbook  # noqa: E402

MAX_CELL_CHARS = 32_767  # Excel's limit


def _sheet_cells(book_path: Path) -> list[list[object]]:
    sheet = openpyxl.load_workbook(book_path)["result"]
    return [[c.value for c in row] for row in sheet.iter_rows()]


def test_control_characters_in_names_are_escaped_not_a_crash(tmp_path: Path, capsys) -> None:
    # A form feed, ESC with a colour sequence, a NUL-free C0 range sample, and
    # text that already looks like the escape (it must stay as it is).
    name = "Functional.a\x0cb\x1b[31mc\x01d_x0041_e.0.forward"
    for side in ("t", "b"):
        write_dump(tmp_path / f"{side}.json", {name: entry([tensor(1.0)], [tensor(2.0)])})
    code, out, err = cli(capsys, "compare", str(tmp_path / "t.json"), str(tmp_path / "b.json"),
                         "-o", str(tmp_path / "o"), "--xlsx", "-q")
    assert code == 0, err
    assert "Traceback" not in err
    assert "\x1b" not in out + err and "\x0c" not in out + err  # escaped on the terminal
    assert "\\x1b[31m" in out
    (csv_path,) = (tmp_path / "o").glob("compare_result_*.csv")
    with open(csv_path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert rows[1][0] == name + ".input.0"
    cells = _sheet_cells(csv_path.with_suffix(".xlsx"))
    assert len(cells) == len(rows)
    for want, got in zip(rows, cells):
        assert unescape(got[0]) == want[0]


def test_a_cell_over_the_excel_limit_is_cut_visibly_and_reported(tmp_path: Path) -> None:
    long = "".join(f"{i:06d}," for i in range(6000))  # 42,000 characters
    csv_path = tmp_path / "compare_result_0_1.csv"
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([["NPU Name", "Err_message"], ["a", long], ["b", "short"]])
    notes: list[str] = []
    cells = _sheet_cells(write_workbook(csv_path, notes))
    cut = cells[1][1]
    assert isinstance(cut, str) and len(cut) <= MAX_CELL_CHARS
    assert cut.endswith(f"[... cut by graphprobe: the CSV's cell holds all {len(long)} characters]")
    head = cut[: cut.index(" [... cut by graphprobe")]
    assert long.startswith(head) and len(head) > 32_000
    assert cells[2] == ["b", "short"]
    assert len(notes) == 1 and "1 cell(s)" in notes[0] and "row 2, column Err_message" in notes[0]


def test_cut_cells_are_a_warning_of_the_cli(tmp_path: Path, capsys) -> None:
    name = "Functional." + "x" * 33_000 + ".0.forward"  # the name alone is past the limit
    for side in ("t", "b"):
        write_dump(tmp_path / f"{side}.json", {name: entry([tensor(1.0)], [tensor(2.0)])})
    code, _, err = cli(capsys, "compare", str(tmp_path / "t.json"), str(tmp_path / "b.json"),
                       "-o", str(tmp_path / "o"), "--xlsx", "-q")
    assert code == 0, err
    assert "graphprobe compare: warning: " in err and "longer than Excel's 32767 characters were cut" in err
    (book,) = (tmp_path / "o").glob("compare_result_*.xlsx")
    assert all(len(c) <= MAX_CELL_CHARS for row in _sheet_cells(book) for c in row if isinstance(c, str))


def test_a_cut_keeps_whole_escapes_and_counts_what_excel_counts(tmp_path: Path) -> None:
    # 6,000 form feeds are 42,000 characters once escaped (_x000C_); 20,000
    # emoji are 40,000 UTF-16 units, Excel's measure, in 20,000 code points.
    cells = ["\x0c" * 6000, "\U0001F600" * 20000, "_x0041_" * 5000]
    csv_path = tmp_path / "r.csv"
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([["a", "b", "c"], cells])
    notes: list[str] = []
    got = _sheet_cells(write_workbook(csv_path, notes))[1]
    assert len(notes) == 1 and "3 cell(s)" in notes[0]
    for want, cell in zip(cells, got):
        head, marker = cell.split(" [... cut by graphprobe", 1)
        assert marker == f": the CSV's cell holds all {len(want)} characters]"
        assert len(cell.encode("utf-16-le")) // 2 <= MAX_CELL_CHARS
        assert want.startswith(unescape(head)) and len(unescape(head)) > 4000

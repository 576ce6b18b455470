"""msprobe users' habits (issue 31 item 5): msprobe's compare flags where they
mean the same, a clear refusal with the reason where they do not, and the
.xlsx workbook (openpyxl) with the CSV's columns and cells."""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

import pytest
from compare_fixtures import cli, entry, simple_model_dump, tensor, write_dump

from graphprobe.compare.msprobe_flags import UNSUPPORTED
from graphprobe.compare.workbook import MAX_SHEET_ROWS, write_workbook

ROOT = Path(__file__).resolve().parent.parent
openpyxl = pytest.importorskip("openpyxl")


def _pair(tmp_path: Path) -> tuple[Path, Path]:
    t = write_dump(tmp_path / "t" / "step0" / "rank0" / "dump.json", simple_model_dump(3.0, 1))
    b = write_dump(tmp_path / "b" / "step0" / "rank0" / "dump.json", simple_model_dump())
    return t.parent.parent.parent, b.parent.parent.parent


def _csv_cells(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def _same_cell(text: str, value: object) -> bool:
    """A workbook cell holds the CSV's text, or the number that text reads as."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return math.isfinite(float(text)) and float(text) == value
    return value == text or (value is None and text == "")


def test_msprobe_flags_give_the_same_result_as_ours(tmp_path: Path, capsys) -> None:
    t, b = _pair(tmp_path)
    code, ours, err = cli(capsys, "compare", str(t), str(b), "-o", str(tmp_path / "ours"), "--fuzzy", "-q")
    assert code == 0, err
    code, theirs, err = cli(capsys, "compare", "-tp", str(t), "-gp", str(b), "-o", str(tmp_path / "theirs"),
                            "-fm", "-m", "auto", "-q")
    assert code == 0, err
    code, long_form, err = cli(capsys, "compare", "--target_path", str(t), "--golden_path", str(b),
                               "--output_path", str(tmp_path / "long"), "--fuzzy_match", "-q")
    assert code == 0, err
    strip = lambda text, o: text.replace(str(tmp_path / o), "OUT")  # noqa: E731
    table = lambda text: [line for line in text.splitlines() if line.startswith("step0/")]  # noqa: E731
    assert table(ours) == table(theirs) == table(long_form) and table(ours)
    (a,) = (tmp_path / "ours" / "step0").glob("*.csv")
    (c,) = (tmp_path / "theirs" / "step0").glob("*.csv")
    assert _csv_cells(a) == _csv_cells(c)
    assert strip(ours, "ours").count("OUT") == strip(theirs, "theirs").count("OUT")


@pytest.mark.parametrize("flags", sorted(UNSUPPORTED))
def test_unsupported_msprobe_flags_are_refused_with_the_reason(tmp_path: Path, capsys, flags) -> None:
    t, b = _pair(tmp_path)
    for flag in flags:
        code, _, err = cli(capsys, "compare", "-tp", str(t), "-gp", str(b), flag, "x.json")
        assert code == 2
        assert f"{flag} (an msprobe compare flag) is not supported: it is {UNSUPPORTED[flags]}" in err
        assert "unrecognized arguments" not in err


def test_mode_other_than_auto_and_paths_given_twice_are_refused(tmp_path: Path, capsys) -> None:
    t, b = _pair(tmp_path)
    code, _, err = cli(capsys, "compare", "-tp", str(t), "-gp", str(b), "-m", "torchair")
    assert code == 2 and "only msprobe's mode 'auto' is supported" in err
    code, _, err = cli(capsys, "compare", str(t), str(b), "-tp", str(t))
    assert code == 2 and "TARGET is given twice" in err
    code, _, err = cli(capsys, "compare", "-tp", str(t))
    assert code == 2 and "usage:" in err and "BENCH is missing" in err and "-gp BENCH" in err


def test_the_help_lists_the_accepted_and_the_refused_flags(capsys) -> None:
    code, out, _ = cli(capsys, "compare", "--help")
    assert code == 0
    text = " ".join(out.split())
    for accepted in ("-tp/--target_path", "-gp/--golden_path", "-o/--output_path", "-fm/--fuzzy_match", "--xlsx"):
        assert accepted in text
    assert "-am/--api_mapping" in text and "--rank" in text


def test_xlsx_holds_the_csv_cells(tmp_path: Path, capsys) -> None:
    t, b = _pair(tmp_path)
    code, out, err = cli(capsys, "compare", "-tp", str(t), "-gp", str(b), "-o", str(tmp_path / "o"), "--xlsx", "-q")
    assert code == 0, err
    (csv_path,) = (tmp_path / "o" / "step0").glob("compare_result_0_*.csv")
    book_path = csv_path.with_suffix(".xlsx")
    assert book_path.name in out  # listed with the files
    rows = _csv_cells(csv_path)
    sheet = openpyxl.load_workbook(book_path, read_only=True)["result"]
    cells = [list(r) for r in sheet.iter_rows(values_only=True)]
    assert len(cells) == len(rows) and len(rows) > 2
    assert cells[0] == rows[0]  # the same columns, in the same order
    for want, got in zip(rows, cells):
        assert len(got) == len(want)
        for text, value in zip(want, got):
            assert _same_cell(text, value), (text, value)
    # numbers are numbers: a spreadsheet sorts them
    norm = rows[0].index("NPU l2norm")
    assert isinstance(cells[1][norm], (int, float)) and cells[1][norm] == float(rows[1][norm])


def test_xlsx_keeps_formula_looking_text_as_text(tmp_path: Path) -> None:
    csv_path = tmp_path / "compare_result_0_1.csv"
    csv_path.write_text('NPU Name,Max,Note\n"=cmd|x",1.5,nan\n@SUM(A1),-2,N/A\n', encoding="utf-8")
    book = openpyxl.load_workbook(write_workbook(csv_path))
    sheet = book["result"]
    assert sheet["A2"].value == "=cmd|x" and sheet["A2"].data_type == "s"  # never a formula
    assert sheet["B2"].value == 1.5 and sheet["B3"].value == -2
    assert sheet["C2"].value == "nan" and sheet["C3"].value == "N/A"


def test_xlsx_keeps_as_text_the_numbers_a_spreadsheet_would_show_differently(tmp_path: Path) -> None:
    # A spreadsheet's numbers are doubles: 9223372036854775807 (int64's largest, a common sentinel in an
    # integer tensor's Max) would show as 9223372036854775808; "007" as 7; "-0" as 0.
    kept = ["9223372036854775807", "-9007199254740993", "007", "-0", "+5", "\uff11\uff12"]
    numbers = {"12": 12, "-12": -12, "9007199254740992": 2**53, "0.25": 0.25}
    csv_path = tmp_path / "compare_result_0_1.csv"
    cells = kept + list(numbers)
    csv_path.write_text("Max\n" + "\n".join(cells) + "\n", encoding="utf-8")
    sheet = openpyxl.load_workbook(write_workbook(csv_path))["result"]
    got = [sheet.cell(row=i + 2, column=1).value for i in range(len(cells))]
    assert got[: len(kept)] == kept
    assert got[len(kept):] == list(numbers.values())
    assert all(type(g) is type(v) for g, v in zip(got[len(kept):], numbers.values()))


def test_long_results_continue_on_a_second_sheet(tmp_path: Path, monkeypatch) -> None:
    import graphprobe.compare.workbook as wb

    monkeypatch.setattr(wb, "MAX_SHEET_ROWS", 3)  # 2 data rows per sheet
    csv_path = tmp_path / "r.csv"
    csv_path.write_text("a,b\n" + "".join(f"x{i},{i}\n" for i in range(5)), encoding="utf-8")
    book = openpyxl.load_workbook(wb.write_workbook(csv_path))
    assert book.sheetnames == ["result", "result_2", "result_3"]
    assert [c.value for c in book["result_3"]["A"]] == ["a", "x4"]
    assert MAX_SHEET_ROWS == 1_048_576


def test_xlsx_without_openpyxl_says_how_to_install_it(tmp_path: Path) -> None:
    t, b = _pair(tmp_path)
    # openpyxl hidden from the compare: an import hook that refuses it
    script = ("import sys\n"
              "class Block:\n"
              "    def find_spec(self, name, path=None, target=None):\n"
              "        if name == 'openpyxl' or name.startswith('openpyxl.'):\n"
              "            raise ImportError('No module named openpyxl')\n"
              "sys.meta_path.insert(0, Block())\n"
              "from graphprobe.cli import main\n"
              f"sys.exit(main(['compare', '-tp', {str(t)!r}, '-gp', {str(b)!r}, '-o', {str(tmp_path / 'o')!r}, "
              "'--xlsx', '-q']))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2, proc.stderr
    # From this source checkout: its own interpreter's pip (issue 40 item 7; a pip install gets the extra).
    assert "--xlsx needs openpyxl" in proc.stderr and "python -m pip install openpyxl" in proc.stderr
    assert "graphprobe[xlsx]" not in proc.stderr
    assert not (tmp_path / "o").exists()  # refused before comparing


def test_pyproject_offers_the_xlsx_extra() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(d.startswith("openpyxl") for d in project["optional-dependencies"]["xlsx"])


def test_a_workbook_that_cannot_be_written_is_an_error_not_a_silence(tmp_path: Path, capsys, monkeypatch) -> None:
    import graphprobe.compare.workbook as wb

    def full_disk(csv_path, notes=None):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(wb, "write_workbook", full_disk)
    t, b = _pair(tmp_path)
    code, out, err = cli(capsys, "compare", "-tp", str(t), "-gp", str(b), "-o", str(tmp_path / "o"), "--xlsx", "-q")
    assert code == 2
    assert "(xlsx not written)" in out
    assert "step0/rank0: cannot write" in err and ".xlsx" in err and "No space left on device" in err
    assert list((tmp_path / "o" / "step0").glob("*.csv"))  # the CSV is kept


def test_every_flag_of_the_installed_msprobe_compare_is_accepted_or_refused_with_a_reason(tmp_path: Path,
                                                                                           capsys) -> None:
    # The reference is msprobe's own parser (not graphprobe's table): a flag missing from both
    # graphprobe's options and UNSUPPORTED would be argparse's bare "unrecognized arguments".
    import argparse

    compare_parser = pytest.importorskip("msprobe.core.compare.utils")._compare_parser
    theirs = argparse.ArgumentParser()
    compare_parser(theirs)
    t, b = _pair(tmp_path)
    for action in theirs._actions:
        for flag in action.option_strings:
            if flag in ("-h", "--help", "-tp", "--target_path", "-gp", "--golden_path"):
                continue
            value = [] if action.nargs == 0 else (["auto"] if flag in ("-m", "--mode") else ["x.json"])
            if flag in ("-o", "--output_path"):
                value = [str(tmp_path / "o")]
            out_dir = [] if value == [str(tmp_path / "o")] else ["-o", str(tmp_path / "o")]
            code, _, err = cli(capsys, "compare", "-tp", str(t), "-gp", str(b), *out_dir, flag, *value, "-q")
            assert "unrecognized arguments" not in err, (flag, err)
            assert code == 0 or "(an msprobe compare flag) is not supported: it is" in err, (flag, code, err)

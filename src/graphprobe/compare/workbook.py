"""The result workbook msprobe users open: ``compare_result_{tag}_{time}.xlsx``
next to each CSV, with the CSV's columns and cells (``graphprobe compare
--xlsx``, msprobe's flag).

Written from the finished CSV, so the two never disagree: every cell holds
the CSV's text, except that a cell whose text reads as a finite number is
stored as that number (so that a spreadsheet sorts and filters it), as
msprobe's workbook does, unless the spreadsheet would show another number
(:func:`_cell`). Text cells are stored as text, never as formulas
(a name that begins with ``=`` stays text; the CSV's leading ``'`` of
formula neutralisation is kept, so both files show the same). A sheet holds
at most 1,048,576 rows (the xlsx limit): longer results continue on sheets
``result_2``, ``result_3``, ..., each with the header row.

Two things the CSV can hold and a workbook cannot (docs/formats.md):

* characters XML does not allow (U+0000-U+0008, U+000B, U+000C,
  U+000E-U+001F, U+FFFE, U+FFFF: a form feed or ESC in a recorded name) are
  written as the workbook format's own escape ``_xHHHH_``, which Excel reads
  back as the character (a literal ``_xHHHH_`` in the text is written
  ``_x005F_xHHHH_`` so that Excel shows it as it is);
* a cell longer than 32,767 characters (Excel's limit) is cut, and ends in
  :data:`CUT_MARKER` saying how long the CSV's cell is; each cut cell is
  reported in the ``notes`` of :func:`write_workbook`.

openpyxl is an optional dependency (``pip install 'graphprobe[xlsx]'``;
scripts/setup_env.sh installs it into a checkout's ``.venv``);
:func:`require_openpyxl` says so, with the command for this install, when it
is missing.
"""

from __future__ import annotations

import csv
import math
import os
import re
import sys
from pathlib import Path

from graphprobe.output_files import FILE_MODE, temporary_name
from graphprobe.install_hint import install_command

__all__ = ["CUT_MARKER", "MAX_CELL_CHARS", "MAX_SHEET_ROWS", "OpenpyxlMissing", "openpyxl_install_command",
           "require_openpyxl", "workbook_path",
           "write_workbook", "write_workbooks"]

#: Rows of one sheet, the header included (Excel's limit).
MAX_SHEET_ROWS = 1_048_576
#: Characters of one cell (Excel's limit; counted in UTF-16 units, as Excel
#: counts them, after the escapes below).
MAX_CELL_CHARS = 32_767
#: Ends a cell cut to :data:`MAX_CELL_CHARS`; ``{n}`` is the CSV cell's length.
CUT_MARKER = " [... cut by graphprobe: the CSV's cell holds all {n} characters]"

# What XML 1.0 cannot hold (openpyxl refuses it), and a literal escape that
# Excel would otherwise decode.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_ESCAPE_LIKE = re.compile("_(?=x[0-9A-Fa-f]{4}_)")


class OpenpyxlMissing(ImportError):
    """openpyxl, which writes the .xlsx workbook, is not installed."""


def openpyxl_install_command(package_dir: Path | None = None, executable: str | None = None) -> str:
    """The command that installs openpyxl for this graphprobe
    (:func:`graphprobe.install_hint.install_command`)."""
    package_dir = Path(__file__).resolve().parents[1] if package_dir is None else package_dir
    return install_command("openpyxl", "xlsx", package_dir, executable)


def require_openpyxl() -> None:
    """Raises :class:`OpenpyxlMissing` with the install command that works
    for this install (:func:`openpyxl_install_command`) when openpyxl cannot
    be imported (checked before a compare starts, not after it)."""
    try:
        import openpyxl  # noqa: F401
    except ImportError as e:
        raise OpenpyxlMissing(
            f"--xlsx needs openpyxl, which is not installed in {sys.executable} ({e}): install it with "
            f"{openpyxl_install_command()}, or leave out --xlsx: the CSV holds the same cells") from None


def workbook_path(csv_path: Path) -> Path:
    """``compare_result_0_{time}.xlsx`` for ``compare_result_0_{time}.csv``."""
    return csv_path.with_suffix(".xlsx")


#: The largest integer a spreadsheet holds exactly (its numbers are doubles).
_EXACT_INT = 2**53


def _cell(text: str) -> str | float | int:
    """The CSV's text, or the finite number it reads as (an integer stays
    an integer). ``nan``, ``inf``, ``N/A``, ``None`` and other words stay
    text, as the CSV writes them; so does a number the cell would not show
    as the CSV does: an integer with leading zeros or a sign (``007``,
    ``-0``, ``+5``), one beyond 2**53 (a spreadsheet would round
    ``9223372036854775807``), and non-ASCII digits."""
    if not text.isascii():
        return text
    if text.lstrip("-+").isdigit():
        value = int(text)
        return value if str(value) == text and abs(value) <= _EXACT_INT else text
    try:
        return _finite(float(text), text)
    except ValueError:
        return text


def _finite(value: float, text: str) -> str | float:
    return value if math.isfinite(value) and text.strip() == text and "_" not in text else text


def _escaped(text: str) -> str:
    """``text`` as a workbook can hold it: the ``_xHHHH_`` escapes of the
    module's docstring (Excel shows the CSV's characters)."""
    if "_x" in text:
        text = _ESCAPE_LIKE.sub("_x005F_", text)
    return _NOT_XML.sub(lambda m: f"_x{ord(m.group()):04X}_", text)


def _units(text: str) -> int:
    """Excel's length of ``text``: UTF-16 code units."""
    return len(text) + sum(ord(c) > 0xFFFF for c in text)


def _fitted(text: str) -> tuple[str, bool]:
    """``text`` escaped, and cut with :data:`CUT_MARKER` when longer than
    :data:`MAX_CELL_CHARS`; True when cut."""
    out = _escaped(text)
    if 2 * len(out) <= MAX_CELL_CHARS or _units(out) <= MAX_CELL_CHARS:  # short cells: no count per character
        return out, False
    room = MAX_CELL_CHARS - _units(CUT_MARKER.format(n=len(text)))
    # The longest prefix that fits once escaped (the escaped length grows
    # with the prefix; the marker begins with a space, so it completes no
    # escape).
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if _units(_escaped(text[:mid])) <= room else (lo, mid - 1)
    head = _escaped(text[:lo])
    return head + CUT_MARKER.format(n=len(text)), True


def write_workbook(csv_path: str | os.PathLike[str], notes: list[str] | None = None) -> Path:
    """Writes the workbook of one compare CSV next to it and returns its
    path. Raises :class:`OpenpyxlMissing` without openpyxl, ``OSError`` when
    the CSV cannot be read or the workbook written (the file is written
    atomically: a partial workbook is never left). Each cell cut to
    Excel's 32,767 characters adds a line to ``notes`` (when given)."""
    require_openpyxl()
    from openpyxl import Workbook
    from openpyxl.cell.cell import TYPE_STRING

    src = Path(csv_path)
    book = Workbook(write_only=True)
    with src.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        cut: list[str] = []
        header = [_fitted(v)[0] for v in next(reader, [])]
        sheet, rows, n = None, 0, 0
        for line, record in enumerate(reader, start=2):
            if sheet is None or rows >= MAX_SHEET_ROWS:
                n += 1
                sheet = book.create_sheet("result" if n == 1 else f"result_{n}")
                sheet.append(header)
                rows = 1
            cells: list[object] = []
            for column, v in enumerate(map(_cell, record)):
                if isinstance(v, str):
                    v, was_cut = _fitted(v)
                    if was_cut:
                        cut.append(f"row {line}, column {header[column] if column < len(header) else column + 1}")
                    v = _text_cell(sheet, v, TYPE_STRING)
                cells.append(v)
            sheet.append(cells)
            rows += 1
        if sheet is None:  # no rows: the header alone
            book.create_sheet("result").append(header)
    out = workbook_path(src)
    tmp = temporary_name(out)
    try:
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))  # the mode every output gets
        book.save(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())  # on disk before the name points at it
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if cut and notes is not None:
        shown = "; ".join(cut[:5]) + (f"; ... ({len(cut)} cells in all)" if len(cut) > 5 else "")
        notes.append(f"{out}: {len(cut)} cell(s) longer than Excel's {MAX_CELL_CHARS} characters were cut and end in "
                     f"'{CUT_MARKER.format(n='N').strip()}' ({shown}); the CSV {src} holds them whole")
    return out


def _text_cell(sheet: object, text: str, string_type: str) -> object:
    """A write-only cell that holds ``text`` as text: openpyxl would store a
    text beginning with ``=`` as a formula."""
    if not text.startswith("="):
        return text
    from openpyxl.cell import WriteOnlyCell

    cell = WriteOnlyCell(sheet, value=text)
    cell.data_type = string_type
    return cell


def write_workbooks(run: object, notes: list[str] | None = None) -> dict[Path, Path | str]:
    """The workbook of every CSV a compare wrote (``run``: its
    :class:`~graphprobe.compare.outcome.CompareRun`): CSV path -> workbook
    path, or the error that stopped it (one pair's failure does not stop the
    others). Warnings (cut cells) go to ``notes``."""
    out: dict[Path, Path | str] = {}
    for o in getattr(run, "outcomes", ()):
        if o.csv_path is None:
            continue
        try:
            out[o.csv_path] = write_workbook(o.csv_path, notes)
        except (OSError, ValueError, csv.Error) as e:
            out[o.csv_path] = f"{o.pair.label}: cannot write {workbook_path(o.csv_path)}: {e}"
    return out

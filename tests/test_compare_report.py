"""The HTML report, rendered by headless Chromium."""

from __future__ import annotations

import math
import os
import re
import shutil
import stat
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from compare_fixtures import entry, simple_model_dump, tensor, write_dump

from graphprobe.compare import compare

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


def dump_dom(page: Path, fragment: str = "") -> str:
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri() + fragment],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH (Debian: apt-get install chromium)")
def test_report_renders_plot_and_first_divergence(tmp_path: Path) -> None:
    t = write_dump(tmp_path / "t.json", simple_model_dump(3.0, 1))
    b = write_dump(tmp_path / "b.json", simple_model_dump())
    run = compare(t, b, tmp_path / "out", progress=False)
    (outcome,) = run.outcomes
    assert outcome.report_path is not None
    html = outcome.report_path.read_text()
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "") and "https://" not in html
    dom = dump_dom(outcome.report_path)
    # The inline script ran after layout: the plot has a width and 3 points.
    width = re.search(r'data-plot-width="(\d+)"', dom)
    assert width and int(width.group(1)) > 0
    assert 'data-points="3"' in dom
    assert re.search(r'<circle class="pt error"[^>]*data-entry="Module.layers.1.Linear.forward.0"', dom)
    assert re.search(r'<circle class="pt pass"[^>]*data-entry="Module.layers.0.Linear.forward.0"', dom)
    marker = re.search(r'<g id="first-divergence">.*?</g>', dom, re.S)
    assert marker and "Module.layers.1.Linear.forward.0" in marker.group(0)
    assert "First divergence: <code>Module.layers.1.Linear.forward.0</code>" in dom
    assert re.search(r'<table id="rows">.*Module\.layers\.1\.Linear\.forward\.0\.output\.0', dom, re.S)


def test_report_without_divergence_and_many_entries(tmp_path: Path) -> None:
    # 5000 entries are bucketed; an all-pass comparison has no marker.
    big = {f"Module.m{i}.ReLU.forward.0": entry([tensor(1.0)], [tensor(1.0)]) for i in range(5000)}
    t = write_dump(tmp_path / "t.json", big)
    run = compare(t, t, tmp_path / "out", progress=False)
    html = run.outcomes[0].report_path.read_text()
    assert 'id="first-divergence"' not in html and "No divergence found." in html
    assert html.count('<circle class="pt') == 2500  # buckets of 2
    assert "5000 entries, shown as 2500 buckets" in html


def test_report_buckets_keep_each_buckets_worst_and_the_first_divergence(tmp_path: Path) -> None:
    # 9001 entries: buckets of 3. The one marked entry (4000, the first that
    # differs) has a larger neighbour in its bucket and must still be shown;
    # every other bucket shows its largest output NormRelativeErr, the first
    # of equals (all rows pass: the errors stay below the 10 % warning).
    n, size = 9001, 3
    rel = [0.0] * n
    rel[4000], rel[4001] = 1e-3, 5e-3
    for i in range(4002, n):
        rel[i] = ((i * 7919) % 1000) * 1e-5
    t = write_dump(tmp_path / "t.json", {f"Module.m{i}.ReLU.forward.0": entry([tensor(2.0)], [tensor(2.0 * (1 + r))])
                                         for i, r in enumerate(rel)})
    b = write_dump(tmp_path / "b.json", {f"Module.m{i}.ReLU.forward.0": entry([tensor(2.0)], [tensor(2.0)])
                                         for i in range(n)})
    (outcome,) = compare(t, b, tmp_path / "out", progress=False).outcomes
    assert outcome.first_divergence_index == 4000
    expected = []
    for start in range(0, n, size):
        bucket = range(start, min(n, start + size))
        expected.append(4000 if 4000 in bucket else max(bucket, key=lambda i: rel[i]))
    html = outcome.report_path.read_text()
    shown = [int(m) for m in re.findall(r'<circle class="pt pass"[^>]*data-entry="Module\.m(\d+)\.', html)]
    assert shown == expected
    assert f"{n} entries, shown as {len(expected)} buckets" in html
    marker = re.search(r'<g id="first-divergence">.*?</g>', html, re.S)
    assert marker and "Module.m4000.ReLU.forward.0" in marker.group(0)


class RowsTable(HTMLParser):
    """The body rows of <table id="rows">: (hidden, result, [cell texts], [cell data-v])."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[bool, str, list[str], list[str | None]]] = []
        self._in_table = self._in_body = False
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table" and a.get("id") == "rows":
            self._in_table = True
        elif self._in_table and tag == "tbody":
            self._in_body = True
        elif self._in_body and tag == "tr":
            self.rows.append(("hidden" in a, a.get("data-result") or "", [], []))
        elif self._in_body and tag == "td":
            self._cell = []
            self.rows[-1][3].append(a.get("data-v"))

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None:
            self.rows[-1][2].append("".join(self._cell))
            self._cell = None
        elif tag == "table":
            self._in_table = self._in_body = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def rows_of(dom: str) -> list[tuple[bool, str, list[str], list[str | None]]]:
    parser = RowsTable()
    parser.feed(dom)
    return parser.rows


def _spread_dumps(tmp_path: Path) -> tuple[Path, Path]:
    """Outputs whose errors span the whole axis: 1e-8 %, 0, 66.7 % (an error
    with a long reason), NaN, plus one target-only entry (2 unmatched rows)."""
    outputs = {  # entry -> (target norm, bench norm)
        "layers.0": (3.0 * (1 + 1e-10), 3.0),
        "layers.1": (5.0, 3.0),
        "layers.2": (math.nan, 3.0),
        "layers.3": (3.0, 3.0),
        "layers.4": (3.0 * 1.000123456789, 3.0),
    }
    target, bench = {}, {}
    for name, (t, b) in outputs.items():
        key = f"Module.{name}.Linear.forward.0"
        stats = {"mx": t, "mn": t, "mean": t} if math.isnan(t) else {}
        target[key] = entry([tensor(2.0)], [tensor(t, **stats)])
        bench[key] = entry([tensor(2.0)], [tensor(b)])
    target["Module.extra.ReLU.forward.0"] = entry([tensor(1.0)], [tensor(1.0)])
    return write_dump(tmp_path / "t.json", target), write_dump(tmp_path / "b.json", bench)


def _significant_digits(number: str) -> int:
    return len(number.split("e")[0].replace(".", "").lstrip("0"))


def test_report_numbers_and_file_modes(tmp_path: Path) -> None:
    t, b = _spread_dumps(tmp_path)
    old = os.umask(0o022)
    try:
        run = compare(t, b, tmp_path / "out", progress=False)
    finally:
        os.umask(old)
    (outcome,) = run.outcomes
    html = outcome.report_path.read_text()
    # 4 significant digits on the page; 66.666...% printed in full only in the CSV and the tooltips.
    body = re.sub(r'(title|data-v)="[^"]*"', "", html.split('<table id="rows">')[1])
    assert "66.67%" in body
    for number in re.findall(r"\d+\.\d+(?:e[-+]?\d+)?", body):
        assert _significant_digits(number) <= 4, number
    assert "66.66666666666" in outcome.csv_path.read_text()
    # One rule for every output file: 0640 files and 0750 folders (here with umask 022).
    for path in (outcome.csv_path, outcome.report_path):
        assert stat.S_IMODE(path.stat().st_mode) == 0o640, path
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o750


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH (Debian: apt-get install chromium)")
def test_report_lists_every_row_sortable_filterable_searchable(tmp_path: Path) -> None:
    t, b = _spread_dumps(tmp_path)
    run = compare(t, b, tmp_path / "out", progress=False)
    page = run.outcomes[0].report_path

    dom = dump_dom(page)
    assert 'data-axis-overlaps="0"' in dom, "y-axis labels overlap"
    assert re.search(r'<text class="axis"[^>]*>inf/nan</text>', dom) and re.search(r'>1e-8%</text>', dom)
    rows = rows_of(dom)
    # Every row: 6 entries x (1 input + 1 output), the target-only entry's too.
    assert len(rows) == 12 and not any(hidden for hidden, *_ in rows)
    # Worst first: the two errors, then warnings/passes; rows without a partner last.
    assert [r[1] for r in rows[:2]] == ["error", "error"]
    assert [r[2][0] for r in rows[-2:]] == ["Module.extra.ReLU.forward.0.input.0", "Module.extra.ReLU.forward.0.output.0"]
    assert "12 of 12 rows shown" in dom

    rows = rows_of(dump_dom(page, "#verdict=error&q=LAYERS.1"))
    visible = [r[2][0] for r in rows if not r[0]]
    assert visible == ["Module.layers.1.Linear.forward.0.output.0"]

    rows = rows_of(dump_dom(page, "#sort=2&dir=asc"))  # NormRelativeErr, smallest first
    keys = [float(r[3][2]) for r in rows]
    assert keys == sorted(keys) and keys[0] == -math.inf and keys[-1] == math.inf  # N/A first, NaN last
    rows = rows_of(dump_dom(page, "#sort=0&dir=asc"))  # by name
    names = [r[2][0] for r in rows]
    assert names == sorted(names, key=str.lower)


def test_report_lists_the_worst_rows_when_there_are_too_many(tmp_path: Path, monkeypatch) -> None:
    from graphprobe.compare import report

    monkeypatch.setattr(report, "ROW_LIMIT", 3)
    t, b = _spread_dumps(tmp_path)
    run = compare(t, b, tmp_path / "out", progress=False)
    html = run.outcomes[0].report_path.read_text()
    rows = rows_of(html)
    assert len(rows) == 3 and [r[1] for r in rows[:2]] == ["error", "error"]
    assert "The 3 worst of 12 rows" in html


def test_report_explains_the_first_divergence_as_the_summary_does(tmp_path: Path) -> None:
    import html as html_lib

    from graphprobe.compare.summary import format_summary

    # Layer 1's output is 3x the bench's (the injected fault): layer 0 agrees exactly.
    t = write_dump(tmp_path / "t.json", simple_model_dump(3.0, 1))
    b = write_dump(tmp_path / "b.json", simple_model_dump())
    run = compare(t, b, tmp_path / "out", progress=False)
    (outcome,) = run.outcomes
    page = html_lib.unescape(outcome.report_path.read_text())
    d = outcome.divergence
    assert d is not None and d.entry == "Module.layers.1.Linear.forward.0"
    assert d.message and f"Why: {d.message}" in page
    # The same words as the terminal summary: the explanation, the noise upstream
    # (layer 0 and the input agree exactly: 0) and the float32 floor (1e-4 relative).
    summary = format_summary(run, 10)
    assert f"first divergence: {d.entry} ({d.message})" in summary
    noise = "noise upstream: max 0 (0x the floor) over "
    assert noise in summary and noise in page
    floors = "noise floors (relative error; Mean/Norm, Max/Min): float32 1e-4/1e-4"
    assert floors in summary and floors in page


def test_report_without_divergence_shows_the_noise_seen(tmp_path: Path) -> None:
    t = write_dump(tmp_path / "t.json", simple_model_dump())
    run = compare(t, t, tmp_path / "out", progress=False)
    page = run.outcomes[0].report_path.read_text()
    assert "Why:" not in page
    assert "noise seen: max 0 (0x the floor) over " in page


# -- issue 31 item 8: an index page over every step x rank/pid report ----------------------------------------------

class _Links(HTMLParser):
    """The links and table rows of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.links.append(dict(attrs)["href"] or "")
        elif tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def test_index_links_every_report_with_counts_and_first_divergence(tmp_path: Path) -> None:
    # 2 steps x 2 ranks; step1/rank1 diverges at layer 1 (a known, injected fault); rank2 has no partner.
    for side in ("t", "b"):
        for step in (0, 1):
            for rank in (0, 1):
                faulty = side == "t" and (step, rank) == (1, 1)
                write_dump(tmp_path / side / f"step{step}" / f"rank{rank}" / "dump.json",
                           simple_model_dump(3.0, 1) if faulty else simple_model_dump())
    write_dump(tmp_path / "t" / "step0" / "rank2" / "dump.json", simple_model_dump())
    run = compare(tmp_path / "t", tmp_path / "b", tmp_path / "out", progress=False)
    index = tmp_path / "out" / "index.html"
    page = _Links()
    page.feed(index.read_text())
    reports = sorted(str(o.report_path.relative_to(tmp_path / "out")) for o in run.outcomes)
    assert len(reports) == 4
    assert sorted(link for link in page.links if "compare_report_" in link) == reports
    for link in page.links:  # every link leads to a file that is there
        assert (tmp_path / "out" / link).is_file(), link
    head, *rows = page.rows
    assert head == ["step", "rank", "pass", "warning", "error", "unmatched", "first divergence", "files"]
    table = {(r[0], r[1]): r[2:7] for r in rows}
    assert table[("step1", "rank1")] == ["5", "0", "1", "0", "Module.layers.1.Linear.forward.0"]
    for key in (("step0", "rank0"), ("step0", "rank1"), ("step1", "rank0")):
        assert table[key] == ["6", "0", "0", "0", "-"], key
    assert "step0/rank2" in index.read_text()  # without a partner, listed


def test_no_index_for_a_single_report(tmp_path: Path) -> None:
    t = write_dump(tmp_path / "t.json", simple_model_dump())
    b = write_dump(tmp_path / "b.json", simple_model_dump())
    compare(t, b, tmp_path / "out", progress=False)
    assert not (tmp_path / "out" / "index.html").exists()  # the report is its own index


def test_version_never_wraps_the_path(tmp_path: Path) -> None:
    import sys

    env = {**os.environ, "COLUMNS": "40", "PYTHONPATH": str(Path(__file__).resolve().parent.parent / "src")}
    proc = subprocess.run([sys.executable, "-m", "graphprobe", "--version"], capture_output=True, text=True,
                          env=env, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    import graphprobe

    # 44 characters and more, on one line though COLUMNS is 40 (argparse wrapped it, cutting the path)
    assert proc.stdout == f"graphprobe {graphprobe.__version__} ({os.path.dirname(graphprobe.__file__)})\n"


def test_index_never_shows_a_pair_that_is_not_a_pass_as_a_pass(tmp_path: Path) -> None:
    # step0/rank1's target holds only the first of the bench's three calls: compare calls such a side
    # short ("NOT A PASS", Coverage.problem); its row had the pass colour because it has no error rows.
    for side in ("t", "b"):
        for rank in (0, 1):
            data = simple_model_dump()
            if side == "t" and rank == 1:
                data = dict(list(data.items())[:1])
            write_dump(tmp_path / side / "step0" / f"rank{rank}" / "dump.json", data)
    run = compare(tmp_path / "t", tmp_path / "b", tmp_path / "out", progress=False)
    short = {o.pair.process: o for o in run.outcomes}["rank1"]
    assert short.coverage is not None and short.coverage.problem and not short.counts.get("error")
    text = (tmp_path / "out" / "index.html").read_text()
    classes = dict((name, cls) for cls, name in re.findall(r'<tr class="(\w+)"><td>step0</td><td><a [^>]*>(\w+)</a>',
                                                            text))
    assert classes == {"rank0": "pass", "rank1": "error"}, classes


def _two_pairs(tmp_path: Path) -> None:
    for side in ("t", "b"):
        for rank in (0, 1):
            write_dump(tmp_path / side / "step0" / f"rank{rank}" / "dump.json", simple_model_dump())


def test_an_index_html_of_the_users_in_the_output_folder_is_never_replaced(tmp_path: Path) -> None:
    # `-o .` in a folder with a web page of the user's: before, compare replaced it with its index.
    _two_pairs(tmp_path)
    out = tmp_path / "site"
    out.mkdir()
    (out / "index.html").write_text("<html><title>my project</title></html>")
    run = compare(tmp_path / "t", tmp_path / "b", out, progress=False)
    assert (out / "index.html").read_text() == "<html><title>my project</title></html>"
    assert run.index_path is not None and re.fullmatch(r"index_\d{14}\.html", run.index_path.name)
    page = _Links()
    page.feed(run.index_path.read_text())
    assert sorted(link for link in page.links if "compare_report_" in link) == sorted(
        str(o.report_path.relative_to(out)) for o in run.outcomes)
    from graphprobe.compare.summary import format_summary

    assert f"index of the reports: {run.index_path.name}" in format_summary(run, top=1)
    # graphprobe's own index.html is replaced by the next compare's, as before.
    again = compare(tmp_path / "t", tmp_path / "b", tmp_path / "o2", progress=False)
    assert again.index_path == tmp_path / "o2" / "index.html"
    assert compare(tmp_path / "t", tmp_path / "b", tmp_path / "o2", progress=False).index_path == again.index_path


def test_an_index_that_cannot_be_written_is_a_warning_and_the_results_stay(tmp_path: Path, monkeypatch) -> None:
    from graphprobe.compare import report_index

    def full(path, text):
        raise OSError(28, "No space left on device")

    _two_pairs(tmp_path)
    monkeypatch.setattr(report_index, "write_text_atomic", full)
    with pytest.warns(RuntimeWarning, match="index of the reports could not be written.*No space left"):
        run = compare(tmp_path / "t", tmp_path / "b", tmp_path / "out", progress=False)
    assert run.index_path is None and len(run.outcomes) == 2
    assert all(o.csv_path is not None and o.csv_path.is_file() for o in run.outcomes)


def test_page_number_text_is_short_and_short_pct_exactly() -> None:
    # report.py formats the table's and the plot's numbers with one format
    # call (_short, _short_pct); numbers.py's short/short_pct are the
    # reference (the summary's and the worst rows' text): they must agree
    # on every float, the special values included.
    import random
    import struct

    from graphprobe.compare import report
    from graphprobe.compare.numbers import short, short_pct

    rng = random.Random(38)
    values: list[float | None] = [None, 0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan, 5e-324, 2.2250738585072014e-308,
                                  1.7976931348623157e308, 1.0, -1.0, 0.5, 9.9995, 99995.0, 1e16, 123456789.0, 1e-5, 0.0001]
    values += [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(20000)]
    values += [rng.choice((-1, 1)) * 10 ** rng.uniform(-12, 12) for _ in range(20000)]
    values += [round(rng.uniform(-1e4, 1e4), rng.randint(0, 6)) for _ in range(5000)]
    for v in values:
        assert report._short(v) == short(v), v
        assert report._short_pct(v) == short_pct(v), v

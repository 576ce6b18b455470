"""``index.html``: one page in the output folder that links every report of
a compare -- one row per step x rank (or pid) -- with its verdict counts, its
first divergence and what had no partner.

Written by :func:`graphprobe.compare.compare` when it writes two or more
HTML reports (a single pair's report is its own index), atomically, over
the index of an earlier compare into the same folder: the index lists the
latest compare's reports (the earlier ones stay, under their own
time-stamped names). An ``index.html`` that graphprobe did not write (``-o``
pointed at a folder of the user's) is never replaced: the index is then
``index_{time}.html``.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from urllib.parse import quote

from graphprobe.compare.outcome import CompareRun
from graphprobe.compare.report import COLOURS
from graphprobe.output_files import write_text_atomic

__all__ = ["INDEX_NAME", "render_index", "write_index"]

INDEX_NAME = "index.html"
# In every index page graphprobe writes: how an index.html is known as ours.
_GENERATOR = '<meta name="generator" content="graphprobe compare index">'
_OLD_TITLE = "<title>graphprobe compare: "  # pages written before the generator tag
_RESULTS = ("pass", "warning", "error", "unmatched")


def _link(path: Path | None, root: Path, text: str) -> str:
    if path is None:
        return html.escape(text)
    href = quote(os.path.relpath(path, root).replace(os.sep, "/"))
    return f'<a href="{html.escape(href)}">{html.escape(text)}</a>'


def render_index(run: CompareRun) -> str:
    """The index page of ``run`` as a string (links relative to its output
    folder)."""
    root = Path(run.output_dir)
    kinds = {o.pair.kind for o in run.outcomes}
    what = "rank" if kinds == {"rank"} else "pid" if kinds == {"pid"} else "rank / pid"
    heads = ["step", what, *_RESULTS, "first divergence", "files"]
    rows = []
    for o in sorted(run.outcomes, key=lambda o: (-1 if o.pair.step is None else o.pair.step, o.pair.kind,
                                                 int(o.pair.rank) if o.pair.rank.isdigit() else -1)):
        step = "-" if o.pair.step is None else f"step{o.pair.step}"
        name = _link(o.report_path, root, o.pair.process)
        if o.error is not None:
            rows.append(f'<tr class="failed"><td>{step}</td><td>{name}</td>'
                        f'<td colspan="{len(_RESULTS) + 2}">FAILED: {html.escape(o.error)}</td></tr>')
            continue
        counts = "".join(f'<td class="n {r if o.counts.get(r) else "zero"}">{o.counts.get(r, 0)}</td>'
                         for r in _RESULTS)
        problem = o.coverage.problem if o.coverage is not None and o.coverage.problem else ""
        first = html.escape(o.first_divergence) if o.first_divergence else "-"
        if problem:
            first += f'<br><span class="problem">NOT A PASS: {html.escape(problem)}</span>'
        files = _link(o.csv_path, root, "CSV")
        # A short or empty side is never a pass (Coverage.problem), whatever its rows say.
        verdict = "error" if o.first_divergence or o.counts.get("error") or problem else \
            "warning" if o.counts.get("warning") else "pass"
        rows.append(f'<tr class="{verdict}"><td>{step}</td><td>{name}</td>{counts}<td><code>{first}</code></td>'
                    f"<td>{files}</td></tr>")
    unpaired = "".join(f"<li>{html.escape(u.side)}: {html.escape(u.what)} (<code>{html.escape(str(u.path))}"
                       "</code>)</li>" for u in run.unpaired)
    colours = "".join(f"td.n.{k}{{color:{c}}}" for k, c in COLOURS.items())
    head = "".join(f"<th>{html.escape(h)}</th>" for h in heads)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
{_GENERATOR}
<title>graphprobe compare: {len(run.outcomes)} reports</title>
<style>
body{{font-family:sans-serif;margin:1.5em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left}} td.n{{text-align:right}}
tr.error td:first-child{{border-left:4px solid {COLOURS['error']}}}
tr.warning td:first-child{{border-left:4px solid {COLOURS['warning']}}}
tr.pass td:first-child{{border-left:4px solid {COLOURS['pass']}}}
tr.failed td{{color:{COLOURS['error']}}} .problem{{color:{COLOURS['error']}}} {colours} td.n.zero{{color:#999}}
</style></head>
<body>
<h1>graphprobe compare: {len(run.outcomes)} reports</h1>
<p>One row per step and {what}; the name links its report, CSV its result file. Counts are rows per
verdict; first divergence is graphprobe's noise-aware first divergence ("-": none).</p>
<table id="pairs"><thead><tr>{head}</tr></thead>
<tbody>
{chr(10).join(rows)}
</tbody></table>
{f'<h2>Without a partner</h2><ul id="unpaired">{unpaired}</ul>' if unpaired else ''}
</body></html>
"""


def _ours(path: Path) -> bool:
    """Whether ``path`` is an index page graphprobe wrote (or is absent)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            head = f.read(4096)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return _GENERATOR in head or _OLD_TITLE in head


def write_index(run: CompareRun, stamp: str) -> Path:
    """Writes the index page into ``run.output_dir`` and returns its path:
    ``index.html``, or ``index_{stamp}.html`` (``_{k}`` added while taken)
    when an ``index.html`` there is not graphprobe's."""
    out = Path(run.output_dir)
    path = out / INDEX_NAME
    k = 0
    while not _ours(path):
        k += 1
        path = out / (f"index_{stamp}.html" if k == 1 else f"index_{stamp}_{k - 1}.html")
    write_text_atomic(path, render_index(run))
    return path

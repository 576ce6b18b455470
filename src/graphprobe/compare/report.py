"""One self-contained HTML page per comparison (no network access needed).

The page plots, along execution order, each target entry's relative error
(its largest output NormRelativeErr) on a log axis, coloured by verdict, with
the first divergence marked, and lists the rows (worst first) in a table that
can be sorted by any column, filtered by verdict and searched by name. The
plot is static inline SVG; inline script adds hover details and the table
controls. The table's state can be set from the address:
``report.html#verdict=error,warning&q=layers.1&sort=norm&dir=desc``.

Numbers show 4 significant digits (the full value is the cell's tooltip);
the CSV keeps full precision.
"""

from __future__ import annotations

import functools
import html
import math
import os
import re
from collections.abc import Sequence
from string import Template

from graphprobe.compare.numbers import shorten_numbers
from graphprobe.compare.explain import floors_text, noise_text
from graphprobe.compare.outcome import SEVERITY, Divergence, EntryPoint, Noise, RowDigest

__all__ = ["render_html", "COLOURS", "ROW_LIMIT"]

COLOURS = {"pass": "#2e7d32", "warning": "#f9a825", "error": "#c62828", "unmatched": "#9e9e9e"}
_W, _H = 1000, 380
_LEFT, _RIGHT, _TOP, _BOTTOM = 70, 20, 20, 50
_BAND = 30  # px for the "0" and "inf/nan" bands: room for their labels apart from the decades'
_LABEL_GAP = 12  # px: decade labels closer than this to a band label are left out
# Rows listed in the page (all of a typical L0 comparison; the worst ones of a
# larger one, whose CSV has them all): each costs ~0.1 ms and ~400 bytes.
ROW_LIMIT = 5000


# Control characters (Unicode Cc: NUL, ESC, CR, U+0085 ...) and lone
# surrogates, which names read from a dump may hold: a raw NUL or control
# character is an HTML parse error (browsers drop or replace it) and hides
# what the name holds.
_INVISIBLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
# What _esc changes: the above and html.escape's five characters. Most
# names, verdicts and numbers hold none and are returned as they are (the
# page escapes ~30,000 cells; substituting and escaping each was a quarter
# of its rendering).
_TO_ESCAPE = re.compile("[&<>\"'\x00-\x1f\x7f-\x9f\ud800-\udfff]")


@functools.cache
def _asset(name: str) -> str:
    """The page's stylesheet or script (package resources under
    report_assets/), with the verdict colours filled in."""
    # Read by this module's loader (a file, or a zip member), as
    # importlib.resources would, without its imports (typing, tempfile, ...):
    # decoded and newlines translated as its read_text does.
    raw = __loader__.get_data(os.path.join(os.path.dirname(__file__), "report_assets", name))
    text = raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    return Template(text).substitute(error_colour=COLOURS["error"]) if name.endswith(".css") else text


def _esc(text: str) -> str:
    """``text`` escaped for HTML, with each control character shown as its
    ``\\uXXXX`` escape (the spelling dump.json and the CSV use for NUL)."""
    if _TO_ESCAPE.search(text) is None:
        return text
    return html.escape(_INVISIBLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text))


def _plot(points: Sequence[EntryPoint], thresholds: dict[str, float]) -> str:
    finite = [p.value for p in points if p.value is not None and math.isfinite(p.value) and p.value > 0]
    lo = math.floor(math.log10(min(finite))) if finite else -3
    hi = math.ceil(math.log10(max(finite))) if finite else 2
    lo, hi = min(lo, -3), max(hi, 2, math.ceil(math.log10(max(thresholds.values(), default=1) or 1)))
    # Bands below and above the decades: 0 at the bottom, inf/nan at the top.
    plot_h = _H - _TOP - _BOTTOM
    band = _BAND
    span_h = plot_h - 2 * band
    x_span = _W - _LEFT - _RIGHT
    n = max(len(points), 1)

    def x(i: int) -> float:
        return _LEFT + (i + 0.5) * x_span / n if n > 1 else _LEFT + x_span / 2

    def y(v: float) -> float:
        if v <= 0:
            return _TOP + plot_h - band / 2
        if not math.isfinite(v):
            return _TOP + band / 2
        return _TOP + band + span_h * (1 - (math.log10(v) - lo) / (hi - lo))

    parts = [
        f'<svg id="plot" xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
        f'viewBox="0 0 {_W} {_H}" role="img" aria-label="relative error per entry">',
        f'<rect x="{_LEFT}" y="{_TOP}" width="{x_span}" height="{plot_h}" fill="#fafafa" stroke="#ccc"/>',
    ]
    # Many decades would crowd the axis: label every k-th one.
    step = max(1, math.ceil((hi - lo + 1) * 14 / span_h))
    for d in range(lo, hi + 1):
        yy = y(10.0**d)
        parts.append(f'<line x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#e0e0e0"/>')
        near_band = min(abs(yy - y(0)), abs(yy - y(math.inf))) < _LABEL_GAP
        if (d - lo) % step == 0 and not near_band:
            parts.append(f'<text class="axis" x="{_LEFT - 6}" y="{yy + 4:.1f}" text-anchor="end" font-size="11">'
                         f"1e{d}%</text>")
    parts.append(f'<text class="axis" x="{_LEFT - 6}" y="{y(0) + 4:.1f}" text-anchor="end" font-size="11">0</text>')
    parts.append(f'<text class="axis" x="{_LEFT - 6}" y="{y(math.inf) + 4:.1f}" text-anchor="end" '
                 'font-size="11">inf/nan</text>')
    for name, v in thresholds.items():
        if v > 0:
            yy = y(v)
            parts.append(
                f'<line class="threshold" x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{yy:.1f}" y2="{yy:.1f}" '
                f'stroke="#888" stroke-dasharray="4 3"><title>{_esc(name)} {v:g}%</title></line>'
            )
    for k, p in enumerate(points):
        if p.first_divergence:
            xx = x(k)
            parts.append(
                f'<g id="first-divergence"><line x1="{xx:.1f}" x2="{xx:.1f}" y1="{_TOP}" y2="{_TOP + plot_h}" '
                f'stroke="#6a1b9a" stroke-width="2"/>'
                f'<text x="{xx + 4:.1f}" y="{_TOP + 12}" font-size="12" fill="#6a1b9a">first divergence: '
                f"{_esc(p.entry)}</text></g>"
            )
    for k, p in enumerate(points):
        v = p.value
        yy = y(0.0 if v is None else (math.inf if math.isnan(v) else v))
        # _esc maps character by character, so the entry is escaped once;
        # the rest of the title (an index, a percentage, a verdict word that
        # COLOURS holds) has nothing it would change.
        entry = _esc(p.entry)
        parts.append(
            f'<circle class="pt {p.result}" cx="{x(k):.1f}" cy="{yy:.1f}" r="3.5" fill="{COLOURS[p.result]}" '
            f'data-entry="{entry}"><title>#{p.index} {entry}: {_short_pct(v)} ({p.result})</title></circle>'
        )
    parts.append(
        f'<text x="{_LEFT + x_span / 2}" y="{_H - 12}" text-anchor="middle" font-size="12">'
        "entries in execution order (target)</text>"
    )
    parts.append("</svg>")
    return "\n".join(parts)


def _num_cell(v: float | None, text: str) -> str:
    """A numeric cell: short text, the full value as tooltip, a sort key
    (N/A lowest, nan highest)."""
    if v is None:
        return '<td data-v="-Infinity">N/A</td>'
    full = repr(v)  # once: it is both the tooltip and, for finite v, the key
    key = full if math.isfinite(v) else "Infinity" if v != v else full.replace("inf", "Infinity")
    return f'<td data-v="{key}" title="{full}">{text}</td>'  # numbers: nothing to escape


def _short(v: float | None) -> str:
    """``short(v)``: for a float (or None), ``f"{v:.4g}"`` is exactly what
    short() returns, nan and the infinities included (checked by the tests);
    one format call instead of three checks. The page formats ~15,000."""
    return "N/A" if v is None else f"{v:.4g}"


def _short_pct(v: float | None) -> str:
    """``short_pct(v)``, as :func:`_short`."""
    if v is None:
        return "N/A"
    return f"{v:.4g}%" if math.isfinite(v) else f"{v:.4g}"


def _cosine(v: float | None) -> str:
    # Cosines that matter sit just below 1, where 4 significant digits would
    # print 1: six decimals keep 0.999995 apart from 1.
    return "N/A" if v is None else "nan" if math.isnan(v) else f"{v:.6f}"


def _table_row(r: RowDigest, tensor: bool) -> str:
    # The page's costliest part (5,000 rows): each cell written once, and
    # nothing escaped that cannot hold what _esc changes (a verdict word is
    # one of SEVERITY's keys, numbers are digits, '.', 'e', '+', '-', '%').
    result = r.result
    cells = (f'<tr class="{result}" data-result="{result}"><td>{_esc(r.name)}</td>'
             f'<td data-v="{SEVERITY[result]}">{result}</td>'
             f"{_num_cell(r.norm_rel_err_pct, _short_pct(r.norm_rel_err_pct))}"
             f"{_num_cell(r.target_norm, _short(r.target_norm))}"
             f"{_num_cell(r.bench_norm, _short(r.bench_norm))}")
    if tensor:
        cells += f"{_num_cell(r.cosine, _cosine(r.cosine))}{_num_cell(r.max_abs_err, _short(r.max_abs_err))}"
    reasons = r.reasons
    why = _esc("; ".join(shorten_numbers(x) for x in reasons)) if reasons else ""
    return f"{cells}<td>{why}</td></tr>"


def render_html(
    *,
    title: str,
    target: str,
    bench: str,
    counts: dict[str, int],
    first_divergence: str | None,
    points: Sequence[EntryPoint],
    rows: Sequence[RowDigest],
    total_rows: int,
    thresholds: dict[str, float],
    divergence: Divergence | None = None,
    noise: Noise | None = None,
    floors_used: Sequence[tuple[str, float, float]] = (),
    entries: int | None = None,
) -> str:
    """The whole page as a string. ``rows`` are listed worst first (of
    ``total_rows`` in the CSV); ``thresholds`` maps a label to a percentage
    drawn as a dashed line. ``divergence``, ``noise`` and ``floors_used``
    (the pair's digests) give the first divergence's explanation, the noise
    where the pair agrees and the noise floors used, in the summary's words.
    ``points`` are the plot's, already bucketed (``digest_rows``) for
    ``entries`` target entries (None: one point per entry)."""
    esc = _esc
    entries = len(points) if entries is None else entries
    legend = " ".join(
        f'<span class="chip" style="background:{c}"></span>{esc(k)}: {counts.get(k, 0)}' for k, c in COLOURS.items()
    )
    fd = (
        f'<p id="first-divergence-text">First divergence: <code>{esc(first_divergence)}</code></p>'
        if first_divergence
        else '<p id="first-divergence-text">No divergence found.</p>'
    )
    why = "".join(
        f'<p id="{key}">{esc(text)}</p>\n'
        for key, text in (
            ("divergence-explanation", f"Why: {divergence.message}" if divergence is not None else ""),
            ("noise", noise_text(noise)),
            ("noise-floors", floors_text(floors_used)),
        )
        if text
    )
    note = f"<p>{entries} entries, shown as {len(points)} buckets (worst of each).</p>" if len(points) < entries else ""
    listed = (f"All {total_rows} rows, worst first (by verdict, then NormRelativeErr)." if len(rows) >= total_rows
              else f"The {len(rows)} worst of {total_rows} rows (by verdict, then NormRelativeErr); the CSV has all.")
    # Tensor dumps: the data's Cosine and MaxAbsErr too.
    tensor = any(r.cosine is not None or r.max_abs_err is not None for r in rows)
    heads = ["Row", "Result", "NormRelativeErr", "Target norm", "Bench norm"]
    heads += ["Cosine", "MaxAbsErr"] if tensor else []
    heads += ["Reasons"]
    head = "".join(f'<th data-col="{k}" title="click to sort">{h}</th>' for k, h in enumerate(heads))
    filters = " ".join(
        f'<label><input type="checkbox" class="verdict" value="{k}" checked> {k} ({counts.get(k, 0)})</label>'
        for k in COLOURS
    )
    body = "\n".join(_table_row(r, tensor) for r in rows)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{esc(title)}</title>
<style>
{_asset('report.css')}</style></head>
<body>
<h1>{esc(title)}</h1>
<p>Target: <code>{esc(target)}</code><br>Bench: <code>{esc(bench)}</code></p>
<p>{legend}</p>
{fd}
{why}<h2>Relative error along execution order</h2>
<p>Largest output NormRelativeErr per entry (log axis); dashed lines: thresholds.</p>
{note}
{_plot(points, thresholds)}
<div id="hover"></div>
<h2>Rows</h2>
<p>{listed} Click a column to sort; numbers show 4 significant digits (hover for the full value).</p>
<div id="controls">{filters}
<label>name contains <input type="search" id="row-search" placeholder="e.g. layers.1"></label>
<span id="row-count"></span></div>
<table id="rows"><thead><tr>{head}</tr></thead>
<tbody>
{body}
</tbody></table>
<script>
{_asset('report.js')}</script>
</body></html>
"""

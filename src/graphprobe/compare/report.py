"""One self-contained HTML page per comparison (no network access needed).

The page plots, along execution order, each target entry's relative error
(its largest output NormRelativeErr) on a log axis, coloured by verdict, with
the first divergence marked, and lists the worst rows. The plot is static
inline SVG; a few lines of inline script only add hover details.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

from graphprobe.compare.outcome import SEVERITY, EntryPoint, RowDigest

__all__ = ["render_html", "COLOURS"]

COLOURS = {"pass": "#2e7d32", "warning": "#f9a825", "error": "#c62828", "unmatched": "#9e9e9e"}
_MAX_POINTS = 4000  # more entries are bucketed, keeping each bucket's worst
_W, _H = 1000, 380
_LEFT, _RIGHT, _TOP, _BOTTOM = 70, 20, 20, 50


def _fmt(v: float | None) -> str:
    if v is None:
        return "N/A"
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.4g}%"


def _bucket(points: Sequence[EntryPoint]) -> list[EntryPoint]:
    if len(points) <= _MAX_POINTS:
        return list(points)
    size = math.ceil(len(points) / _MAX_POINTS)
    out = []
    for start in range(0, len(points), size):
        chunk = points[start : start + size]
        marked = [p for p in chunk if p.first_divergence]

        def key(p: EntryPoint) -> tuple[int, float]:
            v = p.value
            return (SEVERITY[p.result], -1.0 if v is None else math.inf if math.isnan(v) else v)

        out.append(marked[0] if marked else max(chunk, key=key))
    return out


def _plot(points: Sequence[EntryPoint], thresholds: dict[str, float]) -> str:
    finite = [p.value for p in points if p.value is not None and math.isfinite(p.value) and p.value > 0]
    lo = math.floor(math.log10(min(finite))) if finite else -3
    hi = math.ceil(math.log10(max(finite))) if finite else 2
    lo, hi = min(lo, -3), max(hi, 2, math.ceil(math.log10(max(thresholds.values(), default=1) or 1)))
    # Bands below and above the decades: 0 at the bottom, inf/nan at the top.
    plot_h = _H - _TOP - _BOTTOM
    band = 18
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
    for d in range(lo, hi + 1):
        yy = y(10.0**d)
        parts.append(f'<line x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#e0e0e0"/>')
        parts.append(f'<text x="{_LEFT - 6}" y="{yy + 4:.1f}" text-anchor="end" font-size="11">1e{d}%</text>')
    parts.append(f'<text x="{_LEFT - 6}" y="{y(0) + 4:.1f}" text-anchor="end" font-size="11">0</text>')
    parts.append(f'<text x="{_LEFT - 6}" y="{y(math.inf) + 4:.1f}" text-anchor="end" font-size="11">inf/nan</text>')
    for name, v in thresholds.items():
        if v > 0:
            yy = y(v)
            parts.append(
                f'<line class="threshold" x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{yy:.1f}" y2="{yy:.1f}" '
                f'stroke="#888" stroke-dasharray="4 3"><title>{html.escape(name)} {v:g}%</title></line>'
            )
    for k, p in enumerate(points):
        if p.first_divergence:
            xx = x(k)
            parts.append(
                f'<g id="first-divergence"><line x1="{xx:.1f}" x2="{xx:.1f}" y1="{_TOP}" y2="{_TOP + plot_h}" '
                f'stroke="#6a1b9a" stroke-width="2"/>'
                f'<text x="{xx + 4:.1f}" y="{_TOP + 12}" font-size="12" fill="#6a1b9a">first divergence: '
                f"{html.escape(p.entry)}</text></g>"
            )
    for k, p in enumerate(points):
        v = p.value
        yy = y(0.0 if v is None else (math.inf if math.isnan(v) else v))
        title = html.escape(f"#{p.index} {p.entry}: {_fmt(v)} ({p.result})")
        parts.append(
            f'<circle class="pt {p.result}" cx="{x(k):.1f}" cy="{yy:.1f}" r="3.5" fill="{COLOURS[p.result]}" '
            f'data-entry="{html.escape(p.entry)}"><title>{title}</title></circle>'
        )
    parts.append(
        f'<text x="{_LEFT + x_span / 2}" y="{_H - 12}" text-anchor="middle" font-size="12">'
        "entries in execution order (target)</text>"
    )
    parts.append("</svg>")
    return "\n".join(parts)


def render_html(
    *,
    title: str,
    target: str,
    bench: str,
    counts: dict[str, int],
    first_divergence: str | None,
    points: Sequence[EntryPoint],
    worst: Sequence[RowDigest],
    thresholds: dict[str, float],
) -> str:
    """The whole page as a string; ``thresholds`` maps a label to a
    percentage drawn as a dashed line."""
    esc = html.escape
    shown = _bucket(points)
    legend = " ".join(
        f'<span class="chip" style="background:{c}"></span>{esc(k)}: {counts.get(k, 0)}' for k, c in COLOURS.items()
    )
    fd = (
        f'<p id="first-divergence-text">First divergence: <code>{esc(first_divergence)}</code></p>'
        if first_divergence
        else '<p id="first-divergence-text">No divergence found.</p>'
    )
    note = f"<p>{len(points)} entries, shown as {len(shown)} buckets (worst of each).</p>" if len(shown) < len(points) else ""
    # Tensor dumps: the data's Cosine and MaxAbsErr too.
    tensor = any(r.cosine is not None or r.max_abs_err is not None for r in worst)
    tensor_head = "<th>Cosine</th><th>MaxAbsErr</th>" if tensor else ""
    rows = "\n".join(
        f'<tr class="{esc(r.result)}"><td>{esc(r.name)}</td><td>{esc(r.result)}</td>'
        f"<td>{_fmt(r.norm_rel_err_pct)}</td><td>{_fmt_num(r.target_norm)}</td><td>{_fmt_num(r.bench_norm)}</td>"
        + (f"<td>{_fmt_num(r.cosine, 10)}</td><td>{_fmt_num(r.max_abs_err)}</td>" if tensor else "")
        + f"<td>{esc('; '.join(r.reasons))}</td></tr>"
        for r in worst
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{esc(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 20px; color: #222; }}
code {{ background: #f3f3f3; padding: 1px 4px; }}
.chip {{ display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 12px; border-radius: 50%; }}
table {{ border-collapse: collapse; font-size: 13px; }}
td, th {{ border: 1px solid #ddd; padding: 3px 6px; text-align: left; }}
tr.error td:nth-child(2) {{ color: {COLOURS["error"]}; font-weight: bold; }}
tr.warning td:nth-child(2) {{ color: #b7791f; font-weight: bold; }}
#hover {{ min-height: 1.2em; font-family: monospace; }}
</style></head>
<body>
<h1>{esc(title)}</h1>
<p>Target: <code>{esc(target)}</code><br>Bench: <code>{esc(bench)}</code></p>
<p>{legend}</p>
{fd}
<h2>Relative error along execution order</h2>
<p>Largest output NormRelativeErr per entry (log axis); dashed lines: thresholds.</p>
{note}
{_plot(shown, thresholds)}
<div id="hover"></div>
<h2>Worst rows</h2>
<table id="worst"><thead><tr><th>Row</th><th>Result</th><th>NormRelativeErr</th><th>Target norm</th>
<th>Bench norm</th>{tensor_head}<th>Reasons</th></tr></thead>
<tbody>
{rows}
</tbody></table>
<script>
(function () {{
  var svg = document.getElementById("plot");
  var hover = document.getElementById("hover");
  svg.querySelectorAll("circle.pt").forEach(function (c) {{
    c.addEventListener("mouseenter", function () {{ hover.textContent = c.querySelector("title").textContent; }});
  }});
  // Read back by tests: proves the page was laid out and scripted.
  document.body.setAttribute("data-plot-width", String(Math.round(svg.getBoundingClientRect().width)));
  document.body.setAttribute("data-points", String(svg.querySelectorAll("circle.pt").length));
}})();
</script>
</body></html>
"""


def _fmt_num(v: float | None, digits: int = 6) -> str:
    if v is None:
        return "N/A"
    return f"{v:.{digits}g}"

"""A self-contained HTML report of a history (docs/history.md, "Report"):
the first anomaly, one record over steps (min, mean and max over ranks) and a
step x module heat map of the relative change from the previous step. Inline
SVG, no script, nothing fetched from the network."""

from __future__ import annotations

import html
import math
import os
from pathlib import Path
from typing import Any

from graphprobe.history.query import Anomaly, StepStat, connect, first_anomaly, history_files, record_over_steps
from graphprobe.history.rules import AnomalyRule

__all__ = ["heat_map", "write_report"]

#: A record's module: its name up to the direction (forward/backward/...).
_MODULE_RE = r"^(.*?)\.(forward|backward|backward_pass[0-9]+|parameters_grad)(\.|$)"


def heat_map(hist: str | os.PathLike[str], stat: str = "Norm", modules: int = 40, columns: int = 200,
             con: Any = None) -> tuple[list[int], list[str], list[list[float | None]]]:
    """(step bins, modules, cells): the largest relative change of ``stat``
    from a record's previous step, over the module's records and all ranks;
    steps are binned into at most ``columns`` bins (a bin holds its largest
    change; its label is the bin's first step); the ``modules`` modules
    with the largest change, in program order (first ``ord``); a record
    whose name has no direction is a module of its own."""
    con = con or connect()
    files = history_files(hist)
    rows = con.execute(f"""
        WITH d AS (
            SELECT step, ord, coalesce(nullif(regexp_extract(record, '{_MODULE_RE}', 1), ''), record) AS module, {stat} AS b,
                   lag({stat}) OVER (PARTITION BY rank, record ORDER BY step) AS a
            FROM read_parquet($files)),
        r AS (
            SELECT step, ord, module, CASE WHEN a IS NULL OR b IS NULL THEN NULL
                WHEN NOT isfinite(a) OR NOT isfinite(b) THEN 'inf'::DOUBLE WHEN a = b THEN 0.0
                WHEN a = 0 THEN 'inf'::DOUBLE ELSE abs(b - a) / abs(a) END AS rel FROM d),
        s AS (SELECT min(step) AS lo, max(step) AS hi FROM r)
        SELECT module, min(ord) AS first_ord,
               CAST(floor((step - s.lo) * $cols / (s.hi - s.lo + 1)) AS BIGINT) AS bin,
               min(step) AS bin_step, max(rel) AS rel
        FROM r, s GROUP BY module, bin ORDER BY module, bin""",
        {"files": files, "cols": int(columns)}).fetchall()
    if not rows:
        return [], [], []
    peak: dict[str, float] = {}
    first: dict[str, int] = {}
    bins: dict[int, int] = {}
    cells: dict[tuple[str, int], float | None] = {}
    for module, ord_, b, bin_step, rel in rows:
        first[module] = min(first.get(module, ord_), ord_)
        bins[b] = min(bins.get(b, bin_step), bin_step)
        cells[(module, b)] = rel
        if rel is not None:
            peak[module] = max(peak.get(module, 0.0), rel)
    chosen = sorted(first, key=lambda m: (-peak.get(m, 0.0), first[m]))[:modules]
    chosen.sort(key=lambda m: first[m])
    order = sorted(bins)
    return [bins[b] for b in order], chosen, [[cells.get((m, b)) for b in order] for m in chosen]


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.6g}"


def _line_chart(series: list[StepStat], record: str, stat: str) -> str:
    w, h, pad = 900, 300, 60
    pts = [s for s in series if s.mean is not None]
    if not pts:
        return "<p>No finite value of this record.</p>"
    lo = min(s.min for s in pts if s.min is not None)
    hi = max(s.max for s in pts if s.max is not None)
    if hi == lo:
        hi, lo = hi + 0.5 * (abs(hi) or 1), lo - 0.5 * (abs(lo) or 1)
    s0, s1 = series[0].step, max(series[-1].step, series[0].step + 1)

    def xy(step: int, v: float) -> str:
        return f"{pad + (step - s0) / (s1 - s0) * (w - 2 * pad):.1f},{h - pad - (v - lo) / (hi - lo) * (h - 2 * pad):.1f}"

    band = " ".join(xy(s.step, s.max) for s in pts) + " " + " ".join(xy(s.step, s.min) for s in reversed(pts))
    mean = " ".join(xy(s.step, s.mean) for s in pts)
    bad = "".join(f'<line x1="{xy(s.step, lo).split(",")[0]}" x2="{xy(s.step, lo).split(",")[0]}" y1="{pad}" '
                  f'y2="{h - pad}" stroke="#d00" stroke-width="2"><title>step {s.step}: {s.nonfinite} rank(s) '
                  f'non-finite</title></line>' for s in series if s.nonfinite)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img">'
            f'<rect width="{w}" height="{h}" fill="#fff"/>'
            f'<polygon points="{band}" fill="#9cf" opacity="0.5"><title>min..max over ranks</title></polygon>'
            f'<polyline points="{mean}" fill="none" stroke="#036" stroke-width="1.5"/>{bad}'
            f'<text x="{pad}" y="{pad - 10}" font-size="12">{html.escape(record)}: {stat} '
            f'(line: mean over ranks; band: min..max; red: non-finite)</text>'
            f'<text x="5" y="{pad + 4}" font-size="11">{hi:.4g}</text>'
            f'<text x="5" y="{h - pad}" font-size="11">{lo:.4g}</text>'
            f'<text x="{pad}" y="{h - pad + 18}" font-size="11">step {s0}</text>'
            f'<text x="{w - pad - 60}" y="{h - pad + 18}" font-size="11">step {series[-1].step}</text></svg>')


def _colour(rel: float | None) -> str:
    if rel is None:
        return "#eee"
    if math.isinf(rel):
        return "#000"
    # log scale: 1e-6 (white) .. 1 and above (red)
    t = 0.0 if rel <= 1e-6 else min(1.0, (math.log10(rel) + 6) / 6)
    return f"rgb(255,{int(255 * (1 - t))},{int(255 * (1 - t))})"


def _heat_svg(steps: list[int], modules: list[str], cells: list[list[float | None]], stat: str) -> str:
    if not modules:
        return "<p>No module records.</p>"
    cw, ch, left, top = max(2, min(12, 900 // max(1, len(steps)))), 14, 360, 30
    w, h = left + cw * len(steps) + 20, top + ch * len(modules) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img">',
           f'<text x="{left}" y="16" font-size="12">relative change of {stat} from the previous step, largest over '
           'records and ranks (white: &lt;1e-6, red: &gt;=1, black: non-finite)</text>']
    for i, m in enumerate(modules):
        y = top + i * ch
        out.append(f'<text x="{left - 4}" y="{y + 11}" font-size="10" text-anchor="end">{html.escape(m[-60:])}</text>')
        for j, rel in enumerate(cells[i]):
            out.append(f'<rect x="{left + j * cw}" y="{y}" width="{cw}" height="{ch}" fill="{_colour(rel)}">'
                       f'<title>{html.escape(m)} step {steps[j]}: {_fmt(rel)}</title></rect>')
    out.append(f'<text x="{left}" y="{h - 8}" font-size="11">step {steps[0]}</text>'
               f'<text x="{w - 80}" y="{h - 8}" font-size="11">step {steps[-1]}</text></svg>')
    return "".join(out)


def write_report(hist: str | os.PathLike[str], out: str | os.PathLike[str], record: str | None = None,
                 stat: str = "Norm", rule: AnomalyRule | None = None) -> Path:
    """Writes the report to ``out`` and returns its path. ``record`` defaults
    to the first anomaly's record (else the first record of the history)."""
    con = connect()
    anomaly: Anomaly | None = first_anomaly(hist, rule, con=con)
    if record is None:
        if anomaly is not None:
            record = anomaly.record
        else:
            row = con.execute("SELECT record FROM read_parquet(?) ORDER BY step, rank, ord LIMIT 1",
                              [history_files(hist)[:1]]).fetchone()
            record = row[0]
    series = record_over_steps(hist, record, stat, con=con)
    steps, modules, cells = heat_map(hist, stat, con=con)
    if anomaly is None:
        first = "<p>No record leaves its history.</p>"
    else:
        first = (f"<p><b>First anomaly</b>: step {anomaly.step}, rank {anomaly.rank}, "
                 f"<code>{html.escape(anomaly.record)}</code> ({anomaly.kind}: value {_fmt(anomaly.value)}, "
                 f"previous mean {_fmt(anomaly.mean_prev)}, std {_fmt(anomaly.std_prev)}, n {anomaly.n_prev})</p>")
    doc = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>graphprobe history</title>"
           f"<style>body{{font-family:sans-serif;margin:20px}}code{{background:#f4f4f4}}</style></head><body>"
           f"<h1>graphprobe history</h1><p>{html.escape(os.fspath(hist))}</p>{first}"
           f"<h2>{html.escape(record)} over steps</h2>{_line_chart(series, record, stat)}"
           f"<h2>Step x module: relative change</h2>{_heat_svg(steps, modules, cells, stat)}</body></html>")
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc, encoding="utf-8")
    return path

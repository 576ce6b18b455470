"""Stage 4, report: diagnosis.json (schema: docs/diagnose.md), a text
summary and an HTML page."""

from __future__ import annotations

import html
import json
import shlex
from pathlib import Path
from typing import Any

from graphprobe.diagnose.commands import printable
from graphprobe.output_files import write_text_atomic

__all__ = ["SCHEMA_VERSION", "format_text", "write_reports"]

SCHEMA_VERSION = 1


def _num(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else "-"


def format_text(d: dict[str, Any]) -> str:
    """The summary printed at the end and saved as summary.txt."""
    lines = ["graphprobe diagnose: " + d["conclusion"], ""]
    fd = d.get("first_divergence")
    lines.append("first divergence: " + (f"step {fd['step']}, {fd['entry']} ({', '.join(fd['kinds'])})"
                                         if fd else "none"))
    o = d.get("origin")
    if o:
        lines.append(f"origin:           {o['module']} -- {o['verdict']}: local error {_num(o['local_error'])} "
                     f"(eager on the same inputs {_num(o['eager_local_error'])}, graph mode vs float64 "
                     f"{_num(o['float64_error'])}, floor {_num(o.get('floor'))})")
    elif d.get("attribution"):
        lines.append(f"origin:           none ({d['attribution'].get('why', '')})")
    b = d.get("bisect")
    if b:
        if b.get("backend"):
            lines.append(f"bisect:           backend {b['backend']}, subsystem {b.get('subsystem') or '-'}, bisect "
                         f"number {b.get('bisect_number') if b.get('bisect_number') is not None else '-'}, debug info "
                         f"{b.get('debug_info') or '-'} ({_tests_said(b.get('tests', []))})")
        lines.append(f"                  {b.get('note', '')}")
    elif d.get("bisect_skipped"):
        lines.append(f"bisect:           skipped ({d['bisect_skipped']})")
    if d.get("kernels_note"):
        lines.append(f"kernels:          {', '.join(d.get('kernels') or []) or '-'} ({d['kernels_note']})")
    r = d.get("repro")
    if r:
        lines.append(f"repro:            python {r['script']}" + (f"  (missing: {'; '.join(r['missing'])})"
                                                                   if r["missing"] else ""))
        said = {True: "yes", False: "NO", None: "unknown"}.get(r.get("reproduces"), "unknown")
        lines.append(f"                  reproduces: {said} -- {r.get('reproduces_note') or '-'}")
    lines.append(f"commands run:     {len(d['commands'])}, {sum(c['seconds'] for c in d['commands']):.0f} s")
    lines.append("stages:           " + ", ".join(f"{k} {v:.0f} s" for k, v in d.get("stages", {}).items()))
    lines.append(f"files:            {d['files']['diagnosis']}, {d['files']['html']}")
    return "\n".join(lines)


def _tests_said(tests: list[dict[str, Any]]) -> str:
    """How many bisect tests the bisector asked for, and how many more ran
    ahead of it without being asked for (issue #37's parallel bisect)."""
    used = sum(1 for t in tests if t.get("used", True))
    extra = len(tests) - used
    return f"{used} tests" + (f", {extra} more run ahead and not needed" if extra else "")


def _result(passed: Any, seen: str = "") -> str:
    """A bisect test's result: pass, FAIL, stopped (not needed), or not
    judged (the bisect stopped there)."""
    if passed is None and seen.startswith("stopped"):
        return "stopped"
    return "pass" if passed is True else "FAIL" if passed is False else "not judged (the bisect stopped)"


def _html(d: dict[str, Any], text: str) -> str:
    e = html.escape
    rows = "".join(
        f"<tr><td>{e(m['module'] or '(model)')}</td><td class='{e(m['verdict'].replace(' ', '-'))}'>{e(m['verdict'])}"
        f"</td><td>{_num(m['local_error'])}</td><td>{_num(m['eager_local_error'])}</td>"
        f"<td>{_num(m['float64_error'])}</td><td>{e(m['reason'])}</td></tr>"
        for m in (d.get("attribution") or {}).get("modules", []))
    tests = "".join(
        f"<tr><td>{t['test']}</td><td>{e(str(t['backend']))}</td><td>{e(str(t['subsystem'] or ''))}</td>"
        f"<td>{e(str(t['state'] or ''))}{e(' ' + str(t['range']) if t.get('range') else '')}</td>"
        f"<td>{_result(t.get('passed'), t['seen'])}</td><td>{e(t['seen'])}</td>"
        f"<td>{'ahead' if t.get('speculative') else 'asked'}{'' if t.get('used', True) else ', not used'}</td>"
        f"<td>{_num(t.get('seconds'))}</td></tr>"
        for t in (d.get("bisect") or {}).get("tests", []))
    cmds = "".join(f"<tr><td>{e(c['stage'])}</td><td>{c['exit_code']}</td><td>{c['seconds']:.1f}</td>"
                   f"<td><code>{e(shlex.join(c['argv']))}</code></td><td>{e(c['log'])}</td></tr>"
                   for c in d["commands"])
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>graphprobe diagnose</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;
padding:3px 6px;font-size:13px}}.creates{{color:#b00;font-weight:bold}}.inherits{{color:#070}}pre{{background:#f6f6f6;
padding:1em}}</style></head><body><h1>graphprobe diagnose</h1><pre>{e(text)}</pre>
<h2>Attribution (replay)</h2><table><tr><th>module</th><th>verdict</th><th>local error</th><th>eager local error</th>
<th>float64 error</th><th>reason</th></tr>{rows}</table>
<h2>Bisect</h2><table><tr><th>test</th><th>backend</th><th>subsystem</th><th>state</th><th>result</th><th>seen</th>
<th>run</th><th>s</th></tr>{tests}</table><h2>Commands</h2><table><tr><th>stage</th><th>exit</th><th>s</th><th>command</th><th>log</th></tr>
{cmds}</table><h2>diagnosis.json</h2><pre>{e(json.dumps(d, indent=1))}</pre></body></html>"""


def write_reports(out: Path, d: dict[str, Any]) -> str:
    """Writes diagnosis.json, summary.txt and report.html; returns the text."""
    d["files"] = {"diagnosis": str(out / "diagnosis.json"), "html": str(out / "report.html"),
                  "summary": str(out / "summary.txt")}
    text = format_text(d)
    # JSON escapes a non-UTF-8 argument (ensure_ascii: "\udcff", which json.load gives back and os.fsencode turns
    # into the bytes given); the text and the page show it escaped.
    write_text_atomic(str(out / "diagnosis.json"), json.dumps(d, indent=1, default=str))
    write_text_atomic(str(out / "summary.txt"), printable(text) + "\n")
    write_text_atomic(str(out / "report.html"), printable(_html(d, text)))
    return text

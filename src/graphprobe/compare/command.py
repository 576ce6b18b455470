"""The ``graphprobe compare`` subcommand: arguments and exit codes.

Exit codes: 0 done (whatever the verdicts, unless --fail-on says otherwise),
1 when --fail-on triggers, 2 for a usage or input error (a path that is not a
dump, a dump that cannot be read; the message goes to stderr).

--fail-on error: any row with Result error, a first divergence (graphprobe's
noise-aware rule), a pair in which nothing was compared (every row unmatched),
or a side that recorded nothing or far fewer records than the other. --fail-on unmatched: also any unmatched row or
step/rank without a partner. --fail-on warning: also any row with Result
warning -- everything that is not a clean pass. Why it failed goes to stderr.
TARGET and BENCH naming one dump (the same folder or file after resolving
symlinks, or a dump.json and its folder: a copy-paste slip that passes every
row) print a warning; with --fail-on (any level) it also exits 1.
Everything printed passes through terminal_safe: names read from a dump cannot
hold terminal escapes.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

from graphprobe._cli_types import int_at_least, print_usage_error
from graphprobe._text import terminal_safe
from graphprobe.compare.fail_on import FAIL_ON_LEVELS, fail_on_reasons
from graphprobe.compare.msprobe_flags import add_msprobe_flags, resolve_paths
from graphprobe.compare.native import threshold_defaults
from graphprobe.compare.pairing import PID_PAIRINGS
from graphprobe.compare.tensors import TENSOR_LAYOUTS

__all__ = ["register", "run", "same_dump"]


def _pct(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (v >= 0 and v != float("inf")):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return v


def _positive(text: str) -> float:
    v = _pct(text)
    if v == 0:
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}")
    return v


_count = int_at_least(0)


def same_dump(target: str | None, bench: str | None) -> str | None:
    """Whether TARGET and BENCH name one dump after resolving symlinks: the
    same folder, the same file, or a dump.json and the folder holding it;
    None when they differ (or one does not exist: compare says so)."""
    if not target or not bench:
        return None
    try:
        t, b = Path(target).resolve(), Path(bench).resolve()
        if t.exists() and b.exists() and os.path.samefile(t, b):
            return f"TARGET and BENCH are the same {'folder' if t.is_dir() else 'file'} ({t})"
        for file, folder in ((t, b), (b, t)):
            if file.is_file() and folder.is_dir() and file.parent == folder:
                return f"TARGET and BENCH are the same dump ({file} and the folder holding it)"
    except (OSError, ValueError):  # unreadable, a NUL, a lone surrogate: compare names what is wrong
        return None
    return None


def register(subparsers: Any) -> None:
    """Adds ``compare`` to the CLI's subparsers. The thresholds' defaults
    are the engine's (``threshold_defaults()``)."""
    try:
        defaults = threshold_defaults()
    except ImportError:  # a broken install: --help still works; compare itself says what is wrong
        defaults = {}
    p = subparsers.add_parser(
        "compare",
        help="compare two dumps (msprobe statistics compare)",
        description="Compare TARGET (the run under test, msprobe's 'NPU') against BENCH (the reference). "
        "Each may be a dump.json, a rank*/pid*/proc* folder, a step* folder or a dump root.",
    )
    p.add_argument("target", metavar="TARGET", nargs="?")  # or msprobe's -tp (msprobe_flags)
    p.add_argument("bench", metavar="BENCH", nargs="?")  # or msprobe's -gp
    p.add_argument("-o", "--output", "--output_path", default="compare_output",
                   help="output folder (default: %(default)s)")
    p.add_argument("--fuzzy", "-fm", "--fuzzy_match", action="store_true",
                   help="match rows ignoring call indices, in execution order")
    p.add_argument("--pid-pairing", choices=PID_PAIRINGS, default="single",
                   help="a step holding several pid (single-process) folders: single = refuse and list them; "
                        "newest = by dump.json time, newest with newest (re-runs into one dump_path); order = "
                        "ascending pid (several processes of one run without ranks) (default: %(default)s)")
    add_msprobe_flags(p)
    p.add_argument("--fail-on", choices=FAIL_ON_LEVELS,
                   help="exit with 1 on: error (error rows, a first divergence, nothing compared, a side empty or "
                        "short, TARGET and BENCH the same dump); unmatched (also unmatched rows, steps/ranks/pids "
                        "without a partner); warning (also warning rows)")
    p.add_argument("--input-error-pct", type=_pct, default=defaults.get("input_error_pct"), metavar="PCT",
                   help="error rule: every input NormRelativeErr below this (default: %(default)s)")
    p.add_argument("--output-error-pct", type=_pct, default=defaults.get("output_error_pct"), metavar="PCT",
                   help="error rule: an output NormRelativeErr above this (default: %(default)s)")
    p.add_argument("--warning-ratio", type=_pct, default=defaults.get("warning_ratio"), metavar="X",
                   help="warning rule: output above X times the largest input (default: %(default)s)")
    p.add_argument("--warning-pct", type=_pct, default=defaults.get("warning_pct"), metavar="PCT",
                   help="warning rule when inputs are exact (default: %(default)s)")
    p.add_argument("--floor-scale", type=_positive, default=defaults.get("floor_scale"), metavar="X",
                   help="first divergence: multiply every noise floor by X, for hardware noisier than the defaults "
                        "assume (TF32, HF32; the floors are in docs/formats.md) (default: %(default)s)")
    p.add_argument("--divergence-ratio", type=_pct, default=defaults.get("divergence_ratio"), metavar="R",
                   help="first divergence: an output's relative error must exceed R times its inputs' and "
                        "parameters' plus its noise floor, an input's R times everything recorded before it plus "
                        "its floor (default: %(default)s)")
    p.add_argument("--parameters-as-causes", action="store_true",
                   help="first divergence: judge parameters as causes at every step; by default, from a training "
                        "run's step 1, parameters that differ are taken as the first update's doing (clean runs' "
                        "optimizers leave them apart) and explain their calls' outputs")
    p.add_argument("--reference", metavar="REF",
                   help="a dump of the same model run eagerly in float64 (graphprobe.reference_dump): the first "
                        "divergence is then the first entry where TARGET is further from REF than BENCH is, by "
                        "torch's same() margin; the CSV gets each side's error vs REF")
    p.add_argument("--graphprobe-verdicts", action="store_true",
                   help="let graphprobe's additions decide Result: rows without a partner are 'unmatched' and "
                        "--noise-pct applies (default: Result is msprobe's verdict)")
    p.add_argument("--noise-pct", type=_pct, default=defaults.get("noise_pct"), metavar="PCT",
                   help="with --graphprobe-verdicts: outputs at or below this never get the ratio warning "
                        "(default: %(default)s)")
    p.add_argument("--tensor-layout", choices=TENSOR_LAYOUTS, default="msprobe",
                   help="tensor dumps (task tensor): msprobe = msprobe's real-data CSV (Cosine, EucDist, MaxAbsErr, "
                        "MaxRelativeErr, One/Five Thousandth Err Ratio, max/min/mean/norm, Result, Err_message, "
                        "Data_name) judged by msprobe's real-data rules; graphprobe = the statistics CSV with those "
                        "columns appended, judged by the statistics rules plus graphprobe's tensor rules "
                        "(default: %(default)s)")
    p.add_argument("--cosine-input-min", type=_pct, default=defaults.get("cosine_input_min"), metavar="C",
                   help="tensor dumps: warning when every input Cosine is above C ... (default: %(default)s)")
    p.add_argument("--cosine-drop", type=_pct, default=defaults.get("cosine_drop"), metavar="D",
                   help="... and an output's is more than D below the lowest input's (default: %(default)s)")
    p.add_argument("--thousandth-input-min", type=_pct, default=defaults.get("thousandth_input_min"), metavar="R",
                   help="tensor dumps: error when every input One Thousandth Err Ratio is above R ... "
                        "(default: %(default)s)")
    p.add_argument("--thousandth-output-max", type=_pct, default=defaults.get("thousandth_output_max"), metavar="R",
                   help="... and an output's is below R (default: %(default)s)")
    p.add_argument("--top", type=_count, default=10, metavar="N", help="worst rows shown per pair (default: %(default)s)")
    p.add_argument("-j", "--jobs", type=_count, default=0, metavar="N", help="worker processes (default: CPU count)")
    p.add_argument("--no-report", action="store_true", help="write only the CSVs, no HTML")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Runs the comparison described by ``args``; returns the exit code."""
    from graphprobe.compare import PairingError, Thresholds, compare
    from graphprobe.compare.checksums import checksum_lines
    from graphprobe.compare.summary import format_summary
    from graphprobe.compare.workbook import OpenpyxlMissing, require_openpyxl, write_workbooks

    usage = resolve_paths(args)
    if usage is None and args.xlsx:
        try:
            require_openpyxl()  # before the compare, not after it
        except OpenpyxlMissing as e:
            usage = str(e)
    if usage is not None:
        if getattr(args, "compare_parser", None) is not None:
            print_usage_error(args.compare_parser, usage)
        else:
            print(terminal_safe(f"graphprobe compare: error: {usage}"), file=sys.stderr)
        return 2
    same = same_dump(args.target, args.bench)
    if same is not None:  # a copy-paste slip passes every row: say it before anything else
        print(terminal_safe(f"graphprobe compare: warning: {same}: the dump is compared with itself, so every row "
                            "agrees; check TARGET and BENCH" + (f" (--fail-on {args.fail_on}: exit 1)"
                                                                if args.fail_on else "")), file=sys.stderr)
    thresholds = Thresholds(**{f.name: getattr(args, f.name) for f in fields(Thresholds)
                               if getattr(args, f.name) is not None})
    try:
        result = compare(
            args.target,
            args.bench,
            args.output,
            fuzzy=args.fuzzy,
            thresholds=thresholds,
            top=args.top,
            html=not args.no_report,
            jobs=args.jobs or None,
            progress=not args.quiet,
            graphprobe_verdicts=args.graphprobe_verdicts,
            tensor_layout=args.tensor_layout,
            floor_scale=args.floor_scale,
            divergence_ratio=args.divergence_ratio,
            reference=args.reference,
            pid_pairing=args.pid_pairing,
            parameters_as_causes=args.parameters_as_causes,
        )
    except (PairingError, OSError) as e:
        print(terminal_safe(f"graphprobe compare: error: {e}"), file=sys.stderr)
        return 2
    book_notes: list[str] = []  # cells cut to Excel's limit
    workbooks = write_workbooks(result, book_notes) if args.xlsx else {}
    print(format_summary(result, args.top, workbooks))
    for line in checksum_lines(result):  # both dumps with "md5": bit-identical or not (compare/checksums.py)
        print(terminal_safe(line))
    unwritten = [w for w in workbooks.values() if isinstance(w, str)]
    for message in unwritten:
        print(terminal_safe(f"graphprobe compare: error: {message}"), file=sys.stderr)
    for note in book_notes:
        print(terminal_safe(f"graphprobe compare: warning: {note}"), file=sys.stderr)
    for o in result.outcomes:
        for note in o.notes:
            print(terminal_safe(f"graphprobe compare: warning: {note}"), file=sys.stderr)
    if not result.outcomes:
        print("graphprobe compare: error: nothing to compare: no TARGET/BENCH pair was found", file=sys.stderr)
        return 2
    if result.failures or unwritten:
        for o in result.failures:
            print(terminal_safe(f"graphprobe compare: error: {o.error}"), file=sys.stderr)
        return 2
    if args.fail_on:
        reasons = fail_on_reasons(result, args.fail_on)
        if same is not None:
            reasons.insert(0, f"{same}: nothing was compared against a reference")
        for reason in reasons:
            print(terminal_safe(f"graphprobe compare: --fail-on {args.fail_on}: {reason}"), file=sys.stderr)
        if reasons:
            return 1
    return 0

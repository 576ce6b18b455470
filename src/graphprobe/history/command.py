"""The ``graphprobe history`` subcommand (registrar: imports nothing heavy).

    graphprobe history build DUMP_ROOT -o HIST [--every N]
    graphprobe history query HIST --first-anomaly | --movers STEP_A STEP_B | --record NAME [...]
    graphprobe history report HIST [-o report.html] [--record NAME]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any

from graphprobe._cli_types import int_at_least

__all__ = ["register"]

_STATS = ("Max", "Min", "Mean", "Norm")


def _ranks(text: str) -> list[int]:
    """``0,3,8-11`` -> [0, 3, 8, 9, 10, 11]."""
    out: list[int] = []
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            out += range(int(lo), int(hi or lo) + 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--ranks {text!r}: expected ranks like 0,3,8-11") from None
    if not out or min(out) < 0:
        raise argparse.ArgumentTypeError(f"--ranks {text!r}: expected ranks >= 0 like 0,3,8-11")
    return sorted(set(out))


def _rule_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stat", choices=_STATS, default="Norm", help="the statistic judged (default: %(default)s)")
    p.add_argument("--k", type=float, default=6.0, help="deviation rule: standard deviations (default: %(default)s)")
    p.add_argument("--window", type=int_at_least(2), default=20, help="previous values in the mean (default: %(default)s)")
    p.add_argument("--min-history", type=int_at_least(2), default=5,
                   help="values needed before the deviation rule judges (default: %(default)s)")
    p.add_argument("--rtol", type=float, default=1e-3,
                   help="deviation floor relative to the mean (default: %(default)s)")


def register(subparsers: Any) -> None:
    """Adds ``history`` to the CLI's subparsers."""
    p = subparsers.add_parser(
        "history", help="a queryable history of a long run: build it from dumps, query it (DuckDB or Dask), report",
        description="The statistics of every step and rank in Parquet files, read selectively by rank and step "
        "(docs/history.md). Exit 0: done (query --first-anomaly: nothing left its history; --replicas: they "
        "agree); 1: query --first-anomaly or --replicas found one; 2: usage or input error.")
    sub = p.add_subparsers(dest="history_command", metavar="ACTION")
    sub.required = True
    b = sub.add_parser("build", help="convert DUMP_ROOT/step{N}/rank{R}/dump.json folders into a history",
                       description="Converts the dump.json files of AclGraphDumper's dump_path into a history.")
    b.add_argument("dump_root", metavar="DUMP_ROOT")
    b.add_argument("-o", "--out", required=True, metavar="HIST", help="the history folder to write")
    b.add_argument("--every", type=int_at_least(1), default=100, help="steps per file (default: %(default)s)")
    b.set_defaults(handler=_build)

    q = sub.add_parser("query", help="ask the history a question",
                       description="Prints the answer. --first-anomaly: the first (step, rank, record) whose value "
                       "is NaN/Inf or leaves its running mean by more than K standard deviations; --movers: the "
                       "records that changed most between two steps; --record: a record's statistic over steps; --replicas: "
                       "the ranks whose tensors differ from their replicas' (DuckDB only).")
    q.add_argument("hist", metavar="HIST")
    what = q.add_mutually_exclusive_group(required=True)
    what.add_argument("--first-anomaly", action="store_true")
    what.add_argument("--movers", nargs=2, type=int, metavar=("STEP_A", "STEP_B"))
    what.add_argument("--record", metavar="NAME")
    what.add_argument("--replicas", action="store_true",
                      help="ranks whose checksum (summary_mode md5) of a record differs from the other replicas' "
                      "(--ranks: the replica group; --like: the records)")
    q.add_argument("--nonfinite-only", action="store_true",
                   help="--first-anomaly: the first NaN/Inf only (no deviation rule; one scan)")
    q.add_argument("--like", default="%", help="--replicas: SQL LIKE pattern of the records (default: all)")
    _rule_args(q)
    q.add_argument("--top", type=int_at_least(1), default=20, help="--movers: rows to print (default: %(default)s)")
    q.add_argument("--ranks", type=_ranks, default=None, help="only these ranks, e.g. 0,3,8-11 (default: all)")
    q.add_argument("--engine", choices=("duckdb", "dask"), default="duckdb", help="(default: %(default)s)")
    q.add_argument("--json", action="store_true", help="print JSON instead of a table")
    q.set_defaults(handler=_query)

    r = sub.add_parser("report", help="write a self-contained HTML report",
                       description="A record over steps and a step x module heat map of relative change.")
    r.add_argument("hist", metavar="HIST")
    r.add_argument("-o", "--out", default="history_report.html", help="(default: %(default)s)")
    r.add_argument("--record", metavar="NAME", help="the record to plot (default: the first anomaly's)")
    _rule_args(r)
    r.set_defaults(handler=_report)


def _rule(args: argparse.Namespace) -> Any:
    from graphprobe.history.rules import AnomalyRule

    return AnomalyRule(k=args.k, window=args.window, min_history=args.min_history, rtol=args.rtol, stat=args.stat)


def _fail(message: str) -> int:
    print(f"graphprobe history: error: {message}", file=sys.stderr)
    return 2


def _build(args: argparse.Namespace) -> int:
    from graphprobe.history.writer import build_history

    try:
        counts = build_history(args.dump_root, args.out, every=args.every)
    except (OSError, ValueError, ImportError) as e:
        return _fail(str(e))
    print(f"history {args.out}: {counts['steps']} steps, {counts['ranks']} ranks, {counts['rows']} rows, "
          f"{counts['files']} files")
    return 0


def _query(args: argparse.Namespace) -> int:
    try:
        rule = _rule(args)
        if args.engine == "duckdb":
            from graphprobe.history import query as engine
            kw: dict[str, Any] = {}
        else:
            from graphprobe.history import dask_query as engine
            kw = {"scheduler": "threads"}
        if args.first_anomaly:
            found = engine.first_anomaly(args.hist, rule, ranks=args.ranks, deviation=not args.nonfinite_only, **kw)
            if args.json:
                print(json.dumps(None if found is None else asdict(found)))
            elif found is None:
                print("no record leaves its history")
            else:
                extra = "" if found.kind == "nonfinite" else (
                    f" (previous {found.n_prev}: mean {found.mean_prev:.6g}, std {found.std_prev:.6g})")
                print(f"first anomaly: step {found.step}, rank {found.rank}, {found.record}: {found.kind}, "
                      f"{args.stat} {found.value}{extra}")
            return 0 if found is None else 1
        if args.movers:
            rows = engine.movers(args.hist, args.movers[0], args.movers[1], args.stat, args.top, args.ranks, **kw)
            if args.json:
                print(json.dumps([asdict(r) for r in rows]))
            else:
                print(f"{'rank':>5}  {'rel_change':>12}  {args.stat + '@' + str(args.movers[0]):>14}  "
                      f"{args.stat + '@' + str(args.movers[1]):>14}  record")
                for m in rows:
                    print(f"{m.rank:>5}  {m.rel:>12.4g}  {m.a:>14.6g}  {m.b:>14.6g}  {m.record}")
            return 0
        if args.replicas:
            from graphprobe.history.query import replica_mismatches

            found_rows = replica_mismatches(args.hist, args.ranks, args.like)
            if args.json:
                print(json.dumps([asdict(r) for r in found_rows]))
            elif not found_rows:
                print("replicas agree")
            for r in ([] if args.json else found_rows):
                m = "no majority" if r.majority is None else f"majority {r.majority & (2**64 - 1):016x}"
                print(f"step {r.step}: rank {r.rank} disagrees on {r.record} ({r.checksum & (2**64 - 1):016x}, {m})")
            return 1 if found_rows else 0
        series = engine.record_over_steps(args.hist, args.record, args.stat, args.ranks, **kw)
        if args.json:
            print(json.dumps([asdict(s) for s in series]))
        else:
            print(f"{args.record}: {args.stat} over ranks")
            print(f"{'step':>8}  {'ranks':>5}  {'min':>12}  {'mean':>12}  {'max':>12}  nonfinite")
            for s in series:
                print(f"{s.step:>8}  {s.ranks:>5}  {_g(s.min):>12}  {_g(s.mean):>12}  {_g(s.max):>12}  {s.nonfinite}")
        return 0
    except (OSError, ValueError, ImportError) as e:
        return _fail(str(e))


def _g(v: float | None) -> str:
    return "-" if v is None else f"{v:.6g}"


def _report(args: argparse.Namespace) -> int:
    from graphprobe.history.report import write_report

    try:
        path = write_report(args.hist, args.out, args.record, args.stat, _rule(args))
    except (OSError, ValueError, ImportError) as e:
        return _fail(str(e))
    print(f"report: {path}")
    return 0

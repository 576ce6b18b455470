"""The ``graphprobe diagnose`` subcommand (registrar: imports nothing heavy)."""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from graphprobe._cli_types import int_at_least

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Adds ``diagnose`` to the CLI's subparsers."""
    p = subparsers.add_parser(
        "diagnose",
        help="from 'graph mode differs' to the module that creates the error and the compiler stage that causes it",
        usage="graphprobe diagnose [-o OUT] [--reference-cmd CMD] [--level {L0,mix}] [--steps N] [--no-bisect] "
              "[--timeout S] [--jobs N] [--no-fork-server] -- COMMAND [ARGS...]",
        description="Runs COMMAND (your script, which wires AclGraphDumper() as usual; diagnose supplies its "
        "configuration through $GRAPHPROBE_CONFIG) in four stages: screen (reference = the same command with "
        "TORCHDYNAMO_DISABLE=1, or --reference-cmd; target; compare; first divergence), attribute (the target "
        "again with replay on the divergent module: the deepest module that creates the error), bisect (torch's "
        "CompilerBisector with that verdict as pass/fail: backend, subsystem, bisect number) and report "
        "(OUT/diagnosis.json, OUT/report.html, OUT/repro/). Exit 0: nothing diverges; 1: a divergence was "
        "diagnosed; 2: usage error or a stage could not run; 130: interrupted (the running command is stopped). "
        "See docs/diagnose.md.",
    )
    p.add_argument("-o", "--out", default="graphprobe_diagnose", help="output folder (default: %(default)s)")
    p.add_argument("--reference-cmd", metavar="CMD",
                   help="the reference command, one shell-quoted string (default: COMMAND with TORCHDYNAMO_DISABLE=1)")
    p.add_argument("--level", choices=("L0", "mix"), default="L0", help="the screen's level (default: %(default)s)")
    p.add_argument("--steps", type=int_at_least(1), default=None,
                   help="compare and judge only the first N steps (default: every recorded step)")
    p.add_argument("--no-bisect", action="store_true", help="skip the compiler bisect")
    p.add_argument("--timeout", type=int_at_least(1), default=None, metavar="S",
                   help="stop a command (and its child processes) that runs longer than S seconds (default: none)")
    p.add_argument("--jobs", type=int_at_least(1), default=None, metavar="N",
                   help="bisect tests run at once (default: one per CPU, at most 8; 1: one at a time, as torch's "
                   "bisector; each is a full run of COMMAND, with its memory)")
    p.add_argument("--no-fork-server", action="store_true",
                   help="run every command as a fresh process (default: runs of `python SCRIPT` / `python -m MODULE` "
                   "are forked from one process that imported torch, inductor and graphprobe once)")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="COMMAND", help="the command to diagnose, after --")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Runs the diagnosis; see the subcommand's description for the exit codes."""
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        print("graphprobe diagnose: error: no COMMAND: give it after --, e.g. graphprobe diagnose -- python train.py",
              file=sys.stderr)
        return 2
    reference = None
    if args.reference_cmd is not None:
        try:
            reference = shlex.split(args.reference_cmd)
        except ValueError as e:
            print(f"graphprobe diagnose: error: --reference-cmd {args.reference_cmd!r}: {e}", file=sys.stderr)
            return 2
        if not reference:
            print("graphprobe diagnose: error: --reference-cmd is empty", file=sys.stderr)
            return 2
    from graphprobe.diagnose.pipeline import DiagnoseOptions, OutFolderError, diagnose

    try:
        code, _ = diagnose(DiagnoseOptions(command=cmd, out=args.out, reference_command=reference, level=args.level,
                                           steps=args.steps, bisect=not args.no_bisect, timeout=args.timeout,
                                           jobs=args.jobs, fork_server=not args.no_fork_server))
    except (OutFolderError, OSError) as e:  # OUT could not be prepared: nothing ran, nothing in it was changed
        print(f"graphprobe diagnose: error: {e}", file=sys.stderr)
        return 2
    return code

"""The ``graphprobe`` command line.

Subcommands live in their own modules and are listed in ``SUBCOMMANDS`` as
``name -> "module:function"``; the function receives argparse's subparsers
object, adds its parser and sets ``handler`` (``Namespace -> int``) as a
default. Registrar modules must import nothing heavy at top level (no torch):
all of them are imported to build ``--help``. To add ``demo``, write e.g.
``graphprobe/demo/command.py`` with a ``register`` and add one line here.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from graphprobe._cli_types import Parser, int_at_least  # int_at_least: re-exported, part of this module's interface

__all__ = ["EXIT_STDOUT_CLOSED", "SUBCOMMANDS", "build_parser", "int_at_least", "main"]

SUBCOMMANDS: dict[str, str] = {
    "compare": "graphprobe.compare.command:register",
    "demo": "graphprobe.demo.command:register",
    "diagnose": "graphprobe.diagnose.command:register",
    "history": "graphprobe.history.command:register",
}


def build_parser() -> argparse.ArgumentParser:
    """The full parser, with every subcommand registered."""
    return _parser(SUBCOMMANDS)


def _parser(names: Sequence[str]) -> argparse.ArgumentParser:
    """The parser with the subcommands ``names`` (keys of ``SUBCOMMANDS``,
    in its order) registered."""
    import graphprobe

    # Raw: argparse would wrap --version's text at the terminal width, cutting
    # the install path mid-word.
    # Parser: a usage error leads with the error line, then one usage line.
    parser = Parser(prog="graphprobe", description="graphprobe: precision debugging in graph mode",
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version",
                        version=f"graphprobe {graphprobe.__version__} ({os.path.dirname(graphprobe.__file__)})")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, target in SUBCOMMANDS.items():
        if name not in names:
            continue
        module, _, func = target.partition(":")
        getattr(importlib.import_module(module), func)(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``graphprobe`` console script; returns the exit
    code (0 ok, 1 check failed, 2 usage or input error, 130 interrupted, 141
    when stdout was closed by its reader, as for ``... | head -1``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    # A command line naming a subcommand first registers that one alone:
    # the others' modules (graphprobe.config for demo, ...) cost a compare
    # their import time. Anything else (--help, --version, an unknown
    # command) gets the full parser, so that every message is unchanged.
    parser = _parser([argv[0]]) if argv and argv[0] in SUBCOMMANDS else build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return int(e.code) if isinstance(e.code, int) else 2
    try:
        code = int(args.handler(args))
        sys.stdout.flush()  # inside the try: a reader that has gone shows here
        return code
    except KeyboardInterrupt:
        print("graphprobe: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _stdout_closed()


#: The exit code of a tool whose reader went away (``graphprobe compare ... |
#: head -1``): what a shell reports for one that SIGPIPE ended (128 + 13).
EXIT_STDOUT_CLOSED = 141


def _stdout_closed() -> int:
    """Python's recipe for a closed pipe (docs of the signal module, "Note on
    SIGPIPE"): point stdout at /dev/null, so that the flush at exit cannot
    fail again and print a second traceback, and exit quietly."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # a stdout without a descriptor (tests capture it)
        pass
    return EXIT_STDOUT_CLOSED


if __name__ == "__main__":
    sys.exit(main())

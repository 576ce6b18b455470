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

__all__ = ["SUBCOMMANDS", "build_parser", "int_at_least", "main"]

SUBCOMMANDS: dict[str, str] = {
    "compare": "graphprobe.compare.command:register",
    "demo": "graphprobe.demo.command:register",
}


def int_at_least(minimum: int):  # noqa: ANN201  (an argparse type)
    """An argparse ``type`` accepting integers >= ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    """The full parser, with every subcommand registered."""
    import graphprobe

    parser = argparse.ArgumentParser(prog="graphprobe", description="graphprobe: precision debugging in graph mode")
    parser.add_argument("--version", action="version",
                        version=f"graphprobe {graphprobe.__version__} ({os.path.dirname(graphprobe.__file__)})")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for target in SUBCOMMANDS.values():
        module, _, func = target.partition(":")
        getattr(importlib.import_module(module), func)(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``graphprobe`` console script; returns the exit
    code (0 ok, 1 check failed, 2 usage or input error)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return int(e.code) if isinstance(e.code, int) else 2
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        print("graphprobe: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

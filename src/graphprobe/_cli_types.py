"""argparse pieces shared by the ``graphprobe`` subcommands (``type``
functions, the parser class and its usage errors): a floor module, so that a
subcommand's parser need not import the CLI that lists it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn, TextIO

__all__ = ["Parser", "int_at_least", "print_usage_error", "short_usage"]


def short_usage(parser: argparse.ArgumentParser) -> str:
    """One usage line: the program, ``[options]`` and the positional
    arguments (``usage: graphprobe compare [options] [TARGET] [BENCH]``),
    instead of argparse's full list of options (15 lines for ``compare``)."""
    words = [parser.prog]
    if any(a.option_strings for a in parser._actions):
        words.append("[options]")
    for action in parser._actions:
        if action.option_strings or action.help == argparse.SUPPRESS:
            continue
        if isinstance(action, argparse._SubParsersAction):
            words.append("COMMAND")
            continue
        name = action.metavar if isinstance(action.metavar, str) else action.dest
        words.append(f"[{name}]" if action.nargs in ("?", "*") else name)
    return "usage: " + " ".join(words)


def print_usage_error(parser: argparse.ArgumentParser, message: str, stream: TextIO | None = None) -> None:
    """A usage error as the user needs it: the error first, then one usage
    line and where the full help is."""
    from graphprobe._text import terminal_safe  # lazy: this floor module stays free of graphprobe at import

    out = sys.stderr if stream is None else stream
    print(terminal_safe(f"{parser.prog}: error: {message}"), file=out)
    print(short_usage(parser), file=out)
    print(f"all options: {parser.prog} --help", file=out)


class Parser(argparse.ArgumentParser):
    """argparse's parser whose usage errors lead with the error (argparse
    prints the whole usage first); subcommand parsers are of this class too
    (``add_subparsers`` makes them of its parser's class)."""

    def error(self, message: str) -> NoReturn:
        print_usage_error(self, message)
        self.exit(2)


def int_at_least(minimum: int) -> Callable[[str], int]:
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

"""argparse ``type`` functions shared by the ``graphprobe`` subcommands: a
floor module, so that a subcommand's parser need not import the CLI that
lists it."""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = ["int_at_least"]


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

"""Which characters may reach C++ and the terminal.

C++ reads paths and names as NUL-terminated UTF-8: a NUL truncates them and a
lone surrogate cannot be encoded. Control and format characters (ESC, CR,
U+0085, the bidi override U+202E, ...) make paths and names lie when printed.
"""

from __future__ import annotations

import unicodedata

__all__ = ["UNSAFE_PATH_CHARS", "first_unsafe", "terminal_safe"]

#: Unicode categories refused in paths: control (Cc: NUL, ESC, CR, U+0085),
#: format (Cf: U+202E, zero-width characters), lone surrogates (Cs), line and
#: paragraph separators (Zl, Zp).
UNSAFE_PATH_CHARS = ("Cc", "Cf", "Cs", "Zl", "Zp")


def first_unsafe(text: str, categories: tuple[str, ...] = UNSAFE_PATH_CHARS) -> tuple[int, str] | None:
    """The position and ``U+XXXX`` name of the first character of ``text``
    whose Unicode category is in ``categories``; None when there is none."""
    for i, c in enumerate(text):
        if unicodedata.category(c) in categories:
            return i, f"U+{ord(c):04X}"
    return None


def terminal_safe(text: str) -> str:
    """``text`` with every control or format character (newline included)
    shown as a Python escape (``\\x1b``, ``\\r``, ``\\u202e``), so that a
    name read from a dump cannot move the cursor, clear the screen, fake a
    line or reorder one. Apply it to each line, then join."""
    # Every such character is non-printable, so repr escapes it.
    return "".join(repr(c)[1:-1] if unicodedata.category(c) in UNSAFE_PATH_CHARS else c for c in text)

"""Numbers as people read them: 4 significant digits in the terminal and the
HTML report. The CSV keeps full precision (as msprobe's does)."""

from __future__ import annotations

import math
import re

__all__ = ["short", "short_number", "short_pct", "shorten_numbers"]

DIGITS = 4

# A decimal or exponent literal standing alone: not part of a name such as
# "layers.1.0" (preceded by a dot or a word character).
_NUMBER = re.compile(r"(?<![\w.])-?(?:\d+\.\d+(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+)(?![\w.])")


def short(v: float | None) -> str:
    """``v`` with 4 significant digits; ``N/A`` for None, ``nan``/``inf``."""
    if v is None:
        return "N/A"
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.{DIGITS}g}"


def short_pct(v: float | None) -> str:
    """A percentage with 4 significant digits and a ``%`` (none for N/A, nan, inf)."""
    text = short(v)
    return text + "%" if v is not None and math.isfinite(v) else text


def shorten_numbers(text: str) -> str:
    """Every stand-alone decimal number in ``text`` (a verdict's reason)
    rewritten with 4 significant digits."""
    return _NUMBER.sub(lambda m: f"{float(m.group(0)):.{DIGITS}g}", text)


def short_number(v: float) -> str:
    """Two significant digits, an exponent below 1e-2 (``2e-6``), as the
    engine's messages and the noise-floor table write numbers."""
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == 0:
        return "0"
    text = f"{v:.1e}" if abs(v) < 1e-2 else f"{v:.2g}"
    if "e" not in text:
        return text
    mant, exp = text.split("e")
    if mant.endswith(".0"):
        mant = mant[:-2]
    return f"{mant}e{int(exp)}"

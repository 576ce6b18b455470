"""The words that explain a pair's first divergence: the noise where the
pair agrees and the noise floors used, shared by the terminal summary and
the HTML report so that both say the same."""

from __future__ import annotations

from collections.abc import Iterable

from graphprobe.compare.numbers import short_number
from graphprobe.compare.outcome import Noise

__all__ = ["floors_text", "noise_text"]


def noise_text(n: Noise | None) -> str:
    """``noise upstream: max 2e-7 (0.0021x the floor) over 40 rows`` (or
    ``noise seen`` without a first divergence); empty without a digest."""
    if n is None:
        return ""
    where = "noise upstream" if n.upstream else "noise seen"
    if n.rows == 0:
        return f"{where}: none (no matched row before it)" if n.upstream else f"{where}: no matched row"
    return f"{where}: max {short_number(n.max_e)} ({short_number(n.max_z)}x the floor) over {n.rows} rows"


def floors_text(floors_used: Iterable[tuple[str, float, float]]) -> str:
    """The noise floors used, each table row once in the order first seen:
    ``noise floors (relative error; Mean/Norm, Max/Min): float32 1e-4/1e-4``;
    empty when none was used."""
    floors: dict[str, tuple[float, float]] = {}
    for name, aggregate, extreme in floors_used:
        floors.setdefault(name, (aggregate, extreme))
    if not floors:
        return ""
    return "noise floors (relative error; Mean/Norm, Max/Min): " + ", ".join(
        name if a == 0 and e == 0 else f"{name} {short_number(a)}/{short_number(e)}" for name, (a, e) in floors.items())

"""The types that the pair outcome (outcome.py) and the float64 referee
(referee.py) share: a first divergence and the referee's verdict.

A floor module: it imports nothing of graphprobe, so that outcome.py and
referee.py both import from here and neither imports the other (an import
cycle, even a type-only one, makes either module's import order matter).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Divergence", "RefereeRow", "Verdict"]


@dataclass(frozen=True)
class Divergence:
    """Why an entry is the first divergence (docs/formats.md, "First divergence").

    ``kinds`` holds every kind that applies: ``parameter`` (a parameter
    differs beyond noise: a cause of its own), ``output`` (an output whose
    error exceeds ``divergence_ratio`` times its inputs' and parameters' plus
    its noise floor), ``unrecorded-input`` (an input whose error exceeds the
    ratio times everything recorded before it plus its floor: the error came
    from code that is not
    recorded, between ``last_agreeing`` and this entry); with one of these,
    ``integer-output`` (an integer output changed while the inputs agree
    within their floor), ``bitwise-pair`` (below the floor, in a pair that
    agreed bit for bit so far where the same code reproduced) and
    ``same-values`` (an output the bench holds, bit for bit, as an earlier
    entry's output changed on the target; with ``unrecorded-input``, the
    same for a gradient a backward call received) and ``random`` (the entry
    draws random numbers, dropout in training mode: unless both runs drew
    the same ones, a fault there cannot be told from the draw). ``row`` is
    the row
    that triggered (parameter, else output, else input); ``errors`` its
    scale-aware relative error per statistic (Max, Min, Mean, Norm), ``z``
    the largest of them over the noise floor ``floor`` of its dtype's table
    row ``floor_name`` (``hard``: a dtype, shape or value difference, z inf).
    """

    entry: str
    entry_index: int
    kinds: tuple[str, ...]
    row: str
    message: str
    z: float
    errors: tuple[float | None, ...] = ()
    worst_stat: str | None = None
    floor_name: str = ""
    floor: float | None = None
    hard: str | None = None
    z_inputs: float = 0.0
    z_parameters: float = 0.0
    z_outputs: float = 0.0
    last_agreeing: str | None = None
    unmatched_between: tuple[str, ...] = ()
    parameter_rows: int = 0
    parameter_rows_differing: int = 0
    # A parameter cause while most parameters differ: an earlier step's
    # update (or the loaded weights) differ.
    parameters_throughout: bool = False


@dataclass(frozen=True, slots=True)
class RefereeRow:
    """One matched row's distances to the float64 reference, per class of
    statistic (aggregate Mean/Norm, extreme Max/Min); None where REF has no
    such row (or the row is not a floating tensor)."""

    name: str
    target: tuple[float, float] | None
    bench: tuple[float, float] | None


@dataclass(frozen=True)
class Verdict:
    """What the referee decided for one pair: the entry blamed on the target
    (None: none), the first entry where the bench is the one further from
    float64, their messages, and every row's distances."""

    blamed_entry: str | None
    blamed_index: int | None
    blamed_row: str | None
    blamed_kind: str | None
    message: str | None
    bench_further_entry: str | None
    bench_further_message: str | None
    rows: tuple[RefereeRow, ...]
    reference: str

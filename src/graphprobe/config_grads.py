"""``statistics.data_mode``: msprobe's choice of directions, read for the
backward records (wiring/backward.py)."""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["DATA_MODES", "parse_data_mode"]

#: msprobe's values. graphprobe records forward calls whole in every mode;
#: "all" and "backward" add the backward and parameter-gradient records.
DATA_MODES = ("all", "forward", "backward", "input", "output")


_Factory = Callable[[str, Any, str], Exception]


def parse_data_mode(value: Any, where: str, errors: tuple[_Factory, _Factory]) -> tuple[str, ...]:
    """The validated list as a tuple; ``errors`` are the config's (type
    error, value error) factories, called with (where, value, allowed)."""
    type_error, value_error = errors
    if not isinstance(value, list) or not value:
        raise type_error(where, value, f"a non-empty list of {list(DATA_MODES)}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise type_error(f"{where}[{i}]", item, f"one of {list(DATA_MODES)}")
        if item not in DATA_MODES:
            raise value_error(f"{where}[{i}]", item, f"one of {list(DATA_MODES)}")
    return tuple(value)

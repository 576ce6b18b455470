"""Configuration: msprobe's ``config.json`` keys, loaded and validated.

Example::

    {"task": "statistics", "dump_path": "./L0_dump", "rank": [], "level": "L0",
     "statistics": {"list": ["linear", "attention"]}}

Every error names the field, the value given and what is allowed. A wrong
type raises :class:`ConfigTypeError` (a ``TypeError``), a wrong value
:class:`ConfigValueError` (a ``ValueError``); both are :class:`ConfigError`.
Unknown keys are reported with a warning and otherwise ignored.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

__all__ = [
    "ConfigError",
    "ConfigTypeError",
    "ConfigValueError",
    "DumpConfig",
    "load_config",
    "parse_config",
    "parse_ranks",
]

TASKS = ("statistics", "tensor")
LEVELS = ("L0", "L1", "mix")
SUPPORTED_LEVELS = ("L0", "L1", "mix")
ROOT_KEYS = ("task", "dump_path", "rank", "level", "statistics", "dump_enable")
STATISTICS_KEYS = ("list",)
MAX_PATH = 4096


class ConfigError(Exception):
    """A configuration that graphprobe cannot use."""


class ConfigTypeError(ConfigError, TypeError):
    """A configuration field has the wrong type."""


class ConfigValueError(ConfigError, ValueError):
    """A configuration field has a value outside what is allowed."""


@dataclass(frozen=True)
class DumpConfig:
    """A validated configuration."""

    dump_path: str
    task: str = "statistics"
    level: str = "L0"
    ranks: tuple[int, ...] = ()  # empty: every rank records
    keywords: tuple[str, ...] = ()  # empty: every module / API records
    dump_enable: bool = True
    source: str | None = field(default=None, compare=False)

    def selects_rank(self, rank: int) -> bool:
        """Whether ``rank`` records under this configuration."""
        return not self.ranks or rank in self.ranks


def _type_name(value: Any) -> str:
    return type(value).__name__


def _type_error(where: str, value: Any, allowed: str) -> ConfigTypeError:
    return ConfigTypeError(f"config field '{where}': got {value!r} ({_type_name(value)}); allowed: {allowed}")


def _value_error(where: str, value: Any, allowed: str) -> ConfigValueError:
    return ConfigValueError(f"config field '{where}': got {value!r}; allowed: {allowed}")


def parse_ranks(value: Any, where: str = "rank") -> tuple[int, ...]:
    """Parses msprobe's ``rank`` field: ints and ``"start-end"`` (or ``"3"``) strings."""
    if not isinstance(value, list):
        raise _type_error(where, value, 'a list of non-negative ints and "start-end" strings, e.g. [0, "2-3"]')
    ranks: list[int] = []
    for i, item in enumerate(value):
        here = f"{where}[{i}]"
        if isinstance(item, bool) or not isinstance(item, (int, str)):
            raise _type_error(here, item, 'a non-negative int or a "start-end" string')
        if isinstance(item, int):
            if item < 0:
                raise _value_error(here, item, "a rank >= 0")
            ranks.append(item)
            continue
        text = item.strip()
        parts = text.split("-")
        if len(parts) == 1 and parts[0].isdigit():
            ranks.append(int(parts[0]))
            continue
        if len(parts) != 2 or not parts[0].strip().isdigit() or not parts[1].strip().isdigit():
            raise _value_error(here, item, 'a "start-end" range of non-negative ints, e.g. "2-3", or a single rank "3"')
        start, end = int(parts[0]), int(parts[1])
        if start > end:
            raise _value_error(here, item, f"a range whose start ({start}) is not greater than its end ({end})")
        ranks.extend(range(start, end + 1))
    unique = sorted(set(ranks))
    if len(unique) != len(ranks):
        dupes = sorted({r for r in ranks if ranks.count(r) > 1})
        warnings.warn(f"config field '{where}': ranks {dupes} are listed more than once", stacklevel=3)
    return tuple(unique)


def check_path(value: Any, where: str) -> str:
    """A path from the configuration: non-empty, no control characters, no '..'."""
    if not isinstance(value, str):
        raise _type_error(where, value, "a path string")
    if not value:
        raise _value_error(where, value, "a non-empty path")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise _value_error(where, value, "a path without control characters")
    if ".." in value.replace("\\", "/").split("/"):
        raise _value_error(where, value, "a path without '..' components (write the folder out in full)")
    if len(value.encode()) > MAX_PATH:
        raise _value_error(where, value[:40] + "...", f"a path of at most {MAX_PATH} bytes")
    for part in value.split("/"):
        if len(part.encode()) > 255:
            raise _value_error(where, part[:40] + "...", "path components of at most 255 bytes")
    return value


def parse_config(data: Any, source: str | None = None) -> DumpConfig:
    """Validates a decoded config.json document."""
    if not isinstance(data, dict):
        raise _type_error("<root>", data, "a JSON object")
    unknown = [k for k in data if k not in ROOT_KEYS]
    if unknown:
        warnings.warn(f"config: unknown keys {unknown} are ignored (known: {list(ROOT_KEYS)})", stacklevel=3)

    task = data.get("task", "statistics")
    if not isinstance(task, str):
        raise _type_error("task", task, f"one of {list(TASKS)}")
    if task not in TASKS:
        raise _value_error("task", task, f"one of {list(TASKS)}")

    if "dump_path" not in data:
        raise ConfigValueError("config field 'dump_path' is required: the folder that receives step*/ dumps")
    dump_path = check_path(data["dump_path"], "dump_path")

    level = data.get("level", "L0")
    if not isinstance(level, str):
        raise _type_error("level", level, f"one of {list(LEVELS)}")
    if level not in LEVELS:
        raise _value_error("level", level, f"one of {list(LEVELS)}")
    if level not in SUPPORTED_LEVELS:
        raise _value_error("level", level, f"one of {list(SUPPORTED_LEVELS)} ({level} is not yet supported)")

    ranks = parse_ranks(data.get("rank", []))

    stats = data.get("statistics", {})
    if not isinstance(stats, dict):
        raise _type_error("statistics", stats, 'an object such as {"list": ["linear"]}')
    unknown = [k for k in stats if k not in STATISTICS_KEYS]
    if unknown:
        warnings.warn(f"config: unknown keys {['statistics.' + k for k in unknown]} are ignored", stacklevel=3)
    keywords = stats.get("list", [])
    if not isinstance(keywords, list):
        raise _type_error("statistics.list", keywords, "a list of strings")
    for i, k in enumerate(keywords):
        if not isinstance(k, str):
            raise _type_error(f"statistics.list[{i}]", k, "a string")
        if not k:
            raise _value_error(f"statistics.list[{i}]", k, "a non-empty string")

    enable = data.get("dump_enable", True)
    if not isinstance(enable, bool):
        raise _type_error("dump_enable", enable, "true or false")

    return DumpConfig(
        dump_path=dump_path,
        task=task,
        level=level,
        ranks=ranks,
        keywords=tuple(k.lower() for k in keywords),
        dump_enable=enable,
        source=source,
    )


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


def load_config(config_path: str | os.PathLike[str] | None = None) -> DumpConfig:
    """Loads and validates a config file; ``None`` loads the built-in default.

    The built-in default (``graphprobe/default_config.json``) dumps L0
    statistics of every module of every rank into ``./graphprobe_dump``.
    """
    if config_path is None:
        text = resources.files("graphprobe").joinpath("default_config.json").read_text()
        return parse_config(json.loads(text), source="<built-in default>")
    if not isinstance(config_path, (str, os.PathLike)):
        raise _type_error("config_path", config_path, "a path to a JSON file, or None for the built-in default")
    path = os.fspath(config_path)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ConfigValueError(f"config file '{path}' cannot be read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigValueError(f"config file '{path}' is not UTF-8 text: {exc}") from exc
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise ConfigValueError(f"config file '{path}' is not valid JSON: {exc}") from exc
    try:
        return parse_config(data, source=path)
    except ConfigError as exc:
        raise type(exc)(f"{path}: {exc}") from None



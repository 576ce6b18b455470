"""Configuration: msprobe's ``config.json`` keys, loaded and validated.

Example::

    {"task": "statistics", "dump_path": "./L0_dump", "rank": [], "level": "L0",
     "statistics": {"list": ["linear", "attention"]}}

Every error names the field, the value given and what is allowed. A wrong
type raises :class:`ConfigTypeError` (a ``TypeError``), a wrong value
:class:`ConfigValueError` (a ``ValueError``); both are :class:`ConfigError`.
An unknown key is a :class:`ConfigValueError` that suggests the nearest known
key (a typo'd ``"levle"`` would otherwise dump at the default level). The
msprobe keys that graphprobe knowingly ignores (:data:`MSPROBE_IGNORED_KEYS`)
are accepted, so msprobe configs load; one set to a value that would change
what msprobe dumps is warned about, at the line that created the dumper.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from graphprobe._text import first_unsafe
from graphprobe.config_checksum import parse_summary_mode
from graphprobe.config_grads import parse_data_mode
from graphprobe.config_sections import (
    DEFAULT_TENSOR_LAYOUT,
    MSPROBE_IGNORED_TENSOR_KEYS,
    TENSOR_KEYS,
    SliceRule,
    parse_slice,
    parse_tensor_section,
)
from graphprobe.replay.config import ReplayConfig, parse_replay

__all__ = [
    "ConfigError",
    "ConfigTypeError",
    "ConfigValueError",
    "DumpConfig",
    "config_from_arguments",
    "load_config",
    "parse_config",
    "parse_ranks",
]

TASKS = ("statistics", "tensor")
#: Each level and what it records: (module calls, API calls). L0 records
#: modules, L1 APIs (torch functions, Tensor methods), mix both.
LEVEL_RECORDS: dict[str, tuple[bool, bool]] = {"L0": (True, False), "L1": (False, True), "mix": (True, True)}
LEVELS = tuple(LEVEL_RECORDS)
DEFAULT_LEVEL = "L0"
ROOT_KEYS = ("task", "dump_path", "rank", "level", "statistics", "tensor", "dump_enable", "replay")
STATISTICS_KEYS = ("list", "slice", "data_mode", "summary_mode", "sketch")
#: msprobe's config keys that graphprobe accepts and ignores: key -> (the value
#: under which ignoring it changes nothing, None: any value; what graphprobe
#: does instead). Other tasks' sections (overflow_check, run_ut, ...) only
#: configure those tasks.
MSPROBE_IGNORED_KEYS: dict[str, tuple[Any, str]] = {
    "step": ([], "every step() is dumped; skip steps with dump_enable / enable(False) or step(dump=False)"),
    "seed": (None, "graphprobe seeds nothing"),
    "is_deterministic": (None, "graphprobe changes no determinism setting"),
    "enable_dataloader": (None, "graphprobe does not wrap the data loader"),
    "acl_config": (None, "graphprobe does not use ACL dump"),
    "async_dump": (None, "graphprobe always writes on a background thread"),
    "precision": (None, "statistics are accumulated in double"),
    "framework": (None, "graphprobe records PyTorch only"),
    "overflow_check": (None, "another msprobe task"),
    "free_benchmark": (None, "another msprobe task"),
    "run_ut": (None, "another msprobe task"),
    "grad_probe": (None, "another msprobe task"),
    "structure": (None, "another msprobe task"),
    "exception_dump": (None, "another msprobe task"),
}
#: The same for keys of the ``statistics`` object.
MSPROBE_IGNORED_STATISTICS_KEYS: dict[str, tuple[Any, str]] = {
    "scope": ([], "graphprobe selects with statistics.list only"),
    "tensor_list": ([], "graphprobe's task \"tensor\" saves every selected tensor"),
}
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
    level: str = DEFAULT_LEVEL
    ranks: tuple[range, ...] = ()  # sorted disjoint ranges; empty: every rank records
    keywords: tuple[str, ...] = ()  # empty: every module / API records
    dump_enable: bool = True
    source: str | None = field(default=None, compare=False)
    replay: ReplayConfig | None = None  # "replay": local error attribution (graphprobe.replay)
    slices: tuple[SliceRule, ...] = ()  # statistics.slice (statistics task)
    custom_api: tuple[str, ...] = ()  # tensor.custom_api (tensor task)
    tensor_layout: str = DEFAULT_TENSOR_LAYOUT  # tensor.layout (tensor task)
    data_mode: tuple[str, ...] = ("all",)  # statistics.data_mode: "all"/"backward" add backward records
    summary_mode: str = "statistics"  # statistics.summary_mode: "md5" adds a checksum per tensor
    sketch: bool = True  # statistics.sketch: the Sketch statistic (docs/formats.md); off saves a CPU pass

    @property
    def records_modules(self) -> bool:
        """Whether this level records module calls (L0, mix)."""
        return LEVEL_RECORDS.get(self.level, (False, False))[0]

    @property
    def records_apis(self) -> bool:
        """Whether this level records API calls (L1, mix)."""
        return LEVEL_RECORDS.get(self.level, (False, False))[1]

    @property
    def records_grads(self) -> bool:
        """Whether module calls get backward and parameter-gradient records
        (L0, mix). Not in msprobe's aclgraph tensor layout: its files name
        forward calls only (msprobe's aclgraph dumper records no backward),
        and a backward file would keep a name no reader of the layout knows."""
        if self.task == "tensor" and self.tensor_layout == "aclgraph":
            return False
        return self.records_modules and ("all" in self.data_mode or "backward" in self.data_mode)

    def selects_rank(self, rank: int) -> bool:
        """Whether ``rank`` records under this configuration."""
        return not self.ranks or any(rank in r for r in self.ranks)


def _type_name(value: Any) -> str:
    return type(value).__name__


def _type_error(where: str, value: Any, allowed: str) -> ConfigTypeError:
    return ConfigTypeError(f"config field '{where}': got {value!r} ({_type_name(value)}); allowed: {allowed}")


def _value_error(where: str, value: Any, allowed: str) -> ConfigValueError:
    return ConfigValueError(f"config field '{where}': got {value!r}; allowed: {allowed}")


#: Largest rank accepted: torch.distributed ranks are 32-bit ints.
MAX_RANK = 2**31 - 1
_ASCII_DIGITS = re.compile(r"[0-9]+")


def _rank_number(text: str, where: str, item: Any) -> int:
    # ASCII only: str.isdigit() accepts "²", which int() then refuses.
    text = text.strip()
    if not _ASCII_DIGITS.fullmatch(text):
        raise _value_error(where, item, 'a "start-end" range of non-negative ints, e.g. "2-3", or a single rank "3"')
    if len(text) > 10 or int(text) > MAX_RANK:
        raise _value_error(where, item, f"ranks of at most {MAX_RANK}")
    return int(text)


def parse_ranks(value: Any, where: str = "rank") -> tuple[range, ...]:
    """Parses msprobe's ``rank`` field: ints and ``"start-end"`` (or ``"3"``)
    strings. Returns sorted, disjoint, merged ranges (never expanded, so
    ``"0-2147483647"`` costs nothing); overlaps are warned about."""
    if not isinstance(value, list):
        raise _type_error(where, value, 'a list of non-negative ints and "start-end" strings, e.g. [0, "2-3"]')
    spans: list[tuple[int, int]] = []  # inclusive
    for i, item in enumerate(value):
        here = f"{where}[{i}]"
        if isinstance(item, bool) or not isinstance(item, (int, str)):
            raise _type_error(here, item, 'a non-negative int or a "start-end" string')
        if isinstance(item, int):
            if item < 0:
                raise _value_error(here, item, "a rank >= 0")
            if item > MAX_RANK:
                raise _value_error(here, item, f"a rank of at most {MAX_RANK}")
            spans.append((item, item))
            continue
        parts = item.split("-")
        if len(parts) > 2:
            raise _value_error(here, item, 'a "start-end" range of non-negative ints, e.g. "2-3", or a single rank "3"')
        start = _rank_number(parts[0], here, item)
        end = _rank_number(parts[-1], here, item)
        if start > end:
            raise _value_error(here, item, f"a range whose start ({start}) is not greater than its end ({end})")
        spans.append((start, end))
    spans.sort()
    merged: list[list[int]] = []
    repeated: list[str] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            lo, hi = start, min(end, merged[-1][1])
            repeated.append(str(lo) if lo == hi else f"{lo}-{hi}")
            merged[-1][1] = max(merged[-1][1], end)
        elif merged and start == merged[-1][1] + 1:
            merged[-1][1] = end
        else:
            merged.append([start, end])
    if repeated:
        warnings.warn(f"config field '{where}': ranks [{', '.join(repeated)}] are listed more than once",
                      stacklevel=_user_stacklevel())
    return tuple(range(lo, hi + 1) for lo, hi in merged)


def check_path(value: Any, where: str) -> str:
    """A path from the configuration: non-empty, no control or format
    characters (see :data:`graphprobe._text.UNSAFE_PATH_CHARS`), valid
    UTF-8, no '..'. A leading ``~`` or ``~user`` is expanded to the home
    folder, as a shell would."""
    if not isinstance(value, str):
        raise _type_error(where, value, "a path string")
    if not value:
        raise _value_error(where, value, "a non-empty path")
    bad = first_unsafe(value)
    if bad is not None:
        raise _value_error(where, value, f"a path without control or format characters ({bad[1]} at index {bad[0]}); "
                                         "lone surrogates are not valid UTF-8")
    if ".." in value.replace("\\", "/").split("/"):
        raise _value_error(where, value, "a path without '..' components (write the folder out in full)")
    if value.startswith("~"):
        value = os.path.expanduser(value)
        if value.startswith("~"):
            raise _value_error(where, value, "a leading '~' that names a home folder (HOME is unset or the user "
                                             "is unknown); write the folder out in full")
    if len(value.encode()) > MAX_PATH:
        raise _value_error(where, value[:40] + "...", f"a path of at most {MAX_PATH} bytes")
    for part in value.split("/"):
        if len(part.encode()) > 255:
            raise _value_error(where, part[:40] + "...", "path components of at most 255 bytes")
    return value


def _user_stacklevel() -> int:
    """The ``stacklevel`` that points a warning given by the caller of this
    function at the first frame outside the graphprobe package: the user's
    line that created the dumper or loaded the config."""
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame = sys._getframe(2)  # the function that warns is level 1
    level = 2
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame = frame.f_back
        level += 1
    return level


def _is_harmless(value: Any, harmless: Any) -> bool:
    if harmless is None or value == harmless:
        return True
    if isinstance(harmless, dict) and isinstance(value, dict):  # a section whose selection is empty
        return not value.get("list") and not value.get("scope")
    return False


def _check_keys(data: dict[str, Any], known: tuple[str, ...], ignored: dict[str, tuple[Any, str]],
                prefix: str) -> None:
    """Refuses keys that are neither graphprobe's nor msprobe's (with the
    nearest known key); warns about ignored msprobe keys whose value would
    change what msprobe dumps."""
    for key in data:
        if key in known:
            continue
        if key in ignored:
            harmless, instead = ignored[key]
            if not _is_harmless(data[key], harmless):
                warnings.warn(f"config: msprobe key '{prefix}{key}' = {data[key]!r} is ignored by graphprobe "
                              f"({instead})", stacklevel=_user_stacklevel())
            continue
        text = key if isinstance(key, str) else repr(key)
        near = difflib.get_close_matches(text, [*known, *ignored], n=1, cutoff=0.6)
        hint = f"did you mean '{prefix}{near[0]}'? " if near else ""
        raise ConfigValueError(
            f"config: unknown key '{prefix}{text}'; {hint}allowed: {[prefix + k for k in known]}, and msprobe's "
            f"{[prefix + k for k in ignored]}, which graphprobe ignores")


def parse_config(data: Any, source: str | None = None) -> DumpConfig:
    """Validates a decoded config.json document."""
    if not isinstance(data, dict):
        raise _type_error("<root>", data, "a JSON object")
    _check_keys(data, ROOT_KEYS, MSPROBE_IGNORED_KEYS, "")

    task = data.get("task", "statistics")
    if not isinstance(task, str):
        raise _type_error("task", task, f"one of {list(TASKS)}")
    if task not in TASKS:
        raise _value_error("task", task, f"one of {list(TASKS)}")

    if "dump_path" not in data:
        raise ConfigValueError("config field 'dump_path' is required: the folder that receives step*/ dumps")
    dump_path = check_path(data["dump_path"], "dump_path")

    level = data.get("level", DEFAULT_LEVEL)
    if not isinstance(level, str):
        raise _type_error("level", level, f"one of {list(LEVELS)}")
    if level not in LEVELS:
        raise _value_error("level", level, f"one of {list(LEVELS)}")

    ranks = parse_ranks(data.get("rank", []))

    stats = data.get("statistics", {})
    if not isinstance(stats, dict):
        raise _type_error("statistics", stats, 'an object such as {"list": ["linear"]}')
    _check_keys(stats, STATISTICS_KEYS, MSPROBE_IGNORED_STATISTICS_KEYS, "statistics.")
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

    errors = (_type_error, _value_error)
    data_mode = parse_data_mode(stats.get("data_mode", ["all"]), "statistics.data_mode", errors)
    summary_mode = parse_summary_mode(stats.get("summary_mode", "statistics"), "statistics.summary_mode", errors)
    slices = parse_slice(stats["slice"], "statistics.slice", errors) if "slice" in stats else ()
    sketch = stats.get("sketch", True)
    if not isinstance(sketch, bool):
        raise _type_error("statistics.sketch", sketch, "true or false")
    section = data.get("tensor", {})
    if isinstance(section, dict):
        _check_keys(section, TENSOR_KEYS, MSPROBE_IGNORED_TENSOR_KEYS, "tensor.")
    tensor = parse_tensor_section(section, errors)
    if task == "tensor":
        if tensor.keywords is not None:
            # Compared as they are used (keywords match case-insensitively).
            if keywords and [k.lower() for k in tensor.keywords] != [k.lower() for k in keywords]:
                raise ConfigValueError(f"config fields 'statistics.list' {keywords!r} and 'tensor.list' "
                                       f"{list(tensor.keywords)!r} both select what the tensor task saves; keep one "
                                       "(msprobe reads tensor.list)")
            keywords = list(tensor.keywords)
        if slices:
            warnings.warn("config: 'statistics.slice' is ignored by the tensor task (msprobe's graph mode slices "
                          "statistics only; tensors are saved whole)", stacklevel=_user_stacklevel())
            slices = ()
        if isinstance(section, dict) and section.get("slice"):
            warnings.warn("config: 'tensor.slice' is ignored: the tensor task saves tensors whole (msprobe's "
                          "aclgraph dumper ignores it too; its eager dumper would slice the saved tensors)",
                          stacklevel=_user_stacklevel())
    elif tensor.given:
        warnings.warn("config: the 'tensor' section (list, custom_api, layout) is ignored by the statistics task "
                      "(set \"task\": \"tensor\" to use it)", stacklevel=_user_stacklevel())

    replay = parse_replay(data.get("replay"), level, ConfigTypeError, ConfigValueError)

    return DumpConfig(
        dump_path=dump_path,
        task=task,
        level=level,
        ranks=ranks,
        keywords=tuple(k.lower() for k in keywords),
        dump_enable=enable,
        source=source,
        replay=replay,
        slices=slices,
        custom_api=tensor.custom_api if task == "tensor" else (),
        tensor_layout=tensor.layout,
        data_mode=data_mode,
        summary_mode=summary_mode,
        sketch=sketch,
    )


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


class _DuplicateKey(ValueError):
    """A key repeated in one object of a config file."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json``'s object hook that refuses a repeated key. Python's ``json``
    (and so msprobe) keeps the last value silently; a config is an
    instruction, and which of two ``level`` values the user meant cannot be
    guessed, so it is an error (compare only warns for a dump.json, which is
    data that a tool wrote)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(f"key {key!r} appears more than once in one object (values {out[key]!r} and "
                                f"{value!r}); keep one")
        out[key] = value
    return out


def load_config(config_path: str | os.PathLike[str] | None = None) -> DumpConfig:
    """Loads and validates a config file; ``None`` loads the built-in default.

    The built-in default (``graphprobe/default_config.json``) dumps L0
    statistics of every submodule of every rank into ``./graphprobe_dump``.
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
        data = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        raise ConfigValueError(f"config file '{path}': {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise ConfigValueError(f"config file '{path}' is not valid JSON: {exc}") from exc
    try:
        return parse_config(data, source=path)
    except ConfigError as exc:
        raise type(exc)(f"{path}: {exc}") from None


def _as_json(value: Any) -> Any:
    """A Python config value as the file would hold it: tuples as lists,
    path objects as strings; anything else as given (parse_config judges it)."""
    if isinstance(value, Mapping):
        return {k: _as_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_as_json(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


def config_from_arguments(config: str | os.PathLike[str] | Mapping[str, Any] | None = None,
                          keys: Mapping[str, Any] | None = None, *, who: str = "AclGraphDumper") -> DumpConfig:
    """The configuration of ``AclGraphDumper(config, **keys)``: a config
    file's path (:func:`load_config`), a dict of the file's keys, or the
    file's keys as keyword arguments (``dump_path="runs/compiled",
    level="mix"``); nothing at all: the built-in default. A dict and keyword
    arguments are validated exactly as the file is (the same keys, the same
    errors naming the field), each error prefixed with where the keys came
    from; tuples count as lists and path objects as strings. A path or dict
    together with keyword arguments is refused: which one wins could not be
    told from the call."""
    keys = dict(keys or {})
    if config is not None and not isinstance(config, (str, os.PathLike, Mapping)):
        raise _type_error("config_path", config, "a path to a JSON file, a dict of config keys, or None (then the "
                          "config's keys may be given as keyword arguments)")
    if config is not None and keys:
        given = "a path" if isinstance(config, (str, os.PathLike)) else "a dict"
        raise ConfigValueError(
            f"{who}: the config is given twice: as {given} ({config!r}) and as keyword arguments {sorted(keys)}; "
            f"give one: {who}('config.json'), {who}({{'dump_path': ...}}) or {who}(dump_path=..., level=...)")
    if isinstance(config, Mapping):
        data, source = _as_json(config), f"<{who} dict>"
    elif keys:
        data, source = _as_json(keys), f"<{who} keyword arguments>"
    else:
        return load_config(config)
    try:
        return parse_config(data, source=source)
    except ConfigError as exc:
        raise type(exc)(f"{source[1:-1]}: {exc}") from None


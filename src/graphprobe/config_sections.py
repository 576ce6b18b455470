"""The config keys of msprobe's newest aclgraph_dump: ``statistics.slice`` and
the ``tensor`` section (``list``, ``custom_api``) with graphprobe's
``tensor.layout``. :mod:`graphprobe.config` calls these; errors are raised in
its style (field path, value given, what is allowed).

``slice`` follows msprobe's ``check_slice_info`` and ``slice_by_config``
(python/msprobe/core/common/utils.py): a list of rules
``{"dim", "size", "begin", "end"}``, integers, ``dim >= 0`` (default 0),
``size >= 0`` (the rule applies only when that dimension has that length),
``begin`` (default 0) and ``end`` (exclusive, default: to the end) may be
negative (Python slicing). graphprobe is stricter than msprobe in two places,
both of which msprobe accepts silently: a key other than the four is an error
(msprobe ignores it, so ``{"dims": 1}`` would slice dim 0), and a boolean is
not an integer (msprobe takes ``true`` as 1).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Callable

__all__ = [
    "SLICE_KEYS",
    "TENSOR_KEYS",
    "TENSOR_LAYOUTS",
    "MSPROBE_IGNORED_TENSOR_KEYS",
    "DEFAULT_TENSOR_LAYOUT",
    "SliceRule",
    "TensorSection",
    "parse_slice",
    "parse_tensor_section",
]

SLICE_KEYS = ("dim", "size", "begin", "end")
#: Keys of the ``tensor`` section graphprobe reads. ``slice`` is validated
#: and ignored there, as msprobe's graph mode ignores it for the tensor task.
TENSOR_KEYS = ("list", "custom_api", "layout", "slice")
#: ``tensor.layout``: where the tensor task puts its files.
#: ``dump_json`` (default): msprobe's eager layout, ``dump.json`` plus
#: ``dump_tensor_data/{entry}.{io}.pt`` (what graphprobe's tensor task always
#: wrote; statistics, non-tensor values and order are kept, and both
#: ``graphprobe compare`` and ``msprobe compare`` read it).
#: ``aclgraph``: msprobe's aclgraph_dump layout, no dump.json, files
#: ``dump_tensor_data/{api}.{call}.{input|input_kwargs|output}[.{i}].pt``.
TENSOR_LAYOUTS = ("dump_json", "aclgraph")
#: msprobe's other ``tensor`` keys (its eager dumper's), accepted and ignored
#: as config.py's ``MSPROBE_IGNORED_STATISTICS_KEYS``: key -> (the value under
#: which ignoring it changes nothing, None: any value; what graphprobe does).
MSPROBE_IGNORED_TENSOR_KEYS: dict[str, tuple[Any, str]] = {
    "scope": ([], "graphprobe selects with tensor.list only"),
    "data_mode": (["all"], "graphprobe saves inputs and outputs of every call; statistics.data_mode decides "
                  "the backward records"),
    "summary_mode": ("statistics", "the tensor task saves whole tensors"),
    "tensor_list": ([], "the tensor task saves every selected tensor"),
    "bench_path": (None, "graphprobe has no online md5 diff"),
    "diff_nums": (None, "graphprobe has no online md5 diff"),
    "request_id": ("", "graphprobe does not slice by request id"),
    "file_format": (None, "graphprobe writes .pt files"),
    "backward_input": ([], "graphprobe has no level L2; its backward records follow statistics.data_mode"),
    "tls_path": (None, "another msprobe task"),
    "online_run_ut_recompute": (None, "another msprobe task"),
    "online_run_ut": (None, "another msprobe task"),
    "nfs_path": (None, "another msprobe task"),
    "host": (None, "another msprobe task"),
    "port": (None, "another msprobe task"),
}
DEFAULT_TENSOR_LAYOUT = "dump_json"


@dataclass(frozen=True)
class SliceRule:
    """One ``statistics.slice`` rule (msprobe's meaning)."""

    dim: int = 0
    size: int | None = None
    begin: int = 0
    end: int | None = None

    def as_tuple(self) -> tuple[int, int | None, int, int | None]:
        """``(dim, size, begin, end)``: plain constants, which dynamo guards on by value."""
        return (self.dim, self.size, self.begin, self.end)


@dataclass(frozen=True)
class TensorSection:
    """What the ``tensor`` section says (empty when absent)."""

    keywords: tuple[str, ...] | None = None  # None: no "list" key (statistics.list is used)
    custom_api: tuple[str, ...] = ()
    layout: str = DEFAULT_TENSOR_LAYOUT
    given: bool = False  # the section has a key that matters


#: config.py's error factories ``(type_error, value_error)``, each called as
#: ``(field path, value given, what is allowed)``; passed in, so that this
#: module does not import config.py (which imports it).
ErrorFactories = tuple[Callable[[str, Any, str], Exception], Callable[[str, Any, str], Exception]]


_SLICE_EXAMPLE = '[{"dim": 1, "size": 50, "begin": 0, "end": 10}]'


def parse_slice(value: Any, where: str, errors: ErrorFactories) -> tuple[SliceRule, ...]:
    """Validates a ``slice`` list; returns its rules in order. An empty
    object is skipped, as msprobe skips it (``if not item: continue``): it is
    not a rule ``{"dim": 0}`` that would undo an earlier rule on dim 0."""
    _type_error, _value_error = errors
    if not isinstance(value, list):
        raise _type_error(where, value, f"a list of objects such as {_SLICE_EXAMPLE}")
    rules = []
    for i, item in enumerate(value):
        here = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise _type_error(here, item, f'an object with keys {list(SLICE_KEYS)}, e.g. {{"end": 1024}}')
        for key, number in item.items():
            if key not in SLICE_KEYS:
                near = difflib.get_close_matches(str(key), SLICE_KEYS, n=1, cutoff=0.6)
                hint = f" (did you mean '{near[0]}'?)" if near else ""
                raise _value_error(f"{here}.{key}", number, f"the keys {list(SLICE_KEYS)}{hint}")
            if isinstance(number, bool) or not isinstance(number, int):
                raise _type_error(f"{here}.{key}", number, "an integer")
            if key in ("dim", "size") and number < 0:
                raise _value_error(f"{here}.{key}", number, "an integer >= 0")
        if item:
            rules.append(SliceRule(dim=item.get("dim", 0), size=item.get("size"), begin=item.get("begin", 0),
                                   end=item.get("end")))
    return tuple(rules)


def _string_list(value: Any, where: str, what: str, errors: ErrorFactories) -> tuple[str, ...]:
    _type_error, _value_error = errors
    if not isinstance(value, list):
        raise _type_error(where, value, f"a list of {what}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise _type_error(f"{where}[{i}]", item, f"a string ({what})")
        if not item.strip():
            raise _value_error(f"{where}[{i}]", item, "a non-empty string")
    return tuple(value)


def parse_tensor_section(section: Any, errors: ErrorFactories) -> TensorSection:
    """Validates the ``tensor`` object: ``list`` (keywords, as
    ``statistics.list``), ``custom_api`` (full import paths such as
    ``"my_package.ops.reshape_and_cache"``), ``layout`` (one of
    :data:`TENSOR_LAYOUTS`) and ``slice`` (checked, not used: msprobe's graph
    mode slices statistics only). Unknown keys are left to the caller."""
    _type_error, _value_error = errors
    if not isinstance(section, dict):
        raise _type_error("tensor", section, 'an object such as {"list": ["linear"], "custom_api": []}')
    keywords = None
    if "list" in section:
        keywords = _string_list(section["list"], "tensor.list", "keywords", errors)
    custom = _string_list(section.get("custom_api", []), "tensor.custom_api",
                          'full import paths of callables, e.g. "my_package.ops.reshape_and_cache"', errors)
    for i, path in enumerate(custom):
        parts = path.split(".")
        if len(parts) < 2 or not all(p.isidentifier() for p in parts):
            raise _value_error(f"tensor.custom_api[{i}]", path,
                               'a dotted import path "module.attribute" of Python identifiers, e.g. '
                               '"my_package.ops.reshape_and_cache"')
    layout = section.get("layout", DEFAULT_TENSOR_LAYOUT)
    if not isinstance(layout, str):
        raise _type_error("tensor.layout", layout, f"one of {list(TENSOR_LAYOUTS)}")
    if layout not in TENSOR_LAYOUTS:
        raise _value_error("tensor.layout", layout, f"one of {list(TENSOR_LAYOUTS)}")
    if "slice" in section:
        parse_slice(section["slice"], "tensor.slice", errors)
    given = bool(keywords) or bool(custom) or "layout" in section
    return TensorSection(keywords=keywords, custom_api=custom, layout=layout, given=given)

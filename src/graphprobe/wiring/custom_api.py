"""``tensor.custom_api``: Python callables named by their full import path,
wrapped at ``start()`` so that each call records its inputs and outputs.

msprobe's rule (``AclGraphDumper._resolve_custom_api`` and
``_make_custom_api_wrapper``, python/msprobe/pytorch/aclgraph_dumper.py):
the longest prefix of the path that imports is the module, the rest is a
chain of attributes; the last attribute's owner gets the wrapper in its
place. Every call of the wrapper saves the tensors in its positional
arguments (``input.{i}``), keyword arguments (``input_kwargs.{key}``) and
result (``output``), all under one call index of the API, which is named by
the path's last component (``my_package.ops.reshape_and_cache`` →
``reshape_and_cache``).

The wrapper is plain Python that calls the same probe functions as the
module hooks (:mod:`graphprobe.wiring.probe`): dynamo traces it inline, with
no graph break, and the probe ops become graph nodes that run on every
execution (eager, compiled, captured). Records are named
``{api}.{n}.forward`` in dump.json, and files
``{api}.{call}.{input|input_kwargs|output}[.{i}].pt`` in the aclgraph layout.

Limits (as msprobe's): only the attribute named by the path is replaced, so a
reference copied before ``start()`` (``from my_package.ops import
reshape_and_cache`` executed earlier, a bound method stored in an object, a
function captured in a closure) keeps calling the original and records
nothing; the paths are read at ``start()`` (editing the config later changes
nothing); ``stop()`` puts the originals back. A staticmethod or classmethod
keeps its kind.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from dataclasses import dataclass
from typing import Any, Callable

import torch

from graphprobe.wiring import own_calls
from graphprobe.wiring.probe import probe_inputs, probe_output, safe_text
from graphprobe.wiring.symbolic import concrete_numbers

__all__ = ["CustomApiError", "CustomApiTarget", "CustomApiWiring", "resolve"]

_ORIGIN = "__graphprobe_custom_api_origin__"


class CustomApiError(ValueError):
    """A ``tensor.custom_api`` path that does not import or is not callable."""


@dataclass(frozen=True)
class CustomApiTarget:
    """A resolved path: the owner whose attribute is replaced, and the value found there."""

    path: str
    owner: Any
    attr: str
    raw: Any  # the attribute as stored in the owner (a staticmethod/classmethod stays one)
    function: Callable[..., Any]


def _raw_attribute(owner: Any, attr: str) -> Any:
    try:
        return inspect.getattr_static(owner, attr)
    except AttributeError:
        return getattr(owner, attr)


def resolve(index: int, path: str) -> CustomApiTarget:
    """Finds ``path`` (``tensor.custom_api[index]``). Raises
    :class:`CustomApiError` naming the path and why it cannot be used."""
    where = f"config field 'tensor.custom_api[{index}]': {path!r}"
    parts = path.split(".")
    import_error: BaseException | None = None
    for end in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:end])
        try:
            obj = importlib.import_module(module_name)
        except ImportError as exc:
            import_error = import_error or exc
            continue
        except Exception as exc:  # the module itself raised while importing
            raise CustomApiError(f"{where}: importing {module_name!r} raised {type(exc).__name__}: {exc}") from exc
        owner = obj
        for i, attr in enumerate(parts[end:]):
            owner = obj
            try:
                obj = getattr(obj, attr)
            except AttributeError:
                found = ".".join(parts[: end + i])
                raise CustomApiError(f"{where}: {found!r} imports but has no attribute {attr!r}; allowed: the full "
                                     "import path of a callable") from None
        raw = _raw_attribute(owner, parts[-1])
        if isinstance(obj, type):
            # A function in a class's place would make isinstance() and
            # subclassing with it raise everywhere until stop().
            name = f"{obj.__module__}.{obj.__qualname__}"
            hint = f"{path}.forward" if issubclass(obj, torch.nn.Module) else f"{path}.__init__"
            raise CustomApiError(f"{where}: resolves to the class {name}, which cannot be wrapped (graphprobe "
                                 f"would put a function in the class's place); allowed: the full import path of a "
                                 f"function or method, e.g. {hint!r} to record the calls of its instances")
        if not callable(obj):
            raise CustomApiError(f"{where}: resolves to a {type(obj).__name__}, which is not callable; allowed: the "
                                 "full import path of a function, method or other callable")
        return CustomApiTarget(path, owner, parts[-1], raw, obj)
    reason = f" ({import_error})" if import_error is not None else ""
    raise CustomApiError(f"{where}: no prefix of it imports{reason}; allowed: the full import path of a callable, "
                         'e.g. "my_package.ops.reshape_and_cache"')


def _wrapper(function: Callable[..., Any], api: str) -> Callable[..., Any]:
    entry = safe_text(f"{api}.{{n}}.forward")

    def probe(*values: Any) -> None:
        """Probes the inputs (``args, kwargs``) or the output (one value)."""
        own_calls.enter()
        try:
            if torch.compiler.is_compiling():  # dynamic=True: sizes may be symbolic
                values = tuple(concrete_numbers(v) for v in values)
            if len(values) == 2:
                probe_inputs(entry, values[0], values[1])
            else:
                probe_output(entry, values[0])
        finally:
            own_calls.leave()

    @functools.wraps(function)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        # Calls made by graphprobe's own code (its hooks and probes call
        # torch themselves: torch.empty for a part without tensors in a
        # traced graph, values() of a nested tensor, is_compiling()) run the
        # original only: they are not the user's calls, and a wrapped API
        # among them would otherwise call its wrapper again from inside the
        # probe and recurse (msprobe guards its collection the same way,
        # AclGraphDumper._dc).
        if own_calls.inside():
            return function(*args, **kwargs)
        probe(args, kwargs)
        output = function(*args, **kwargs)
        probe(output)
        return output

    setattr(wrapped, _ORIGIN, function)
    return wrapped


def _wrapped_attribute(target: CustomApiTarget) -> Any:
    """The replacement for ``target.raw``: the same kind of attribute."""
    raw = target.raw
    if isinstance(raw, staticmethod):
        return staticmethod(_wrapper(raw.__func__, target.attr))
    if isinstance(raw, classmethod):
        return classmethod(_wrapper(raw.__func__, target.attr))
    return _wrapper(target.function, target.attr)


class CustomApiWiring:
    """The wrapped APIs of one dumper; :meth:`remove` restores the originals."""

    def __init__(self, targets: list[CustomApiTarget]) -> None:
        self._restore: list[tuple[Any, str, Any, bool]] = []
        self.apis: list[str] = []
        done: set[tuple[int, str]] = set()
        for t in targets:
            key = (id(t.owner), t.attr)
            if key in done or getattr(t.function, _ORIGIN, None) is not None:
                continue  # listed twice, or wrapped by a dumper dropped without stop()
            own = t.attr in getattr(t.owner, "__dict__", {})  # else inherited: deleted again at remove()
            try:
                setattr(t.owner, t.attr, _wrapped_attribute(t))
            except (AttributeError, TypeError) as exc:  # a built-in type's attribute is read-only
                self.remove()
                raise CustomApiError(f"config field 'tensor.custom_api': {t.path!r} cannot be replaced in "
                                     f"{type(t.owner).__name__} {getattr(t.owner, '__name__', '')!r} ({exc}); "
                                     "allowed: callables reached through a module or a Python class") from None
            done.add(key)
            self._restore.append((t.owner, t.attr, t.raw, own))
            self.apis.append(t.path)

    def remove(self) -> None:
        """Puts the original attributes back (last wrapped first); an
        inherited method (``torch.Tensor.matmul``, defined on its base) is
        deleted from the class again, so that the base's is found."""
        while self._restore:
            owner, attr, raw, own = self._restore.pop()
            if own:
                setattr(owner, attr, raw)
            else:
                delattr(owner, attr)

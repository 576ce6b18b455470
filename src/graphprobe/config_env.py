"""Configuration supplied through the environment, for tools that run the
user's own script (``graphprobe diagnose``).

``GRAPHPROBE_CONFIG=PATH``: every ``AclGraphDumper(...)`` created in the
process loads PATH instead of the ``config_path`` it was given (or of the
built-in default). A tool that runs ``python train.py`` can so choose the
dump path, level and replay selection without the script being edited. An
empty value counts as unset.

``GRAPHPROBE_REPRO_MODULE=NAME`` with ``GRAPHPROBE_REPRO_DIR=DIR``: at
``start()`` the dumper saves the submodule NAME of the model (dotted path,
as in record names) into DIR for a bug-report repro: ``module.pt`` (the
whole module, pickled; without its hooks when they cannot be pickled),
``state_dict.pt`` and ``module.json`` (class, import path, the source of
the classes and hook functions defined in the script's ``__main__`` and of
the script's functions they call, the imports and simple constants they
read, the compile options the script changed). Saving never raises into the user's
script: a failure is a warning.
"""

from __future__ import annotations

import copy
import inspect
import json
import math
import os
import textwrap
import types
import warnings
from typing import Any

__all__ = ["CONFIG_ENV", "REPRO_DIR_ENV", "REPRO_MODULE_ENV", "config_path_from_env", "save_repro_module"]

#: Replaces the config path of every dumper in the process.
CONFIG_ENV = "GRAPHPROBE_CONFIG"
#: The submodule (dotted path) to save at start() for a repro.
REPRO_MODULE_ENV = "GRAPHPROBE_REPRO_MODULE"
#: Where that submodule is saved.
REPRO_DIR_ENV = "GRAPHPROBE_REPRO_DIR"


#: The hook dicts of a torch.nn.Module emptied when the module cannot be pickled with them.
_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
               "_state_dict_hooks", "_load_state_dict_pre_hooks", "_forward_hooks_with_kwargs",
               "_forward_hooks_always_called", "_forward_pre_hooks_with_kwargs")


def config_path_from_env(config_path: str | os.PathLike[str] | None) -> str | os.PathLike[str] | None:
    """``$GRAPHPROBE_CONFIG`` when it is set and not empty, else ``config_path``.

    Raises the config loader's error (``ConfigValueError``, a ValueError, or
    a TypeError) with the variable named when the file it points at is
    missing or not a valid config: the script's own ``config_path`` is not
    the one read, so a message naming only the file would mislead."""
    env = os.environ.get(CONFIG_ENV, "")
    if not env:
        return config_path
    from graphprobe.config import load_config

    try:
        with warnings.catch_warnings():  # checked here, loaded by the caller: its warnings are given there, once
            warnings.simplefilter("ignore")
            load_config(env)
    except (ValueError, TypeError) as e:
        given = "" if config_path is None else f" (it replaces the config_path {os.fspath(config_path)!r} given)"
        raise type(e)(f"${CONFIG_ENV}={env!r}{given}: {e}; unset it or point it at a valid config.json") from None
    return env


def _code_names(code: types.CodeType) -> set[str]:
    """The global names a code object and the code nested in it (comprehensions, lambdas, inner functions) read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def _functions_of(obj: Any) -> list[types.FunctionType]:
    """The plain functions behind a class attribute (methods, static and
    class methods, property accessors) or a function."""
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if isinstance(obj, property):
        return [f for f in (obj.fget, obj.fset, obj.fdel) if isinstance(f, types.FunctionType)]
    return [obj] if isinstance(obj, types.FunctionType) else []


def _body_names(source: str) -> set[str]:
    """The names a class's source reads outside its functions' code (its
    bases, decorators, class attributes)."""
    import ast

    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _importable(value: Any) -> str | None:
    """``module.qualname`` of a class or function importable by name from a
    module other than ``__main__`` (every part an identifier), else None."""
    mod, qual = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if not isinstance(mod, str) or not isinstance(qual, str) or mod == "__main__":
        return None
    parts = mod.split(".") + qual.split(".")
    return f"{mod}.{qual}" if all(p.isidentifier() for p in parts) and "." not in qual else None


def _literal(value: Any) -> str | None:
    """Python source for a simple constant (str, int, float, bool, None), or None."""
    if value is None or type(value) in (str, bool, int):  # exact types: an IntEnum's repr is not Python
        return repr(value)
    if type(value) is float:
        return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
    return None


def _main_sources(module: Any) -> tuple[list[str], dict[str, Any]]:
    """What a repro script needs to unpickle and run ``module``'s subtree:
    the source of every class of it (and their bases) defined at the top
    level of ``__main__`` (a pickle names them ``__main__.X``) and of the
    top-level ``__main__`` functions registered as its hooks or called by
    those (bases and callees first); and, per global name that code reads,
    one line of Python: ``import torch.nn as nn``, ``from pkg import f as
    g``, ``EPS = 1e-06`` (simple constants; non-finite floats as
    ``float('inf')``). Classes defined inside a function cannot be
    unpickled by name: they are left out (the repro says the module cannot
    be rebuilt). Sources are dedented; nothing is evaluated."""
    import __main__

    objects: list[Any] = []  # classes and functions of __main__, dependencies first
    pending_names: list[str] = []

    def top_level(value: Any) -> bool:
        qual = getattr(value, "__qualname__", "")
        return getattr(value, "__module__", None) == "__main__" and "<" not in qual and "." not in qual

    def add(value: Any) -> None:
        if value in objects or not top_level(value):
            return
        if isinstance(value, type):
            for base in value.__bases__:
                add(base)
            for attr in vars(value).values():
                for fn in _functions_of(attr):
                    pending_names.extend(sorted(_code_names(fn.__code__)))
        elif isinstance(value, types.FunctionType):
            pending_names.extend(sorted(_code_names(value.__code__)))
        else:
            return
        objects.append(value)

    for sub in module.modules():
        add(type(sub))
        for name in _HOOK_DICTS:
            hooks = getattr(sub, name, None)
            for fn in hooks.values() if isinstance(hooks, dict) else ():
                if isinstance(fn, types.FunctionType):
                    add(fn)
    sources: list[str] = []

    def take_sources(objs: list[Any]) -> None:
        # A class's body may name further helpers of the script: they are looked up below.
        for obj in objs:
            try:
                src = textwrap.dedent(inspect.getsource(obj))
            except (OSError, TypeError):
                src = f"# the source of {obj.__qualname__} could not be read\n"
            sources.append(src)
            if isinstance(obj, type):
                pending_names.extend(sorted(_body_names(src)))

    take_sources(list(objects))
    lines: dict[str, Any] = {}
    seen: set[str] = set()
    while pending_names:
        name = pending_names.pop(0)
        if name in seen or not name.isidentifier():
            continue
        seen.add(name)
        value = getattr(__main__, name, inspect.Parameter.empty)
        if value is inspect.Parameter.empty or name in ("torch", "__name__", "__file__"):
            continue
        if isinstance(value, types.ModuleType):
            mod = getattr(value, "__name__", "")
            if isinstance(mod, str) and all(p.isidentifier() for p in mod.split(".")):
                lines[name] = f"import {mod}" if mod == name else f"import {mod} as {name}"
        elif (lit := _literal(value)) is not None:
            lines[name] = f"{name} = {lit}"
        elif top_level(value) and isinstance(value, (type, types.FunctionType)):
            before = len(objects)
            add(value)  # a helper function or class of the script: its source, and the names it reads
            take_sources(objects[before:])
        elif (path := _importable(value)) is not None:
            mod, _, qual = path.rpartition(".")
            lines[name] = f"from {mod} import {qual}" + ("" if qual == name else f" as {name}")
    return sources, lines


def _compile_config() -> str:
    """Python lines that set the dynamo, inductor and functorch (AOTAutograd)
    options the script changed from their defaults (the minifier's
    ``codegen_config``)."""
    lines = []
    try:
        import torch._dynamo.config as dynamo_config
        import torch._functorch.config as functorch_config
        import torch._inductor.config as inductor_config

        for cfg in (dynamo_config, inductor_config, functorch_config):
            lines.append(cfg.codegen_config())
    except Exception as e:  # noqa: BLE001  an option that cannot be written out: say so in the repro
        lines.append(f"# the compile options could not be written out: {type(e).__name__}: {e}")
    return "\n".join(lines)


def _save_atomic(obj: Any, path: str) -> None:
    """``torch.save`` into a temporary file renamed onto ``path``: a save that
    fails half-way (an object that cannot be pickled) leaves no partial file,
    and ranks saving the same module at once each leave a whole one."""
    import torch

    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.tmp{os.getpid()}")
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise


def save_repro_module(model: Any) -> None:
    """Saves the submodule named by ``$GRAPHPROBE_REPRO_MODULE`` into
    ``$GRAPHPROBE_REPRO_DIR`` (see the module docstring); does nothing when
    either is unset. Never raises: a failure is a RuntimeWarning."""
    name = os.environ.get(REPRO_MODULE_ENV)
    folder = os.environ.get(REPRO_DIR_ENV)
    if name is None or not folder:
        return
    try:
        import torch

        module = model.get_submodule(name) if name else model
        os.makedirs(folder, exist_ok=True)
        cls = type(module)
        info: dict[str, Any] = {"module": name, "class": cls.__qualname__, "class_module": cls.__module__,
                                "repr": repr(module)[:4000], "pickled": False}
        _save_atomic(module.state_dict(), os.path.join(folder, "state_dict.pt"))
        try:
            _save_atomic(module, os.path.join(folder, "module.pt"))
            info["pickled"] = True
        except Exception as e:  # noqa: BLE001  a module holding a lambda, a lock ...: the repro explains
            info["pickle_error"] = f"{type(e).__name__}: {e}"
            # Hooks are the usual cause (a local function); a copy without them still rebuilds the module.
            try:
                bare = copy.deepcopy(module)
                for sub in bare.modules():
                    for hooks in _HOOK_DICTS:
                        if isinstance(getattr(sub, hooks, None), dict):
                            getattr(sub, hooks).clear()
                _save_atomic(bare, os.path.join(folder, "module.pt"))
                info["pickled"] = True
                info["hooks_dropped"] = True
            except Exception:  # noqa: BLE001  kept as pickle_error above
                pass
        info["main_sources"], info["main_names"] = _main_sources(module)
        info["compile_config"] = _compile_config()
        tmp = os.path.join(folder, f".module.json.tmp{os.getpid()}")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(info, f, indent=1, default=repr)
        os.replace(tmp, os.path.join(folder, "module.json"))
    except Exception as e:  # noqa: BLE001  never raise into the user's script
        warnings.warn(f"graphprobe: {REPRO_MODULE_ENV}={name!r}: the module could not be saved into {folder!r} for "
                      f"the repro: {type(e).__name__}: {e}", RuntimeWarning, stacklevel=3)

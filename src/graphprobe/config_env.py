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
classes defined in the script's ``__main__`` and the simple constants they
read, the compile options the script changed). Saving never raises into the user's
script: a failure is a warning.
"""

from __future__ import annotations

import copy
import inspect
import json
import os
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
    """``$GRAPHPROBE_CONFIG`` when it is set and not empty, else ``config_path``."""
    env = os.environ.get(CONFIG_ENV, "")
    return env if env else config_path


def _main_sources(module: Any) -> tuple[list[str], dict[str, Any]]:
    """The source of every class of ``module``'s subtree (and their bases)
    defined in ``__main__``, bases first, then of the top-level ``__main__``
    functions registered as its hooks, and the ``__main__`` constants (str,
    int, float, bool, None) they read by name."""
    import __main__

    classes: list[type] = []

    def add(cls: type) -> None:
        if cls in classes or cls.__module__ != "__main__":
            return
        for base in cls.__bases__:
            add(base)
        classes.append(cls)

    # Hooks defined at the top level of the script: pickled by name, so their source is needed too.
    functions: list[types.FunctionType] = []
    for sub in module.modules():
        add(type(sub))
        for name in _HOOK_DICTS:
            hooks = getattr(sub, name, None)
            for fn in hooks.values() if isinstance(hooks, dict) else ():
                if (isinstance(fn, types.FunctionType) and fn.__module__ == "__main__"
                        and "<" not in fn.__qualname__ and fn not in functions):
                    functions.append(fn)
    sources: list[str] = []
    constants: dict[str, Any] = {}

    def read_constants(value: Any) -> None:
        code = getattr(value, "__code__", None)
        if isinstance(code, types.CodeType):
            for name in code.co_names:
                v = getattr(__main__, name, inspect.Parameter.empty)
                if v is None or isinstance(v, (str, int, float, bool)):
                    constants[name] = v

    for obj in [*classes, *functions]:
        try:
            sources.append(inspect.getsource(obj))
        except (OSError, TypeError):
            sources.append(f"# the source of {obj.__qualname__} could not be read\n")
        for value in vars(obj).values() if isinstance(obj, type) else (obj,):
            read_constants(value)
    return sources, constants


def _compile_config() -> str:
    """Python lines that set the dynamo and inductor options the script
    changed from their defaults (the minifier's ``codegen_config``)."""
    lines = []
    try:
        import torch._dynamo.config as dynamo_config
        import torch._inductor.config as inductor_config

        for cfg in (dynamo_config, inductor_config):
            lines.append(cfg.codegen_config())
    except Exception as e:  # noqa: BLE001  an option that cannot be written out: say so in the repro
        lines.append(f"# the compile options could not be written out: {type(e).__name__}: {e}")
    return "\n".join(lines)


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
        torch.save(module.state_dict(), os.path.join(folder, "state_dict.pt"))
        try:
            torch.save(module, os.path.join(folder, "module.pt"))
            info["pickled"] = True
        except Exception as e:  # noqa: BLE001  a module holding a lambda, a lock ...: the repro explains
            info["pickle_error"] = f"{type(e).__name__}: {e}"
            # Hooks are the usual cause (a local function); a copy without them still rebuilds the module.
            try:
                bare = copy.deepcopy(module)
                for sub in bare.modules():
                    for name in _HOOK_DICTS:
                        if isinstance(getattr(sub, name, None), dict):
                            getattr(sub, name).clear()
                torch.save(bare, os.path.join(folder, "module.pt"))
                info["pickled"] = True
                info["hooks_dropped"] = True
            except Exception:  # noqa: BLE001  kept as pickle_error above
                pass
        info["main_sources"], info["main_constants"] = _main_sources(module)
        info["compile_config"] = _compile_config()
        with open(os.path.join(folder, "module.json"), "w", encoding="utf-8") as f:
            json.dump(info, f, indent=1, default=repr)
    except Exception as e:  # noqa: BLE001  never raise into the user's script
        warnings.warn(f"graphprobe: {REPRO_MODULE_ENV}={name!r}: the module could not be saved into {folder!r} for "
                      f"the repro: {type(e).__name__}: {e}", RuntimeWarning, stacklevel=3)

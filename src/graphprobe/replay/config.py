"""The ``"replay"`` key of config.json.

``"replay": true`` replays every module the level wires (L0, mix);
``"replay": {"list": ["mlp", "layers.0.attn"], "memory_mb": 1024,
"save_inputs": false, "user_hooks": false}`` narrows the modules, bounds the
memory, saves every judged call's inputs (by default only those of calls
judged "creates") and runs the user's forward hooks in the replays (by
default they are off there). Absent or ``false``: off.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_MEMORY_MB", "REPLAY_KEYS", "ReplayConfig", "parse_replay"]

REPLAY_KEYS = ("list", "memory_mb", "save_inputs", "user_hooks", "backward")
#: Default budget for the kept tensors of one step and the module copies.
DEFAULT_MEMORY_MB = 1024
_MAX_MEMORY_MB = 1 << 30


@dataclass(frozen=True)
class ReplayConfig:
    """A validated ``replay`` section.

    ``modules``: name filters, each selecting the modules whose
    ``{path}.{Class}`` contains it (case-insensitive), so a dotted path such
    as ``layers.0.mlp`` selects that module and its submodules; empty: every
    submodule. ``memory_mb``: the budget. ``save_inputs``: save the
    inputs of every judged call, not only of those judged "creates".
    ``user_hooks``: run the user's forward hooks and pre-hooks (the module's
    own and the global ones) in the replays; off, they see only the calls of
    the user's program. ``backward``: also keep the gradients each call's
    backward pass received and produced, and judge the module's backward.
    """

    modules: tuple[str, ...] = ()
    memory_mb: int = DEFAULT_MEMORY_MB
    save_inputs: bool = False
    user_hooks: bool = False
    backward: bool = False

    def selects(self, path: str, cls: str) -> bool:
        """Whether the module at ``path`` (of class ``cls``) is replayed."""
        if not self.modules:
            return True
        named = f"{path}.{cls}".lower()
        return any(k.lower() in named for k in self.modules)


def _error(kind: type[Exception], where: str, value: Any, allowed: str) -> Exception:
    return kind(f"config field '{where}': got {value!r} ({type(value).__name__}); allowed: {allowed}")


def parse_replay(value: Any, level: str, type_error: type[Exception],
                 value_error: type[Exception]) -> ReplayConfig | None:
    """Validates the ``replay`` value of a config; None when replay is off.

    ``type_error`` and ``value_error`` are the config's error classes (so
    that callers catch one family); unknown sub-keys are refused by name.
    """
    if value is None or value is False:
        return None
    if value is True:
        section: dict[str, Any] = {}
    elif isinstance(value, dict):
        section = value
    else:
        raise _error(type_error, "replay", value,
                     'true, false, or an object such as {"list": ["mlp"], "memory_mb": 1024, "save_inputs": false}')
    for key in section:
        if key not in REPLAY_KEYS:
            raise value_error(f"config: unknown key 'replay.{key}'; allowed: {['replay.' + k for k in REPLAY_KEYS]}")
    if level not in ("L0", "mix"):
        raise value_error(f"config field 'replay': needs level \"L0\" or \"mix\" (replay re-runs module calls), "
                          f"got level {level!r}")
    names = section.get("list", [])
    if not isinstance(names, list):
        raise _error(type_error, "replay.list", names, "a list of module names or name parts (strings)")
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise _error(type_error, f"replay.list[{i}]", name, "a string")
        if not name:
            raise _error(value_error, f"replay.list[{i}]", name, "a non-empty string")
    memory = section.get("memory_mb", DEFAULT_MEMORY_MB)
    if isinstance(memory, bool) or not isinstance(memory, int):
        raise _error(type_error, "replay.memory_mb", memory, "a positive integer (MiB)")
    if not 0 < memory <= _MAX_MEMORY_MB:
        raise _error(value_error, "replay.memory_mb", memory, f"an integer from 1 to {_MAX_MEMORY_MB} (MiB)")
    save = section.get("save_inputs", False)
    if not isinstance(save, bool):
        raise _error(type_error, "replay.save_inputs", save, "true or false")
    hooks = section.get("user_hooks", False)
    if not isinstance(hooks, bool):
        raise _error(type_error, "replay.user_hooks", hooks, "true or false")
    backward = section.get("backward", False)
    if not isinstance(backward, bool):
        raise _error(type_error, "replay.backward", backward, "true or false")
    return ReplayConfig(modules=tuple(names), memory_mb=memory, save_inputs=save, user_hooks=hooks,
                        backward=backward)

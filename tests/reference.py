"""Independent float64 reference: plain forward hooks on an unwired copy of a model."""

from __future__ import annotations

import inspect
import math
from collections import defaultdict
from typing import Any

import torch
from torch.overrides import TorchFunctionMode


def stats64(t: torch.Tensor) -> dict[str, Any]:
    """Max/Min/Mean/Norm in float64, computed the obvious way."""
    if t.numel() == 0:
        return {"Max": None, "Min": None, "Mean": None, "Norm": None}
    if t.dtype == torch.bool:
        return {"Max": bool(t.any()), "Min": bool(t.all()), "Mean": None, "Norm": None}
    d = t.detach().to(torch.float64)
    return {
        "Max": d.max().item(),
        "Min": d.min().item(),
        "Mean": d.mean().item(),
        "Norm": torch.linalg.vector_norm(d).item(),
    }


def _leaves(value: Any, prefix: str, out: dict[str, torch.Tensor]) -> None:
    if isinstance(value, torch.Tensor):
        out[prefix] = value
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            _leaves(v, f"{prefix}.{i}", out)
    elif isinstance(value, dict):
        for k, v in value.items():
            _leaves(v, f"{prefix}.{k}", out)


class ReferenceRecorder:
    """Records, per module call, float64 stats of every input and output tensor.

    Entries are ordered as the calls complete and named like msprobe's L0.
    """

    def __init__(self, model: torch.nn.Module) -> None:
        self.entries: dict[str, dict[str, dict[str, Any]]] = {}
        self._calls: dict[str, int] = defaultdict(int)
        self._pending: dict[int, list[dict[str, Any]]] = defaultdict(list)
        self._handles = []
        for path, mod in model.named_modules():
            if not path:
                continue
            base = f"Module.{path}.{type(mod).__name__}.forward"
            self._handles.append(mod.register_forward_pre_hook(self._pre(base), with_kwargs=True))
            self._handles.append(mod.register_forward_hook(self._post(base), with_kwargs=True))

    def _pre(self, base: str):
        def hook(mod, args, kwargs):
            leaves: dict[str, torch.Tensor] = {}
            _leaves(args, "input_args", leaves)
            _leaves(kwargs, "input_kwargs", leaves)
            self._pending[id(mod)].append({k: stats64(v) | {"shape": list(v.shape)} for k, v in leaves.items()})

        return hook

    def _post(self, base: str):
        def hook(mod, args, kwargs, output):
            leaves: dict[str, torch.Tensor] = {}
            _leaves(output if isinstance(output, (tuple, list)) else (output,), "output", leaves)
            rec = self._pending[id(mod)].pop()
            rec.update({k: stats64(v) | {"shape": list(v.shape)} for k, v in leaves.items()})
            n = self._calls[base]
            self._calls[base] += 1
            self.entries[f"{base}.{n}"] = rec

        return hook

    def reset(self) -> None:
        self.entries = {}
        self._calls.clear()

    def remove(self) -> None:
        for h in self._handles:
            h.remove()


FORWARD_PARTS = ("input_args", "input_kwargs", "output")


def flatten_dump(data: dict[str, Any], parts: tuple[str, ...] = FORWARD_PARTS) -> dict[str, dict[str, dict[str, Any]]]:
    """dump.json's data → {entry: {place: record}} for the tensor records of ``parts``."""
    out: dict[str, dict[str, dict[str, Any]]] = {}

    def walk(v: Any, prefix: str, into: dict[str, dict[str, Any]]) -> None:
        if isinstance(v, dict) and v.get("type") == "torch.Tensor":
            into[prefix] = v
        elif isinstance(v, list):
            for i, x in enumerate(v):
                walk(x, f"{prefix}.{i}", into)
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(x, f"{prefix}.{k}", into)

    for name, entry in data.items():
        rec: dict[str, dict[str, Any]] = {}
        for part in parts:
            walk(entry.get(part, []), part, rec)
        out[name] = rec
    return out


def assert_stats_close(got: dict[str, Any], want: dict[str, Any], rtol: float, where: str) -> None:
    """Max/Min/Norm to rtol; Mean to rtol of the tensor's RMS, since a mean is a
    cancelling sum whose relative error is unbounded near zero."""
    for key in ("Max", "Min", "Mean", "Norm"):
        g, w = got[key], want[key]
        if w is None or isinstance(w, bool):
            assert g == w, f"{where} {key}: got {g!r}, want {w!r}"
            continue
        assert g is not None, f"{where} {key}: got null, want {w!r}"
        if math.isnan(w):
            assert math.isnan(g), f"{where} {key}: got {g!r}, want NaN"
            continue
        if math.isinf(w):
            assert g == w, f"{where} {key}: got {g!r}, want {w!r}"
            continue
        scale = abs(w)
        if key == "Mean" and want["Norm"] is not None:
            numel = max(1, math.prod(got.get("shape", [1])))
            scale = max(scale, want["Norm"] / math.sqrt(numel))
        assert abs(g - w) <= rtol * scale + 1e-30, f"{where} {key}: got {g!r}, want {w!r} (rtol {rtol})"


def assert_dump_matches(data: dict[str, Any], want: dict[str, dict[str, dict[str, Any]]], rtol: float, where: str) -> None:
    """A dump.json's ``data`` against a reference recorder's entries: the same
    entries in the same order, the same places, shapes, ``requires_grad``
    where the reference has it, and statistics to ``rtol``."""
    got = flatten_dump(data)
    assert list(got) == list(want), f"{where}: entry names/order differ from the reference"
    for entry, places in want.items():
        assert set(got[entry]) == set(places), f"{where} {entry}: recorded places differ"
        for place, w in places.items():
            rec = got[entry][place]
            at = f"{where} {entry} {place}"
            assert rec["shape"] == w["shape"], at
            if "requires_grad" in w:
                assert rec["requires_grad"] == w["requires_grad"], at
            assert_stats_close(rec, w, rtol, at)


class ApiReferenceRecorder:
    """Records, per torch API call made during ``model``'s forward, float64
    stats of every input and output tensor, named like msprobe's L1.

    A plain ``TorchFunctionMode`` is entered around the forward of an unwired
    model. Every call that resolves to a ``torch.nn.functional`` function, a
    ``torch`` function or a ``Tensor`` method is recorded, except the names in
    ``skip``; ``aliases`` renames (``{"Tensor.mul": "Tensor.__mul__"}``).
    With ``sink`` (a :class:`ReferenceRecorder` on the same model) the records
    go into ``sink.entries``, interleaved with its module records as calls
    complete, and the mode ignores the calls its hooks make.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        skip: set[str],
        aliases: dict[str, str],
        sink: ReferenceRecorder | None = None,
    ) -> None:
        self.entries: dict[str, dict[str, dict[str, Any]]] = {}
        self._sink = sink
        self._skip = skip
        self._aliases = aliases
        self._calls: dict[str, int] = defaultdict(int)
        self._paused = False
        self._handles = []
        mode = _ReferenceApiMode(self)
        inner = model.forward

        def forward(*args, **kwargs):
            with mode:
                return inner(*args, **kwargs)

        model.forward = forward
        if sink is not None:
            # Around the sink's hooks (registered before these): pause first, resume last.
            for path, mod in model.named_modules():
                if not path:
                    continue
                self._handles.append(mod.register_forward_pre_hook(self._pause, prepend=True))
                self._handles.append(mod.register_forward_pre_hook(self._resume))
                self._handles.append(mod.register_forward_hook(self._pause, prepend=True))
                self._handles.append(mod.register_forward_hook(self._resume))

    def _pause(self, *_: Any) -> None:
        self._paused = True

    def _resume(self, *_: Any) -> None:
        self._paused = False

    def name_of(self, func: Any) -> str | None:
        if self._paused:
            return None
        name = _api_name(func)
        if name is None or name in self._skip:
            return None
        return self._aliases.get(name, name)

    def add(self, name: str, inputs: dict[str, Any], output: Any) -> None:
        leaves: dict[str, torch.Tensor] = {}
        _leaves(output if isinstance(output, (tuple, list)) else (output,), "output", leaves)
        rec = inputs | {
            k: stats64(v) | {"shape": list(v.shape), "requires_grad": v.requires_grad} for k, v in leaves.items()
        }
        n = self._calls[name]
        self._calls[name] += 1
        target = self._sink.entries if self._sink is not None else self.entries
        target[f"{name}.{n}.forward"] = rec

    def reset(self) -> None:
        self.entries = {}
        self._calls.clear()

    def remove(self) -> None:
        for h in self._handles:
            h.remove()


# The views the shared transformer calls; everything else it calls is recorded.
TRANSFORMER_VIEWS = {"Tensor.chunk", "Tensor.reshape", "Tensor.transpose"}

# C-implemented operators reach a torch-function mode as their method and are
# named as the operator (msprobe's name for the operator spelling).
OPERATOR_NAMES = {
    "Tensor.add": "Tensor.__add__",
    "Tensor.sub": "Tensor.__sub__",
    "Tensor.mul": "Tensor.__mul__",
    "Tensor.div": "Tensor.__truediv__",
    "Tensor.matmul": "Tensor.__matmul__",
    "Tensor.add_": "Tensor.__iadd__",
    "Tensor.__rdiv__": "Tensor.__rtruediv__",
}


_API_NAMESPACES = (("Functional", torch.nn.functional), ("Torch", torch), ("Tensor", torch.Tensor))


def _api_name(func: Any) -> str | None:
    """``{Prefix}.{attribute}`` of ``func`` in the first namespace that holds it."""
    name = getattr(func, "__name__", None)
    if isinstance(name, str):
        for prefix, ns in _API_NAMESPACES:
            if getattr(ns, name, None) is func:
                return f"{prefix}.{name}"
    if not inspect.isfunction(func):
        return None  # property getters and other non-API callables
    # Python wrappers such as Tensor.__pow__ keep the __name__ of what they wrap.
    for attr in sorted(dir(torch.Tensor)):
        if getattr(torch.Tensor, attr, None) is func:
            return f"Tensor.{attr}"
    return None


def _bound(func: Any, args: tuple, kwargs: dict) -> tuple[list, dict]:
    """Python functions (most of torch.nn.functional) by their signature:
    positional-or-keyword parameters positional, defaults applied."""
    if not inspect.isfunction(func):
        return list(args), kwargs
    try:
        bound = inspect.signature(func, follow_wrapped=False).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return list(args), kwargs
    bound.apply_defaults()
    pos: list = []
    kw: dict = {}
    for name, value in bound.arguments.items():
        kind = bound.signature.parameters[name].kind
        if kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            pos.append(value)
        elif kind == inspect.Parameter.VAR_POSITIONAL:
            pos.extend(value)
        elif kind == inspect.Parameter.KEYWORD_ONLY:
            kw[name] = value
        else:
            kw.update(value)
    return pos, kw


class _ReferenceApiMode(TorchFunctionMode):
    def __init__(self, recorder: ApiReferenceRecorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = self.recorder.name_of(func)
        if name is None:
            return func(*args, **kwargs)
        leaves: dict[str, torch.Tensor] = {}
        shown_args, shown_kwargs = _bound(func, args, kwargs)
        _leaves(shown_args, "input_args", leaves)
        _leaves(shown_kwargs, "input_kwargs", leaves)
        inputs = {k: stats64(v) | {"shape": list(v.shape), "requires_grad": v.requires_grad} for k, v in leaves.items()}
        out = func(*args, **kwargs)
        self.recorder.add(name, inputs, out)
        return out

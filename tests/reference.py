"""Independent float64 reference: plain forward hooks on an unwired copy of a model."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import torch


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


def flatten_dump(data: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """dump.json's data → {entry: {place: record}} for tensor records."""
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
        for part in ("input_args", "input_kwargs", "output"):
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

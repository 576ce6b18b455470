"""Replaying kept calls at ``step()`` and judging where an error is created.

For every call kept by :mod:`graphprobe.replay.capture`, the module's
original eager forward runs again on exactly the kept inputs, on two copies
of the module (``copy.deepcopy``, graphprobe's hooks removed, buffers set to
their values at the call): one in the module's own dtypes, one cast to
float64 (inputs too). The model itself is never run or touched, and the
random number generators are restored after each replay. Per output:

* ``local_error``: graph-mode output vs eager output on the same inputs;
* ``eager_local_error``: eager output vs the float64 output;
* ``float64_error``: graph-mode output vs the float64 output.

Each error is norm-relative, computed in float64: ``||t - b||_2 / ||b||_2``
(0 when both are zero; null when the two tensors do not hold the same
non-finite values, or ``b`` is zero and ``t`` is not). The floor is the
aggregate (Mean, Norm) noise floor of docs/formats.md for the coarsest
floating dtype among the call's inputs and the output.

Verdict of a floating output: **creates** when ``local_error > floor`` and
``float64_error > eager_local_error + floor`` (the graph is further from
float64 than eager mode is, on the same inputs); **inherits** otherwise. An
integer or bool output (indices, a routing decision) creates when it differs
from eager mode on the same inputs and is further from float64 than eager
mode is (fractions of unequal elements, no floor). A module creates when one
of its outputs does.
"""

from __future__ import annotations

import contextlib
import copy
import enum
import functools
import hashlib
import itertools
import json
import math
import os
import random
import sys
from typing import Any

import torch

from graphprobe._ops import _C
from graphprobe.output_files import make_dirs, write_text_atomic
from graphprobe.replay.capture import STORE, Call, ReplayWiring, Site, Spec, _describe, _plain_object, _version
from graphprobe.replay.config import ReplayConfig
from graphprobe.wiring.probe import safe_text

__all__ = ["FORMAT_VERSION", "floor_of", "judge_step", "relative_error"]

FORMAT_VERSION = 1
CREATES, INHERITS, NOT_JUDGED = "creates", "inherits", "not judged"

# Aggregate floors by dtype class, read from the compare engine's table
# (csrc/compare/noise_floor.cpp) on first use.
_FLOORS: dict[str, float] = {}


def _floor_table() -> dict[str, float]:
    if not _FLOORS:
        from graphprobe.compare.native import noise_floor_table

        for name, _covers, aggregate, _extreme in noise_floor_table():
            _FLOORS[name] = float(aggregate)
    return _FLOORS


def floor_of(dtype: torch.dtype) -> float:
    """The aggregate noise floor of ``dtype`` (docs/formats.md, "Noise floor");
    0 for integer and bool dtypes (exact)."""
    if not (dtype.is_floating_point or dtype.is_complex):
        return 0.0
    table = _floor_table()
    name = str(dtype).removeprefix("torch.")
    if dtype in (torch.float64, torch.complex128):
        return table["float64"]
    if dtype in (torch.float16, torch.complex32):
        return table["float16"]
    if dtype == torch.bfloat16:
        return table["bfloat16"]
    if name.startswith("float8_e4m3"):
        return table["float8_e4m3"]
    if name.startswith("float8_e5m2"):
        return table["float8_e5m2"]
    return table["float32"]


def _f64_device(device: torch.device) -> torch.device:
    """Where float64 arithmetic runs: the tensor's device unless it lacks
    float64 (NPU, MPS), then the CPU."""
    return device if device.type in ("cpu", "cuda") else torch.device("cpu")


def relative_error(t: torch.Tensor, b: torch.Tensor) -> float | None:
    """``||t - b|| / ||b||`` in float64 over the finite elements; 0 when both
    are zero; None when the non-finite elements differ or ``b`` is zero and
    ``t`` is not. Integer and bool tensors: the fraction of unequal elements."""
    device = _f64_device(b.device)
    if not (b.dtype.is_floating_point or b.dtype.is_complex):
        if b.numel() == 0:
            return 0.0
        return float((t.to(device) != b.to(device)).double().mean())
    wide = torch.complex128 if (t.dtype.is_complex or b.dtype.is_complex) else torch.float64
    t64 = t.detach().to(device=device, dtype=wide)
    b64 = b.detach().to(device=device, dtype=wide)
    finite_t, finite_b = torch.isfinite(t64), torch.isfinite(b64)
    if not torch.equal(finite_t, finite_b):
        return None
    if not bool(finite_b.all()):
        if not torch.equal(t64[~finite_t], b64[~finite_b]) and not bool(
                (torch.isnan(t64[~finite_t]) & torch.isnan(b64[~finite_b])).all()):
            return None
        t64, b64 = t64[finite_t], b64[finite_b]
    num = float(torch.linalg.vector_norm(t64 - b64))
    den = float(torch.linalg.vector_norm(b64))
    if den == 0.0:
        return 0.0 if num == 0.0 else None
    return num / den


_WIDE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _rebuild(spec: Spec, tensors: list[torch.Tensor], wide: bool = False) -> Any:
    """The value ``spec`` describes, with ``tensors`` in its places; objects
    are new instances (so a forward that updates a cache object updates
    replay's own); ``wide``: floating dtypes named in it become float64 (the
    float64 replay)."""
    kind = spec[0]
    if kind == "T":
        return tensors[spec[1]]
    if kind in ("V", "K"):
        return spec[1]
    if kind == "D":
        dtype = getattr(torch, spec[1].removeprefix("torch."))
        return torch.float64 if wide and dtype in _WIDE_DTYPES else dtype
    if kind in ("tuple", "list"):
        items = [_rebuild(s, tensors, wide) for s in spec[1]]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        return {key: _rebuild(s, tensors, wide) for key, s in spec[1]}
    if kind == "O":
        obj = spec[1].__new__(spec[1])
        obj.__dict__.update({key: _rebuild(s, tensors, wide) for key, s in spec[2]})
        return obj
    raise ValueError(spec)


def _unreplayable(spec: Spec, place: str) -> str | None:
    """The first value of a call's structure that replay cannot rebuild."""
    kind = spec[0]
    if kind == "X" and spec[1] == "Generator":
        return (f"{place} is a torch.Generator: the forward may draw random numbers from it, which a replay "
                "cannot reproduce")
    if kind == "X":
        return f"{place} is a {spec[1]}"
    if kind in ("tuple", "list"):
        for i, s in enumerate(spec[1]):
            found = _unreplayable(s, f"{place}[{i}]")
            if found:
                return found
    if kind == "dict":
        for key, s in spec[1]:
            found = _unreplayable(s, f"{place}[{key!r}]")
            if found:
                return found
    if kind == "O":
        for key, s in spec[2]:
            found = _unreplayable(s, f"{place}.{key}")
            if found:
                return found
    return None


def _flat_tensors(value: Any, out: list[torch.Tensor], detach: bool = True) -> list[torch.Tensor]:
    """The tensors of an output in the order the capture hook keeps them
    (by the same walk); ``detach=False`` keeps their autograd history."""
    _describe(value, 0, out, detach=detach)
    return out


def _hook_owner(fn: Any) -> str:
    """The Python module that defined a hook (its class's, for a callable object)."""
    owner = getattr(fn, "__module__", None)
    return owner if isinstance(owner, str) else type(fn).__module__


def _torchs_hook(fn: Any) -> bool:
    """A hook torch itself installs as part of a module's computation
    (pruning's and weight_norm's pre-hooks, FSDP's), which replay keeps."""
    return _hook_owner(fn).startswith("torch.")


def _strip_hooks(module: torch.nn.Module, user_hooks: bool) -> None:
    """Removes from a copy the forward hooks graphprobe added (L0 probes,
    replay) and, unless ``user_hooks``, the user's own: they would see
    calls the user's program never made (twice per kept call, once with
    float64 tensors). torch's own hooks stay."""
    for m in module.modules():
        for table, extra in ((m._forward_pre_hooks, m._forward_pre_hooks_with_kwargs),
                             (m._forward_hooks, m._forward_hooks_with_kwargs)):
            for key in [k for k, fn in table.items() if _hook_owner(fn).startswith("graphprobe.")
                        or not (user_hooks or _torchs_hook(fn))]:
                del table[key]
                extra.pop(key, None)
                m._forward_hooks_always_called.pop(key, None)
        m._compiled_call_impl = None  # Module.compile(): replay runs the eager forward


_GLOBAL_HOOK_TABLES = ("_global_forward_pre_hooks", "_global_forward_hooks")


@contextlib.contextmanager
def _global_hooks_off(off: bool) -> Any:
    """While replaying, the user's global forward hooks
    (``register_module_forward_hook`` and pre-hook) are taken out of torch's
    tables, and put back in their order after; torch's own stay."""
    if not off:
        yield
        return
    from torch.nn.modules import module as nn_module

    saved: list[tuple[Any, list[tuple[int, Any]]]] = []
    try:
        for name in _GLOBAL_HOOK_TABLES:
            table = getattr(nn_module, name, None)
            if not table:
                continue
            items = list(table.items())
            saved.append((table, items))
            for key, fn in items:
                if not _torchs_hook(fn):
                    del table[key]
        yield
    finally:
        for table, items in saved:
            table.clear()
            table.update(items)


_WALK_DEPTH = 4
_MODULE_TABLES = frozenset({"_parameters", "_buffers", "_modules"})


def _held(module: torch.nn.Module) -> tuple[list[tuple[str, torch.Tensor]], list[tuple[str, torch.Generator]]]:
    """The tensors and generators the module's tree holds outside its
    parameters and buffers, each with where (dotted, relative to
    ``module``): plain attributes, and what lists, tuples, dicts and plain
    objects in them hold, a few levels deep. ``copy.deepcopy`` copies them
    with the module."""
    tensors: list[tuple[str, torch.Tensor]] = []
    generators: list[tuple[str, torch.Generator]] = []
    seen: set[int] = set()

    def walk(value: Any, where: str, depth: int) -> None:
        if id(value) in seen:
            return
        if isinstance(value, torch.Tensor):
            seen.add(id(value))
            tensors.append((where, value))
            return
        if isinstance(value, torch.Generator):
            seen.add(id(value))
            generators.append((where, value))
            return
        if depth >= _WALK_DEPTH or value is None or isinstance(value, (str, bytes, int, float, bool, type,
                                                                       torch.nn.Module)) or callable(value):
            return
        seen.add(id(value))
        if isinstance(value, (list, tuple, set, frozenset)):
            for i, item in enumerate(value):
                walk(item, f"{where}[{i}]", depth + 1)
        elif isinstance(value, dict):
            for key, item in list(value.items()):
                walk(item, f"{where}[{key!r}]", depth + 1)
        else:
            attrs = getattr(value, "__dict__", None)
            if isinstance(attrs, dict):
                for key, item in list(attrs.items()):
                    walk(item, f"{where}.{key}", depth + 1)

    for name, sub in module.named_modules():
        for key, value in vars(sub).items():
            if key in _MODULE_TABLES or "hooks" in key:
                continue
            walk(value, f"{name}.{key}" if name else key, 0)
    return tensors, generators


def _generator_states(found: list[tuple[str, torch.Generator]]) -> list[tuple[str, torch.Generator, torch.Tensor]]:
    return [(where, g, g.get_state()) for where, g in found]


def _generators_restore(states: list[tuple[str, torch.Generator, torch.Tensor]]) -> str | None:
    """Puts the generators back; where the first one the replay drew from is held, or None."""
    drew = None
    for where, g, state in states:
        if drew is None and not torch.equal(g.get_state(), state):
            drew = where
        g.set_state(state)
    return drew


def _copy_bytes(module: torch.nn.Module) -> int:
    """Bytes of the two copies of ``module``: its own dtypes, and float64.
    Tensors held in plain attributes are copied too (deepcopy), at their own
    dtype in both copies (``Module.to`` converts parameters and buffers only)."""
    total = 0
    counted: set[int] = set()
    for t in itertools.chain(module.parameters(), module.buffers()):
        size = t.element_size()
        total += t.numel() * (size + (8 if (t.is_floating_point() or t.is_complex()) else size))
        counted.add(_storage_key(t))
    for _where, t in _held(module)[0]:
        key = _storage_key(t)
        if key in counted:  # a view of a parameter or buffer, or of a tensor already counted: copied once
            continue
        counted.add(key)
        try:
            total += 2 * t.untyped_storage().nbytes()
        except Exception:  # no storage (a tensor subclass): its elements
            total += 2 * t.numel() * t.element_size()
    return total


def _storage_key(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr() or id(t)
    except Exception:
        return id(t)


def _to64(value: Any) -> Any:
    """``value`` for the float64 replay; always new tensors (copy=True): a
    float64 or integer input would otherwise be the kept input itself, and a
    forward that writes into its input would change what replay saves."""
    if isinstance(value, torch.Tensor):
        if value.is_floating_point():
            return value.to(device=_f64_device(value.device), dtype=torch.float64, copy=True)
        if value.is_complex():
            return value.to(device=_f64_device(value.device), dtype=torch.complex128, copy=True)
        return value.to(device=_f64_device(value.device), copy=True)
    if isinstance(value, tuple):
        return tuple(_to64(v) for v in value)
    if isinstance(value, list):
        return [_to64(v) for v in value]
    if isinstance(value, dict):
        return {k: _to64(v) for k, v in value.items()}
    if value in (torch.float32, torch.float16, torch.bfloat16):
        return torch.float64
    return value


_RngState = tuple[torch.Tensor, list[torch.Tensor], Any, Any, list[torch.Tensor]]


def _numpy_random() -> Any:
    """numpy's global generator module, if the process imported numpy (replay
    does not import it)."""
    numpy = sys.modules.get("numpy")
    return getattr(numpy, "random", None) if numpy is not None else None


def _privateuse1() -> Any:
    """The PrivateUse1 device's module (``torch.npu`` with torch_npu) when it
    is in use and has per-device generators; else None."""
    try:
        name = torch._C._get_privateuse1_backend_name()
        module = getattr(torch, name, None) if name != "privateuseone" else None
        if module is None or not all(hasattr(module, f) for f in ("get_rng_state_all", "set_rng_state_all")):
            return None
        initialized = getattr(module, "is_initialized", None)
        return module if initialized is None or initialized() else None
    except Exception:  # a device module without a working generator API: nothing to restore there
        return None


def _rng_state() -> _RngState:
    """The global generators a forward may draw from: torch's CPU, CUDA and
    PrivateUse1 (NPU) ones, Python's ``random`` and numpy's (a layer-drop
    written with them)."""
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else []
    np_random = _numpy_random()
    device = _privateuse1()
    return (torch.random.get_rng_state(), cuda, random.getstate(),
            np_random.get_state() if np_random is not None else None,
            list(device.get_rng_state_all()) if device is not None else [])


def _same_numpy_state(a: Any, b: Any) -> bool:
    if a is None or b is None:  # numpy imported by the forward itself: its generator was fresh
        return True
    return a[0] == b[0] and bool((a[1] == b[1]).all()) and tuple(a[2:]) == tuple(b[2:])


def _rng_restore(state: _RngState) -> bool:
    """Restores the generators; whether the replay had drawn from them."""
    cpu, cuda, py, np_state, device_states = state
    now_cpu, now_cuda, now_py, now_np, now_device = _rng_state()
    drew = (not torch.equal(cpu, now_cpu) or any(not torch.equal(a, b) for a, b in zip(cuda, now_cuda))
            or py != now_py or not _same_numpy_state(np_state, now_np)
            or any(not torch.equal(a, b) for a, b in zip(device_states, now_device)))
    torch.random.set_rng_state(cpu)
    if cuda:
        torch.cuda.set_rng_state_all(cuda)
    random.setstate(py)
    np_random = _numpy_random()
    if np_state is not None and np_random is not None:
        np_random.set_state(np_state)
    device = _privateuse1()
    if device_states and device is not None:
        device.set_rng_state_all(device_states)
    return drew


def _set_buffers(module: torch.nn.Module, names: tuple[str, ...], values: list[torch.Tensor]) -> None:
    """Puts the buffers' values at the call into a copy of the module."""
    for name, value in zip(names, values):
        owner_name, _, attr = name.rpartition(".")
        owner = module.get_submodule(owner_name) if owner_name else module
        old = owner._buffers.get(attr)
        if old is None and value.numel() == 0:
            continue  # None at the call (capture.py keeps an empty tensor for it) and now
        if old is not None and old.shape == value.shape:
            with torch.no_grad():
                old.copy_(value)
        else:
            owner._buffers[attr] = value.to(dtype=old.dtype if old is not None else value.dtype).clone()


def _written_buffers(module: torch.nn.Module, names: tuple[str, ...], values: list[torch.Tensor]) -> list[str]:
    out = []
    for name, value in zip(names, values):
        owner_name, _, attr = name.rpartition(".")
        now = (module.get_submodule(owner_name) if owner_name else module)._buffers.get(attr)
        if now is None:
            continue
        if now.shape != value.shape or not torch.equal(now, value.to(now.dtype)):
            out.append(name)
    return out


@torch.compiler.disable
def _run(module: torch.nn.Module, args: Any, kwargs: Any) -> Any:
    """The module's eager forward (no compiled code, no autograd)."""
    with torch.no_grad():
        return module(*args, **kwargs)


@torch.compiler.disable
def _run_grad(module: torch.nn.Module, args: Any, kwargs: Any) -> Any:
    """The module's eager forward with autograd on (the backward replay)."""
    with torch.enable_grad():
        return module(*args, **kwargs)


def _foreign_forward(module: torch.nn.Module) -> str | None:
    """The relative path of the first module in ``module``'s tree whose
    ``forward`` is replaced on the instance by a callable not bound to that
    module, or None. ``copy.deepcopy`` rebinds a bound method (and a
    ``functools.partial`` over the module, as accelerate's hooks make) to the
    copy, but a plain function or closure is copied as itself: a closure over
    the original module's ``forward`` would run the original — its float32
    weights in the float64 replay, and its buffers, which replay must never
    write."""
    for name, sub in module.named_modules():
        fwd = sub.__dict__.get("forward")
        if fwd is None:
            continue
        if getattr(fwd, "__self__", None) is sub:
            continue
        if isinstance(fwd, functools.partial) and any(a is sub for a in fwd.args):
            continue
        return name
    return None


class _Copies:
    """The two copies (its dtypes, float64) of one module, made once per step
    and shared by the module's replayed submodules (:meth:`sub`): every call
    sets the buffers of its whole module from its own snapshot first, so a
    call of a submodule cannot leave state behind for its parent's calls."""

    def __init__(self, module: torch.nn.Module, user_hooks: bool) -> None:
        self.native = copy.deepcopy(module)
        _strip_hooks(self.native, user_hooks)
        self._f64: torch.nn.Module | None = None
        self.prefix = ""  # this view's path in the copied module, with a trailing "."
        # Which value each parameter of the copies holds (by its path in the copied module): absent, the
        # value at step(); else the version of a kept earlier value (an optimizer changed it since the call).
        self.loaded: dict[str, int] = {}
        self.loaded64: dict[str, int] = {}

    def f64(self) -> torch.nn.Module:
        """The float64 copy, made on first use."""
        if self._f64 is None:
            device = next((t.device for t in self.native.parameters()), torch.device("cpu"))
            self._f64 = copy.deepcopy(self.native).to(device=_f64_device(device), dtype=torch.float64)
            self.loaded64.clear()
            self.loaded64.update(self.loaded)  # made from the native copy's values of now
        return self._f64

    def generators(self, copy64: torch.nn.Module | None = None) -> list[tuple[str, torch.Generator]]:
        """The generators the native copy (or the float64 copy ``copy64``)
        holds, found once: every call of the module would otherwise walk its
        whole tree again."""
        key = "_generators" if copy64 is None else "_generators64"
        found = self.__dict__.get(key)
        if found is None:
            found = _held(self.native if copy64 is None else copy64)[1]
            self.__dict__[key] = found
        return found

    def sub(self, rel: str) -> _Copies:
        """The copies of the submodule at the relative path ``rel``."""
        if not rel:
            return self
        view = _Copies.__new__(_Copies)
        view.native = self.native.get_submodule(rel)
        view._f64 = None
        view.prefix = rel + "."
        view.loaded, view.loaded64 = self.loaded, self.loaded64
        parent = self

        def f64() -> torch.nn.Module:
            return parent.f64().get_submodule(rel)

        view.f64 = f64  # type: ignore[method-assign]
        return view


def _load_params(module: torch.nn.Module, loaded: dict[str, int], prefix: str, names: tuple[str, ...],
                 live: dict[str, torch.Tensor], kept: dict[str, tuple[int, torch.Tensor]]) -> None:
    """Puts into a copy the parameters a call used: ``kept`` (name -> the
    version at the call and its value, copied before an optimizer changed
    it), else the value at ``step()`` (``live``); copies only what differs
    from what the copy holds."""
    for name in names:
        version, value = kept.get(name, (None, live.get(name)))
        if value is None or loaded.get(prefix + name) == version:
            continue
        with torch.no_grad():
            module.get_parameter(name).copy_(value)
        if version is None:
            loaded.pop(prefix + name, None)
        else:
            loaded[prefix + name] = version


def _fmt(x: float | None) -> str:
    return "non-finite" if x is None else f"{x:.3g}"


def _judge_outputs(graph: list[torch.Tensor], eager: list[torch.Tensor], f64: list[torch.Tensor] | None,
                   input_floor: float) -> tuple[list[dict[str, Any]], str, str]:
    """Per-output errors and the call's verdict with its reason."""
    rows: list[dict[str, Any]] = []
    creates: list[str] = []
    notes: list[str] = []
    judged = 0
    for i, (g, e) in enumerate(zip(graph, eager)):
        row: dict[str, Any] = {"index": i, "dtype": str(g.dtype), "local_error": None, "eager_local_error": None,
                               "float64_error": None, "floor": floor_of(g.dtype)}
        rows.append(row)
        if g.shape != e.shape or g.dtype != e.dtype:
            row["note"] = f"graph {g.dtype}{list(g.shape)} vs eager {e.dtype}{list(e.shape)}"
            notes.append(f"output {i}: {row['note']} (autocast or another dtype in the graph?)")
            continue
        row["local_error"] = relative_error(g, e)
        if f64 is not None:
            row["eager_local_error"] = relative_error(e, f64[i])
            row["float64_error"] = relative_error(g, f64[i])
        if not (g.is_floating_point() or g.is_complex()):
            judged += 1
            _judge_exact(i, row, creates, notes)
            continue
        judged += 1
        floor = max(row["floor"], input_floor)
        row["floor"] = floor
        local, eager_err, graph_err = row["local_error"], row["eager_local_error"], row["float64_error"]
        if local is not None and local <= floor:
            continue
        if f64 is None:
            notes.append(f"output {i}: graph vs eager on the same inputs {_fmt(local)} > floor {floor:.3g}, and the "
                         "float64 replay did not run")
            continue
        if graph_err is None and eager_err is None:
            notes.append(f"output {i}: graph-mode and eager outputs both hold non-finite values where float64 does not")
        elif graph_err is None or (eager_err is not None and graph_err > eager_err + floor):
            creates.append(f"output {i}: graph vs eager on the same inputs {_fmt(local)} > floor {floor:.3g}; graph "
                           f"vs float64 {_fmt(graph_err)} > eager vs float64 {_fmt(eager_err)} + floor")
        elif eager_err is None:
            notes.append(f"output {i}: the eager replay is non-finite where float64 is not")
        else:
            row["note"] = "graph differs from eager but is no further from float64: a different rounding"
    if creates:
        return rows, CREATES, "; ".join(creates)
    if notes:
        return rows, NOT_JUDGED, "not judged: " + "; ".join(notes)
    if not judged:
        return rows, NOT_JUDGED, "not judged: no tensor output"
    if any("note" in r for r in rows):
        return rows, INHERITS, ("the graph-mode output differs from eager mode on the same inputs beyond the floor "
                                "but is no further from float64 than eager mode (a different rounding, not an error "
                                "this module creates)")
    worst = max((r["local_error"] for r in rows if r["local_error"] is not None), default=0.0)
    return rows, INHERITS, (f"local error {worst:.3g} within the noise floor: the graph-mode output matches eager "
                            "mode on the same inputs")


def _judge_exact(i: int, row: dict[str, Any], creates: list[str], notes: list[str]) -> None:
    """An integer or bool output (indices, a routing decision): its errors are
    fractions of unequal elements and there is no floor. It creates when it
    differs from eager mode on the same inputs and is further from the
    float64 replay than eager mode is; when eager mode differs from float64
    as much (a near tie that rounding decides), it is a different rounding."""
    local, eager_err, graph_err = row["local_error"], row["eager_local_error"], row["float64_error"]
    row["floor"] = 0.0
    if not local:
        return
    if eager_err is None or graph_err is None:
        notes.append(f"output {i}: integer output differs from eager mode on the same inputs in a fraction "
                     f"{local:.3g} of its elements, and the float64 replay did not run")
    elif graph_err > eager_err:
        creates.append(f"output {i}: integer output differs from eager mode on the same inputs in a fraction "
                       f"{local:.3g} of its elements; graph vs float64 {graph_err:.3g} > eager vs float64 "
                       f"{eager_err:.3g}")
    else:
        row["note"] = "graph differs from eager but is no further from float64: a different rounding at a tie"


def _input_floor(tensors: list[torch.Tensor]) -> float:
    return max((floor_of(t.dtype) for t in tensors if t.is_floating_point() or t.is_complex()), default=0.0)


def _cpu_tree(value: Any) -> Any:
    """``value`` with its tensors on the CPU, in types ``torch.load(...,
    weights_only=True)`` reads: an object becomes a dict of its attributes
    with ``"__class__"`` (its qualified name), a class its name, a device
    or enum member its text."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu").clone()
    if isinstance(value, tuple):
        return tuple(_cpu_tree(v) for v in value)
    if isinstance(value, list):
        return [_cpu_tree(v) for v in value]
    if isinstance(value, dict):
        return {k: _cpu_tree(v) for k, v in value.items()}
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    if isinstance(value, (torch.device, enum.Enum)):
        return str(value)
    if _plain_object(value):
        cls = type(value)
        return {"__class__": f"{cls.__module__}.{cls.__qualname__}",
                **{k: _cpu_tree(v) for k, v in value.__dict__.items()}}
    return value


_NAME_BYTES = 200


def _file_name(entry: str, taken: set[str]) -> str:
    """``{entry}.pt``, unique among ``taken`` (which it joins). Path
    separators and control characters (a module path from a ModuleDict key
    may hold them) become ``_``, a leading ``.`` too; a name so changed, or
    over 200 bytes, is cut to 183 bytes and ends in ``-`` and 16 hex digits
    of the SHA-256 of the whole entry, so that two entries never share a file."""
    name = "".join("_" if (c in "/\\" or not c.isprintable()) else c for c in entry)
    if name.startswith("."):
        name = "_" + name[1:]
    if name != entry or len(name.encode()) > _NAME_BYTES:
        digest = hashlib.sha256(entry.encode("utf-8", "backslashreplace")).hexdigest()[:16]
        name = name.encode()[: _NAME_BYTES - 17].decode(errors="ignore") + "-" + digest
    unique, n = name, 1
    while unique in taken:
        n += 1
        unique = f"{name}-{n}"
    taken.add(unique)
    return unique + ".pt"


class _Judge:
    """Judges one step's calls; see the module docstring."""

    def __init__(self, wiring: ReplayWiring, config: ReplayConfig, step_dir: str) -> None:
        self.wiring = wiring
        self.config = config
        self.step_dir = step_dir
        self.file_names: set[str] = set()
        self.kept_params: dict[int, dict[str, tuple[int, torch.Tensor]]] = {}  # id(call) -> _load_params' kept

    def run(self, calls: list[Call]) -> list[dict[str, Any]]:
        numbered: list[tuple[Call, Site, int]] = []
        counts: dict[str, int] = {}
        for call in calls:
            site = STORE.sites[call.site]
            n = counts.get(site.path, 0)
            counts[site.path] = n + 1
            numbered.append((call, site, n))
        records: dict[int, dict[str, Any]] = {}
        backward: dict[int, dict[str, Any]] = {}  # replay.backward: the call's backward, after its forward
        by_module: dict[str, list[int]] = {}
        for i, (_, site, _) in enumerate(numbered):
            by_module.setdefault(site.path, []).append(i)
        budget_left = (STORE.budget - sum(c.nbytes for c in calls)
                       - sum(t.numel() * t.element_size() for t in STORE.step_params.values()))
        # Modules are copied once per step, at the outermost replayed module
        # (a root); its replayed submodules run on parts of that copy.
        roots: dict[str, list[str]] = {}
        for path in by_module:
            root = next((r for r in roots if path.startswith(r + ".")), path)
            roots.setdefault(root, []).append(path)
        for root, paths in roots.items():
            shared: _Copies | str | None = None
            for path in paths:
                copies: _Copies | str | None = None
                for i in by_module[path]:
                    call, site, n = numbered[i]
                    entry = safe_text(f"Module.{site.path}.{site.cls}.forward.{n}")
                    record: dict[str, Any] = {"module": site.path, "entry": entry, "verdict": NOT_JUDGED,
                                              "reason": "", "outputs": []}
                    records[i] = record
                    why = self._refusal(call, site)
                    if why:
                        record["reason"] = why
                        continue
                    if copies is None:
                        if shared is None:
                            shared = self._copies(root, budget_left)
                        if isinstance(shared, _Copies):
                            copies = shared.sub(path[len(root) + 1:] if path != root else "")
                        else:  # the root could not be copied: this module alone may be
                            copies = self._copies(path, budget_left) if path != root else shared
                    if isinstance(copies, str):
                        record["reason"] = copies
                        continue
                    try:
                        self._judge_call(call, site, copies, record)
                    except Exception as exc:  # one call that cannot be judged must not cost the others
                        record.update(verdict=NOT_JUDGED, outputs=[],
                                      reason=f"not judged: replay failed ({type(exc).__name__}: {exc})")
                    if self.config.backward and (call.grad_out or call.grad_in or call.grad_refused):
                        back = {"module": site.path, "entry": safe_text(f"Module.{site.path}.{site.cls}.backward.{n}"),
                                "verdict": NOT_JUDGED, "reason": "", "outputs": []}
                        backward[i] = back
                        try:
                            self._judge_backward(call, site, copies, back, record)
                        except Exception as exc:
                            back.update(verdict=NOT_JUDGED, outputs=[],
                                        reason=f"not judged: the backward replay failed ({type(exc).__name__}: {exc})")
            del shared
        out = []
        for i in range(len(numbered)):
            out.append(records[i])
            if i in backward:
                out.append(backward[i])
        return out

    def _refusal(self, call: Call, site: Site) -> str:
        if call.refused:
            return call.refused
        if call.inputs is None or not call.opened:
            return "not judged: the call's inputs were not kept (its open hook did not run in the graph)"
        if call.outputs is None or not call.closed:
            return "not judged: the call's graph-mode outputs were not kept (its forward raised, or its close hook " \
                   "did not run in the graph)"
        bad = _unreplayable(site.args, "input_args") or _unreplayable(site.kwargs, "input_kwargs")
        if bad:
            return f"not judged: {bad}, which replay cannot copy and pass again (tensors, numbers, strings, dtypes, " \
                   "tuples, lists and dicts of them, and objects whose attributes hold them can)"
        ref = self.wiring.modules.get(site.path)
        module = ref() if ref is not None else None
        if module is None:
            return f"not judged: module {site.path} no longer exists"
        if call.param_versions is not None and not call.captured:
            params = dict(module.named_parameters())
            kept: dict[str, tuple[int, torch.Tensor]] = {}
            for name, version in zip(site.params, call.param_versions):
                p = params.get(name)
                if p is not None and (version < 0 or _version(p) == version):
                    continue
                value = STORE.step_params.get((id(p), version)) if p is not None else None
                if value is None:
                    return (f"not judged: parameter {site.path}.{name} changed between the call and step(), and "
                            "its value at the call was not kept: replay keeps it when a torch.optim optimizer's "
                            "step() is about to change it, within replay.memory_mb; an in-place change of the "
                            "user's own, or a parameter replaced, is not")
                kept[name] = (version, value)
            if kept:
                self.kept_params[id(call)] = kept
        return ""

    def _copies(self, path: str, budget_left: int) -> _Copies | str:
        module = self.wiring.modules[path]()
        if module is None:
            return f"not judged: module {path} no longer exists"
        need = _copy_bytes(module)
        if need > budget_left:
            return (f"not judged: copies of {path} for replay need {need / 2**20:.1f} MiB, over what is left of the "
                    f"replay memory budget ({max(budget_left, 0) / 2**20:.1f} of {STORE.budget / 2**20:.0f} MiB): "
                    "raise replay.memory_mb or narrow replay.list")
        try:
            return _Copies(module, self.config.user_hooks)
        except Exception as exc:
            return f"not judged: module {path} cannot be copied for replay ({type(exc).__name__}: {exc})"

    def _judge_call(self, call: Call, site: Site, copies: _Copies, record: dict[str, Any]) -> None:
        assert call.inputs is not None and call.outputs is not None and call.buffers is not None
        foreign = _foreign_forward(copies.native)
        if foreign is not None:
            where = f"{site.path}.{foreign}" if foreign else site.path
            record["reason"] = (f"not judged: {where}.forward is replaced on the instance by "
                                "a callable that is not bound to the module; the copy made for replay would "
                                "call it, and through it possibly the original module and its state, so it is "
                                "not run (bind the replacement with types.MethodType, or leave the module out "
                                "of replay.list)")
            return
        inputs = call.inputs
        args = _rebuild(site.args, inputs)
        kwargs = _rebuild(site.kwargs, inputs)
        clones = [t.clone() for t in inputs]  # the forward may write into its inputs (a cache it updates)
        kept = self.kept_params.get(id(call), {})
        # Parameters are only put in when some call of the step used values an optimizer changed since.
        params_differ = bool(kept or copies.loaded or copies.loaded64)
        live: dict[str, torch.Tensor] = {}
        if params_differ:
            ref = self.wiring.modules.get(site.path)
            module = ref() if ref is not None else None
            live = {n: p.detach() for n, p in module.named_parameters()} if module is not None else {}
        rng = _rng_state()
        own = _generator_states(copies.generators())
        written: list[str] = []
        hooks_off = not self.config.user_hooks
        try:
            _set_buffers(copies.native, site.buffers, call.buffers)
            if params_differ:
                _load_params(copies.native, copies.loaded, copies.prefix, site.params, live, kept)
            with _global_hooks_off(hooks_off):
                eager = _run(copies.native, _rebuild(site.args, clones), _rebuild(site.kwargs, clones))
            written = _written_buffers(copies.native, site.buffers, call.buffers)
        except Exception as exc:
            _rng_restore(rng)
            _generators_restore(own)
            record["reason"] = f"not judged: the eager forward raised {type(exc).__name__}: {exc}"
            return
        drew = _generators_restore(own)
        if _rng_restore(rng) or drew is not None:
            # The module's own generator was copied with it at step(), in its state then, not at the call.
            source = f" from the generator {site.path}.{drew}" if drew is not None else ""
            record["reason"] = (f"not judged: the forward draws random numbers{source} (dropout in training "
                                "mode?), so its output cannot be reproduced; replay it in eval mode or leave it "
                                "out of replay.list")
            return
        f64: list[torch.Tensor] | None = None
        f64_failed = ""
        own64: list[tuple[str, torch.Generator, torch.Tensor]] = []
        try:
            model64 = copies.f64()
            own64 = _generator_states(copies.generators(model64))
            _set_buffers(model64, site.buffers, call.buffers)
            if params_differ:
                _load_params(model64, copies.loaded64, copies.prefix, site.params, live, kept)
            with _global_hooks_off(hooks_off):
                wide = [_to64(t) for t in inputs]
                f64 = _flat_tensors(_run(model64, _rebuild(site.args, wide, True), _rebuild(site.kwargs, wide, True)), [])
        except Exception as exc:
            f64_failed = f" (float64 replay raised {type(exc).__name__}: {exc})"
        finally:
            _rng_restore(rng)
            _generators_restore(own64)
        eager_flat = _flat_tensors(eager, [])
        if len(eager_flat) != len(call.outputs) or (f64 is not None and len(f64) != len(eager_flat)):
            record["reason"] = (f"not judged: the eager forward returned {len(eager_flat)} tensors, the graph-mode "
                                f"call {len(call.outputs)}")
            return
        rows, verdict, reason = _judge_outputs(call.outputs, eager_flat, f64, _input_floor(inputs))
        record["outputs"] = rows
        record["verdict"] = verdict
        extra = f" (writes buffer {', '.join(written)} in forward: replayed from its value at the call)" if written \
            else ""
        record["reason"] = reason + f64_failed + extra
        if verdict == CREATES or (self.config.save_inputs and verdict != NOT_JUDGED):
            record["inputs_file"] = self._save_inputs(record["entry"], args, kwargs, site, call)

    def _judge_backward(self, call: Call, site: Site, copies: _Copies, record: dict[str, Any],
                        forward: dict[str, Any]) -> None:
        """Re-runs the call's forward with autograd on its kept inputs, in its
        dtypes and in float64, and back-propagates the gradients its outputs
        received in graph mode; the gradients of its positional inputs are
        judged as a forward call's outputs are (the floor: the coarsest of
        the inputs and the received gradients)."""
        if call.grad_refused:
            record["reason"] = "not judged: " + call.grad_refused
            return
        if forward["verdict"] == NOT_JUDGED and not forward["outputs"]:
            record["reason"] = f"not judged: its forward call could not be replayed ({forward['reason']})"
            return
        if not call.grad_in:
            record["reason"] = ("not judged: no gradient of a positional input was kept (none requires grad, or "
                                "the backward pass did not reach the call's inputs)")
            return
        if not call.grad_out:
            record["reason"] = "not judged: the gradients the call's outputs received were not kept"
            return
        assert call.inputs is not None and call.buffers is not None
        positions = sorted(call.grad_in)
        kept = self.kept_params.get(id(call), {})
        hooks_off = not self.config.user_hooks

        def run(model: torch.nn.Module, loaded: dict[str, int], wide: bool) -> list[torch.Tensor]:
            tensors = [_to64(t) if wide else t.clone() for t in call.inputs or []]
            args = _rebuild(site.args, tensors, wide)
            kwargs = _rebuild(site.kwargs, tensors, wide)
            leaves = []
            for i in positions:
                leaf = args[i]
                if not isinstance(leaf, torch.Tensor):
                    raise ValueError(f"input {i} is not a tensor in the replay")
                leaves.append(leaf.requires_grad_(True))
            _set_buffers(model, site.buffers, call.buffers or [])
            if kept or loaded:
                ref = self.wiring.modules.get(site.path)
                live_module = ref() if ref is not None else None
                live = {n: p.detach() for n, p in live_module.named_parameters()} if live_module is not None else {}
                _load_params(model, loaded, copies.prefix, site.params, live, kept)
            with _global_hooks_off(hooks_off):
                flat = _flat_tensors(_run_grad(model, args, kwargs), [], detach=False)
            outs, grads = [], []
            for j, g in sorted(call.grad_out.items()):
                if j < len(flat) and flat[j].requires_grad:
                    outs.append(flat[j])
                    grads.append(g.to(device=flat[j].device, dtype=flat[j].dtype))
            if not outs:
                raise ValueError("no output of the replay requires grad")
            got = torch.autograd.grad(outs, leaves, grads, allow_unused=True)
            return [torch.zeros_like(leaf) if g is None else g.detach() for leaf, g in zip(leaves, got)]

        rng = _rng_state()
        try:
            eager = run(copies.native, copies.loaded, False)
        finally:
            drew = _rng_restore(rng)
        if drew:
            record["reason"] = "not judged: the forward draws random numbers, so its backward cannot be reproduced"
            return
        f64: list[torch.Tensor] | None = None
        f64_failed = ""
        try:
            f64 = run(copies.f64(), copies.loaded64, True)
        except Exception as exc:
            f64_failed = f" (float64 backward replay raised {type(exc).__name__}: {exc})"
        finally:
            _rng_restore(rng)
        graph = [call.grad_in[i] for i in positions]
        floor = _input_floor(list(call.inputs) + list(call.grad_out.values()))
        rows, verdict, reason = _judge_outputs(graph, eager, f64, floor)
        for row, i in zip(rows, positions):
            row["input"] = i  # the positional input whose gradient this row is
        record.update(outputs=rows, verdict=verdict, reason=reason + f64_failed)

    def _save_inputs(self, entry: str, args: Any, kwargs: Any, site: Site, call: Call) -> str | None:
        folder = os.path.join(self.step_dir, "replay_inputs")
        name = _file_name(entry, self.file_names)
        payload = {"args": list(_cpu_tree(args)), "kwargs": _cpu_tree(kwargs),
                   "buffers": {n: b.detach().to("cpu").clone() for n, b in zip(site.buffers, call.buffers or [])},
                   "graph_outputs": [t.detach().to("cpu").clone() for t in call.outputs or []]}
        try:
            make_dirs(folder)
            tmp = os.path.join(folder, f".{name}.tmp{os.getpid()}")
            torch.save(payload, tmp)
            os.replace(tmp, os.path.join(folder, name))
        except OSError as exc:
            return f"not written: {exc}"
        return "replay_inputs/" + name


def judge_step(wiring: ReplayWiring, config: ReplayConfig, step_dir: str | None) -> str | None:
    """Replays and judges the calls kept since the last step; writes
    ``{step_dir}/replay.json`` and returns its path (None when no call was
    kept, or ``step_dir`` is None: ``step(dump=False)`` discards them)."""
    calls = STORE.take()
    if step_dir is None or not calls:
        STORE.step_params = {}
        return None
    try:
        modules = _Judge(wiring, config, step_dir).run(calls)
    finally:
        STORE.step_params = {}
    doc = {"version": FORMAT_VERSION, "error": "norm_relative", "modules": modules}
    make_dirs(step_dir)
    path = os.path.join(step_dir, "replay.json")
    write_text_atomic(path, json.dumps(_finite(doc), indent=1, allow_nan=False) + "\n")
    return path


def _finite(value: Any) -> Any:
    """JSON has no infinities: a non-finite number becomes null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def replay_at_step(wiring: list[Any], config: ReplayConfig | None, step_dir: str | None) -> None:
    """The dumper's ``step()`` hook: judges the step's kept calls when replay
    is on (``step_dir`` None discards them). A failure of replay itself is
    warned about, never raised: the step's records are written regardless."""
    if config is None:
        return
    found = next((w for w in wiring if isinstance(w, ReplayWiring)), None)
    if found is None:
        return
    # The copies carry none of graphprobe's hooks; wrappers that graphprobe put
    # around functions for the whole process (tensor.custom_api) would still
    # probe: recording is off while the step's calls are re-run.
    _C.set_active(False)
    try:
        judge_step(found, config, step_dir)
    except Exception as exc:  # pragma: no cover - defensive
        import warnings

        warnings.warn(f"graphprobe: replay failed at step(), no replay.json for {step_dir}: "
                      f"{type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=3)
    finally:
        _C.set_active(True)

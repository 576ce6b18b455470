"""Keeping a module call's inputs, buffers and graph-mode outputs for replay.

The hooks that :class:`ReplayWiring` adds run eagerly on every call, and
under ``torch.compile`` once, while dynamo traces. They do not keep anything
themselves: they describe the call's structure (a constant of the graph, its
*site*) and hand the call's tensors to ``graphprobe_replay::keep``, an op
that becomes a node of the compiled graph and so runs on every execution,
with the real tensors:

* part 0, when the call opens: the positional and keyword inputs, then the
  module's buffers (its own and its submodules', so that a KV cache or
  BatchNorm's running statistics are replayed from their values at the
  call), then its parameters (only their version counters are read; a
  ``torch.optim`` optimizer about to change a parameter a kept call used
  makes a copy of it first, :meth:`_Store.keep_params`, so that an
  ``optimizer.step()`` before ``dumper.step()`` leaves the call judgeable;
  a parameter changed otherwise makes the call "not judged");
* part 1, when the call closes: its outputs.

The op copies what it keeps (``clone``) unless the memory budget of the step
is spent, in which case the call is kept without tensors and reported "not
judged" with the budget as the reason. Under CUDA or ACL graph capture the op
runs once, at capture: its copies are made by captured kernels into memory
the graph owns, so each replay of the graph refreshes them, and ``step()``
reads the latest replay's values (one call per captured site per step).

The op never raises: a failure is kept as the call's reason.
"""

from __future__ import annotations

import collections
import enum
import threading
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx.node import has_side_effect
from torch.optim.optimizer import register_optimizer_step_pre_hook
from torch.utils.hooks import RemovableHandle

from graphprobe.replay.config import ReplayConfig
from graphprobe.wiring.backward import in_recomputation
from graphprobe.wiring.probe import MAX_DEPTH, safe_text
from graphprobe.wiring.symbolic import concrete_numbers

__all__ = ["Call", "ReplayWiring", "Site", "STORE", "keep_op", "set_recording"]

_LIB = torch.library.Library("graphprobe_replay", "DEF")
_LIB.define("keep(Tensor[] tensors, int site, int part) -> ()", tags=(torch.Tag.nondeterministic_seeded,))

PART_OPEN, PART_CLOSE = 0, 1
PART_GRAD = 2  # and up: one gradient of a call's backward, grad_part()


def grad_part(received: bool, index: int) -> int:
    """The keep op's part for the gradient an output ``index`` received
    (``received``) or the one produced for positional input ``index``."""
    return PART_GRAD + 2 * index + (0 if received else 1)

_MAX_OBJECTS = 3  # objects within objects that replay describes (a cache holds its layers: 2)
_MAX_OPEN = 4096  # open calls remembered per thread
_EMPTY = torch.empty(0)  # stands for a buffer or parameter set to None after start()

# A spec leaf: ("T", k) the k-th kept tensor; ("V", value) a number, string,
# bool, None, torch.device or enum member; ("D", "torch.float32") a dtype;
# ("K", cls) a class; ("X", "TypeName") a value replay cannot rebuild.
# Containers: ("tuple"|"list", children), ("dict", ((key, child), ...)) and
# ("O", cls, ((attribute, child), ...)): an object rebuilt as a new instance
# of cls with these attributes (a transformers Cache and its layers).
Spec = tuple[Any, ...]


@dataclass(frozen=True)
class Site:
    """What is known of a call at trace time (or, eagerly, at its first call)."""

    path: str
    cls: str
    args: Spec
    kwargs: Spec
    inputs: int  # kept input tensors
    buffers: tuple[str, ...]  # names in module.named_buffers() order
    params: tuple[str, ...]


@dataclass
class Call:
    """One call of a module as the graph-mode run made it."""

    site: int
    inputs: list[torch.Tensor] | None = None
    buffers: list[torch.Tensor] | None = None
    param_versions: list[int] | None = None
    outputs: list[torch.Tensor] | None = None
    opened: bool = False
    closed: bool = False
    captured: bool = False
    refused: str = ""  # why nothing (or not everything) was kept
    nbytes: int = 0
    # replay.backward: gradients the graph-mode backward pass gave this call, by position: those its
    # outputs received (grad_out, by output tensor) and those it produced for its positional inputs
    # (grad_in, by argument position); grad_refused: why not all were kept.
    grad_out: dict[int, torch.Tensor] = field(default_factory=dict)
    grad_in: dict[int, torch.Tensor] = field(default_factory=dict)
    grad_refused: str = ""


@dataclass
class _Store:
    """The kept calls of the current step, and the captured sites."""

    sites: list[Site] = field(default_factory=list)
    keys: dict[tuple[Any, ...], int] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    captured: dict[int, list[Call]] = field(default_factory=dict)
    budget: int = 0
    used: int = 0  # bytes kept this step (captured copies count every step)
    active: bool = False  # a ReplayWiring is in place
    recording: bool = True  # the dumper's live switch (enable(), dump_enable)
    # Per (site, part, thread): the calls of this step still missing that part, oldest first.
    missing: dict[tuple[int, int, int], collections.deque[Call]] = field(default_factory=dict)
    # Per thread: (path, site) of the calls whose open hook ran and whose close hook has not, innermost last.
    # The close takes its site from here, not from its own view of the arguments: a forward may change its
    # arguments (append to a list it was given), and the call would then be split over two sites.
    opens: dict[int, list[tuple[str, int]]] = field(default_factory=dict)
    # Copies of parameters that kept calls used, made just before an optimizer changed them:
    # (id(parameter), version at the call) -> the value then. step_params: those of the step being judged.
    params: dict[tuple[int, int], torch.Tensor] = field(default_factory=dict)
    step_params: dict[tuple[int, int], torch.Tensor] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def site(self, key: tuple[Any, ...], make: Any) -> int:
        """The site of ``key``, made with ``make()`` the first time."""
        with self.lock:
            found = self.keys.get(key)
            if found is None:
                found = len(self.sites)
                self.sites.append(make())
                self.keys[key] = found
            return found

    def opened(self, path: str, site: int) -> None:
        """Notes that a call of ``path`` at ``site`` opened in this thread."""
        with self.lock:
            stack = self.opens.setdefault(threading.get_ident(), [])
            stack.append((path, site))
            if len(stack) > _MAX_OPEN:  # opens without a close (forwards that raised): the oldest go
                del stack[: len(stack) - _MAX_OPEN]

    def closing(self, path: str) -> int | None:
        """The site of this thread's innermost open call of ``path`` (which
        this close ends), or None when none is open."""
        with self.lock:
            stack = self.opens.get(threading.get_ident(), [])
            for i in range(len(stack) - 1, -1, -1):
                if stack[i][0] == path:
                    site = stack[i][1]
                    del stack[i:]  # calls opened inside this one and never closed raised
                    return site
            return None

    def keep(self, tensors: list[torch.Tensor], site: int, part: int, eager: bool = False) -> Call | None:
        """Keeps one part of a call (the op's work): copies within the budget,
        else the call's refusal. ``eager``: called by the hook itself (not
        by the op in a compiled graph), so a close always follows its own
        open (:meth:`_find`)."""
        if not (self.active and self.recording) or not 0 <= site < len(self.sites):
            return None
        if part >= PART_GRAD:
            self.keep_grad(tensors, site, part)
            return None
        info = self.sites[site]
        capturing = _capturing()
        with self.lock:
            call = self._find(site, part, capturing, eager)
            if part == PART_OPEN:
                call.opened = True
                keep = list(tensors[: info.inputs + len(info.buffers)])
                call.param_versions = [_version(t) for t in tensors[info.inputs + len(info.buffers):]]
            else:
                call.closed = True
                keep = list(tensors)
            nbytes = sum(t.numel() * t.element_size() for t in keep)
            if call.refused:
                return call
            if self.used + nbytes > self.budget:
                call.refused = (f"not judged: over the replay memory budget ({self.budget / 2**20:.0f} MiB; this "
                                f"call needs {(call.nbytes + nbytes) / 2**20:.1f} MiB more with "
                                f"{self.used / 2**20:.1f} MiB kept this step): raise replay.memory_mb or narrow "
                                "replay.list")
                call.inputs = call.buffers = call.outputs = None
                self.used -= call.nbytes
                call.nbytes = 0
                return call
            self.used += nbytes
            call.nbytes += nbytes
        copies = [t.detach().clone() for t in keep]
        if part == PART_OPEN:
            call.inputs, call.buffers = copies[: info.inputs], copies[info.inputs:]
        else:
            call.outputs = copies
        return call

    def keep_grad(self, tensors: list[torch.Tensor], site: int, part: int, call: Call | None = None) -> None:
        """Keeps one gradient of a call's backward (``part``: :func:`grad_part`).
        ``call`` is known in eager autograd; a compiled backward graph names
        only the site: the latest call of it in this step still missing
        this gradient (a backward pass reaches a module's calls in the
        reverse of their order). A second gradient for one place (a second
        backward pass over one forward) is not kept."""
        if not (self.active and self.recording) or len(tensors) != 1:
            return
        received, index = (part - PART_GRAD) % 2 == 0, (part - PART_GRAD) // 2
        with self.lock:
            if call is None:
                call = next((c for c in reversed(self.calls) if c.site == site and c.closed and index not in
                             (c.grad_out if received else c.grad_in)), None)
            if call is None or call.refused or call.grad_refused:
                return
            table = call.grad_out if received else call.grad_in
            if index in table:
                return
            grad = tensors[0]
            nbytes = grad.numel() * grad.element_size()
            if self.used + nbytes > self.budget:
                call.grad_refused = (f"over the replay memory budget ({self.budget / 2**20:.0f} MiB) when the "
                                     "gradients arrived: raise replay.memory_mb or narrow replay.list")
                return
            self.used += nbytes
            call.nbytes += nbytes
        table[index] = grad.detach().clone()

    def _find(self, site: int, part: int, capturing: bool, eager: bool = False) -> Call:
        """The call this part belongs to: one of the site's calls in this
        thread still missing it, else a new one. Calls are paired per thread
        (two threads calling one module interleave their opens and closes).
        A compiled graph may run a call's close before its open, so the
        oldest waiting call is taken; an eager close takes the latest open
        instead: in eager mode a close follows its own open, so an older
        waiting call is one whose forward raised (or an outer call of the
        same module), and must not receive these outputs."""
        if capturing:  # a module called twice in a capture, or captured in two graphs: one call each
            calls = self.captured.setdefault(site, [])
            for call in calls:
                if not (call.opened if part == PART_OPEN else call.closed):
                    return call
            calls.append(Call(site, captured=True))
            return calls[-1]
        thread = threading.get_ident()
        waiting = self.missing.get((site, part, thread))
        if waiting:
            return waiting.pop() if eager and part == PART_CLOSE else waiting.popleft()
        call = Call(site)
        self.calls.append(call)
        other = PART_CLOSE if part == PART_OPEN else PART_OPEN
        self.missing.setdefault((site, other, thread), collections.deque()).append(call)
        return call

    def take(self) -> list[Call]:
        """This step's calls (captured sites last, once each); the budget
        starts again."""
        with self.lock:
            calls, self.calls = self.calls, []
            self.missing = {}
            self.opens = {}
            self.step_params, self.params = self.params, {}
            kept = [c for site_calls in self.captured.values() for c in site_calls]
            calls.extend(kept)
            self.used = sum(c.nbytes for c in kept)
            return calls

    def keep_params(self, modules: dict[str, weakref.ref[torch.nn.Module]], owned: set[int]) -> None:
        """Copies the parameters in ``owned`` (an optimizer's, about to be
        changed) that this step's kept calls used and that still hold the
        value the call saw; within the budget (a call whose parameter could
        not be kept is "not judged" at ``step()``)."""
        if not (self.active and owned):
            return
        with self.lock:
            calls = [c for c in self.calls if c.param_versions and not c.captured]
            by_path: dict[str, dict[str, torch.nn.Parameter]] = {}
            for call in calls:
                info = self.sites[call.site]
                if info.path not in by_path:
                    ref = modules.get(info.path)
                    module = ref() if ref is not None else None
                    by_path[info.path] = dict(module.named_parameters()) if module is not None else {}
                params = by_path[info.path]
                for name, version in zip(info.params, call.param_versions or []):
                    p = params.get(name)
                    if p is None or id(p) not in owned or version < 0 or _version(p) != version:
                        continue
                    key = (id(p), version)
                    if key in self.params:
                        continue
                    nbytes = p.numel() * p.element_size()
                    if self.used + nbytes > self.budget:
                        continue
                    self.used += nbytes
                    self.params[key] = p.detach().clone()

    def reset(self) -> None:
        """Forgets every kept call, the captured ones too."""
        with self.lock:
            self.calls = []
            self.missing = {}
            self.opens = {}
            self.params = {}
            self.step_params = {}
            self.captured = {}
            self.used = 0


STORE = _Store()


def _version(t: torch.Tensor) -> int:
    """A tensor's version counter; -1 for an inference tensor, which has none
    (a model built under ``torch.inference_mode()``)."""
    try:
        return int(t._version)
    except RuntimeError:
        return -1


def set_recording(on: bool) -> None:
    """Follows the dumper's live switch: while it is off, no call is kept."""
    STORE.recording = bool(on)


def _capturing() -> bool:
    if torch.cuda.is_available() and torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing():
        return True
    try:
        from graphprobe._ops import _C

        return bool(_C.privateuse1_capturing())
    except Exception:  # pragma: no cover - no NPU runtime
        return False


def _keep_impl(tensors: list[torch.Tensor], site: int, part: int, eager: bool = False) -> Call | None:
    """The op's kernel (and, with ``eager``, the eager hooks' direct call):
    keeps copies; never raises inside the user's forward."""
    try:
        return STORE.keep(tensors, site, part, eager)
    except Exception as exc:  # pragma: no cover - defensive: a probe must not break the model
        _warn_once(f"graphprobe: replay could not keep a call of site {site}: {exc}")
        return None


def _keep_fake(tensors: list[torch.Tensor], site: int, part: int) -> None:
    """Tracing: nothing is kept."""
    return None


def _keep_kernel(tensors: list[torch.Tensor], site: int, part: int) -> None:
    """The op's kernel (an op returning nothing must return None)."""
    _keep_impl(tensors, site, part)


_LIB.impl("keep", _keep_kernel, "CompositeExplicitAutograd")
torch.library.register_fake("graphprobe_replay::keep", _keep_fake, lib=_LIB)
keep_op = torch.ops.graphprobe_replay.keep.default
has_side_effect(keep_op)

_warned: set[str] = set()


def _warn_once(text: str) -> None:
    if text not in _warned:
        _warned.add(text)
        warnings.warn(text, RuntimeWarning, stacklevel=2)


def _describe(value: Any, depth: int, tensors: list[torch.Tensor], objects: int = 0, detach: bool = True) -> Spec:
    """The structure of ``value`` with its tensors replaced by their index in
    ``tensors``. Written for dynamo to trace without a graph break."""
    if isinstance(value, torch.Tensor):
        if value.layout != torch.strided or value.is_nested or (
                type(value) not in (torch.Tensor, torch.nn.Parameter) and _own_dispatch(value)):
            return ("X", type(value).__name__ + "(" + str(value.layout) + ")")
        tensors.append(value.detach() if detach else value)
        return ("T", len(tensors) - 1)
    if depth >= MAX_DEPTH:
        return ("X", "nesting deeper than " + str(MAX_DEPTH))
    if isinstance(value, (tuple, list)):
        kind = "list" if isinstance(value, list) else "tuple"
        return (kind, tuple(_describe(v, depth + 1, tensors, objects, detach) for v in value))
    if isinstance(value, dict):
        items = []
        for key, item in value.items():
            if not isinstance(key, (str, int)):
                return ("X", "dict with " + type(key).__name__ + " keys")
            items.append((key, _describe(item, depth + 1, tensors, objects, detach)))
        return ("dict", tuple(items))
    if value is None or isinstance(value, (bool, int, float, str)):
        if isinstance(value, str):
            return ("V", safe_text(value))
        return ("V", value)
    if isinstance(value, torch.dtype):
        return ("D", str(value))
    if isinstance(value, (torch.device, enum.Enum)):
        return ("V", value)
    if isinstance(value, type):
        return ("K", value)
    if _plain_object(value):
        # Objects nest at most _MAX_OBJECTS deep: one that refers back to itself (a parent link) or a large
        # object graph would otherwise be walked to MAX_DEPTH, branching at every level.
        if objects >= _MAX_OBJECTS:
            return ("X", type(value).__name__ + " (objects nested deeper than " + str(_MAX_OBJECTS) + ")")
        return ("O", type(value), tuple((key, _describe(item, depth + 1, tensors, objects + 1, detach))
                                        for key, item in value.__dict__.items()))
    return ("X", type(value).__name__)


def _plain_object(value: Any) -> bool:
    """An object replay rebuilds from its attributes (``__dict__``): not a
    module, generator, function or other callable, nor one of torch's own
    objects (streams, events, graph nodes)."""
    return (hasattr(value, "__dict__") and not callable(value)
            and not isinstance(value, (torch.nn.Module, torch.Generator))
            and not type(value).__module__.startswith("torch"))


def _own_dispatch(value: torch.Tensor) -> bool:
    from graphprobe.wiring.probe import _has_own_dispatch

    return _has_own_dispatch(value)


@torch._dynamo.assume_constant_result
def _site_of(path: str, cls: str, args: Spec, kwargs: Spec, inputs: int, buffers: tuple[str, ...],
             params: tuple[str, ...]) -> int:
    """The site of a call of this structure; executed, not traced (its
    result is a constant of the compiled graph)."""
    key = (path, cls, args, kwargs, inputs, buffers, params)
    site = STORE.site(key, lambda: Site(path, cls, args, kwargs, inputs, buffers, params))
    STORE.opened(path, site)
    return site


@torch._dynamo.assume_constant_result
def _close_site_of(path: str, cls: str, args: Spec, kwargs: Spec, inputs: int, buffers: tuple[str, ...],
                   params: tuple[str, ...]) -> int:
    """The site of the call this close ends: the one its open found (the
    arguments may have changed in the forward); the close's own view of the
    call when no open of ``path`` is known (a graph traced again from the
    middle of a forward)."""
    site = STORE.closing(path)
    if site is not None:
        return site
    key = (path, cls, args, kwargs, inputs, buffers, params)
    return STORE.site(key, lambda: Site(path, cls, args, kwargs, inputs, buffers, params))


def _names(module: torch.nn.Module) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return (tuple(n for n, _ in module.named_buffers()), tuple(n for n, _ in module.named_parameters()))


class ReplayWiring:
    """Hooks on the modules that replay selects; :meth:`remove` undoes them.

    ``modules`` maps every wired module's path to a weak reference to it
    (a dropped dumper must not keep the model alive), in ``named_modules()``
    order.
    """

    def __init__(self, model: torch.nn.Module, config: ReplayConfig) -> None:
        self._handles: list[RemovableHandle] = []
        self.modules: dict[str, weakref.ref[torch.nn.Module]] = {}
        for path, module in model.named_modules():
            if not path or not config.selects(path, type(module).__name__):
                continue
            self.modules[path] = weakref.ref(module)
            buffers, params = _names(module)
            self._handles.append(module.register_forward_pre_hook(
                _open_hook(path, type(module).__name__, buffers, params, config.backward), with_kwargs=True))
            self._handles.append(module.register_forward_hook(
                _close_hook(path, type(module).__name__, buffers, params, config.backward), with_kwargs=True))
        STORE.budget = config.memory_mb * 2**20
        STORE.reset()
        STORE.active = True
        self._handles.append(register_optimizer_step_pre_hook(_before_optimizer(self.modules)))

    def remove(self) -> None:
        """Removes the hooks and forgets the kept calls."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        STORE.active = False
        STORE.recording = True
        STORE.reset()


def _before_optimizer(modules: dict[str, weakref.ref[torch.nn.Module]]) -> Any:
    """A global optimizer step pre-hook: keeps the parameters the step's kept
    calls used before the optimizer changes them. Never raises."""

    def hook(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        try:
            owned = {id(p) for group in optimizer.param_groups for p in group["params"]}
            STORE.keep_params(modules, owned)
        except Exception as exc:  # a probe must never break the user's training step
            _warn_once(f"graphprobe: replay could not keep the parameters before an optimizer step: {exc}")

    return hook


def _gather(module: torch.nn.Module, names: tuple[str, ...], kind: str) -> list[torch.Tensor]:
    """The module's buffers or parameters by their dotted names (as they were
    at start()); one that is gone or None now is an empty tensor, so that the
    op's tensors keep their places (a probe must not raise)."""
    out = []
    for name in names:
        owner: Any = module
        parts = name.split(".")
        for part in parts[:-1]:
            owner = owner._modules.get(part) if owner is not None else None
        table = None if owner is None else (owner._buffers if kind == "buffers" else owner._parameters)
        value = None if table is None else table.get(parts[-1])
        out.append(_EMPTY if value is None else value.detach())
    return out


def _call_parts(module: torch.nn.Module, path: str, cls: str, args: Any, kwargs: Any, buffers: tuple[str, ...],
                params: tuple[str, ...], close: bool = False) -> tuple[int, list[torch.Tensor]]:
    if torch.compiler.is_compiling():
        args, kwargs = concrete_numbers(args), concrete_numbers(kwargs)
    tensors: list[torch.Tensor] = []
    spec_args = _describe(tuple(args), 0, tensors)
    spec_kwargs = _describe(dict(kwargs), 0, tensors)
    find = _close_site_of if close else _site_of
    site = find(path, cls, spec_args, spec_kwargs, len(tensors), buffers, params)
    return site, tensors


def _open_hook(path: str, cls: str, buffers: tuple[str, ...], params: tuple[str, ...], backward: bool) -> Any:
    def hook(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if torch.compiler.is_compiling():
            site, tensors = _call_parts(module, path, cls, args, kwargs, buffers, params)
            keep_op(tensors + _gather(module, buffers, "buffers") + _gather(module, params, "params"), site,
                    PART_OPEN)
            if backward and torch.is_grad_enabled():
                wrapped = _wrap_inputs(args, site, None)
                return None if wrapped is None else (wrapped, kwargs)
            return None
        if in_recomputation():  # activation checkpointing re-runs the forward in backward: not a call
            return None
        try:
            site, tensors = _call_parts(module, path, cls, args, kwargs, buffers, params)
            call = _keep_impl(tensors + _gather(module, buffers, "buffers") + _gather(module, params, "params"),
                              site, PART_OPEN, eager=True)
            if backward and call is not None and torch.is_grad_enabled():
                wrapped = _wrap_inputs(args, site, call)
                return None if wrapped is None else (wrapped, kwargs)
        except Exception as exc:  # a probe must never raise inside the user's forward
            _warn_once(f"graphprobe: replay could not describe a call of {path}: {exc}")
        return None

    return hook


def _close_hook(path: str, cls: str, buffers: tuple[str, ...], params: tuple[str, ...], backward: bool) -> Any:
    def hook(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> Any:
        if torch.compiler.is_compiling():
            site, _ = _call_parts(module, path, cls, args, kwargs, buffers, params, close=True)
            outs: list[torch.Tensor] = []
            _describe(output, 0, outs)
            keep_op(outs, site, PART_CLOSE)
            if backward and torch.is_grad_enabled():
                return _wrap_output(output, site, None)
            return None
        if in_recomputation():
            return None
        try:
            site, _ = _call_parts(module, path, cls, args, kwargs, buffers, params, close=True)
            outs = []
            _describe(output, 0, outs)
            call = _keep_impl(outs, site, PART_CLOSE, eager=True)
            if backward and call is not None and torch.is_grad_enabled():
                return _wrap_output(output, site, call)
        except Exception as exc:  # a probe must never raise inside the user's forward
            _warn_once(f"graphprobe: replay could not keep an output of {path}: {exc}")
        return None

    return hook


# ---------------------------------------------------------------- replay.backward


def _wants_grad(x: Any) -> bool:
    return (isinstance(x, torch.Tensor) and type(x) in (torch.Tensor, torch.nn.Parameter) and x.requires_grad
            and x.is_floating_point() and x.layout == torch.strided)


class _GradKeep(torch.autograd.Function):
    """Traced: identity in the forward (a copy: dynamo refuses in-place
    updates of a view a custom Function made); its backward hands the
    gradient to the keep op, which becomes a node of the backward graph."""

    @staticmethod
    def forward(x: torch.Tensor, site: int, part: int) -> torch.Tensor:  # type: ignore[override]
        return x.clone()

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        _, ctx.site, ctx.part = inputs

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        keep_op([grad], ctx.site, ctx.part)
        return grad, None, None


class _EagerGradKeep(torch.autograd.Function):
    """Eager: identity (its output a view, marked so that in-place updates
    stay allowed); its backward keeps the gradient for exactly this call."""

    @staticmethod
    def forward(x: torch.Tensor, site: int, part: int, call: Any) -> torch.Tensor:  # type: ignore[override]
        return x

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        _, ctx.site, ctx.part, ctx.call = inputs

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        try:
            STORE.keep_grad([grad], ctx.site, ctx.part, ctx.call)
        except Exception as exc:  # a probe must never break the user's backward pass
            _warn_once(f"graphprobe: replay could not keep a gradient: {exc}")
        return grad, None, None, None


def _grad_keep(x: torch.Tensor, site: int, part: int, call: Call | None) -> torch.Tensor:
    if call is None:
        return _GradKeep.apply(x, site, part)
    out = _EagerGradKeep.apply(x, site, part, call)
    from graphprobe.wiring.backward import _allow_in_place

    _allow_in_place((out,))
    return out


def _wrap_inputs(args: tuple[Any, ...], site: int, call: Call | None) -> tuple[Any, ...] | None:
    """``args`` with each positional tensor that wants a gradient passed
    through a gradient keeper; None when none does."""
    if not any(_wants_grad(a) for a in args):
        return None
    return tuple(_grad_keep(a, site, grad_part(False, i), call) if _wants_grad(a) else a
                 for i, a in enumerate(args))


def _wrap_output(output: Any, site: int, call: Call | None) -> Any:
    """The output with each tensor that wants a gradient passed through a
    gradient keeper, numbered as :func:`_describe` flattens it: a tensor,
    or a plain tuple or list of tensors and other non-container values;
    None (the output unchanged, its backward not kept) otherwise."""
    if isinstance(output, torch.Tensor):
        return _grad_keep(output, site, grad_part(True, 0), call) if _wants_grad(output) else None
    if type(output) not in (tuple, list):
        return None
    if any(isinstance(o, (tuple, list, dict)) or _plain_object(o) for o in output):
        return None
    items: list[Any] = []
    index = 0
    for o in output:
        if isinstance(o, torch.Tensor) and o.layout == torch.strided and not o.is_nested and (
                type(o) in (torch.Tensor, torch.nn.Parameter) or not _own_dispatch(o)):
            items.append(_grad_keep(o, site, grad_part(True, index), call) if _wants_grad(o) else o)
            index += 1
        else:
            items.append(o)
    return tuple(items) if type(output) is tuple else items

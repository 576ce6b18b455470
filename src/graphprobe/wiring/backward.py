"""Backward records: gradients of module outputs and inputs, and parameter
gradients, recorded by the probe mechanism itself.

A Python backward hook runs only in eager autograd: compiled (AOTAutograd)
and captured backward graphs never call it. So the L0 hooks insert, in the
*forward*, an identity point with an autograd formula (:class:`GradProbe`)
around the tensors whose gradients are wanted; its backward records the
incoming gradient with ``graphprobe::record_stats`` and passes it on
unchanged. Dynamo traces the ``autograd.Function`` (forward and backward),
so AOTAutograd puts the probes into the backward graph and inductor and
CUDA graph trees run them on every execution, like the forward probes.

A module call ``Module.{path}.{Class}.forward.{n}`` gets the backward record
``Module.{path}.{Class}.backward.{n}``, laid out as msprobe's eager
PrecisionDebugger writes it: ``input`` holds the gradients of the call's
outputs (every tensor of the output that requires grad, nested tuples, lists
and dicts flattened), ``output`` the gradients of its positional tensor
inputs that require grad (what a full backward hook sees). Its sites are
registered when the probes are inserted (identity fixed at insertion,
csrc/identity/call_registry.h): the ``output`` part in the forward pre-hook
(it *opens* the backward call), the ``input`` part in the forward hook (it
*closes* it); both are registered, without tensors where none wants a
gradient, whenever grad mode is on, so that every forward call made with
grad has its own backward call. The call assembly knows that a backward
call starts with its ``input`` part and that compiled backward probes run
in the reverse of their insertion order (csrc/identity/call_assembly.cpp).

The backward call is linked to its forward call at insertion (the opening
part carries the forward call's input site, ``forward_site``), and the call
assembly gives it that forward call's ``{n}``, as msprobe names it
(``ModuleProcessor.build_module_hook`` makes ``forward.{i}`` and
``backward.{i}`` from the same call count): a module called three times in
a step has ``backward.0`` for the gradients of ``forward.0``, whatever
order the backward pass reaches them in.

Parameter gradients (``Module.{path}.{Class}.parameters_grad.0``, one row
per parameter) are read at ``step()``: the accumulated ``.grad`` as the
optimizer sees it. A post-accumulate-grad hook per parameter counts the
backward passes that reached it in the step (gradient accumulation); a step
without one (a ``no_grad`` evaluation) records no gradient. Those hooks run
in eager autograd, which accumulates gradients in compiled training too.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook
from torch.utils.hooks import RemovableHandle

from graphprobe._ops import _C, record_stats
from graphprobe.wiring import own_calls, probe, slicing

__all__ = ["GradProbe", "ParamGradRecorder", "backward_entry", "in_recomputation", "wrap_inputs", "wrap_output"]

_CREATION_META_DEFAULT = torch._C._autograd.CreationMeta(0)
_warned = False


def backward_entry(forward_entry: str) -> str:
    """``Module.a.Linear.forward.{n}`` -> ``Module.a.Linear.backward.{n}``."""
    head, _, tail = forward_entry.rpartition(".forward.")
    return f"{head}.backward.{tail}"


def in_recomputation() -> bool:
    """Whether eager code runs inside a backward pass: activation
    checkpointing (``torch.utils.checkpoint``, non-reentrant) recomputes a
    forward there. Its hooks must add no record: the recomputed calls are
    not calls of the program, and the gradients flow through the original
    forward's graph, whose probes are already in place."""
    if torch.compiler.is_compiling():
        return False  # traced code runs its probes on every execution
    return torch._C._current_graph_task_id() != -1


class GradProbe(torch.autograd.Function):
    """Identity in the forward; its backward records the incoming gradient
    into the row ``(site, index)`` and returns it unchanged.

    One per tensor: a tensor whose gradient never arrives (an output the
    loss does not use) leaves its node unexecuted, so nothing is recorded
    for it — in eager autograd and in AOTAutograd's traced backward alike
    (a node shared by several outputs would be run with zeros made up for
    the missing one, and AOTAutograd even runs a probe of such a constant
    while tracing).

    Written in the functorch style (``setup_context``, a generated vmap
    rule; eager code applies :class:`_EagerGradProbe`, which adds a ``jvp``)
    so that the probes never break ``torch.func.grad``, ``vmap``,
    ``jacrev``/``jacfwd`` or forward-mode AD on a wired model: the identity
    passes a tangent through unchanged. Inside ``vmap`` the record op sees
    one example of a batched gradient and records nothing
    (docs/limitations.md)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor, site: int, index: int) -> torch.Tensor:  # type: ignore[override]
        if torch.compiler.is_compiling():
            # Traced: an output aliasing its input would forbid in-place
            # updates of it by the model (dynamo refuses them on a view made
            # by a custom Function). A copy keeps the values bit for bit.
            return x.clone()
        return x  # eager: returned as-is (autograd makes a view; see _allow_in_place)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        _, ctx.site, ctx.index = inputs

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        # statistics.slice applies to gradients as to every recorded tensor
        # (msprobe's eager dumper slices each tensor it analyses); the view
        # is recorded, the whole gradient passed on.
        own_calls.enter()  # the probe's own torch calls are not the user's (tensor.custom_api)
        try:
            if torch.compiler.is_compiling():
                record_stats(slicing.sliced([grad])[0], ctx.site, ctx.index)
            else:
                _record_eager(grad, ctx.site, ctx.index)
        finally:
            own_calls.leave()
        return grad, None, None


class _EagerGradProbe(GradProbe):
    """:class:`GradProbe` with a ``jvp``, applied in eager code: dynamo
    refuses to trace a Function that defines one, and forward-mode AD through
    compiled code is not traced either. An output's probe may carry a
    :class:`_Bypass` (below), whose hook then records instead when the
    output was updated in place after the call returned."""

    @staticmethod
    def forward(x: torch.Tensor, site: int, index: int, bypass: Any = None) -> torch.Tensor:  # type: ignore[override]
        return x

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        _, ctx.site, ctx.index, ctx.bypass = inputs

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        if ctx.bypass is not None and ctx.bypass.updated():
            return grad, None, None, None  # the base's hook records (_Bypass)
        return GradProbe.backward(ctx, grad) + (None,)

    @staticmethod
    def jvp(ctx: Any, x_tangent: torch.Tensor, site_tangent: Any, index_tangent: Any,
            bypass_tangent: Any = None) -> torch.Tensor:
        # Forward-mode AD (torch.autograd.forward_ad, jvp, jacfwd): the
        # tangent of an identity is the input's tangent; nothing to record.
        # A view, as the forward returns its input as-is: autograd requires
        # the tangent of such an output to be a view too.
        return x_tangent.view_as(x_tangent)


def _record_eager(grad: torch.Tensor, site: int, index: int) -> None:
    """Records in eager autograd; never raises into the user's backward."""
    global _warned
    try:
        record_stats(slicing.sliced([grad])[0], site, index)  # a sparse gradient cannot be sliced: warned below
    except Exception as exc:  # noqa: BLE001 - a probe must not break training
        if not _warned:
            _warned = True
            warnings.warn(f"graphprobe: a backward probe could not record a gradient ({exc}); "
                          "later failures are not reported", RuntimeWarning, stacklevel=2)


class _Bypass:
    """Records the gradient of an eager output from a hook on the output
    itself (the probe's base), not from the probe's node. The probe returns
    a view of the output (an ordinary view, see :func:`_allow_in_place`);
    when the program updates that view in place, autograd sends the
    gradient of the value before the update through the view's base: the
    probe's node sees only the reads made before the update (Mixtral's
    router, ``w = topk(p, 2).values; w /= w.sum(-1, keepdim=True)``: the
    sum's gradient alone, 5.07 where the values' gradient was 1.85), or
    nothing at all (Falcon's ``mlp_output += attention_output``). The hook,
    registered before the update, stays with the base's node of the time and
    receives the whole gradient of the value the call returned, as compiled
    code's probe does (it returns a copy, which the update changes).
    Without an update the probe's node records and the hook does nothing:
    the hook sees every use of the output, the ones the call made itself
    before returning it too (an attention's weights, returned and used for
    its output: their whole gradient where the call's boundary passes none,
    and compiled code records none or zeros -- a clean GraniteMoE training
    step was named there). Whether the output was updated is its version
    counter's business (``_C.VersionWatch``, the counter without the
    tensor). Compiled code needs none of this."""

    __slots__ = ("site", "index", "watch")

    def __init__(self, site: int, index: int, x: torch.Tensor) -> None:
        self.site = site
        self.index = index
        self.watch = _C.VersionWatch(x)

    def updated(self) -> bool:
        """Whether the output was updated in place after the call returned it."""
        return self.watch.changed()

    def __call__(self, grad: torch.Tensor) -> None:
        if not self.updated():
            return  # the probe's node recorded the gradient at the call's boundary
        own_calls.enter()
        try:
            _record_eager(grad, self.site, self.index)
        finally:
            own_calls.leave()


def _watch_bypass(x: torch.Tensor, site: int, index: int) -> _Bypass | None:
    """Registers the :class:`_Bypass` hook on an output ``x`` about to be
    probed; None where a hook could not see the bypass or could disturb the
    program: a leaf (its hook would see every consumer's gradient), a view
    (its hook sits on its own node, which the update bypasses too), or a
    tensor of a functorch transform."""
    if x.grad_fn is None or x._base is not None or torch._C._are_functorch_transforms_active():
        return None
    bypass = _Bypass(site, index, x)
    x.register_hook(bypass)
    return bypass


def _allow_in_place(outs: tuple[torch.Tensor, ...]) -> None:
    """Eager outputs of :class:`GradProbe` are views of its inputs, which
    autograd forbids to modify in place (``nn.ReLU(inplace=True)`` on a
    module's input, ``out += residual`` on its output). As msprobe does for
    its backward hooks, they are marked as ordinary views: an in-place
    update then goes through the view's base, with correct gradients, and
    that tensor's gradient is recorded where it still passes a probe."""
    for o in outs:
        if o._base is not None and torch._C._autograd._get_creation_meta(o) != _CREATION_META_DEFAULT:
            torch._C._autograd._set_creation_meta(o, _CREATION_META_DEFAULT)


def _wants_grad(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.requires_grad and type(x) in (torch.Tensor, torch.nn.Parameter)


def _register(opening: bool, entry: str, part: str, count: int, forward_site: int = -1) -> int:
    """Registers one part of a backward call (``count`` gradient tensors
    under ``part``: ``input`` or ``output``; the opening part linked to its
    forward call's input ``forward_site``) and returns its site."""
    places = tuple((part, str(i)) for i in range(count))
    return _register_constant(opening, entry, places, forward_site, probe._mode(), probe._session)


@torch._dynamo.assume_constant_result
def _register_constant(opening: bool, entry: str, places: tuple[tuple[str, ...], ...], forward_site: int,
                       mode: int, session: int) -> int:
    """Executed (not traced) by dynamo, once per trace; ``session`` makes
    dynamo guard on the dumper session, as for forward sites."""
    program = 0
    if mode == probe._TRACED:
        program = _backward_program()
    register = _C.open_call if opening else _C.close_call
    n = len(places)
    return int(register(entry, places, tuple(range(n)), (False,) * n, (), mode, program, (), forward_site))


def _backward_program() -> int:
    """The engine's program number for the backward probes of the trace
    under way: the backward graph runs apart from the forward one, so its
    probes form a run of their own (csrc/identity/call_assembly.h)."""
    return probe._trace_program("_graphprobe_backward_program")


def _apply(site: int, tensors: list[torch.Tensor], outputs: bool = False) -> tuple[torch.Tensor, ...]:
    """Passes ``tensors`` through probes recording their gradients into
    ``site``; ``outputs``: they are a call's outputs (eager code then also
    watches for an in-place update that bypasses the probe: :class:`_Bypass`)."""
    if torch.compiler.is_compiling():
        return tuple(GradProbe.apply(t, site, i) for i, t in enumerate(tensors))
    outs = tuple(_EagerGradProbe.apply(t, site, i, _watch_bypass(t, site, i) if outputs else None)
                 for i, t in enumerate(tensors))
    _allow_in_place(outs)
    return outs


def wrap_inputs(entry: str, args: tuple[Any, ...], forward_site: int = -1) -> tuple[Any, ...] | None:
    """Forward pre-hook part: opens the backward call of ``entry`` (a
    ``...backward.{n}`` template), linked to its forward call's input
    ``forward_site``, with the gradients of the positional tensor inputs
    that require grad (its ``output``), and returns ``args`` with those
    tensors passed through a :class:`GradProbe`; None when no positional
    input requires grad (the call is opened all the same: its ``input``
    part, :func:`wrap_output`, closes it and is named by the link)."""
    index = [i for i, a in enumerate(args) if _wants_grad(a)]
    site = _register(True, entry, "output", len(index), forward_site)
    if not index:
        return None
    outs = _apply(site, [args[i] for i in index])
    new = list(args)
    for i, o in zip(index, outs):
        new[i] = o
    return tuple(new)


def wrap_output(entry: str, output: Any) -> Any:
    """Forward hook part: closes the backward call of ``entry`` with the
    gradients of the output's tensors that require grad (its ``input``),
    and returns the output with those tensors passed through a
    :class:`GradProbe` (tuples rebuilt, lists and dicts updated in place, as
    msprobe does, so that a ``ModelOutput`` keeps its class). Closes the
    call opened by :func:`wrap_inputs` even when no tensor wants a
    gradient, so that no call is left open.

    An output whose containers cannot be rebuilt (a tuple subclass whose
    constructor takes its fields as arguments, a dict that refuses item
    assignment) is returned untouched and its gradients are not recorded
    (warned once per call site and type): the probe must not make the
    forward raise."""
    found: list[torch.Tensor] = []
    _collect(output, found, 0)
    if found:
        refused = _refused_container(output, 0)
        if refused is not None:
            _warn_unprobed(entry, *refused)
            found = []
    site = _register(False, entry, "input", len(found))
    if not found:
        return output
    outs = iter(_apply(site, found, outputs=True))
    return _rebuild(output, outs, 0)


_warned_outputs: set[tuple[int, str, str]] = set()


def _warn_unprobed(entry: str, kind: str, exc: BaseException) -> None:
    call = entry.replace(".backward.{n}", "").replace(".{n}.backward", "")
    key = (probe._session, call, kind)  # once per dumper
    if key in _warned_outputs:
        return
    _warned_outputs.add(key)
    warnings.warn(f"graphprobe: the output of {call} holds a {kind} that cannot be rebuilt with probed tensors "
                  f"({type(exc).__name__}: {exc}); the gradients of that output are not recorded (its backward "
                  "records have no 'input' part). Warned once per call site and type by each dumper.", RuntimeWarning,
                  stacklevel=4)


def _holds_wanted(value: Any, depth: int) -> bool:
    found: list[torch.Tensor] = []
    _collect(value, found, depth)
    return bool(found)


def _refused_container(value: Any, depth: int) -> tuple[str, BaseException] | None:
    """The first container of ``value`` that :func:`_rebuild` would have to
    change and cannot (its qualified type name and the error), else None.
    Tried with the container's own items: a tuple is built again, a list or
    dict item is assigned the value it holds."""
    if depth >= probe.MAX_DEPTH or not isinstance(value, (tuple, list, dict)):
        return None
    items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
    changed = [(k, v) for k, v in items if _holds_wanted(v, depth + 1)]
    if not changed:
        return None
    try:
        if isinstance(value, tuple):
            _construct(value, list(value))
        else:
            for k, v in changed:
                value[k] = v
    except Exception as exc:  # noqa: BLE001 - a user class may raise anything
        return f"{type(value).__module__}.{type(value).__qualname__}", exc
    for _, v in changed:
        refused = _refused_container(v, depth + 1)
        if refused is not None:
            return refused
    return None


def _construct(value: tuple[Any, ...], items: list[Any]) -> tuple[Any, ...]:
    return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)


def _collect(value: Any, found: list[torch.Tensor], depth: int) -> None:
    if _wants_grad(value):
        found.append(value)
    elif depth < probe.MAX_DEPTH and isinstance(value, (tuple, list)):
        for item in value:
            _collect(item, found, depth + 1)
    elif depth < probe.MAX_DEPTH and isinstance(value, dict):
        for item in value.values():
            _collect(item, found, depth + 1)


def _rebuild(value: Any, outs: Any, depth: int) -> Any:
    """``value`` with each tensor that wants a gradient replaced by the next
    of ``outs``; containers without such a tensor are left as they are."""
    return _rebuilt(value, outs, depth)[0]


def _rebuilt(value: Any, outs: Any, depth: int) -> tuple[Any, bool]:
    # Whether anything changed is carried along rather than found by
    # ``new is not old``: dynamo cannot trace ``is`` between two tuples, and
    # a graph break in a forward hook made it run the hook's traced half and
    # then the whole hook again eagerly (a module's records written twice).
    if _wants_grad(value):
        return next(outs), True
    if depth >= probe.MAX_DEPTH:
        return value, False
    if isinstance(value, tuple):
        pairs = [_rebuilt(v, outs, depth + 1) for v in value]
        if not any(changed for _, changed in pairs):
            return value, False
        return _construct(value, [new for new, _ in pairs]), True
    if isinstance(value, list):
        any_changed = False
        for i, v in enumerate(value):
            new, changed = _rebuilt(v, outs, depth + 1)
            if changed:
                value[i] = new
                any_changed = True
        return value, any_changed
    if isinstance(value, dict):
        any_changed = False
        for k in list(value.keys()):
            new, changed = _rebuilt(value[k], outs, depth + 1)
            if changed:
                value[k] = new
                any_changed = True
        return value, any_changed
    return value, False


class ParamGradRecorder:
    """Records each wired module's parameter gradients once per step: when
    an optimizer's ``step()`` begins (the gradients it is about to apply,
    before the user's ``zero_grad()``), or else at the dumper's ``step()``.

    One record per module whose parameters received a gradient in the step,
    ``Module.{path}.{Class}.parameters_grad.0`` with one row per parameter
    (``{"weight": [...], "bias": [...]}``, msprobe's layout), each row
    carrying ``backward_passes``: how many backward passes accumulated into
    that gradient since the last record (gradient accumulation)."""

    def __init__(self, modules: list[tuple[str, torch.nn.Module]]) -> None:
        self._handles: list[RemovableHandle] = []
        self._groups: list[tuple[str, list[tuple[str, torch.nn.Parameter]]]] = []
        self._passes: dict[int, int] = {}
        # Ids whose count is above zero. step() runs record() every iteration, and most steps have
        # nothing to record (the optimizer's pre-hook took the gradients, or there was no backward):
        # with this set empty, record() returns without walking every parameter (that walk was
        # two thirds of step()'s time on a small transformer, issue 39).
        self._counted: set[int] = set()
        for prefix, module in modules:
            params = [(name, p) for name, p in module._parameters.items() if p is not None and p.requires_grad]
            if not params:
                continue
            self._groups.append((probe.safe_text(f"{prefix}.parameters_grad.{{n}}"), params))
            for _, p in params:
                if id(p) not in self._passes:
                    self._passes[id(p)] = 0
                    self._handles.append(p.register_post_accumulate_grad_hook(self._count))
        if self._groups:
            self._handles.append(register_optimizer_step_pre_hook(self._optimizer_step))

    @torch._dynamo.disable
    def _optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        # Eager even inside a compiled optimizer step: the gradients are read
        # now, before the step changes anything.
        own_calls.enter()
        try:
            self.record(True, reset=False)
        finally:
            own_calls.leave()

    def _count(self, p: torch.Tensor) -> None:
        self._passes[id(p)] = self._passes.get(id(p), 0) + 1
        self._counted.add(id(p))

    @property
    def pending(self) -> bool:
        """Whether a backward pass accumulated into a parameter since its last record."""
        return bool(self._counted)

    def record(self, record: bool = True, reset: bool = True) -> None:
        """Records (when ``record``) the gradients that backward passes
        produced since the last record, and starts counting their passes
        anew (all of them when ``reset``: the dumper's step). Never raises
        (a failure is warned once)."""
        if not self._counted:  # every count is zero: nothing to record, nothing to reset
            return
        try:
            for entry, params in self._groups if record else ():
                rows = [(name, p.grad, self._passes.get(id(p), 0)) for name, p in params]
                rows = [(n, g, c) for n, g, c in rows if c > 0 and isinstance(g, torch.Tensor)]
                if not rows:
                    continue
                for _, p in params:
                    self._passes[id(p)] = 0
                    self._counted.discard(id(p))
                places = tuple((n, "0") for n, _, _ in rows)
                extras = tuple((("backward_passes", str(c)),) for _, _, c in rows)
                site = _C.open_call(entry, places, tuple(range(len(rows))), (False,) * len(rows), (),
                                    probe._EAGER, 0, extras)
                tensors = [probe._recordable(g) for _, g, _ in rows]
                for i, t in enumerate(tensors):
                    if t is not None:
                        (t,) = slicing.sliced([t])  # statistics.slice, as for the parameters themselves
                        record_stats(t, int(site), i)
        except Exception as exc:  # noqa: BLE001 - step() must not fail for a probe
            global _warned
            if not _warned:
                _warned = True
                warnings.warn(f"graphprobe: parameter gradients could not be recorded ({exc})", RuntimeWarning,
                              stacklevel=3)
        finally:
            if reset:
                for k in self._counted:
                    self._passes[k] = 0
                self._counted.clear()

    def remove(self) -> None:
        """Removes the counting hooks."""
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._groups.clear()


def record_parameter_grads(wiring: list[Any], record: bool) -> None:
    """``step()``: records (``record``) the parameter gradients of every
    module wiring that has a :class:`ParamGradRecorder`, and starts counting
    backward passes anew (a discarded or switched-off step only resets)."""
    recorders = [r for w in wiring if (r := getattr(w, "param_grads", None)) is not None and r.pending]
    if not recorders:  # the usual step: the optimizer's pre-hook recorded them, or no backward ran
        return
    own_calls.enter()
    try:
        for recorder in recorders:
            recorder.record(record)
    finally:
        own_calls.leave()

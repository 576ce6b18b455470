"""L1 wiring: inputs and outputs of torch API calls made during the forward.

A :class:`torch.overrides.TorchFunctionMode` is entered around the wired
model's ``forward`` (the root's ``forward`` is wrapped, so under
``torch.compile`` the mode is entered inside the compiled region and dynamo
traces ``__torch_function__`` inline: the probes become graph nodes, with no
graph break). For every call to an API of :data:`DEFAULT_APIS` the mode
probes the positional and keyword inputs before the call and the output
after it. A ``TorchDispatchMode`` would see aten ops instead, and makes dynamo
silently skip the frame, so it is not used.

Naming follows msprobe's eager dumper: ``Functional.{api}.{n}.forward``
(``torch.nn.functional``), ``Torch.{api}.{n}.forward`` (``torch``) and
``Tensor.{method}.{n}.forward`` (tensor methods and operators); ``{n}`` counts
the calls of that API in the step, in execution order. A function that is
reachable under two prefixes (``F.conv2d is torch.conv2d``) takes the first in
the order Functional, Torch, Tensor.

Operators implemented in C reach a torch-function mode as their method:
``x * y``, ``2 * x`` and ``x.mul(y)`` all arrive as ``Tensor.mul``, and
``x += y`` as ``Tensor.add_``. They are recorded under the operator's name
(``Tensor.__mul__``, ``Tensor.__iadd__``; see :data:`OPERATOR_METHODS`),
which is what msprobe records for the operator spelling, by far the common
one in model code; the method spelling is recorded under the operator's name
too. Operators that PyTorch implements in Python (``2 - x`` is
``Tensor.__rsub__``, ``x ** 2`` is ``Tensor.__pow__``) arrive as themselves.
An operator called by its own name (``t[0].__iadd__(u)``) arrives as its
method in eager mode but as itself under dynamo; both are recorded under
the operator's name.

Default set (:data:`DEFAULT_APIS`): APIs that compute new values, where
precision problems appear: linear algebra, convolution, normalisation,
activations, softmax, attention, embedding, pooling and interpolation,
elementwise arithmetic and transcendental functions, reductions, losses and
dtype casts. Skipped: metadata (``size``, ``dim``, ``shape``, ``dtype``),
views and layout (``view``, ``reshape``, ``permute``, ``transpose``,
``chunk``, ``split``, ``contiguous``, ``expand``, ``__getitem__``), pure
data movement (``cat``, ``stack``, ``clone``, ``gather``, ``pad``, device
copies), factories (``zeros``, ``arange``, ``rand``) and comparisons and
logical operators; their values are those of their inputs, or carry no
precision.

Only the outermost API call is recorded: inside ``__torch_function__`` the
mode is off, so ``F.layer_norm`` does not also record the ``torch.layer_norm``
it calls, and graphprobe's own probe ops and tensor accesses are never
recorded. The same holds for an API outside the table: the APIs it calls run
with the mode off. Module hooks of L0 (``mix``) run inside the mode; their
probes pass through it unrecorded, since no graphprobe operation is in the
table. Dynamo hands most APIs to the mode as eager does, but inlines a few
Python ones; of those in the table, ``F.rms_norm`` reaches the mode as the
``torch.rms_norm`` it calls, which is therefore named ``Functional.rms_norm``
(:data:`INLINED_BY_DYNAMO`).

Arguments: functions written in C receive the call as written, in eager and
under dynamo alike. Functions written in Python (most of
``torch.nn.functional``) reach the mode, in eager, with the arguments their
own ``handle_torch_function`` call re-packs, but under dynamo as written at
the call site; they are bound to their signature so that both give one form:
every positional-or-keyword parameter in ``input_args``, keyword-only ones in
``input_kwargs``, defaults filled in (``F.layer_norm`` as ``nn.LayerNorm``
calls it: ``input, normalized_shape, weight, bias, eps``). The
``boolean_dispatch`` wrappers (``F.max_pool2d``, ``F.adaptive_max_pool2d``,
...) take ``(*args, **kwargs)`` and are bound to the signature of the
function they dispatch to.

Graph modes: under ``dynamic=True`` symbolic numbers among the arguments are
made concrete while tracing (:mod:`graphprobe.wiring.symbolic`); calls that
inductor's generated code makes while the mode is entered at run time (after
a graph break) are not recorded (:func:`_called_by_compiled_code`); the MHA
fast path is off while wired (:class:`ApiWiring`). Each keeps the compiled
record list equal to eager mode's.

``statistics.list`` keeps the APIs whose ``{Prefix}.{api}`` contains one of
its keywords (case-insensitive), as it keeps modules at L0.

Observer effect: every recorded tensor becomes an input of an opaque,
side-effectful op, so under inductor each L1 probe is a fusion barrier and
forces its tensor to be materialised; pointwise chains that inductor would
fuse into one kernel run as separate kernels, which can change rounding
slightly and costs time and memory. L1 perturbs the compiled graph much more
than L0 (which probes module boundaries only); narrow it with
``statistics.list``.
"""

from __future__ import annotations

import functools
import inspect
import sys
import weakref
from typing import Any, Callable, Mapping

import torch
from torch.overrides import TorchFunctionMode

from graphprobe.wiring import api_backward, backward, own_calls, scripted
from graphprobe.wiring.dynamo_frames import run_eagerly_from_eager_code
from graphprobe.wiring.probe import matches, probe_inputs, probe_output
from graphprobe.wiring.symbolic import concrete_numbers

__all__ = ["ApiWiring", "DEFAULT_APIS", "INLINED_BY_DYNAMO", "OPERATOR_METHODS", "resolve_apis"]

DEFAULT_APIS: dict[str, tuple[str, ...]] = {
    "Functional": (
        # linear algebra and convolution
        "linear", "bilinear", "conv1d", "conv2d", "conv3d",
        "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
        # normalisation
        "layer_norm", "rms_norm", "group_norm", "batch_norm", "instance_norm",
        "local_response_norm", "normalize",
        # activations
        "relu", "relu6", "leaky_relu", "prelu", "elu", "selu", "celu", "gelu", "silu",
        "mish", "glu", "hardtanh", "hardswish", "hardsigmoid", "softplus", "softsign", "logsigmoid",
        # softmax and attention
        "softmax", "log_softmax", "softmin", "scaled_dot_product_attention", "multi_head_attention_forward",
        # embedding, dropout, pooling, resampling
        "embedding", "embedding_bag", "dropout",
        "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
        "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
        "adaptive_max_pool1d", "adaptive_max_pool2d", "interpolate",
        # losses and distances
        "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss",
        "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "cosine_similarity",
    ),
    "Torch": (
        # linear algebra
        "matmul", "mm", "bmm", "mv", "dot", "outer", "addmm", "addbmm", "baddbmm", "einsum", "tensordot",
        # normalisation, softmax
        "layer_norm", "group_norm", "batch_norm", "softmax", "log_softmax",
        # elementwise arithmetic
        "add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod", "pow",
        "neg", "abs", "reciprocal", "square", "sqrt", "rsqrt", "exp", "exp2", "expm1",
        "log", "log2", "log10", "log1p", "sin", "cos", "tan", "tanh", "sigmoid", "relu",
        "erf", "erfc", "erfinv", "sign", "clamp", "clip", "maximum", "minimum",
        "where", "lerp", "addcmul", "addcdiv", "masked_fill",
        # reductions
        "sum", "mean", "prod", "std", "var", "std_mean", "var_mean", "norm", "max", "min",
        "amax", "amin", "argmax", "argmin", "logsumexp", "cumsum", "cumprod", "topk",
    ),
    "Tensor": (
        # operators (see OPERATOR_METHODS) and their in-place forms
        "__add__", "__sub__", "__mul__", "__truediv__", "__matmul__", "__mod__", "__neg__",
        "__iadd__", "__isub__", "__imul__", "__itruediv__",
        "__rsub__", "__rtruediv__", "__rmatmul__", "__rmod__", "__floordiv__", "__rfloordiv__",
        "__pow__", "__rpow__",
        # linear algebra
        "mm", "bmm", "addmm", "baddbmm",
        # elementwise arithmetic
        "pow", "abs", "reciprocal", "square", "sqrt", "rsqrt", "exp", "log", "log1p",
        "sin", "cos", "tanh", "sigmoid", "relu", "erf", "clamp", "clip",
        "lerp", "addcmul", "addcdiv", "masked_fill", "masked_fill_",
        # softmax and reductions
        "softmax", "log_softmax", "sum", "mean", "prod", "std", "var", "norm", "max", "min",
        "amax", "amin", "argmax", "argmin", "logsumexp", "cumsum",
        # casts
        "to", "type_as", "float", "half", "bfloat16", "double", "int", "long",
    ),
}
"""The APIs recorded at L1 by default, by msprobe prefix; see the module docstring."""

OPERATOR_METHODS: dict[str, str] = {
    "__add__": "add",
    "__sub__": "sub",
    "__mul__": "mul",
    "__truediv__": "div",
    "__matmul__": "matmul",
    "__mod__": "remainder",
    "__neg__": "neg",
    "__iadd__": "add_",
    "__isub__": "sub_",
    "__imul__": "mul_",
    "__itruediv__": "div_",
}
"""C-implemented operators → the method that reaches the mode for them."""

INLINED_BY_DYNAMO: dict[str, tuple[str, str]] = {
    # Dynamo inlines F.rms_norm instead of handing it to the mode; only the
    # torch.rms_norm it calls arrives, with the same arguments. A direct
    # torch.rms_norm call is therefore named Functional.rms_norm too.
    "Functional.rms_norm": ("Torch", "rms_norm"),
}
"""API → the function that reaches the mode for it under ``torch.compile``."""

_NAMESPACES: tuple[tuple[str, Any], ...] = (
    ("Functional", torch.nn.functional),
    ("Torch", torch),
    ("Tensor", torch.Tensor),
)


def resolve_apis(
    keywords: tuple[str, ...] = (), table: Mapping[str, tuple[str, ...]] = DEFAULT_APIS
) -> dict[Callable[..., Any], str]:
    """Maps each function of ``table`` that ``keywords`` select to its entry
    template (``"Functional.linear.{n}.forward"``).

    Names that this torch does not have are left out, so one table serves
    several torch versions.
    """
    entries: dict[Callable[..., Any], str] = {}
    for prefix, namespace in _NAMESPACES:
        for api in table.get(prefix, ()):
            attr = OPERATOR_METHODS.get(api, api) if prefix == "Tensor" else api
            func = getattr(namespace, attr, None)
            name = f"{prefix}.{api}"
            if func is None or func in entries or not matches(name, keywords):
                continue
            entries[func] = f"{name}.{{n}}.forward"
    recorded = set(entries.values())
    spaces = dict(_NAMESPACES)
    for name, (prefix, attr) in INLINED_BY_DYNAMO.items():
        func = getattr(spaces[prefix], attr, None)
        if func is not None and f"{name}.{{n}}.forward" in recorded:
            entries[func] = f"{name}.{{n}}.forward"
    return entries


# Parameter kinds of a layout: (name, kind, default) per parameter.
_POSITIONAL, _KEYWORD_ONLY, _VAR_POSITIONAL, _VAR_KEYWORD = range(4)
_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: _POSITIONAL,
    inspect.Parameter.POSITIONAL_OR_KEYWORD: _POSITIONAL,
    inspect.Parameter.KEYWORD_ONLY: _KEYWORD_ONLY,
    inspect.Parameter.VAR_POSITIONAL: _VAR_POSITIONAL,
    inspect.Parameter.VAR_KEYWORD: _VAR_KEYWORD,
}
_Layout = tuple[tuple[str, int, Any], ...]
_REQUIRED = inspect.Parameter.empty


def _signature_holder(func: Callable[..., Any]) -> Callable[..., Any]:
    """The function whose signature ``func`` is called with. The
    ``boolean_dispatch`` wrappers of ``torch.nn.functional`` (``max_pool2d``,
    ``adaptive_max_pool2d``, ...) take ``(*args, **kwargs)`` and pick one of
    two functions of one signature on ``return_indices``; that signature is
    the API's."""
    dispatched = getattr(torch._jit_internal, "boolean_dispatched", {})
    for _ in range(4):  # a dispatcher may dispatch to another one
        try:
            choice = dispatched.get(func)
        except TypeError:  # not hashable, not weak-referenceable
            return func
        if not choice:
            return func
        func = choice["if_false"]
    return func


def _layout(func: Callable[..., Any]) -> _Layout | None:
    """The signature of a Python function, precomputed for :func:`_bind`;
    None for C functions, whose arguments need no binding."""
    func = _signature_holder(func)
    if not inspect.isfunction(func):
        return None
    try:
        # Not followed: a functools.wraps wrapper receives (*args, **kwargs).
        sig = inspect.signature(func, follow_wrapped=False)
    except (TypeError, ValueError):
        return None
    return tuple((p.name, _KINDS[p.kind], p.default) for p in sig.parameters.values())


def _bind(layout: _Layout, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args, kwargs`` bound to ``layout``: positional-or-keyword parameters
    positional, keyword-only ones by name, defaults filled in. Written for
    dynamo: no ``inspect`` at call time. Unbindable calls come back as given."""
    pos: list[Any] = []
    kw: dict[str, Any] = {}
    rest = dict(kwargs)
    i = 0
    for name, kind, default in layout:
        if kind == _VAR_POSITIONAL:
            pos.extend(args[i:])
            i = len(args)
        elif kind == _VAR_KEYWORD:
            kw.update(rest)
            rest = {}
        elif kind == _POSITIONAL and i < len(args):
            pos.append(args[i])
            i += 1
        else:
            value = rest.pop(name) if name in rest else default
            if value is _REQUIRED:
                return args, kwargs
            if kind == _POSITIONAL:
                pos.append(value)
            else:
                kw[name] = value
    if i < len(args) or rest:
        return args, kwargs
    return tuple(pos), kw


# Modules of the code that inductor generates and runs: its output code is
# loaded as torch._inductor.runtime.compile_tasks.<hash>.
_GENERATED_CODE_PREFIX = "torch._inductor."
_CALLER_FRAMES = 8


def _called_by_compiled_code() -> bool:
    """Whether the API call being handled was made by code that inductor
    generated (``extern_kernels.addmm(..., alpha=1, beta=1, out=buf)``), not by
    the model.

    Such code runs with the mode on the stack when a graph break leaves the
    mode entered at run time (the wrapper's ``with mode:`` spans the break):
    its calls are the compiler's, already recorded by the probes of the
    graph. The walk goes up from the API's caller through torch's own frames
    (``torch.nn.functional``, ``torch.overrides``, ...) and stops at the
    first frame outside torch: the model, or graphprobe's wrapper.
    """
    # 0: this function, 1: _probe_call, 2: __torch_function__, 3: the code
    # that called the API (torch.overrides' handle_torch_function for an API
    # written in Python).
    frame = sys._getframe(3)
    for _ in range(_CALLER_FRAMES):
        if frame is None:
            return False
        module = frame.f_globals.get("__name__")
        if not isinstance(module, str) or not module.startswith("torch."):
            return False
        if module.startswith(_GENERATED_CODE_PREFIX):
            return True
        frame = frame.f_back
    return False


class _ApiMode(TorchFunctionMode):
    """Probes the calls to the functions of ``entries``; passes the rest through."""

    def __init__(self, entries: dict[Callable[..., Any], str], grads: bool = False) -> None:
        super().__init__()
        self.grads = grads  # backward records (wiring/api_backward.py)
        # Looked up by name, then by identity: dynamo 2.13 misses some Python
        # functions (Tensor.__rsub__) as dict keys and then fails its own guard.
        by_name: dict[str, list[tuple[Callable[..., Any], str, _Layout | None]]] = {}
        for func, entry in entries.items():
            by_name.setdefault(func.__name__, []).append((func, entry, _layout(func)))
        # An operator called by its own name (``t[0].__iadd__(u)``) reaches the
        # mode as its method (``add_``) in eager mode, but as itself under
        # dynamo: without this the compiled record list lacked the call.
        for api, attr in OPERATOR_METHODS.items():
            carrier, operator = getattr(torch.Tensor, attr, None), getattr(torch.Tensor, api, None)
            entry = entries.get(carrier) if carrier is not None else None
            if operator is not None and operator not in entries and entry == f"Tensor.{api}.{{n}}.forward":
                by_name.setdefault(operator.__name__, []).append((operator, entry, _layout(operator)))
        self.by_name = {name: tuple(found) for name, found in by_name.items()}

    def lookup(self, func: Callable[..., Any]) -> tuple[str, _Layout | None] | None:
        """The entry template and argument layout of ``func``; None when not recorded."""
        for candidate, entry, layout in self.by_name.get(getattr(func, "__name__", ""), ()):
            if candidate is func:
                return entry, layout
        return None

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        own_calls.enter()  # the probes' own torch calls are not the user's (tensor.custom_api)
        try:
            return self._probe_call(func, args, {} if kwargs is None else kwargs)
        finally:
            own_calls.leave()

    def _probe_call(self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        found = self.lookup(func)
        # is_compiling() first: dynamo folds it, and never traces the frame walk.
        if found is None or scripted.paused() or (not torch.compiler.is_compiling() and _called_by_compiled_code()):
            return own_calls.outside(func, args, kwargs)
        entry, layout = found
        # The mode is off while its __torch_function__ runs, so neither the
        # probes nor the APIs that ``func`` calls internally come back here.
        shown_args, shown_kwargs = (args, kwargs) if layout is None else _bind(layout, args, kwargs)
        if torch.compiler.is_compiling():
            shown_args, shown_kwargs = concrete_numbers(shown_args), concrete_numbers(shown_kwargs)
        site = probe_inputs(entry, shown_args, shown_kwargs)
        grad_entry = None
        if self.grads and torch.is_grad_enabled() and not backward.in_recomputation():
            # The bound form, as the forward record shows the arguments, so
            # that the gradients are numbered alike in eager and compiled code.
            bound = (args, kwargs) if layout is None else _bind(layout, args, kwargs)
            wrapped = api_backward.wrap_inputs(entry, site, bound[0], bound[1])
            if wrapped is not None:
                args, kwargs, grad_entry = wrapped
        out = own_calls.outside(func, args, kwargs)
        probe_output(entry, concrete_numbers(out) if torch.compiler.is_compiling() else out)
        if grad_entry is not None:
            return backward.wrap_output(grad_entry, out)
        return out


# Torch calls made by code that runs eagerly between graphs run eagerly, with
# eager probes (dynamo_frames.py); traced code inlines the mode as before.
run_eagerly_from_eager_code(_ApiMode.__torch_function__)


def _mha_fastpath() -> tuple[Callable[[], bool], Callable[[bool], None]] | None:
    """``torch.backends.mha``'s getter and setter of the fast-path switch;
    None on a torch without them."""
    mha = getattr(torch.backends, "mha", None)
    get = getattr(mha, "get_fastpath_enabled", None)
    set_ = getattr(mha, "set_fastpath_enabled", None)
    return None if get is None or set_ is None else (get, set_)


# Wirings alive that need the MHA fast path off, and the value it had before
# the first of them: one count for the process, so that wirings removed in any
# order restore the user's value once, when the last one goes.
_fastpath_users = 0
_fastpath_saved: bool | None = None


def _fastpath_off() -> bool:
    """Switches the MHA fast path off for one more wiring; False on a torch
    without the switch (nothing to undo)."""
    global _fastpath_users, _fastpath_saved
    switch = _mha_fastpath()
    if switch is None:
        return False
    if _fastpath_users == 0:
        _fastpath_saved = bool(switch[0]())
        switch[1](False)
    _fastpath_users += 1
    return True


def _fastpath_release() -> None:
    """One wiring less needs the fast path off; the last one restores it."""
    global _fastpath_users, _fastpath_saved
    _fastpath_users -= 1
    if _fastpath_users > 0:
        return
    _fastpath_users = 0
    switch = _mha_fastpath()
    if switch is not None and _fastpath_saved is not None:
        switch[1](_fastpath_saved)
    _fastpath_saved = None


class ApiWiring:
    """Records the selected torch APIs called during ``model``'s forward.

    Wraps ``model.forward`` (an instance attribute, so ``torch.compile``
    traces the wrapper and the mode it enters); :meth:`remove` restores it.
    Nothing is wrapped when ``keywords`` select no API.

    While wired, the fast path of ``nn.TransformerEncoderLayer`` and
    ``nn.MultiheadAttention`` (one fused C++ op in eval mode without grad)
    is switched off (``torch.backends.mha.set_fastpath_enabled(False)``,
    restored to the user's value when the last wiring is removed). In eager mode the mode already turns it
    off (a tensor "has a torch function" while a mode is active), so the
    calls it is made of are recorded; dynamo's ``has_torch_function`` ignores
    modes, and compiled code would take the fused op, which records nothing.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        keywords: tuple[str, ...],
        table: Mapping[str, tuple[str, ...]] = DEFAULT_APIS,
        grads: bool = False,
    ) -> None:
        self.entries = resolve_apis(keywords, table)
        # Weak references only: a dumper dropped without stop() keeps its
        # wiring (to undo it at the next start() or at exit), and that must
        # not keep the model alive (a re-run notebook cell would hold two).
        self._model: weakref.ref[torch.nn.Module] | None = None
        self._wrapper: weakref.ref[Callable[..., Any]] | None = None
        self._fastpath = False
        self._scripts: scripted.ScriptInlining | None = None
        if not self.entries:
            return
        saved = model.__dict__.get("forward")  # usually None: forward is the class's method
        mode = _ApiMode(self.entries, grads)
        self._scripts = scripted.ScriptInlining(model)
        inner = model.forward
        wired = self._wired = [True]

        @functools.wraps(inner)
        def forward(*args: Any, **kwargs: Any) -> Any:
            if not wired[0]:  # removed, but kept inside a forward the user assigned after start()
                return inner(*args, **kwargs)
            with mode:
                return inner(*args, **kwargs)

        forward._graphprobe_saved = saved  # type: ignore[attr-defined]  # lives as long as the wrapper
        model.forward = forward
        self._model = weakref.ref(model)
        self._wrapper = weakref.ref(forward)
        # Last: an __init__ that raised above leaves the switch as it was.
        self._fastpath = _fastpath_off()

    def remove(self) -> None:
        """Restores the model's ``forward`` (when the model is still alive)."""
        model_ref, self._model = self._model, None
        wrapper_ref, self._wrapper = self._wrapper, None
        if self._fastpath:
            self._fastpath = False
            _fastpath_release()
        scripts, self._scripts = self._scripts, None
        if scripts is not None:
            scripts.remove()
        if model_ref is None:
            return
        self._wired[0] = False
        model, wrapper = model_ref(), wrapper_ref() if wrapper_ref is not None else None
        # Only what __init__ changed is undone: a forward the user assigned
        # after start() (model.forward = torch.compile(model.forward)) stays,
        # its calls passing through the unwired wrapper.
        if model is not None and wrapper is not None and model.__dict__.get("forward") is wrapper:
            saved = wrapper._graphprobe_saved  # type: ignore[attr-defined]
            if saved is None:
                model.__dict__.pop("forward", None)
            else:
                model.forward = saved

"""The first-divergence matrix of issue #35: architectures, graph-only fault
kinds and an independent reference for where each fault must be named.

Builds on tests/real_models.py (its models, its recording helper, its
compare wrapper). What is new here:

* More architectures (:data:`ARCHS`): GPT-NeoX, Mistral, OPT, DistilBERT and
  a tiny mixture-of-experts model (:class:`TinyMoE`, dense dispatch so that
  the routing is data but the program is static), next to GPT-2, Llama,
  Qwen2, BERT and ViT of real_models.SPECS. Each names the modules the
  faults target.
* Fault kinds, each graph-only (eager takes the clean path), sized x1.001
  (fp32) / x1.01 (bf16) or the equivalent:

  - ``scale``: the target module's output times the factor (issue #25's A).
  - ``softmax``: one attention's query times the factor before ``q @ k^T``,
    i.e. the softmax scale: the attention redistributes its weights while
    the statistics of its output barely move.
  - ``precision``: the target's output mantissa rounded to 9 (fp32) / 5
    (bf16) bits -- relative changes up to 2^-10 / 2^-6, zero on average.
  - ``lowering``: a custom inductor lowering of the model's activation
    (aten.silu / aten.gelu taken out of inductor's decomposition table,
    aten.tanh / aten.relu replaced) computing ``act(x) * factor``; installed
    for the compile only, restored after.
  - ``decomp``: a custom AOTAutograd backend whose decomposition table turns
    aten.native_layer_norm (LayerNorm models) or aten.rsqrt (RMSNorm models)
    into a version off by the factor.
  - ``routing``: TinyMoE's top-k expert indices of one token swapped after
    ``torch.topk`` (a routing flip; every float the router produced agrees).
  - ``grad``: an identity in forward whose backward multiplies the gradient
    by the factor (a custom autograd.Function at the target's output), in a
    training step.

  The switchable kinds (scale, softmax, precision, routing, grad) read their
  setting from a tensor at run time, so one compiled model serves the clean
  step and the faulty one; their ops are ``torch.ops.aten`` calls, which no
  level records, so the record list is the program's.
* :func:`differential_trace` / :func:`expected_place` -- the reference: two
  eager runs of a fresh, unwired copy of the model, one with the fault
  forced on (the same code path the compiled program takes, or for the
  compiler faults the same arithmetic applied to the eager op's output),
  each recording every module call and every L1 API call (named as
  graphprobe's API table names them) in completion order, with copies of
  their tensors. The first record, at a level's record set, whose tensors
  are not bit-identical between the two runs is where the fault must be
  named; it is "exact" when its inputs are identical (the fault is inside
  it) and "consumer" when an input already differs (the first reader of
  unrecorded code). graphprobe's dumps are never consulted.
"""

from __future__ import annotations

import contextlib
import functools
import math
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

import real_models as rm

aten = torch.ops.aten

FAULT_KINDS = ("scale", "softmax", "precision", "lowering", "decomp", "routing", "grad")
# Faults set at run time by a tensor (one compile serves all of them).
# "swap" (features 0 and 1 of the target's output exchanged) and "sign"
# (feature 0 negated) leave the output's Max, Min, Mean and Norm as they were
# (swap) or its Norm (sign): held-out kinds, not in the matrix.
SWITCHABLE = ("scale", "softmax", "precision", "routing", "swap", "sign")
# Mantissa bits kept by the precision fault: relative changes up to
# 2^-(bits+1), i.e. ~5e-4 (fp32) and ~1.6e-2 (bf16), the size of x1.001 / x1.01.
KEEP_BITS = {"fp32": 9, "bf16": 5}

# Set by the reference to take the faulty branch in eager mode.
_FORCE = [False]


def _faulting() -> bool:
    return torch.compiler.is_compiling() or _FORCE[0]


# ---------------------------------------------------------------------------
# architectures


def _gpt_neox() -> nn.Module:
    from transformers import GPTNeoXConfig, GPTNeoXModel

    return GPTNeoXModel(GPTNeoXConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=64, rotary_pct=0.5, attn_implementation="eager"))


def _mistral() -> nn.Module:
    from transformers import MistralConfig, MistralModel

    return MistralModel(MistralConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, sliding_window=None, attn_implementation="eager"))


def _opt() -> nn.Module:
    from transformers import OPTConfig, OPTModel

    return OPTModel(OPTConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, ffn_dim=64, num_attention_heads=4,
        max_position_embeddings=64, word_embed_proj_dim=32, attn_implementation="eager"))


def _distilbert() -> nn.Module:
    from transformers import DistilBertConfig, DistilBertModel

    return DistilBertModel(DistilBertConfig(
        vocab_size=64, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=32,
        attn_implementation="eager"))


class _RMSNorm(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.weight * h.to(x.dtype)


class _Expert(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.up = nn.Linear(dim, hidden, bias=False)
        self.act = nn.SiLU()
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.act(self.up(x)))


class MoEBlock(nn.Module):
    """Top-2 of 4 experts, dense dispatch: every expert runs on every token
    and a one-hot combine keeps the chosen ones, so the routing is data and
    the compiled program has no data-dependent shape. ``flip`` (bool,
    [batch, seq, 1]) swaps a token's two chosen experts (fault ``routing``)."""

    def __init__(self, dim: int = 32, hidden: int = 32, experts: int = 4, top_k: int = 2) -> None:
        super().__init__()
        self.top_k, self.num_experts = top_k, experts
        self.gate = nn.Linear(dim, experts, bias=False)
        self.experts = nn.ModuleList(_Expert(dim, hidden) for _ in range(experts))
        self.flip: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        probs = torch.softmax(self.gate(x), dim=-1, dtype=torch.float32)
        weights, idx = torch.topk(probs, self.top_k, dim=-1)
        if self.flip is not None and _faulting():
            # aten only: unrecorded, the swap is code between two records.
            idx = aten.where.self(self.flip, aten.flip.default(idx, [-1]), idx)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        mask = nn.functional.one_hot(idx, self.num_experts).to(weights.dtype)
        combine = (mask * weights.unsqueeze(-1)).sum(dim=-2).to(x.dtype)
        outs = torch.stack([e(x) for e in self.experts], dim=-1)
        return (outs * combine.unsqueeze(-2)).sum(dim=-1)


class _MoELayer(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = _RMSNorm(dim)
        self.moe = MoEBlock(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.moe(self.norm(x))


class TinyMoE(nn.Module):
    """Embedding, two MoE layers with RMSNorm and residuals, a final norm."""

    def __init__(self, vocab: int = 64, dim: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(_MoELayer(dim) for _ in range(2))
        self.norm = _RMSNorm(dim)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(input_ids)
        for layer in self.layers:
            h = layer(h)
        return self.norm(h)


@dataclass(frozen=True)
class Arch:
    """One architecture of the matrix and what each fault targets.

    ``target``: the module whose output the scale, precision and grad faults
    change; ``attention``: the attention module whose query the softmax
    fault scales (None: the model's attention does not go through a
    module-level ``eager_attention_forward``); ``act``: the aten op the
    lowering fault replaces; ``norm``: the aten op the decomposition fault
    rewrites."""

    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[torch.dtype], rm.Inputs]
    target: str
    attention: str | None
    act: str
    norm: str
    grad_target: str = ""

    @property
    def grad_site(self) -> str:
        """The module whose output the grad fault scales the gradient of: a
        Linear (or Conv1D), so that what reads the scaled gradient first is
        that module's own backward."""
        return self.grad_target or self.target


def _s(name: str) -> rm.ModelSpec:
    return rm.SPECS[name]


ARCHS: dict[str, Arch] = {a.name: a for a in (
    Arch("gpt2", _s("gpt2").build, _s("gpt2").inputs, "h.1.mlp", "h.1.attn", "tanh", "layer_norm", "h.1.mlp.c_proj"),
    Arch("gpt_neox", _gpt_neox, rm._token_inputs, "layers.1.mlp", "layers.1.attention", "gelu", "layer_norm",
         "layers.1.mlp.dense_4h_to_h"),
    Arch("llama", _s("llama").build, _s("llama").inputs, "layers.1.mlp", "layers.1.self_attn", "silu", "rsqrt",
         "layers.1.mlp.down_proj"),
    Arch("mistral", _mistral, rm._token_inputs, "layers.1.mlp", "layers.1.self_attn", "silu", "rsqrt",
         "layers.1.mlp.down_proj"),
    Arch("qwen2", _s("qwen2").build, _s("qwen2").inputs, "layers.1.mlp", "layers.1.self_attn", "silu", "rsqrt",
         "layers.1.mlp.down_proj"),
    Arch("opt", _opt, rm._token_inputs, "decoder.layers.1.fc2", "decoder.layers.1.self_attn", "relu", "layer_norm",
         "decoder.layers.1.fc2"),
    Arch("bert", _s("bert").build, _s("bert").inputs, "encoder.layer.1.intermediate", None, "gelu", "layer_norm",
         "encoder.layer.1.output.dense"),
    Arch("distilbert", _distilbert, rm._bert_inputs, "transformer.layer.1.ffn", None, "gelu", "layer_norm",
         "transformer.layer.1.ffn.lin2"),
    Arch("vit", _s("vit").build, _s("vit").inputs, "encoder.layer.1.intermediate", "encoder.layer.1.attention.attention",
         "gelu", "layer_norm", "encoder.layer.1.output.dense"),
    Arch("moe", TinyMoE, lambda dt: ((rm._ids(1, 8, 64),), {}), "layers.1.moe", None, "silu", "rsqrt",
         "layers.1.moe.experts.1.down"),
)}


def applicable(arch: Arch, kind: str) -> bool:
    """Whether fault ``kind`` can be injected into ``arch``."""
    if kind == "softmax":
        return arch.attention is not None
    if kind == "routing":
        return arch.name == "moe"
    return True


def build(name: str, dt: str) -> tuple[nn.Module, rm.Inputs]:
    """The model (eval mode, weights from seed 0) in dtype ``dt`` and its inputs."""
    arch = ARCHS[name]
    torch.manual_seed(0)
    model = arch.build().eval().to(rm.DTYPES[dt])
    return model, arch.inputs(rm.DTYPES[dt])


# ---------------------------------------------------------------------------
# switchable faults (a run-time tensor each; neutral values = clean)


def _first_tensor_map(out: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(out, torch.Tensor):
        return fn(out)
    if isinstance(out, tuple):
        return (_first_tensor_map(out[0], fn),) + tuple(out[1:])
    raise TypeError(f"cannot change an output of type {type(out).__name__}")


def _swap_features(x: torch.Tensor, on: torch.Tensor) -> torch.Tensor:
    """x with features 0 and 1 (last dimension) exchanged where ``on``."""
    last = x.dim() - 1
    swapped = aten.cat.default([aten.slice.Tensor(x, last, 1, 2), aten.slice.Tensor(x, last, 0, 1),
                                aten.slice.Tensor(x, last, 2)], last)
    return aten.where.self(on, swapped, x)


def _negate_feature(x: torch.Tensor, on: torch.Tensor) -> torch.Tensor:
    """x with feature 0 (last dimension) negated where ``on``."""
    last = x.dim() - 1
    flipped = aten.cat.default([aten.neg.default(aten.slice.Tensor(x, last, 0, 1)),
                                aten.slice.Tensor(x, last, 1)], last)
    return aten.where.self(on, flipped, x)


def _round_mantissa(x: torch.Tensor, add: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """x with its float32 mantissa rounded (add half an ulp of the kept
    bits, clear the dropped ones); add = 0 and mask = -1 leave x as it is."""
    x32 = aten._to_copy.default(x, dtype=torch.float32) if x.dtype != torch.float32 else x
    bits = aten.view.dtype(x32, torch.int32)
    bits = aten.bitwise_and.Tensor(aten.add.Tensor(bits, add), mask)
    out = aten.view.dtype(bits, torch.float32)
    return aten._to_copy.default(out, dtype=x.dtype) if x.dtype != torch.float32 else out


class _GradScale(torch.autograd.Function):
    """Identity forward; backward multiplies the gradient by ``scale``."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        ctx.save_for_backward(scale)
        return aten.clone.default(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        (scale,) = ctx.saved_tensors
        return aten.mul.Tensor(grad, scale), None


@dataclass
class Switches:
    """The run-time settings of the switchable faults wired into one model;
    :meth:`on` sets one kind to its faulty value, :meth:`off` all to neutral."""

    dt: str
    scale: torch.Tensor | None = None
    round_add: torch.Tensor | None = None
    round_mask: torch.Tensor | None = None
    query: torch.Tensor | None = None
    grad: torch.Tensor | None = None
    flip: torch.Tensor | None = None
    swap: torch.Tensor | None = None
    sign: torch.Tensor | None = None
    restore: list[Callable[[], None]] = field(default_factory=list)

    def on(self, kind: str) -> None:
        """Switches fault ``kind`` on (the others off)."""
        self.off()
        f = rm.FAULT_SCALE[self.dt]
        if kind == "scale":
            self.scale.fill_(f)  # type: ignore[union-attr]
        elif kind == "softmax":
            self.query.fill_(f)  # type: ignore[union-attr]
        elif kind == "grad":
            self.grad.fill_(f)  # type: ignore[union-attr]
        elif kind == "precision":
            drop = 23 - KEEP_BITS[self.dt]
            self.round_add.fill_(1 << (drop - 1))  # type: ignore[union-attr]
            self.round_mask.fill_(~((1 << drop) - 1))  # type: ignore[union-attr]
        elif kind == "routing":
            self.flip[0, 3, 0] = True  # type: ignore[index]
        elif kind in ("swap", "sign"):
            getattr(self, kind).fill_(True)
        else:
            raise ValueError(f"{kind} is not switchable")

    def off(self) -> None:
        """Every switchable fault neutral (bit-identical to no fault)."""
        for t, v in ((self.scale, 1.0), (self.query, 1.0), (self.grad, 1.0), (self.round_add, 0),
                     (self.round_mask, -1), (self.flip, False), (self.swap, False), (self.sign, False)):
            if t is not None:
                t.fill_(v)

    def uninstall(self) -> None:
        """Puts back what :func:`wire_switches` patched outside the model."""
        while self.restore:
            self.restore.pop()()


def _attention_module_globals(module: nn.Module) -> dict[str, Any]:
    return vars(sys.modules[type(module).__module__])


def wire_switches(model: nn.Module, arch: Arch, dt: str, kinds: tuple[str, ...]) -> Switches:
    """Wires the switchable faults of ``kinds`` into ``model`` (neutral);
    call before ``AclGraphDumper.start()`` and :meth:`Switches.uninstall`
    after (the softmax fault patches the modeling module's
    ``eager_attention_forward``)."""
    sw = Switches(dt)
    target = model.get_submodule(arch.grad_site if "grad" in kinds else arch.target)
    inner = target.forward
    if {"scale", "precision", "swap", "sign"} & set(kinds) and "grad" in kinds:
        raise ValueError("the grad fault sits on another module: wire it alone")
    if {"scale", "precision", "grad", "swap", "sign"} & set(kinds):
        # Only the kinds asked for: the mantissa rounding views floats as
        # integers, which autograd cannot differentiate (a training step
        # wires "grad" alone).
        if "scale" in kinds:
            sw.scale = torch.ones((), dtype=torch.float32)
        if "grad" in kinds:
            sw.grad = torch.ones((), dtype=torch.float32)
        if "precision" in kinds:
            sw.round_add = torch.zeros((), dtype=torch.int32)
            sw.round_mask = torch.full((), -1, dtype=torch.int32)
        for k in ("swap", "sign"):
            if k in kinds:
                setattr(sw, k, torch.zeros((), dtype=torch.bool))

        def forward(*args: Any, **kwargs: Any) -> Any:
            out = inner(*args, **kwargs)
            if _faulting():
                if sw.scale is not None:
                    out = _first_tensor_map(out, lambda t: aten.mul.Tensor(t, sw.scale))
                if sw.round_add is not None:
                    out = _first_tensor_map(out, lambda t: _round_mantissa(t, sw.round_add, sw.round_mask))
                if sw.swap is not None:
                    out = _first_tensor_map(out, lambda t: _swap_features(t, sw.swap))
                if sw.sign is not None:
                    out = _first_tensor_map(out, lambda t: _negate_feature(t, sw.sign))
                if sw.grad is not None:
                    out = _first_tensor_map(out, lambda t: _GradScale.apply(t, sw.grad))
            return out

        target.forward = forward
    if "softmax" in kinds and arch.attention is not None:
        attn = model.get_submodule(arch.attention)
        sw.query = torch.ones((), dtype=torch.float32)
        table = _attention_module_globals(attn)
        original = table["eager_attention_forward"]

        def eager_attention_forward(module: nn.Module, query: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if module is attn and _faulting():
                query = aten.mul.Tensor(query, sw.query)
            return original(module, query, *args, **kwargs)

        table["eager_attention_forward"] = eager_attention_forward
        sw.restore.append(lambda: table.__setitem__("eager_attention_forward", original))
    if "routing" in kinds:
        block = model.get_submodule(arch.target)
        args, _ = arch.inputs(rm.DTYPES[dt])
        sw.flip = torch.zeros((*args[0].shape, 1), dtype=torch.bool)
        block.flip = sw.flip  # type: ignore[assignment]
    return sw


# ---------------------------------------------------------------------------
# compiler faults: a custom lowering, a custom decomposition table


_ACT_OPS = {"silu": aten.silu.default, "gelu": aten.gelu.default, "tanh": aten.tanh.default,
            "relu": aten.relu.default}
_NORM_OPS = {"layer_norm": aten.native_layer_norm.default, "rsqrt": aten.rsqrt.default}


def _wrong_lowering(act: str, factor: float) -> tuple[Any, Callable[..., Any]]:
    """(aten op, lowering computing act(x) * factor) from inductor's own lowerings."""
    from torch._inductor.lowering import lowerings

    mul, add = lowerings[aten.mul.Tensor], lowerings[aten.add.Tensor]
    op = _ACT_OPS[act]
    if act == "silu":
        def exact(x: Any) -> Any:
            return mul(x, lowerings[aten.sigmoid.default](x))
    elif act == "gelu":
        def exact(x: Any, approximate: str = "none") -> Any:
            if approximate == "tanh":  # Gemma's GELU: torch's own formula
                inner = mul(add(x, mul(mul(mul(x, x), x), 0.044715)), math.sqrt(2 / math.pi))
                return mul(mul(x, 0.5), add(lowerings[aten.tanh.default](inner), 1.0))
            if approximate != "none":
                raise ValueError(f"gelu lowering fault: approximate={approximate!r}; allowed: 'none', 'tanh'")
            return mul(mul(x, 0.5), add(lowerings[aten.erf.default](mul(x, 1 / math.sqrt(2))), 1.0))
    else:
        exact = lowerings[op]

    def wrong(*args: Any, **kwargs: Any) -> Any:
        return mul(exact(*args, **kwargs), factor)

    return op, wrong


@contextlib.contextmanager
def wrong_lowering(act: str, factor: float) -> Iterator[Callable[..., Any]]:
    """Yields an inductor backend in which aten ``act`` is lowered by a
    custom lowering off by ``factor`` (silu/gelu: taken out of the
    decomposition table so that they reach the lowering); the lowering table
    is restored on exit. Inductor's and AOTAutograd's caches are off inside:
    their keys do not see a changed lowering."""
    import torch._functorch.config as fc
    import torch._inductor.config as ic
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.decomposition import select_decomp_table
    from torch._inductor.lowering import lowerings

    op, fn = _wrong_lowering(act, factor)
    saved = {k: lowerings.get(k) for k in (op, op.overloadpacket)}

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        table = {k: v for k, v in select_decomp_table().items() if k not in (op, op.overloadpacket)}
        return compile_fx(gm, example_inputs, decompositions=table)

    lowerings[op] = fn
    try:
        with ic.patch(fx_graph_cache=False, compile_threads=1), fc.patch(enable_autograd_cache=False):
            yield backend
    finally:
        for k, v in saved.items():
            if v is None:
                lowerings.pop(k, None)
            else:
                lowerings[k] = v


def wrong_decomposition_backend(norm: str, factor: float) -> Callable[..., Any]:
    """An AOTAutograd backend (nop compilers, as aot_eager) whose
    decomposition table holds one wrong entry: native_layer_norm's output,
    or rsqrt, times ``factor``."""
    from torch._decomp import decomposition_table
    from torch._dynamo.backends.common import aot_autograd
    from torch._dynamo.backends.debugging import boxed_nop

    if norm == "layer_norm":
        def decomp(x: Any, shape: Any, weight: Any, bias: Any, eps: float) -> Any:
            out, mean, rstd = decomposition_table[aten.native_layer_norm.default](x, shape, weight, bias, eps)
            return aten.mul.Tensor(out, factor), mean, rstd
    else:
        def decomp(x: Any) -> Any:
            # pow, not rsqrt: the table would send rsqrt back here.
            return aten.mul.Tensor(aten.pow.Tensor_Scalar(x, -0.5), factor)
    return aot_autograd(fw_compiler=boxed_nop, bw_compiler=boxed_nop, keep_inference_input_mutations=True,
                        decompositions={_NORM_OPS[norm]: decomp})


def _emulated_funcs(kind: str, arch: Arch) -> set[Any]:
    """The torch functions whose outputs the reference multiplies by the
    factor to emulate a compiler fault in eager mode."""
    if kind == "lowering":
        return {"silu": {nn.functional.silu}, "gelu": {nn.functional.gelu},
                "tanh": {torch.tanh, torch.Tensor.tanh}, "relu": {nn.functional.relu, torch.relu}}[arch.act]
    if kind == "decomp":
        return {nn.functional.layer_norm} if arch.norm == "layer_norm" else {torch.rsqrt, torch.Tensor.rsqrt}
    return set()


# ---------------------------------------------------------------------------
# the reference: a differential eager trace


@dataclass
class Event:
    """One record a level can hold: a module call or an L1 API call, with
    copies of its tensors at call time (inputs) and return (outputs)."""

    name: str
    kind: str  # "module" | "api"
    inputs: list[torch.Tensor]
    outputs: list[torch.Tensor]


def _tensors(value: Any) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []

    def walk(v: Any) -> None:
        if isinstance(v, torch.Tensor):
            # functorch's batched tensors (vmap in transformers' mask code) are no records' values.
            if not torch._C._functorch.is_functorch_wrapped_tensor(v):
                out.append(v.detach().clone())
        elif isinstance(v, (tuple, list)):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif hasattr(v, "to_tuple"):
            walk(v.to_tuple())

    walk(value)
    return out


def trace_events(model: nn.Module, inputs: rm.Inputs, emulate: set[Any] = frozenset(),
                 factor: float = 1.0) -> list[Event]:
    """Every module call (root excluded) and outermost L1 API call of one
    eager no-grad run of ``model``, in completion order. Calls of a function
    in ``emulate`` have their output multiplied by ``factor``."""
    from graphprobe.wiring.apis import resolve_apis

    names = resolve_apis(())
    counts: dict[str, int] = defaultdict(int)
    module_calls: dict[str, int] = defaultdict(int)
    events: list[Event] = []
    pending: list[tuple[str, list[torch.Tensor]]] = []
    handles = []

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            kwargs = kwargs or {}
            entry = names.get(func)
            before = _tensors((args, kwargs)) if entry is not None else []
            out = func(*args, **kwargs)
            if func in emulate:
                with torch._C.DisableTorchFunction():
                    out = out * factor
            if entry is not None:
                name = entry.replace("{n}", str(counts[entry]))
                counts[entry] += 1
                events.append(Event(name, "api", before, _tensors(out)))
            return out

    for path, mod in model.named_modules():
        if not path:
            continue
        base = f"Module.{path}.{type(mod).__name__}.forward"

        def pre(mod: nn.Module, args: Any, kwargs: Any, base: str = base) -> None:
            with torch._C.DisableTorchFunction():
                pending.append((f"{base}.{module_calls[base]}", _tensors((args, kwargs))))
                module_calls[base] += 1

        def post(mod: nn.Module, args: Any, kwargs: Any, out: Any) -> None:
            with torch._C.DisableTorchFunction():
                name, before = pending.pop()
                events.append(Event(name, "module", before, _tensors(out)))

        handles.append(mod.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(mod.register_forward_hook(post, with_kwargs=True))
    args, kwargs = inputs
    try:
        with torch.no_grad(), Mode():
            model(*args, **kwargs)
    finally:
        for h in handles:
            h.remove()
    return events


def _differs(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    if len(a) != len(b):
        return True
    return any(x.shape != y.shape or x.dtype != y.dtype or not torch.equal(x, y) for x, y in zip(a, b))


@dataclass
class Expected:
    """Where a fault must be named at each level, and how."""

    place: dict[str, str | None]  # level -> record name
    how: dict[str, str]  # level -> "exact" | "consumer"


LEVEL_KINDS = {"L0": {"module"}, "L1": {"api"}, "mix": {"module", "api"}}


def first_tainted(clean: list[Event], faulty: list[Event], level: str) -> tuple[str | None, str]:
    """The first record of ``level`` whose tensors differ between the two
    traces, and whether its inputs already differ ("consumer") or not ("exact")."""
    kinds = LEVEL_KINDS[level]
    for c, f in zip(clean, faulty):
        if c.name != f.name:
            return f.name, "order"  # the fault changed the call sequence: the first record that differs
        if c.kind not in kinds:
            continue
        if _differs(c.inputs, f.inputs):
            return c.name, "consumer"
        if _differs(c.outputs, f.outputs):
            return c.name, "exact"
    return None, "none"


@functools.lru_cache(maxsize=None)
def differential_trace(name: str, dt: str, kind: str, levels: tuple[str, ...] = ("L0", "L1", "mix")) -> Expected:
    """The reference for a forward fault: eager clean vs eager with the fault
    forced on, on fresh unwired builds of the model (cached: the traces do
    not depend on the level)."""
    arch = ARCHS[name]
    factor = rm.FAULT_SCALE[dt]
    traces = []
    for faulty in (False, True):
        model, inputs = build(name, dt)
        switchable = kind in SWITCHABLE
        sw = wire_switches(model, arch, dt, (kind,)) if switchable else None
        try:
            if faulty and sw is not None:
                sw.on(kind)
            _FORCE[0] = faulty
            emulate = _emulated_funcs(kind, arch) if faulty else set()
            traces.append(trace_events(model, inputs, emulate, factor))
        finally:
            _FORCE[0] = False
            if sw is not None:
                sw.uninstall()
    place, how = {}, {}
    for level in levels:
        place[level], how[level] = first_tainted(traces[0], traces[1], level)
    return Expected(place, how)


def grad_expected(name: str, dt: str, levels: tuple[str, ...] = ("L0", "L1", "mix")) -> Expected:
    """The reference for the ``grad`` fault, from the eager trace of the
    unwired model. The gradient is scaled between the grad site's output and
    the code inside it, so in the backward pass (forward records are
    untouched: identity) the first record that holds it is, at L0, the grad
    site's own backward (its incoming gradient agrees, the gradient it
    computes does not: "exact"), and at L1/mix the backward of the last API
    call inside the site that returned the site's output (it receives the
    scaled gradient: "consumer"; it completes before its module)."""
    arch = ARCHS[name]
    model, inputs = build(name, dt)
    trace = rm.ReferenceTrace.run(model, inputs)
    site = arch.grad_site
    fwd = trace.module_entry[site]
    out = trace.module_out[site]
    last = None
    for c in trace.calls[:trace.module_end[site]]:
        if site in c.modules and c.outputs & out:
            last = c.name
    place: dict[str, str | None] = {}
    how: dict[str, str] = {}
    for level in levels:
        if level == "L0":
            place[level], how[level] = fwd.rsplit(".forward.", 1)[0] + ".backward." + fwd.rsplit(".", 1)[1], "exact"
        else:
            place[level] = last.rsplit(".forward", 1)[0] + ".backward" if last else None
            how[level] = "consumer"
    return Expected(place, how)

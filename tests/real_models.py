"""Third-party models for the real-model matrix (issue #25, item 6).

`transformers` models built from tiny configs (random weights, fixed seeds,
no downloads), dumped with graphprobe in eager mode, under ``aot_eager`` and
under inductor, compared with :func:`graphprobe.compare.compare`; graph-only
faults injected on one module of each, and an independent reference for
where each fault must be named.

* :data:`SPECS` -- the models: a builder, deterministic inputs, the module
  that faults A and B target and the weight-bearing module inside it that
  the parameter fault scales.
* Faults. **A** (:func:`graph_only_scale`): the target's ``forward`` is
  wrapped so that, *when dynamo traces it* (``torch.compiler.is_compiling()``),
  its output is multiplied by a scale read from a tensor at run time; eager
  mode takes the other branch, and one compiled model serves the clean step
  (scale exactly 1.0: ``x * 1.0 == x`` in every dtype) and the faulty one.
  The multiply is ``torch.ops.aten.mul``, which L1 does not record, so the
  record list is the program's. **B** (:class:`ScaleModuleOutput`): an
  inductor post-grad pass that finds the node computing the target's output
  (``node.meta["nn_module_stack"]``) and routes every user of it, probes
  included, through a multiply -- the compiler computing that module's
  output wrongly. **W** (:func:`scaled_parameter`): a weight of one module
  scaled in place between two steps of the same compiled model (parameters
  are graph inputs, so nothing recompiles).
* :class:`ReferenceTrace` -- an eager run of an *unwired* copy that records,
  by tensor storage, which module call and which L1 API call produced and
  consumed what; :func:`expected_first_divergence` derives from it where
  each fault must be named at each level (docs in its docstring). It uses
  graphprobe's API name table (what a record is called), never its dumps.
* :func:`noise_rows` -- the scale-aware relative errors of every matched
  tensor row of two dump.json files, computed here in float64.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import glob
import json
import math
import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from reference import flatten_dump

Inputs = tuple[tuple[Any, ...], dict[str, Any]]

LEVELS = ("L0", "L1", "mix")
MODES = ("eager", "aot_eager", "inductor")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# The graph-only fault per dtype: 1000x above float32 rounding, ~3 bf16 ulps.
FAULT_SCALE = {"fp32": 1.001, "bf16": 1.01, "fp16": 1.01}
WEIGHT_SCALE = 1.3

# ---------------------------------------------------------------------------
# models


def _ids(batch: int, seq: int, vocab: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(seed))


def _floats(shape: tuple[int, ...], dtype: torch.dtype, seed: int = 1) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _qwen2() -> nn.Module:
    from transformers import Qwen2Config, Qwen2Model

    return Qwen2Model(Qwen2Config(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, attn_implementation="eager"))


def _gemma2() -> nn.Module:
    from transformers import Gemma2Config, Gemma2Model

    return Gemma2Model(Gemma2Config(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, max_position_embeddings=64, sliding_window=4,
        attn_implementation="eager"))


def _llama() -> nn.Module:
    from transformers import LlamaConfig, LlamaModel

    return LlamaModel(LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, attn_implementation="eager"))


def _gpt2() -> nn.Module:
    from transformers import GPT2Config, GPT2Model

    return GPT2Model(GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=32,
                                attn_implementation="eager"))


def _t5() -> nn.Module:
    from transformers import T5Config, T5Model

    return T5Model(T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                            num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=16,
                            attn_implementation="eager"))


def _bert() -> nn.Module:
    from transformers import BertConfig, BertModel

    return BertModel(BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=64, max_position_embeddings=32, attn_implementation="eager"))


def _vit() -> nn.Module:
    from transformers import ViTConfig, ViTModel

    return ViTModel(ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                              image_size=16, patch_size=4, num_channels=3, attn_implementation="eager"))


def _wav2vec2() -> nn.Module:
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    return Wav2Vec2Model(Wav2Vec2Config(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=4, mask_time_prob=0.0, attn_implementation="eager"))


def _resnet() -> nn.Module:
    from transformers import ResNetConfig, ResNetModel

    # The embedder ends in nn.MaxPool2d(3, 2, 1).
    return ResNetModel(ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic"))


def _token_inputs(dtype: torch.dtype) -> Inputs:
    return (_ids(1, 8, 64),), {"use_cache": False}


def _bert_inputs(dtype: torch.dtype) -> Inputs:
    return (_ids(1, 8, 64),), {}


def _t5_inputs(dtype: torch.dtype) -> Inputs:
    # Explicit masks: without them T5 builds its masks differently under
    # dynamo (`is_torchdynamo_compiling()` branches: no encoder mask, a
    # decoder mask one column wider), and the compiled program really differs.
    return (_ids(1, 8, 64),), {"attention_mask": torch.ones(1, 8, dtype=torch.long),
                               "decoder_input_ids": _ids(1, 6, 64, seed=2),
                               "decoder_attention_mask": torch.ones(1, 6, dtype=torch.long), "use_cache": False}


@dataclass(frozen=True)
class ModelSpec:
    """One model of the matrix.

    ``target`` is the module that faults A and B scale the output of;
    ``weight`` a module inside it whose ``weight`` the parameter fault
    scales (a Linear, or the closest thing the model has)."""

    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[torch.dtype], Inputs]
    target: str
    weight: str


SPECS: dict[str, ModelSpec] = {s.name: s for s in (
    ModelSpec("qwen2", _qwen2, _token_inputs, "layers.1.mlp", "layers.1.mlp.down_proj"),
    ModelSpec("gemma2", _gemma2, _token_inputs, "layers.1.mlp", "layers.1.mlp.up_proj"),
    ModelSpec("t5", _t5, _t5_inputs, "encoder.block.1.layer.1.DenseReluDense",
              "encoder.block.1.layer.1.DenseReluDense.wo"),
    ModelSpec("vit", _vit, lambda dt: ((_floats((1, 3, 16, 16), dt),), {}), "encoder.layer.1.intermediate",
              "encoder.layer.1.intermediate.dense"),
    ModelSpec("wav2vec2", _wav2vec2, lambda dt: ((_floats((1, 400), dt),), {}), "encoder.layers.1.feed_forward",
              "encoder.layers.1.feed_forward.output_dense"),
    # ResNetModel has no Linear: the embedder's convolution carries the weight.
    ModelSpec("resnet", _resnet, lambda dt: ((_floats((1, 3, 32, 32), dt),), {}), "embedder",
              "embedder.embedder.convolution"),
    ModelSpec("gpt2", _gpt2, _token_inputs, "h.1.mlp", "h.1.mlp.c_proj"),
    ModelSpec("llama", _llama, _token_inputs, "layers.1.mlp", "layers.1.mlp.down_proj"),
    ModelSpec("bert", _bert, _bert_inputs, "encoder.layer.1.intermediate", "encoder.layer.1.intermediate.dense"),
)}


def build(name: str, dtype: torch.dtype) -> tuple[nn.Module, Inputs]:
    """The model (eval mode, in ``dtype``, weights from seed 0) and its inputs."""
    spec = SPECS[name]
    torch.manual_seed(0)
    model = spec.build().eval().to(dtype)
    return model, spec.inputs(dtype)


def module_entry(model: nn.Module, path: str, call: int = 0) -> str:
    """The L0 record name of call ``call`` of the module at ``path``."""
    return f"Module.{path}.{type(model.get_submodule(path)).__name__}.forward.{call}"


# ---------------------------------------------------------------------------
# faults


def _scale_output(out: Any, scale: torch.Tensor) -> Any:
    """``out`` (a tensor, or the first tensor of a tuple/ModelOutput) times ``scale``."""
    if isinstance(out, torch.Tensor):
        # aten directly: not an API of graphprobe's L1 table, so not recorded.
        return torch.ops.aten.mul.Tensor(out, scale)
    if isinstance(out, tuple):
        return (_scale_output(out[0], scale),) + tuple(out[1:])
    raise TypeError(f"graph_only_scale: cannot scale an output of type {type(out).__name__}")


def graph_only_scale(model: nn.Module, path: str) -> torch.Tensor:
    """Fault A: wraps the forward of ``model.{path}`` so that code compiled by
    dynamo multiplies its output by the returned float32 scalar tensor (1.0
    until changed with ``fill_``); eager calls are untouched. Call before
    ``AclGraphDumper.start()``."""
    module = model.get_submodule(path)
    scale = torch.ones((), dtype=torch.float32)
    inner = module.forward

    @functools.wraps(inner)
    def forward(*args: Any, **kwargs: Any) -> Any:
        out = inner(*args, **kwargs)
        if torch.compiler.is_compiling():
            out = _scale_output(out, scale)
        return out

    module.forward = forward
    return scale


_STACK_PATH = re.compile(r"\._modules\['([^']*)'\]|\['([^']*)'\]")


def _module_path(stack_key: str) -> str:
    """``"L['self'].layers.1.mlp"`` / ``"L['self']._modules['layers']..."`` -> ``"layers.1.mlp"``."""
    text = stack_key[len("L['self']"):] if stack_key.startswith("L['self']") else stack_key
    text = _STACK_PATH.sub(lambda m: "." + (m.group(1) or m.group(2)), text)
    return text.lstrip(".")


def _in_module(node: torch.fx.Node, path: str) -> bool:
    stack = node.meta.get("nn_module_stack") or {}
    for key, value in stack.items():
        fqn = value[0] if isinstance(value, tuple) and value and isinstance(value[0], str) else key
        p = _module_path(fqn)
        if p == path or p.endswith("." + path) or p.startswith(path + "."):
            return True
    return False


def _is_probe(node: torch.fx.Node) -> bool:
    return "graphprobe" in str(node.target)


_VIEWS = {torch.ops.aten.view.default, torch.ops.aten.reshape.default, torch.ops.aten._unsafe_view.default,
          torch.ops.aten.squeeze.dim, torch.ops.aten.unsqueeze.default, torch.ops.aten.alias.default}


class ScaleModuleOutput:
    """Fault B: an inductor post-grad pass (``post_grad_custom_post_pass``)
    that multiplies the output of module ``path`` by ``scale``.

    The output is the last node (graph order) computed inside the module
    (by ``nn_module_stack``) that a node outside the module uses, followed
    back through views to the op that computed its values; every user of
    that node except the new multiply -- graphprobe's probes included --
    is rerouted to the product. ``applied`` lists the nodes scaled (the
    pass must find exactly one)."""

    def __init__(self, path: str, scale: float) -> None:
        self.path, self.scale = path, scale
        self.applied: list[str] = []

    def __call__(self, graph: torch.fx.Graph) -> None:
        inside = [n for n in graph.nodes if n.op == "call_function" and not _is_probe(n) and _in_module(n, self.path)]
        members = set(inside)
        outputs = [n for n in inside if isinstance(n.meta.get("val"), torch.Tensor)
                   and any(u not in members and not _is_probe(u) for u in n.users)]
        if not outputs:
            return
        node = outputs[-1]
        # Through views back to the op that computed the values (GPT-2's
        # Conv1D returns addmm(...).view(...): scaling the view would leave
        # the addmm's own output, which L1 records, untouched).
        while (node.target in _VIEWS and node.args and isinstance(node.args[0], torch.fx.Node)
               and node.args[0] in members):
            node = node.args[0]
        with graph.inserting_after(node):
            mul = graph.call_function(torch.ops.aten.mul.Tensor, (node, self.scale))
        mul.meta.update({k: v for k, v in node.meta.items() if k != "val"})
        mul.meta["val"] = node.meta["val"]
        node.replace_all_uses_with(mul, delete_user_cb=lambda u: u is not mul)
        self.applied.append(node.name)

    def uuid(self) -> None:
        """None: inductor does not cache graphs compiled with this pass."""
        return None


def _as_custom_pass(p: ScaleModuleOutput) -> Any:
    from torch._inductor.custom_graph_pass import CustomGraphPass

    class _Pass(CustomGraphPass):
        def __call__(self, graph: torch.fx.Graph) -> None:
            p(graph)

        def uuid(self) -> None:
            return None

    return _Pass()


@contextlib.contextmanager
def inductor_pass(p: ScaleModuleOutput | None) -> Iterator[None]:
    """Inductor compiles inside this block with ``p`` as its post-grad
    custom pass (and without the FX graph cache, which would reuse a graph
    compiled without it)."""
    import torch._inductor.config as ic

    patches: dict[str, Any] = {"compile_threads": 1}
    if p is not None:
        patches.update(post_grad_custom_post_pass=_as_custom_pass(p), fx_graph_cache=False)
    with ic.patch(patches):
        yield


@contextlib.contextmanager
def scaled_parameter(model: nn.Module, path: str, factor: float, name: str = "weight") -> Iterator[None]:
    """Fault W: ``model.{path}.{name}`` multiplied by ``factor`` in place for the block."""
    param = getattr(model.get_submodule(path), name)
    saved = param.detach().clone()
    with torch.no_grad():
        param.mul_(factor)
    try:
        yield
    finally:
        with torch.no_grad():
            param.copy_(saved)


# ---------------------------------------------------------------------------
# dumping


@dataclass
class Phase:
    """One step of a recording: ``setup`` runs before the model (a fault
    switched on), ``teardown`` after ``step()``."""

    label: str
    setup: Callable[[], Any] = lambda: None
    teardown: Callable[[], Any] = lambda: None


def record(model: nn.Module, inputs: Inputs, level: str, mode: str, out_dir: str, phases: list[Phase],
           post_grad: ScaleModuleOutput | None = None, fullgraph: bool = True) -> dict[str, str]:
    """Wires ``model`` at ``level``, runs it once per phase (eagerly or
    compiled with ``mode``), one ``step()`` each, and returns ``{phase label:
    dump.json path}``."""
    import graphprobe

    os.makedirs(out_dir, exist_ok=True)
    dump_path = os.path.join(out_dir, "dump")
    config = os.path.join(out_dir, "config.json")
    with open(config, "w") as f:
        json.dump({"dump_path": dump_path, "level": level}, f)
    args, kwargs = inputs
    torch._dynamo.reset()
    dumper = graphprobe.AclGraphDumper(config)
    dumper.start(model)
    try:
        runner = model if mode == "eager" else torch.compile(model, backend=mode, fullgraph=fullgraph)
        with torch.no_grad(), inductor_pass(post_grad if mode == "inductor" else None):
            for phase in phases:
                phase.setup()
                try:
                    runner(*args, **kwargs)
                finally:
                    phase.teardown()
                dumper.step()
    finally:
        dumper.stop()
        torch._dynamo.reset()
    paths = {}
    for step, phase in enumerate(phases):
        (found,) = glob.glob(os.path.join(dump_path, f"step{step}", "*", "dump.json"))
        paths[phase.label] = found
    return paths


def load_data(path: str) -> dict[str, Any]:
    """dump.json's ``data``."""
    with open(path) as f:
        return json.load(f)["data"]


def tensor_rows(data: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{entry: {place: tensor record}}`` over inputs, kwargs, outputs and parameters."""
    return flatten_dump(data, ("input_args", "input_kwargs", "parameters", "output"))


def record_list(data: dict[str, Any]) -> list[tuple[str, list[tuple[str, Any, Any]]]]:
    """Names in order, each with its tensor places, shapes and dtypes."""
    return [(name, [(place, r.get("shape"), r.get("dtype")) for place, r in places.items()])
            for name, places in tensor_rows(data).items()]


# ---------------------------------------------------------------------------
# noise: the scale-aware relative errors, in float64, from the two dump.json files

AGGREGATE, EXTREME = ("Mean", "Norm"), ("Max", "Min")
# H1's floors (issue #25 design): per dtype, (aggregate, extreme).
FLOORS = {"torch.float32": (1e-4, 1e-4), "torch.bfloat16": (2e-3, 1.6e-2), "torch.float16": (1e-3, 2e-3)}


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def scale_aware_errors(t: dict[str, Any], b: dict[str, Any]) -> dict[str, float]:
    """e_s per statistic: |t-b| / max(|b|, rms_b) for Max/Min/Mean, |t-b|/|b|
    for Norm, rms_b = Norm_b / sqrt(numel). Statistics missing or not finite
    on either side are left out; so is every statistic of a tensor whose
    bench Norm is 0 (no scale)."""
    norm_b = _num(b.get("Norm"))
    shape = b.get("shape") or []
    numel = math.prod(shape) if shape else 1
    if norm_b is None or not math.isfinite(norm_b) or norm_b == 0 or numel == 0:
        return {}
    rms = norm_b / math.sqrt(numel)
    out = {}
    for key in ("Max", "Min", "Mean", "Norm"):
        tv, bv = _num(t.get(key)), _num(b.get(key))
        if tv is None or bv is None or not (math.isfinite(tv) and math.isfinite(bv)):
            continue
        denom = abs(bv) if key == "Norm" else max(abs(bv), rms)
        out[key] = abs(tv - bv) / denom
    return out


def coarsest_dtype(rows: list["NoiseRow"]) -> str:
    """The float dtype with the largest floors among ``rows`` (a bf16 model's
    float32 rows carry bf16 noise: inductor keeps bf16 intermediates in
    float32, so a cast's float32 output holds the unrounded value)."""
    return max((r.dtype for r in rows), key=lambda d: FLOORS.get(d, (0.0, 0.0)), default="torch.float32")


def z_score(dtype: str, errors: dict[str, float]) -> float:
    """max over statistics of e_s / floor_s with the per-dtype floors of the
    issue's design (:data:`FLOORS`)."""
    agg, ext = FLOORS.get(dtype, (1e-4, 1e-4))
    return max((e / (agg if k in AGGREGATE else ext) for k, e in errors.items()), default=0.0)


@dataclass
class NoiseRow:
    """One matched tensor row of a pair: where it is and its errors."""

    entry: str
    place: str
    dtype: str
    errors: dict[str, float]


def noise_rows(target: dict[str, Any], bench: dict[str, Any]) -> list[NoiseRow]:
    """Scale-aware errors of every float tensor row present on both sides
    (same entry, same place), in the target's order."""
    t_rows, b_rows = tensor_rows(target), tensor_rows(bench)
    out = []
    for entry, places in t_rows.items():
        for place, t in places.items():
            b = b_rows.get(entry, {}).get(place)
            dtype = (b or {}).get("dtype", "")
            if b is None or not any(k in dtype for k in ("float", "bfloat")):
                continue
            errors = scale_aware_errors(t, b)
            if errors:
                out.append(NoiseRow(entry, place, dtype, errors))
    return out


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank) of values; 0 for none."""
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))]


def entry_errors(target: dict[str, Any], bench: dict[str, Any], entry: str) -> dict[str, dict[str, float]]:
    """``{place: errors}`` of one entry (for the faulty row's margin)."""
    return {r.place: r.errors for r in noise_rows({entry: target[entry]}, {entry: bench[entry]})} \
        if entry in target and entry in bench else {}


# ---------------------------------------------------------------------------
# compare


@dataclass
class CompareResult:
    """What graphprobe's compare said about one pair."""

    first_divergence: str | None
    counts: dict[str, int]
    gate_error: list[str]


def compare_dumps(target: str, bench: str, out_dir: str) -> CompareResult:
    """``graphprobe compare TARGET BENCH`` with the defaults, through the API;
    ``gate_error`` is what ``--fail-on error`` would fail on (empty: passes)."""
    from graphprobe.compare import compare
    from graphprobe.compare.fail_on import fail_on_reasons

    run = compare(target, bench, out_dir, html=False, progress=False, jobs=1)
    (outcome,) = run.outcomes
    assert outcome.error is None, outcome.error
    return CompareResult(outcome.first_divergence, dict(outcome.counts), fail_on_reasons(run, "error"))


# ---------------------------------------------------------------------------
# independent reference: where each fault must be named


def _storages(value: Any) -> set[int]:
    out: set[int] = set()

    def walk(v: Any) -> None:
        if isinstance(v, torch.Tensor):
            try:
                if v.numel():
                    out.add(v.untyped_storage().data_ptr())
            except (NotImplementedError, RuntimeError):  # functorch's batched tensors (vmap in mask code)
                pass
        elif isinstance(v, (tuple, list)):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif hasattr(v, "to_tuple"):  # transformers' ModelOutput
            walk(v.to_tuple())

    walk(value)
    return out


@dataclass
class _ApiCall:
    name: str
    modules: tuple[str, ...]
    inputs: set[int]
    outputs: set[int]
    keep: Any = None


@dataclass
class ReferenceTrace:
    """An eager run of an unwired copy of the model: the L1 API calls (named
    as graphprobe's L1 table names them, outermost calls only, counted in
    call order), the module path stack at each call, and the storages each
    call and each module read and wrote."""

    calls: list[_ApiCall] = field(default_factory=list)
    module_out: dict[str, set[int]] = field(default_factory=dict)
    module_end: dict[str, int] = field(default_factory=dict)  # path -> number of API calls made before it returned
    module_entry: dict[str, str] = field(default_factory=dict)
    module_order: list[str] = field(default_factory=list)  # paths, in the order their (first) calls returned
    params: dict[str, set[int]] = field(default_factory=dict)
    keep: list[Any] = field(default_factory=list)  # module outputs, alive for the same reason

    @classmethod
    def run(cls, model: nn.Module, inputs: Inputs) -> "ReferenceTrace":
        """Traces ``model`` (copied first, so it stays unwired and untouched)."""
        from graphprobe.wiring.apis import resolve_apis

        model = copy.deepcopy(model)
        trace = cls()
        names = resolve_apis(())
        counts: dict[str, int] = defaultdict(int)
        module_calls: dict[str, int] = defaultdict(int)
        stack: list[str] = []
        handles = []

        class Mode(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
                out = func(*args, **(kwargs or {}))
                entry = names.get(func)
                if entry is not None:
                    name = entry.replace("{n}", str(counts[entry]))
                    counts[entry] += 1
                    # The tensors are kept alive (``keep``), so that no later tensor
                    # reuses their memory and storage addresses identify values.
                    trace.calls.append(_ApiCall(name, tuple(stack), _storages((args, kwargs)), _storages(out),
                                                keep=(args, kwargs, out)))
                return out

        mode = Mode()
        for path, mod in model.named_modules():
            if not path:
                continue
            base = f"Module.{path}.{type(mod).__name__}.forward"
            trace.params[path] = {p.untyped_storage().data_ptr() for p in mod.parameters(recurse=False)}

            def pre(mod: nn.Module, args: Any, path: str = path, base: str = base) -> None:
                with torch._C.DisableTorchFunction():
                    stack.append(path)
                    trace.module_entry.setdefault(path, f"{base}.{module_calls[base]}")
                    module_calls[base] += 1

            def post(mod: nn.Module, args: Any, out: Any, path: str = path) -> None:
                with torch._C.DisableTorchFunction():
                    stack.pop()
                    trace.module_out.setdefault(path, _storages(out))
                    trace.keep.append(out)
                    if path not in trace.module_end:
                        trace.module_end[path] = len(trace.calls)
                        trace.module_order.append(path)

            handles.append(mod.register_forward_pre_hook(pre))
            handles.append(mod.register_forward_hook(post))
        args, kwargs = inputs
        try:
            with torch.no_grad(), mode:
                model(*args, **kwargs)
        finally:
            for h in handles:
                h.remove()
        return trace

    def producer_inside(self, path: str) -> str | None:
        """The first API call inside module ``path`` whose output shares
        storage with the module's output (the call that computed it)."""
        out = self.module_out[path]
        for c in self.calls[:self.module_end[path]]:
            if path in c.modules and c.outputs & out:
                return c.name
        return None

    def producer_module_inside(self, path: str) -> str:
        """The innermost module inside ``path`` (or ``path`` itself) that
        returned the module's output: the first of them to return a tensor
        sharing storage with it."""
        out = self.module_out[path]
        for p in self.module_order:
            if (p == path or p.startswith(path + ".")) and self.module_out[p] & out:
                return p
        return path

    def first_consumer_after(self, path: str) -> str | None:
        """The first API call after module ``path`` returned that reads its output."""
        out = self.module_out[path]
        for c in self.calls[self.module_end[path]:]:
            if c.inputs & out:
                return c.name
        return None

    def first_reader_of_params(self, path: str) -> str | None:
        """The first API call that reads a parameter of module ``path``."""
        params = self.params[path]
        for c in self.calls:
            if c.inputs & params:
                return c.name
        return None


def expected_first_divergence(trace: ReferenceTrace, spec: ModelSpec, fault: str, level: str) -> str | None:
    """Where the first divergence must be, from the reference trace alone.

    * **L0**: the module record of the faulty module: for A the target
      (its output differs, everything recorded before agrees); for W the
      module whose weight was scaled (a parameter differs); for B the
      innermost module that computed the scaled value (the pass scales the
      node that *is* the target's output, which is also the output of the
      child that computed it: ``down_proj`` for a Llama MLP).
    * **W at L1/mix**: the first API call that reads the scaled weight
      (``Functional.linear``/``conv2d``/``Torch.addmm`` inside that module):
      the weight is one of its inputs, and it ends before its module does.
    * **B at L1/mix**: the API call inside the target that computed the
      target's output (the pass scales that value, and that call's output
      probe reads it); it ends before the module record (mix).
    * **A at L1**: the multiply is not a recorded call, so no record inside
      the target differs; the first record that does is the first API call
      after the target returned that reads its output (an entry whose input
      differs although every recorded producer agrees). **A at mix**: the
      target's module record (its output differs, every call inside agrees),
      which ends before that consumer.
    """
    if fault == "W":
        return (trace.module_entry[spec.weight] if level == "L0" else trace.first_reader_of_params(spec.weight))
    if fault == "B" and level == "L0":
        return trace.module_entry[trace.producer_module_inside(spec.target)]
    if level == "L0" or (fault == "A" and level == "mix"):
        return trace.module_entry[spec.target]
    if fault == "B":
        return trace.producer_inside(spec.target) or trace.first_consumer_after(spec.target)
    return trace.first_consumer_after(spec.target)

"""A dump is a function of the program: the same record list (names, call
indices, order, places, shapes) in eager mode, under ``aot_eager`` and under
inductor, which reorders probes that have no data dependency (issue #13).

Values are checked against float64 references computed on an unwired copy
of the model: module calls by plain hooks (``reference.ReferenceRecorder``),
API calls by a plain torch-function mode over the same name table.
"""

from __future__ import annotations

import copy
import glob
import json
import os
from collections import defaultdict
from typing import Any

import pytest
import torch
from identity_models import MODELS, TwoTowers, inputs_for
from reference import ReferenceRecorder, assert_stats_close, flatten_dump, stats64
from torch.overrides import TorchFunctionMode

import graphprobe
from graphprobe.wiring.apis import resolve_apis

STEPS = 3
BACKENDS = ("eager", "aot_eager", "inductor")


class ApiOutputs(TorchFunctionMode):
    """float64 stats of the outputs of every outermost call to an API of the
    default L1 table, named as msprobe names them."""

    def __init__(self) -> None:
        super().__init__()
        self.names = resolve_apis(())
        self.entries: dict[str, dict[str, Any]] = {}
        self.counts: dict[str, int] = defaultdict(int)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))  # the mode is off inside: outermost calls only
        entry = self.names.get(func)
        if entry is not None:
            outs = out if isinstance(out, (tuple, list)) else (out,)
            rec = {f"output.{i}": stats64(t) | {"shape": list(t.shape)} for i, t in enumerate(outs)
                   if isinstance(t, torch.Tensor)}
            name = entry.replace("{n}", str(self.counts[entry]))
            self.counts[entry] += 1
            self.entries[name] = rec
        return out


def _references(model: torch.nn.Module, inputs: list[Any], level: str) -> list[dict[str, dict[str, Any]]]:
    """Per step: record name -> {place: float64 stats}, in reference order."""
    # Two copies: the module hooks' own tensor work must not reach the API mode.
    api_ref, module_ref = copy.deepcopy(model), copy.deepcopy(model)
    modules = ReferenceRecorder(module_ref) if level in ("L0", "mix") else None
    out = []
    for x in inputs:
        entries: dict[str, dict[str, Any]] = {}
        with torch.no_grad():
            if level in ("L1", "mix"):
                with ApiOutputs() as mode:
                    api_ref(x)
                entries.update(mode.entries)
            if modules is not None:
                modules.reset()
                module_ref(x)
                entries.update(modules.entries)
        out.append(entries)
    return out


def _dump(model, level, backend, inputs, tmp_path, runs_per_step=1, fullgraph=True, **compile_kw):
    tmp_path.mkdir(parents=True, exist_ok=True)
    dump_path = str(tmp_path / f"{level}-{backend}")
    config = tmp_path / f"{level}-{backend}.json"
    config.write_text(json.dumps({"dump_path": dump_path, "level": level}))
    dumper = graphprobe.AclGraphDumper(str(config))
    dumper.start(model)
    runner = model if backend == "eager" else torch.compile(model, backend=backend, fullgraph=fullgraph, **compile_kw)
    with torch.no_grad():
        for x in inputs:
            for _ in range(runs_per_step):
                runner(x)
            dumper.step()
    dumper.stop()
    torch._dynamo.reset()
    steps = []
    for step in range(len(inputs)):
        (path,) = glob.glob(os.path.join(dump_path, f"step{step}", "*", "dump.json"))
        with open(path) as f:
            steps.append(json.load(f)["data"])
    return steps


def _record_list(data: dict[str, Any]) -> list[tuple[str, list[tuple[str, list[int]]]]]:
    """Names in order, each with its tensor places and shapes."""
    return [(name, [(place, rec["shape"]) for place, rec in places.items()])
            for name, places in flatten_dump(data).items()]


def _check_values(data: dict[str, Any], ref: dict[str, dict[str, Any]], rtol: float, where: str) -> int:
    checked = 0
    for name, places in flatten_dump(data).items():
        for place, want in ref.get(name, {}).items():
            if place in places:
                assert places[place]["shape"] == want["shape"], f"{where} {name} {place}"
                _assert_close_to_scale(places[place], want, rtol, f"{where} {name} {place}")
                checked += 1
    return checked


def _assert_close_to_scale(got: dict[str, Any], want: dict[str, Any], rtol: float, where: str) -> None:
    """As ``assert_stats_close``, with Max and Min also relative to the
    tensor's RMS: a compiler's reordered float32 sums move a value near zero
    (the minimum of a square after a cancellation) by more than 1e-5 of
    itself, but not of the tensor's scale."""
    norm = want["Norm"]
    if isinstance(norm, float) and norm > 0:
        rms = norm / max(1, torch.Size(want["shape"]).numel()) ** 0.5
        want = dict(want)
        for key in ("Max", "Min"):
            g, w = got[key], want[key]
            if isinstance(w, float) and isinstance(g, float) and abs(g - w) <= rtol * rms:
                want[key] = g
    assert_stats_close(got, want, rtol, where)


CASES = [("towers", "L0"), ("towers", "L1"), ("towers", "mix"), ("rotary", "L1"), ("rotary", "mix"), ("llama", "mix")]


@pytest.mark.parametrize("name,level", CASES)
def test_record_list_is_the_same_under_every_backend(name, level, tmp_path):
    if name == "llama":
        pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = MODELS[name]().eval()
    inputs = inputs_for(name, STEPS)
    refs = _references(model, inputs, level)
    dumps = {backend: _dump(model, level, backend, inputs, tmp_path) for backend in BACKENDS}
    eager = [_record_list(d) for d in dumps["eager"]]
    if level != "mix":
        # eager mode names and orders exactly as the reference does
        for step, (data, ref) in enumerate(zip(dumps["eager"], refs)):
            assert list(data) == list(ref), f"step {step}: eager names/order differ from the reference"
    for backend, steps in dumps.items():
        for step, data in enumerate(steps):
            assert _record_list(data) == eager[step], f"{backend} step {step}: record list differs from eager"
            checked = _check_values(data, refs[step], 1e-5, f"{backend} step {step}")
            assert checked >= len(data), f"{backend} step {step}: only {checked} values had a reference"


# Llama compiles for minutes with fused statistics on 2 cores (one reduction
# kernel per probe): run by hand with GRAPHPROBE_SLOW_TESTS=1.
_FUSED_MODELS = ["towers"] + (["llama"] if os.environ.get("GRAPHPROBE_SLOW_TESTS") == "1" else [])


@pytest.mark.parametrize("name", _FUSED_MODELS)
def test_fused_statistics_keep_record_list_and_values(name, tmp_path):
    # Statistics fused into inductor's code (opt-in): the same record list as
    # eager mode and the same float64-referenced values, on our model and (by
    # hand) on transformers' Llama.
    if name == "llama":
        pytest.importorskip("transformers")
    from graphprobe.wiring import fused_stats

    torch.manual_seed(0)
    model = MODELS[name]().eval()
    inputs = inputs_for(name, 2)
    refs = _references(model, inputs, "mix")
    eager = _dump(model, "mix", "eager", inputs, tmp_path)
    before = fused_stats.enabled()
    fused_stats.set_enabled(True)
    try:
        torch._dynamo.reset()
        fused = _dump(model, "mix", "inductor", inputs, tmp_path / "fused")
    finally:
        fused_stats.set_enabled(before)
    for step, data in enumerate(fused):
        assert _record_list(data) == _record_list(eager[step]), f"fused step {step}: record list differs from eager"
        checked = _check_values(data, refs[step], 1e-5, f"fused step {step}")
        assert checked >= len(data), f"fused step {step}: only {checked} values had a reference"


def test_graphprobe_compare_finds_no_divergence_between_inductor_and_eager(tmp_path):
    from graphprobe.compare import compare

    torch.manual_seed(0)
    model = MODELS["rotary"]().eval()
    inputs = inputs_for("rotary", 1)
    _dump(model, "L1", "eager", inputs, tmp_path)
    _dump(model, "L1", "inductor", inputs, tmp_path)
    run = compare(tmp_path / "L1-inductor" / "step0", tmp_path / "L1-eager" / "step0", tmp_path / "out",
                  html=False, progress=False)
    (outcome,) = run.outcomes
    assert outcome.counts.get("error", 0) == 0, outcome.counts
    assert outcome.counts.get("unmatched", 0) == 0, outcome.counts
    assert outcome.counts.get("pass", 0) > 0, outcome.counts
    assert outcome.first_divergence is None


class TwiceAndBreak(torch.nn.Module):
    """A module called twice per forward, and (optionally) a graph break
    between the two calls of ``norm`` inside the parent ``block``."""

    def __init__(self, graph_break: bool) -> None:
        super().__init__()
        self.block = _Block(graph_break)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(x))


class _Block(torch.nn.Module):
    def __init__(self, graph_break: bool) -> None:
        super().__init__()
        self.graph_break = graph_break
        self.fc = torch.nn.Linear(16, 16)
        self.norm = torch.nn.LayerNorm(16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(self.fc(x))
        if self.graph_break:
            torch._dynamo.graph_break()
        return self.norm(y * 2) + torch.tanh(y)


def _eager_and(model_fn, backend, tmp_path, level="mix", runs_per_step=1, fullgraph=True, **compile_kw):
    torch.manual_seed(0)
    model = model_fn().eval()
    inputs = [torch.randn(3, 16) for _ in range(STEPS)]
    eager = _dump(model, level, "eager", inputs, tmp_path / "e", runs_per_step)
    other = _dump(model, level, backend, inputs, tmp_path / "c", runs_per_step, fullgraph=fullgraph, **compile_kw)
    return model, inputs, eager, other


@pytest.mark.parametrize("runs_per_step", [1, 2])
def test_module_called_twice_and_model_run_twice_per_step(runs_per_step, tmp_path):
    model, inputs, eager, compiled = _eager_and(lambda: TwiceAndBreak(False), "inductor", tmp_path,
                                                runs_per_step=runs_per_step)
    names = list(eager[0])
    assert names.count("Module.block.norm.LayerNorm.forward.0") == 1
    assert f"Module.block.norm.LayerNorm.forward.{2 * runs_per_step - 1}" in names
    assert f"Module.block._Block.forward.{runs_per_step - 1}" in names
    for step in range(STEPS):
        assert _record_list(compiled[step]) == _record_list(eager[step]), f"step {step}"
    # values: the last run of each step against the float64 reference
    refs = _references(model, inputs, "L0")
    shift = {f"Module.block.norm.LayerNorm.forward.{i}": f"Module.block.norm.LayerNorm.forward.{i + 2}"
             for i in range(2)} if runs_per_step == 2 else {}
    for step, data in enumerate(compiled):
        ref = {shift.get(k, k): v for k, v in refs[step].items()}
        assert _check_values(data, ref, 1e-5, f"step {step}") > 0


def test_graph_break_in_the_middle_of_a_module(tmp_path):
    torch._dynamo.utils.counters.clear()
    _, _, eager, compiled = _eager_and(lambda: TwiceAndBreak(True), "aot_eager", tmp_path, fullgraph=False)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 2, "the graph did not break"
    for step in range(STEPS):
        assert _record_list(compiled[step]) == _record_list(eager[step]), f"step {step}"


def test_compiled_submodule_in_an_eager_parent(tmp_path):
    def make():
        model = TwoTowers()
        model.right.compile(backend="inductor", fullgraph=True)  # in place: names stay
        return model

    _, _, eager, mixed = _eager_and(make, "eager", tmp_path)
    # "eager" as the backend runs the parent eagerly; only `right` is compiled
    for step in range(STEPS):
        assert _record_list(mixed[step]) == _record_list(eager[step]), f"step {step}"


def test_recompile_for_a_new_shape_keeps_the_rules(tmp_path):
    torch.manual_seed(0)
    model = TwoTowers().eval()
    inputs = [torch.randn(3, 16), torch.randn(5, 16), torch.randn(3, 16)]
    eager = _dump(model, "mix", "eager", inputs, tmp_path / "e")
    compiled = _dump(model, "mix", "inductor", inputs, tmp_path / "c", dynamic=False)
    for step in range(len(inputs)):
        assert _record_list(compiled[step]) == _record_list(eager[step]), f"step {step}"
    assert _record_list(compiled[1])[0][1][0][1][0] == 5  # the second shape's own records


def test_keyword_inputs_are_recorded_in_signature_order(tmp_path):
    class Callee(torch.nn.Module):
        def forward(self, x, *, gate=None, scale=1.0, bias=None):
            return x * scale + gate + bias

    class Caller(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.callee = Callee()

        def forward(self, x):
            return self.callee(x, bias=x + 1, scale=2.0, gate=x * 3)  # not in signature order

    torch.manual_seed(0)
    inputs = [torch.randn(2, 3)]
    for backend in ("eager", "aot_eager"):
        data = _dump(Caller(), "L0", backend, inputs, tmp_path / backend)[0]
        assert list(data["Module.callee.Callee.forward.0"]["input_kwargs"]) == ["gate", "scale", "bias"]


class _Scaler(torch.nn.Module):
    def forward(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        return x * s


class ConstantInput(torch.nn.Module):
    """The child's input is a one-element tensor made from data inside the
    parent's forward: a constant while tracing, so FakeTensor/make_fx used to
    run its probe for real during compilation (several times), splitting the
    call into several records."""

    def __init__(self) -> None:
        super().__init__()
        self.child = _Scaler()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.child(x, torch.tensor(2.0)) + self.child(x, torch.tensor(0.5))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_tensor_made_inside_the_forward_is_probed_once_per_run(backend, tmp_path):
    torch.manual_seed(0)
    model = ConstantInput().eval()
    inputs = [torch.randn(3, 2) for _ in range(2)]
    eager = _dump(model, "mix", "eager", inputs, tmp_path / "e")
    compiled = _dump(model, "mix", backend, inputs, tmp_path / "c")
    for step in range(len(inputs)):
        assert _record_list(compiled[step]) == _record_list(eager[step]), f"step {step}"
    assert "Module.child._Scaler.forward.1" in compiled[0] and "Module.child._Scaler.forward.2" not in compiled[0]
    refs = _references(model, inputs, "L0")
    for step, data in enumerate(compiled):
        assert _check_values(data, refs[step], 1e-6, f"step {step}") > 0

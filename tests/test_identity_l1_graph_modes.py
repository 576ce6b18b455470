"""L1/mix record identity in the graph modes that used to break it (issue #25,
items 3-5 and 8): ``torch.compile(dynamic=True)``, a graph break under
inductor, max-pooling and ``nn.TransformerEncoder`` in eval/no_grad.

Each test dumps one model eagerly and compiled and requires the *whole*
record list to be identical: names, order, every place of every part, the
shapes of the tensors and the values of the non-tensor arguments (compare
pairs those rows too). Tensor values are checked against float64 statistics
of an unwired copy (``test_program_identity._references``).
"""

from __future__ import annotations

import enum
import glob
import json
import os
from typing import Any

import pytest
import torch
import torch._dynamo.testing
import torch.nn.functional as F
from test_program_identity import _check_values, _references
from torch import nn

import graphprobe


def _dump(model, level, backend, inputs, path, fullgraph=True, counter=None, **compile_kw):
    """Steps of ``model`` on ``inputs`` (one step each) under ``backend``
    ("eager": not compiled); ``counter`` (a CompileCounterWithBackend) counts
    the graphs compiled, listed after each step in ``counter.after_steps``.
    Returns each step's ``data``."""
    path.mkdir(parents=True, exist_ok=True)
    config = path / "config.json"
    config.write_text(json.dumps({"dump_path": str(path / "dump"), "level": level}))
    dumper = graphprobe.AclGraphDumper(str(config))
    dumper.start(model)
    runner = model
    if backend != "eager":
        runner = torch.compile(model, backend=counter or backend, fullgraph=fullgraph, **compile_kw)
    with torch.no_grad():
        for x in inputs:
            runner(x)
            dumper.step()
            if counter is not None:
                counter.after_steps.append(counter.frame_count)
    dumper.stop()
    torch._dynamo.reset()
    steps = []
    for step in range(len(inputs)):
        (found,) = glob.glob(os.path.join(path, "dump", f"step{step}", "*", "dump.json"))
        with open(found) as f:
            steps.append(json.load(f)["data"])
    return steps


def _full_list(data: dict[str, Any]) -> list[tuple[str, list[tuple[str, Any]]]]:
    """Each record in order with every leaf of its parts: tensors as their
    dtype and shape, other values as written (``null`` as None)."""

    def walk(value: Any, place: str, out: list[tuple[str, Any]]) -> None:
        if isinstance(value, dict) and value.get("type") == "torch.Tensor":
            out.append((place, (value["dtype"], tuple(value["shape"]))))
        elif isinstance(value, dict) and "type" in value:
            out.append((place, (value["type"], value.get("value"))))
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{place}.{key}", out)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, f"{place}.{i}", out)
        else:
            out.append((place, value))

    listed = []
    for name, entry in data.items():
        leaves: list[tuple[str, Any]] = []
        for part in ("input_args", "input_kwargs", "parameters", "output"):
            if part in entry:
                walk(entry[part], part, leaves)
        listed.append((name, leaves))
    return listed


def _assert_same_as_eager(eager, other, refs, rtol, where):
    for step, (e, o) in enumerate(zip(eager, other)):
        assert _full_list(o) == _full_list(e), f"{where} step {step}: the record list differs from eager"
        checked = _check_values(o, refs[step], rtol, f"{where} step {step}")
        assert checked >= len(o), f"{where} step {step}: only {checked} values had a float64 reference"


# -- item 5: max-pooling ------------------------------------------------------


class Pools(nn.Module):
    """The pooling layers whose functions are ``boolean_dispatch`` wrappers
    (signature ``(*args, **kwargs)``)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        self.adaptive = nn.AdaptiveMaxPool2d((2, 2))
        self.pool1d = nn.MaxPool1d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.adaptive(self.pool(self.conv(x)))
        return self.pool1d(y.flatten(2)) + F.adaptive_max_pool1d(y.flatten(2), 2)


def test_max_pooling_has_one_argument_layout_in_eager_and_compiled(tmp_path):
    torch.manual_seed(0)
    model = Pools().eval()
    inputs = [torch.randn(2, 3, 12, 12)]
    refs = _references(model, inputs, "L1")
    eager = _dump(model, "L1", "eager", inputs, tmp_path / "e")
    compiled = _dump(model, "L1", "aot_eager", inputs, tmp_path / "c")
    _assert_same_as_eager(eager, compiled, refs, 1e-6, "aot_eager")
    # The layout of the function's signature: every parameter positional, defaults filled in.
    pool = eager[0]["Functional.max_pool2d.0.forward"]
    assert "input_kwargs" not in pool or not pool["input_kwargs"]
    assert [a.get("value") for a in pool["input_args"][1:]] == [3, 2, 1, 1, False, False]
    adaptive = eager[0]["Functional.adaptive_max_pool2d.0.forward"]["input_args"]
    assert [a["value"] for a in adaptive[1]] == [2, 2] and adaptive[2] == {"type": "bool", "value": False}


# -- item 8: nn.TransformerEncoder in eval mode without grad --------------------


def test_transformer_encoder_fast_path_records_as_eager(tmp_path):
    # Eval mode without grad makes nn.TransformerEncoderLayer take its fused
    # fast path (torch._transformer_encoder_layer_fwd), except while a
    # torch-function mode is active; dynamo's has_torch_function ignores
    # modes, so compiled code used to take it and record nothing.
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    model = nn.TransformerEncoder(layer, 2).eval()  # as the issue built it: nested tensors allowed
    inputs = [torch.randn(2, 5, 16) for _ in range(2)]
    refs = _references(model, inputs, "L1")
    before = torch.backends.mha.get_fastpath_enabled()
    eager = _dump(model, "L1", "eager", inputs, tmp_path / "e")
    compiled = _dump(model, "L1", "aot_eager", inputs, tmp_path / "c")
    assert len(eager[0]) == 22
    assert "Functional.multi_head_attention_forward.1.forward" in eager[0]
    _assert_same_as_eager(eager, compiled, refs, 1e-5, "aot_eager")
    assert torch.backends.mha.get_fastpath_enabled() == before  # stop() restored the switch


# -- item 4: a graph break under inductor ---------------------------------------


class Broken(nn.Module):
    """A graph break between two Linears: inductor's code for each part calls
    ``extern_kernels.addmm(..., alpha=1, beta=1, out=buf)`` while the mode is
    on the stack."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.a(x))
        torch._dynamo.graph_break()
        return self.b(y) * 2


@pytest.mark.parametrize("level", ["L1", "mix"])
def test_graph_break_under_inductor_records_no_call_of_generated_code(level, tmp_path):
    torch.manual_seed(0)
    model = Broken().eval()
    inputs = [torch.randn(4, 8) for _ in range(2)]
    refs = _references(model, inputs, level)
    eager = _dump(model, level, "eager", inputs, tmp_path / "e")
    torch._dynamo.utils.counters.clear()
    compiled = _dump(model, level, "inductor", inputs, tmp_path / "c", fullgraph=False)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 2, "the graph did not break"
    assert not any(name.startswith("Torch.addmm") for name in compiled[0])
    _assert_same_as_eager(eager, compiled, refs, 1e-5, "inductor")


# -- item 3: dynamic=True ---------------------------------------------------------


class Kind(enum.IntEnum):
    """An int subclass: a constant, never symbolic, left as it is."""

    TWO = 2


class _Scale(nn.Module):
    def forward(self, x: torch.Tensor, scale: float, n: int, kind: Kind) -> tuple[torch.Tensor, int]:
        return x * scale, n


class Sized(nn.Module):
    """Float attributes of modules (``norm_type``, ``scale``) and a size as
    arguments of recorded calls and of a module (its output too): all
    symbolic under ``dynamic=True``."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(64, 16)
        self.fc = nn.Linear(16, 16)
        self.scaled = _Scale()
        self.scale = 0.5

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.fc(self.emb(ids)).softmax(-1)
        h, n = self.scaled(h, self.scale, ids.shape[1], Kind.TWO)
        return h * n + h.mean(1, keepdim=True)


@pytest.mark.parametrize("level", ["L1", "mix"])
def test_dynamic_shapes_under_inductor_record_as_eager(level, tmp_path):
    torch.manual_seed(0)
    model = Sized().eval()
    gen = torch.Generator().manual_seed(1)
    inputs = [torch.randint(0, 64, (2, n), generator=gen) for n in (8, 6)]
    refs = _references(model, inputs, level)
    eager = _dump(model, level, "eager", inputs, tmp_path / "e")
    compiled = _dump(model, level, "inductor", inputs, tmp_path / "c", dynamic=True)
    _assert_same_as_eager(eager, compiled, refs, 1e-5, "inductor dynamic")
    # The values eager mode records: the float attribute and this step's size.
    for step, n in enumerate((8, 6)):
        assert compiled[step]["Functional.embedding.0.forward"]["input_args"][4] == {"type": "float", "value": 2.0}
        assert compiled[step]["Tensor.__mul__.1.forward"]["input_args"][1] == {"type": "int", "value": n}
        if level == "mix":
            scaled = compiled[step]["Module.scaled._Scale.forward.0"]
            assert scaled["input_args"][1:] == [{"type": "float", "value": 0.5}, {"type": "int", "value": n},
                                                {"type": "Kind", "value": 2}]
            assert scaled["output"][1] == {"type": "int", "value": n}


def _tiny_qwen2() -> nn.Module:
    from transformers import Qwen2Config, Qwen2Model

    cfg = Qwen2Config(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, attn_implementation="eager",
    )
    return Qwen2Model(cfg).eval()


def test_dynamic_shapes_on_qwen2_record_as_eager_without_recompiling(tmp_path):
    # The reproduction (Qwen2, dynamic=True, mix): graphprobe's own
    # code broke the graph and hit dynamo's recompile limit, splitting calls.
    pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = _tiny_qwen2()
    gen = torch.Generator().manual_seed(1)
    inputs = [torch.randint(0, 64, (2, n), generator=gen) for n in (8, 6, 5)]
    refs = _references(model, inputs, "mix")
    eager = _dump(model, "mix", "eager", inputs, tmp_path / "e")
    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
    counter.after_steps = []
    compiled = _dump(model, "mix", "aot_eager", inputs, tmp_path / "c", counter=counter, dynamic=True)
    assert len(set(counter.after_steps)) == 1, f"recompiled for a new sequence length: {counter.after_steps}"
    _assert_same_as_eager(eager, compiled, refs, 1e-5, "aot_eager dynamic")


class DataDependent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) * (x > 0).sum().item()


def test_data_dependent_number_is_recorded_by_type_and_never_fails_the_trace(tmp_path):
    # With capture_scalar_outputs, .item() is an unbacked symbol: there is no
    # value to guard on (guard_scalar would fail the whole trace).
    torch.manual_seed(0)
    model = DataDependent().eval()
    inputs = [torch.randn(3, 4)]
    eager = _dump(model, "mix", "eager", inputs, tmp_path / "e")
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        compiled = _dump(model, "mix", "aot_eager", inputs, tmp_path / "c")
    expected = int((inputs[0] > 0).sum())
    assert eager[0]["Tensor.__mul__.0.forward"]["input_args"][1] == {"type": "int", "value": expected}
    assert compiled[0]["Tensor.__mul__.0.forward"]["input_args"][1] == {"type": "SymInt"}
    assert [name for name, _ in _full_list(compiled[0])] == [name for name, _ in _full_list(eager[0])]

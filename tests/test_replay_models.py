"""Replay on the calls users' models really make (issue #37): integer
outputs (a router's expert choice), weights changed by an optimizer before
``dumper.step()``, transformers' KV cache objects.

References are independent of the tool: each fault's place and kind are
known (a graph-only branch on ``torch.compiler.is_compiling()``), the
router's choice is set by hand-picked logits, and eager runs (no fault at
all) must give local errors of exactly 0.
"""

from __future__ import annotations

import glob
import json
import os
from typing import Any

import pytest
import torch
from torch import nn

from graphprobe import AclGraphDumper


def _replay_file(dump_path: str, step: int = 0) -> dict[str, Any]:
    found = glob.glob(os.path.join(dump_path, f"step{step}", "*", "replay.json"))
    assert len(found) == 1, f"expected one replay.json for step {step}, found {found}"
    with open(found[0]) as f:
        return json.load(f)


def _by_module(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["module"]: m for m in doc["modules"] if m["entry"].endswith(".forward.0")}


# ---------------------------------------------------------------- (b) integer outputs


class Router(nn.Module):
    """Top-1 expert choice over the logits it is given; in graph mode only,
    expert 1's logit gains 3e-6, which flips token 0 (a near tie) to expert
    1 while the returned weight moves by ~3e-6, far within float32's floor."""

    def forward(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if torch.compiler.is_compiling():
            logits = logits + torch.tensor([0.0, 3e-6, 0.0])
        weight, index = torch.topk(logits, k=1, dim=-1)
        return weight, index


class TinyMoE(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.router = Router()
        self.experts = nn.ModuleList(nn.Linear(3, 3) for _ in range(3))

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        weight, index = self.router(logits)
        rows = [self.experts[int(e)](logits[t]) * weight[t] for t, e in enumerate(index[:, 0].tolist())]
        return torch.stack(rows)


def _logits() -> torch.Tensor:
    # Token 0: experts 0 and 1 nearly tied (1.0 vs 0.999999, 17 float32 ulps apart); token 1: expert 2 clear.
    return torch.tensor([[1.0, 0.999999, 0.5], [0.1, 0.2, 0.9]])


@pytest.mark.parametrize("backend, creates", [(None, False), ("aot_eager", True)])
def test_a_routing_flip_names_the_router(write_config, tmp_path, backend, creates) -> None:
    torch.manual_seed(0)
    model = TinyMoE()
    dumper = AclGraphDumper(write_config(replay=True))
    dumper.start(model)
    # The routing decision leaves the graph (.tolist()): compile the router, as a model would compile its blocks.
    if backend is not None:
        model.router.compile(backend=backend, fullgraph=True)
    with torch.no_grad():
        model(_logits())
    dumper.step()
    dumper.stop()
    mods = _by_module(_replay_file(str(tmp_path / "dump")))
    router = mods["router"]
    if not creates:  # eager mode: no fault, the integer output equals eager's exactly
        assert router["verdict"] == "inherits", router
        assert router["outputs"][1]["local_error"] == 0.0
        return
    assert router["verdict"] == "creates", router
    weight, index = router["outputs"]
    assert weight["local_error"] < weight["floor"]  # the floats agree: only the choice differs
    assert index["dtype"] == "torch.int64" and index["local_error"] == 0.5  # one token of two
    assert index["eager_local_error"] == 0.0 and index["float64_error"] == 0.5
    assert "integer output differs" in router["reason"]
    for path in ("experts.1", "experts.2"):  # graph mode sent token 0 to expert 1, token 1 to expert 2
        assert mods[path]["verdict"] == "inherits", mods[path]


# ---------------------------------------------------------------- (c) optimizer.step() before dumper.step()

FAULT = 1.001


class FaultyLinear(nn.Linear):
    """A Linear whose compiled code multiplies its output by ``FAULT``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = super().forward(x)
        return y * FAULT if torch.compiler.is_compiling() else y


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), FaultyLinear(16, 8))


@pytest.mark.parametrize("backend", [None, "aot_eager"])
def test_an_optimizer_step_before_dumper_step_keeps_calls_judgeable(write_config, tmp_path, backend) -> None:
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    dumper = AclGraphDumper(write_config(replay=True))
    dumper.start(model)
    fn = model if backend is None else torch.compile(model, backend=backend, fullgraph=True)
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))
    for _ in range(2):
        loss = fn(x).square().mean()
        loss.backward()
        opt.step()  # changes every weight before dumper.step(), as README's training loop does
        opt.zero_grad()
        dumper.step()
    dumper.stop()
    for step in (0, 1):
        mods = _by_module(_replay_file(str(tmp_path / "dump"), step))
        for path in ("0", "1"):
            assert mods[path]["verdict"] == "inherits", (step, path, mods[path])
            # Replayed with the weights the call used: exactly eager mode's arithmetic.
            assert mods[path]["outputs"][0]["local_error"] == 0.0, (step, path, mods[path])
        last = mods["2"]
        if backend is None:
            assert last["verdict"] == "inherits" and last["outputs"][0]["local_error"] == 0.0, last
        else:
            assert last["verdict"] == "creates", last
            assert last["outputs"][0]["local_error"] == pytest.approx(FAULT - 1, rel=1e-2), last


def test_a_weight_changed_outside_an_optimizer_is_still_refused(write_config, tmp_path) -> None:
    model = _mlp()
    dumper = AclGraphDumper(write_config(replay={"list": ["0"]}))
    dumper.start(model)
    with torch.no_grad():
        model(torch.randn(2, 8))
        model[0].weight.mul_(2)  # the user's own in-place change: its value at the call is unknown
    dumper.step()
    dumper.stop()
    (only,) = _replay_file(str(tmp_path / "dump"))["modules"]
    assert only["verdict"] == "not judged" and "parameter 0.weight changed" in only["reason"], only
    assert "dumper.step() before optimizer.step()" not in only["reason"]


# ---------------------------------------------------------------- (a) transformers' KV cache objects


def _llama_with_faulty_attention(transformers: Any, layer: int) -> nn.Module:
    """A tiny LlamaModel whose ``layers[layer].self_attn`` scales its output
    by ``FAULT`` in graph mode only: a fault in the attention's own code."""
    from transformers.models.llama.modeling_llama import LlamaAttention

    class FaultyAttention(LlamaAttention):
        def forward(self, *args: Any, **kwargs: Any) -> Any:
            out, weights = super().forward(*args, **kwargs)
            return (out * FAULT if torch.compiler.is_compiling() else out), weights

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, attn_implementation="eager")
    model = transformers.LlamaModel(config).eval()
    faulty = FaultyAttention(config, layer_idx=layer)
    faulty.load_state_dict(model.layers[layer].self_attn.state_dict())
    model.layers[layer].self_attn = faulty
    return model


@pytest.mark.parametrize("backend", [None, "aot_eager"])
def test_attention_called_with_the_default_cache_is_judged(write_config, tmp_path, backend) -> None:
    transformers = pytest.importorskip("transformers")
    model = _llama_with_faulty_attention(transformers, layer=0)
    ids = torch.randint(0, 64, (1, 8), generator=torch.Generator().manual_seed(1))
    dumper = AclGraphDumper(write_config(replay={"list": ["self_attn", "layers.1"]}))
    dumper.start(model)
    fn = model if backend is None else torch.compile(model, backend=backend, fullgraph=True)
    with torch.no_grad():
        out = fn(ids)  # use_cache defaults to True: every attention gets the DynamicCache
    assert isinstance(out.past_key_values, transformers.DynamicCache)
    dumper.step()
    dumper.stop()
    mods = _by_module(_replay_file(str(tmp_path / "dump")))
    attn = mods["layers.0.self_attn"]
    if backend is None:
        assert attn["verdict"] == "inherits" and attn["outputs"][0]["local_error"] == 0.0, attn
    else:
        assert attn["verdict"] == "creates", attn
        assert attn["outputs"][0]["local_error"] == pytest.approx(FAULT - 1, rel=1e-2), attn
    for path in ("layers.0.self_attn.q_proj", "layers.0.self_attn.o_proj", "layers.1.self_attn", "layers.1",
                 "layers.1.mlp"):
        assert mods[path]["verdict"] == "inherits", (path, mods[path])
    # The user's cache holds what the model wrote, untouched by replay: one entry of 8 positions per layer.
    assert [layer.keys.shape[-2] for layer in out.past_key_values.layers] == [8, 8]


class Node:
    """An object that refers back to itself, with two branches per level."""

    def __init__(self, x: torch.Tensor) -> None:
        self.x = x
        self.left = self
        self.right = self


class TakesNode(nn.Module):
    def forward(self, x: torch.Tensor, node: Node) -> torch.Tensor:
        return x + node.x


class PassesNode(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = TakesNode()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x, Node(x * 3))


@pytest.mark.parametrize("backend", [None, "aot_eager"])
def test_an_object_that_refers_to_itself_is_refused_quickly(write_config, tmp_path, backend) -> None:
    """Walked to the nesting limit of containers, this object would have
    2**32 branches: the walk stops after a few nested objects, the model
    runs, and the call is not judged with that reason."""
    model = PassesNode()
    dumper = AclGraphDumper(write_config(replay=True))
    dumper.start(model)
    fn = model if backend is None else torch.compile(model, backend=backend, fullgraph=True)
    x = torch.ones(3)
    with torch.no_grad():
        assert torch.equal(fn(x), x * 4)
    dumper.step()
    dumper.stop()
    (call,) = _replay_file(str(tmp_path / "dump"))["modules"]
    assert call["verdict"] == "not judged" and "objects nested deeper than 3" in call["reason"], call


# ---------------------------------------------------------------- (d) backward


class GradScale(torch.autograd.Function):
    """Identity forward; the backward scales the gradient by ``FAULT``."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad * FAULT


class BackwardFaulty(nn.Module):
    """GELU whose backward is scaled by ``FAULT`` in graph mode only; its forward is exact."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_compiling():
            x = GradScale.apply(x)
        return torch.nn.functional.gelu(x)


class BackNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.act = BackwardFaulty()
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


@pytest.mark.parametrize("backend", [None, "aot_eager"])
def test_a_backward_only_fault_is_attributed_to_the_module_whose_backward_creates_it(
        write_config, tmp_path, backend) -> None:
    torch.manual_seed(0)
    model = BackNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    dumper = AclGraphDumper(write_config(replay={"backward": True}))
    dumper.start(model)
    fn = model if backend is None else torch.compile(model, backend=backend, fullgraph=True)
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))
    fn(x).square().mean().backward()
    opt.step()  # before dumper.step(), as README's training loop does
    opt.zero_grad()
    dumper.step()
    dumper.stop()
    doc = _replay_file(str(tmp_path / "dump"))
    calls = {m["entry"]: m for m in doc["modules"]}
    assert list(calls) == ["Module.fc1.Linear.forward.0", "Module.fc1.Linear.backward.0",
                           "Module.act.BackwardFaulty.forward.0", "Module.act.BackwardFaulty.backward.0",
                           "Module.fc2.Linear.forward.0", "Module.fc2.Linear.backward.0"], list(calls)
    for entry, m in calls.items():
        if entry.startswith("Module.act.") and backend is not None:
            continue
        # fc1's input does not require grad: its backward keeps no input gradient, so it is not judged.
        if entry == "Module.fc1.Linear.backward.0":
            assert m["verdict"] == "not judged" and "no gradient of a positional input" in m["reason"], m
            continue
        assert m["verdict"] == "inherits", (entry, m)
    act = calls["Module.act.BackwardFaulty.backward.0"]
    if backend is None:
        assert act["verdict"] == "inherits" and act["outputs"][0]["local_error"] == 0.0, act
    else:
        assert calls["Module.act.BackwardFaulty.forward.0"]["verdict"] == "inherits"
        assert act["verdict"] == "creates", act
        assert act["outputs"][0]["local_error"] == pytest.approx(FAULT - 1, rel=1e-2), act

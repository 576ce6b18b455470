"""Replay (issue #27 part 1): local error attribution in one run.

References are independent of the tool: the fault's location is known (a
×1.001 branch on ``torch.compiler.is_compiling()`` in one module, inductor's
own ``inject_relu_bug_TESTING_ONLY`` in the ReLU lowering), its size is
computed here, and the state checks compare the model's tensors and RNG
states bit for bit with copies taken before ``step()``.
"""

from __future__ import annotations

import glob
import json
import os
import types
from typing import Any

import pytest
import torch
from torch import nn

import graphprobe
from graphprobe import AclGraphDumper
from graphprobe.config import ConfigTypeError, ConfigValueError, parse_config

FAULT = 1.001


class FaultyLinear(nn.Linear):
    """A Linear whose compiled code multiplies its output by ``FAULT``
    (eager mode, and so replay, computes the true value)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = super().forward(x)
        if torch.compiler.is_compiling():
            y = y * FAULT
        return y


class Block(nn.Module):
    def __init__(self, dim: int, faulty: bool = False) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.act = nn.ReLU()
        self.proj = (FaultyLinear if faulty else nn.Linear)(2 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.proj(self.act(self.fc1(x)))


class ThreeBlocks(nn.Module):
    def __init__(self, dim: int = 16, faulty: int | None = None) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim, faulty=i == faulty) for i in range(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


def _replay_file(dump_path: str, step: int) -> dict[str, Any]:
    found = glob.glob(os.path.join(dump_path, f"step{step}", "*", "replay.json"))
    assert len(found) == 1, f"expected one replay.json for step {step}, found {found}"
    with open(found[0]) as f:
        return json.load(f)


def _by_module(doc: dict[str, Any], call: int = 0) -> dict[str, dict[str, Any]]:
    return {m["module"]: m for m in doc["modules"] if m["entry"].endswith(f".forward.{call}")}


def _run(model: nn.Module, inputs: tuple[Any, ...], config: str, backend: str | None, steps: int = 1,
         kwargs: dict[str, Any] | None = None) -> None:
    dumper = AclGraphDumper(config)
    dumper.start(model)
    fn = model if backend is None else torch.compile(model, backend=backend, fullgraph=True)
    with torch.no_grad():
        for _ in range(steps):
            fn(*inputs, **(kwargs or {}))
            dumper.step()
    dumper.stop()


# ---------------------------------------------------------------- config


def test_config_replay_forms() -> None:
    assert parse_config({"dump_path": "d"}).replay is None
    assert parse_config({"dump_path": "d", "replay": False}).replay is None
    on = parse_config({"dump_path": "d", "replay": True}).replay
    assert on is not None and on.modules == () and on.memory_mb == 1024 and not on.save_inputs
    narrow = parse_config({"dump_path": "d", "level": "mix",
                           "replay": {"list": ["mlp"], "memory_mb": 8, "save_inputs": True}}).replay
    assert narrow is not None and narrow.modules == ("mlp",) and narrow.memory_mb == 8 and narrow.save_inputs


@pytest.mark.parametrize("value, error, words", [
    ({"lst": ["a"]}, ConfigValueError, "unknown key 'replay.lst'"),
    ({"list": "mlp"}, ConfigTypeError, "replay.list"),
    ({"list": [""]}, ConfigValueError, "replay.list[0]"),
    ({"memory_mb": 0}, ConfigValueError, "replay.memory_mb"),
    ({"memory_mb": 1.5}, ConfigTypeError, "replay.memory_mb"),
    ({"save_inputs": 1}, ConfigTypeError, "replay.save_inputs"),
    ("yes", ConfigTypeError, "'replay'"),
])
def test_config_replay_refused(value: Any, error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=None) as info:
        parse_config({"dump_path": "d", "replay": value})
    assert words in str(info.value)


def test_config_replay_needs_modules() -> None:
    with pytest.raises(ConfigValueError, match="needs level"):
        parse_config({"dump_path": "d", "level": "L1", "replay": True})


# ---------------------------------------------------------------- verdicts


def test_eager_run_inherits_everywhere(write_config, tmp_path) -> None:
    torch.manual_seed(0)
    model = ThreeBlocks()
    x = torch.randn(4, 16)
    _run(model, (x,), write_config(replay=True), backend=None)
    doc = _replay_file(str(tmp_path / "dump"), 0)
    assert doc["version"] == 1
    assert [m["module"] for m in doc["modules"]] == [
        "blocks.0", "blocks.0.fc1", "blocks.0.act", "blocks.0.proj", "blocks.1", "blocks.1.fc1", "blocks.1.act",
        "blocks.1.proj", "blocks.2", "blocks.2.fc1", "blocks.2.act", "blocks.2.proj"]
    for m in doc["modules"]:
        assert m["verdict"] == "inherits", m
        (out,) = m["outputs"]
        assert out["local_error"] == 0.0 and out["dtype"] == "torch.float32" and out["floor"] == 1e-4
        assert out["eager_local_error"] < 1e-6 and out["float64_error"] == out["eager_local_error"]


def test_graph_only_fault_in_projection_creates(write_config, tmp_path) -> None:
    torch.manual_seed(0)
    model = ThreeBlocks(faulty=1)
    x = torch.randn(4, 16)
    _run(model, (x,), write_config(replay=True), backend="aot_eager", steps=2)
    for step in (0, 1):
        mods = _by_module(_replay_file(str(tmp_path / "dump"), step))
        proj = mods["blocks.1.proj"]
        assert proj["verdict"] == "creates", proj
        # The fault's size, computed here: ||0.001 y|| / ||y|| = 1e-3.
        assert proj["outputs"][0]["local_error"] == pytest.approx(FAULT - 1, rel=1e-3)
        assert proj["outputs"][0]["eager_local_error"] < 1e-6
        assert mods["blocks.1"]["verdict"] == "creates"  # contains the projection
        for path in ("blocks.0", "blocks.0.fc1", "blocks.0.act", "blocks.0.proj", "blocks.1.fc1", "blocks.1.act",
                     "blocks.2", "blocks.2.fc1", "blocks.2.act", "blocks.2.proj"):
            assert mods[path]["verdict"] == "inherits", (path, mods[path])
        # Downstream modules ran on the faulty values: replayed on the same, no local error.
        assert mods["blocks.2.fc1"]["outputs"][0]["local_error"] < 1e-6


def test_inductor_relu_fault_creates_at_the_relu(write_config, tmp_path) -> None:
    import torch._inductor.config as inductor_config

    assert hasattr(inductor_config.cpp, "inject_relu_bug_TESTING_ONLY")
    torch.manual_seed(0)
    model = ThreeBlocks()
    x = torch.randn(4, 16)
    with inductor_config.patch({"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}):
        _run(model, (x,), write_config(replay=True), backend="inductor")
    mods = _by_module(_replay_file(str(tmp_path / "dump"), 0))
    act = mods["blocks.0.act"]
    assert act["verdict"] == "creates", act
    # The bug computes x + 1 instead of relu(x): the error computed here from the kept input.
    h = model.blocks[0].fc1(x).detach()
    diff, ref = (h + 1 - h.relu()).double(), h.relu().double()
    expected = float(torch.linalg.vector_norm(diff) / torch.linalg.vector_norm(ref))
    assert act["outputs"][0]["local_error"] == pytest.approx(expected, rel=1e-4)
    assert mods["blocks.0.fc1"]["verdict"] == "inherits"
    assert mods["blocks.0.proj"]["verdict"] == "inherits"
    # The creating call's inputs are saved for a repro, loadable without pickled code.
    saved = torch.load(os.path.join(str(tmp_path / "dump"), "step0", f"pid{os.getpid()}", act["inputs_file"]),
                       weights_only=True)
    assert torch.equal(saved["args"][0], h)
    assert saved["kwargs"] == {}


# ---------------------------------------------------------------- state


class KVCache(nn.Module):
    """Appends each call's keys to a cache buffer in place and attends over it."""

    def __init__(self, dim: int, length: int) -> None:
        super().__init__()
        self.k = nn.Linear(dim, dim)
        self.register_buffer("cache", torch.zeros(length, dim))
        self.register_buffer("pos", torch.zeros((), dtype=torch.long))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        self.cache.index_copy_(0, self.pos + torch.arange(n), self.k(x))
        self.pos.add_(n)
        return x + self.cache.sum(0)


class Stateful(nn.Module):
    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(dim)
        self.kv = KVCache(dim, 16)
        self.drop = nn.Dropout(0.5)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.drop(self.kv(self.bn(x))))


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict(keep_vars=True).items()}


def _bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(torch.uint8) if a.is_floating_point()
                                                                     else a, b.view(torch.uint8) if
                                                                     b.is_floating_point() else b)


@pytest.mark.parametrize("backend", [None, "aot_eager"])
def test_replay_leaves_state_bit_identical(write_config, tmp_path, backend) -> None:
    torch.manual_seed(0)
    model = Stateful().train()
    xs = [torch.randn(4, 8) for _ in range(2)]
    dumper = AclGraphDumper(write_config(replay=True))
    dumper.start(model)
    fn = model if backend is None else torch.compile(model, backend=backend, fullgraph=True)
    for step, x in enumerate(xs):
        with torch.no_grad():
            fn(x)
        before = _state(model)
        versions = {k: v._version for k, v in model.state_dict(keep_vars=True).items()}
        rng = torch.random.get_rng_state()
        dumper.step()
        after = _state(model)
        assert before.keys() == after.keys()
        for key in before:
            assert _bits_equal(before[key], after[key]), key
            assert model.state_dict(keep_vars=True)[key]._version == versions[key], key
        assert torch.equal(torch.random.get_rng_state(), rng)
        mods = _by_module(_replay_file(str(tmp_path / "dump"), step))
        # BatchNorm (training: batch statistics, running stats written in forward) and the KV cache
        # are replayed from their buffers' values at the call, so they are judged.
        assert mods["bn"]["verdict"] == "inherits", mods["bn"]
        assert "writes buffer running_mean" in mods["bn"]["reason"]
        assert mods["kv"]["verdict"] == "inherits", mods["kv"]
        assert "writes buffer cache, pos" in mods["kv"]["reason"]
        assert mods["drop"]["verdict"] == "not judged"
        assert "draws random numbers" in mods["drop"]["reason"]
    dumper.stop()
    # The cache holds both calls' keys exactly as a plain eager run of the same model computes them.
    torch.manual_seed(0)
    ref = Stateful().train()
    with torch.no_grad():
        for x in xs:
            ref(x)
    assert torch.equal(ref.kv.cache, model.kv.cache) and torch.equal(ref.bn.running_mean, model.bn.running_mean)


class Holder:
    """An object replay cannot copy: its state is in slots, not in attributes
    replay could rebuild it from (objects with a ``__dict__``, such as a
    transformers cache, are copied)."""

    __slots__ = ("state",)


class TakesObject(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, holder: Any = None) -> torch.Tensor:
        return self.lin(x)


class Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = TakesObject()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x, holder=Holder())


def test_refuses_inputs_it_cannot_copy(write_config, tmp_path) -> None:
    _run(Outer(), (torch.randn(2, 4),), write_config(replay=True), backend=None)
    mods = _by_module(_replay_file(str(tmp_path / "dump"), 0))
    assert mods["inner"]["verdict"] == "not judged"
    assert "input_kwargs['holder'] is a Holder" in mods["inner"]["reason"]
    assert mods["inner.lin"]["verdict"] == "inherits"


def test_refuses_weights_changed_before_step(write_config, tmp_path) -> None:
    model = ThreeBlocks()
    dumper = AclGraphDumper(write_config(replay={"list": ["blocks.0.fc1"]}))
    dumper.start(model)
    with torch.no_grad():
        model(torch.randn(2, 16))
        model.blocks[0].fc1.weight.mul_(2)  # an optimizer step before dumper.step()
    dumper.step()
    dumper.stop()
    (only,) = _replay_file(str(tmp_path / "dump"), 0)["modules"]
    assert only["module"] == "blocks.0.fc1" and only["verdict"] == "not judged"
    assert "parameter blocks.0.fc1.weight changed" in only["reason"]


def test_memory_budget(write_config, tmp_path) -> None:
    model = nn.Sequential(nn.Linear(512, 512), nn.ReLU())
    x = torch.randn(600, 512)  # 1.2 MB of input: over a 1 MiB budget
    _run(model, (x,), write_config(replay={"memory_mb": 1}), backend=None)
    mods = _by_module(_replay_file(str(tmp_path / "dump"), 0))
    assert mods["0"]["verdict"] == "not judged" and "memory budget (1 MiB" in mods["0"]["reason"]


def test_list_save_inputs_and_discarded_steps(write_config, tmp_path) -> None:
    torch.manual_seed(0)
    model = ThreeBlocks()
    x = torch.randn(2, 16)
    dumper = AclGraphDumper(write_config(replay={"list": ["blocks.1.fc1", "ReLU"], "save_inputs": True}))
    dumper.start(model)
    with torch.no_grad():
        model(x)
        dumper.step(dump=False)  # kept calls are discarded with the records
        model(x)
        dumper.step()
    dumper.stop()
    assert not glob.glob(os.path.join(str(tmp_path / "dump"), "step1"))
    doc = _replay_file(str(tmp_path / "dump"), 0)
    assert [m["module"] for m in doc["modules"]] == ["blocks.0.act", "blocks.1.fc1", "blocks.1.act", "blocks.2.act"]
    fc1 = doc["modules"][1]
    folder = os.path.join(str(tmp_path / "dump"), "step0", f"pid{os.getpid()}")
    saved = torch.load(os.path.join(folder, fc1["inputs_file"]), weights_only=True)
    with torch.no_grad():
        expected_in = model.blocks[0](x)
    assert torch.equal(saved["args"][0], expected_in)
    assert set(saved["buffers"]) == set() and len(saved["graph_outputs"]) == 1


def test_probe_never_raises(write_config, tmp_path) -> None:
    """Values replay cannot describe (odd dict keys, deep nesting) reach the
    forward untouched and are reported, not raised."""

    class Odd(nn.Module):
        def forward(self, x: torch.Tensor, table: dict) -> torch.Tensor:
            return x * 2

    class Wrap(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.odd = Odd()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.odd(x, {(1, 2): x})

    _run(Wrap(), (torch.ones(2),), write_config(replay=True), backend=None)
    mods = _by_module(_replay_file(str(tmp_path / "dump"), 0))
    assert mods["odd"]["verdict"] == "not judged" and "dict with tuple keys" in mods["odd"]["reason"]


# ---------------------------------------------------------------- transformers


def test_transformers_llama_graph_only_fault(write_config, tmp_path) -> None:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = transformers.LlamaModel(transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, attn_implementation="eager")).eval()
    target = model.layers[0].mlp
    faulty = FaultyLinear(target.down_proj.in_features, target.down_proj.out_features, bias=False)
    faulty.load_state_dict(target.down_proj.state_dict())
    target.down_proj = faulty
    ids = torch.randint(0, 64, (1, 8), generator=torch.Generator().manual_seed(1))
    _run(model, (ids,), write_config(replay=True), backend="aot_eager", kwargs={"use_cache": False})
    mods = _by_module(_replay_file(str(tmp_path / "dump"), 0))
    assert mods["layers.0.mlp.down_proj"]["verdict"] == "creates", mods["layers.0.mlp.down_proj"]
    assert mods["layers.0.mlp.down_proj"]["outputs"][0]["local_error"] == pytest.approx(FAULT - 1, rel=1e-3)
    for path in ("embed_tokens", "layers.0.self_attn.q_proj", "layers.0.self_attn.o_proj",
                 "layers.0.post_attention_layernorm", "layers.0.mlp.gate_proj", "layers.0.mlp.up_proj",
                 "layers.0.mlp.act_fn", "layers.1.input_layernorm", "layers.1.self_attn.q_proj",
                 "layers.1.self_attn", "layers.1.mlp", "layers.1.mlp.down_proj", "norm"):
        assert mods[path]["verdict"] == "inherits", (path, mods[path])
    assert graphprobe.AclGraphDumper._started is not None


class Shared(nn.Module):
    """One Linear called three times per forward, the second call faulty in graph mode only."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.lin(x)
        b = self.lin(a)
        if torch.compiler.is_compiling():
            b = b * FAULT  # in the parent's forward: the Linear's second call is unaffected
        return self.lin(b)


def test_repeated_calls_are_numbered_and_paired(write_config, tmp_path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(Shared())
    _run(model, (torch.randn(2, 8),), write_config(replay=True), backend="aot_eager")
    doc = _replay_file(str(tmp_path / "dump"), 0)
    assert [m["entry"] for m in doc["modules"]] == [
        "Module.0.Shared.forward.0", "Module.0.lin.Linear.forward.0", "Module.0.lin.Linear.forward.1",
        "Module.0.lin.Linear.forward.2"]
    verdicts = [m["verdict"] for m in doc["modules"]]
    # The fault sits between the Linear's calls, in the parent's own code: the parent creates, every call of
    # the Linear inherits (each is replayed on its own graph-mode inputs).
    assert verdicts == ["creates", "inherits", "inherits", "inherits"]


def test_live_switch_off_keeps_nothing(write_config, tmp_path) -> None:
    model = ThreeBlocks()
    dumper = AclGraphDumper(write_config(replay=True))
    dumper.start(model)
    with torch.no_grad():
        dumper.enable(False)
        model(torch.randn(2, 16))
        dumper.step()
        dumper.enable(True)
        model(torch.randn(2, 16))
        dumper.step()
    dumper.stop()
    assert not glob.glob(os.path.join(str(tmp_path / "dump"), "step0", "*", "replay.json"))
    assert len(_replay_file(str(tmp_path / "dump"), 1)["modules"]) == 12


@pytest.mark.parametrize("level", ["L0", "mix"])
def test_dump_json_is_the_same_with_replay(tmp_path, level, read_step) -> None:
    """Replay re-runs modules at step(): nothing of it may reach dump.json
    (the records of both steps equal those of a run without replay)."""
    dumps = {}
    for replay in (False, True):
        torch.manual_seed(0)
        model = ThreeBlocks()
        folder = tmp_path / f"replay{int(replay)}"
        folder.mkdir()
        config = folder / "config.json"
        fields: dict[str, Any] = {"dump_path": str(folder / "dump"), "level": level}
        if replay:
            fields["replay"] = True
        config.write_text(json.dumps(fields))
        dumper = AclGraphDumper(str(config))
        dumper.start(model)
        with torch.no_grad():
            for step in range(2):
                model(torch.randn(2, 16, generator=torch.Generator().manual_seed(step)))
                dumper.step()
        dumper.stop()
        dumps[replay] = [read_step(str(folder / "dump"), step)["data"] for step in range(2)]
    assert dumps[True] == dumps[False]
    assert len(dumps[True][1]) == len(dumps[True][0]) > 0


def test_error_measure_and_floors() -> None:
    from graphprobe.replay.judge import _judge_outputs, floor_of, relative_error

    t = torch.tensor([1.0, 2.0, 2.0])
    b = torch.tensor([1.0, 2.0, 3.0])
    assert relative_error(t, b) == pytest.approx(1.0 / 14 ** 0.5)  # ||(0,0,1)|| / ||(1,2,3)||
    assert relative_error(torch.zeros(3), torch.zeros(3)) == 0.0
    assert relative_error(torch.ones(3), torch.zeros(3)) is None
    nan = float("nan")
    assert relative_error(torch.tensor([nan, 1.0]), torch.tensor([nan, 1.0])) == 0.0
    assert relative_error(torch.tensor([nan, 1.0]), torch.tensor([1.0, 1.0])) is None
    assert relative_error(torch.tensor([1, 2, 3, 4]), torch.tensor([1, 2, 3, 5])) == 0.25
    # The aggregate floors of docs/formats.md ("Noise floor").
    assert (floor_of(torch.float32), floor_of(torch.float16), floor_of(torch.bfloat16), floor_of(torch.float64),
            floor_of(torch.int64)) == (1e-4, 1e-3, 2e-3, 1e-10, 0.0)
    f64 = torch.tensor([1.0, 1.0], dtype=torch.float64)
    # Graph and eager non-finite in different places: no verdict can be given.
    _, verdict, reason = _judge_outputs([torch.tensor([1.0, float("inf")])], [torch.tensor([float("inf"), 1.0])],
                                        [f64], 0.0)
    assert verdict == "not judged" and "non-finite" in reason
    # Graph overflows where eager and float64 do not: graph mode creates it.
    _, verdict, _ = _judge_outputs([torch.tensor([1.0, float("inf")])], [torch.ones(2)], [f64], 0.0)
    assert verdict == "creates"
    # Graph differs from eager but is closer to float64 (another rounding): inherits, with a note.
    rows, verdict, _ = _judge_outputs([torch.tensor([1.0, 1.0])], [torch.tensor([1.0, 1.001])], [f64], 0.0)
    assert verdict == "inherits" and "no further from float64" in rows[0]["note"]


def test_cost_benchmark_runs(tmp_path) -> None:
    """benchmarks/replay_cost.py on the eager path, one round (no timing
    assertion): a subprocess, as the benchmark starts several dumpers."""
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = tmp_path / "replay_cost.md"
    proc = subprocess.run([sys.executable, os.path.join(root, "benchmarks", "replay_cost.py"), "--steps", "1",
                           "--rounds", "1", "--backend", "none", "--out", str(out)], cwd=root, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    text = out.read_text()
    assert "| eager |" in text and "ratio (total per step)" in text


def test_model_built_under_inference_mode(write_config, tmp_path) -> None:
    """Inference tensors have no version counter: their calls are still judged."""
    torch.manual_seed(0)
    with torch.inference_mode():
        model = ThreeBlocks(faulty=0)
    dumper = AclGraphDumper(write_config(replay=True))
    dumper.start(model)
    fn = torch.compile(model, backend="aot_eager", fullgraph=True)
    with torch.inference_mode():
        fn(torch.randn(2, 16))
    dumper.step()
    dumper.stop()
    mods = _by_module(_replay_file(str(tmp_path / "dump"), 0))
    assert mods["blocks.0.proj"]["verdict"] == "creates"
    assert {m["verdict"] for path, m in mods.items() if path not in ("blocks.0", "blocks.0.proj")} == {"inherits"}


class DropsBuffer(nn.Module):
    """Sets a buffer to None after start(): the probe must neither raise nor break the trace."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("scale", torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * (1.0 if self.scale is None else self.scale)


@pytest.mark.parametrize("backend", [None, "aot_eager"])
def test_buffer_set_to_none_after_start(write_config, tmp_path, backend) -> None:
    model = nn.Sequential(DropsBuffer())
    dumper = AclGraphDumper(write_config(replay=True))
    dumper.start(model)
    model[0].scale = None
    fn = model if backend is None else torch.compile(model, backend=backend, fullgraph=True)
    with torch.no_grad():
        fn(torch.randn(2, 4))
    dumper.step()
    dumper.stop()
    mods = _by_module(_replay_file(str(tmp_path / "dump"), 0))
    assert mods["0"]["verdict"] == "inherits" and mods["0.lin"]["verdict"] == "inherits"


def test_forward_replaced_on_the_instance_is_not_run(write_config, tmp_path) -> None:
    """A closure over the original module's forward, set on the instance, is
    copied as itself by deepcopy: replaying the copy would run the original
    module (its float32 weights in the float64 replay, its buffers). Such a
    module (and every module whose tree holds it) is not judged, and the
    original's BatchNorm statistics stay as the graph-mode run left them."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.Linear(8, 8))
    inner = model[1].forward

    def patched(x: torch.Tensor) -> torch.Tensor:
        return inner(x)

    model[1].forward = patched
    bound = nn.Linear(8, 8)
    bound.forward = types.MethodType(nn.Linear.forward, bound)  # bound to the module: deepcopy rebinds it
    model.append(bound)
    _run(model, (torch.randn(4, 8),), write_config(replay=True), backend=None)
    after = {k: v.clone() for k, v in model.state_dict().items()}
    mods = _by_module(_replay_file(str(tmp_path / "dump"), 0))
    assert mods["1"]["verdict"] == "not judged" and "1.forward is replaced on the instance" in mods["1"]["reason"]
    assert mods["0"]["verdict"] == "inherits" and mods["2"]["verdict"] == "inherits"
    assert mods["3"]["verdict"] == "inherits"
    # The refused module was never run by replay: its running statistics saw one batch (the model's own call).
    assert model[1].num_batches_tracked.item() == 1
    assert all(torch.equal(after[k], v) for k, v in model.state_dict().items())

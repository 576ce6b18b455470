"""Wiring never breaks the user's model, and the dumper writes only what its
own compare reads (issue #17, item 10)."""

from __future__ import annotations

import json
import os

import pytest
import torch

import graphprobe
from graphprobe.wiring.probe import MAX_DEPTH


def _nest(x: torch.Tensor, depth: int):
    out = x
    for _ in range(depth):
        out = [out]
    return out


class Deep(torch.nn.Module):
    def __init__(self, depth: int) -> None:
        super().__init__()
        self.depth = depth

    def forward(self, x: torch.Tensor):
        return _nest(x + 1, self.depth), x * 2


def test_deep_outputs_are_cut_at_the_depth_bound_and_compare_reads_them(write_config, read_step, tmp_path):
    x = torch.arange(4.0)
    for depth in (MAX_DEPTH - 1, 300, 5000):  # 5000 once raised RecursionError in the wired forward
        dumper = graphprobe.AclGraphDumper(write_config(level="L0"))
        model = torch.nn.Sequential(Deep(depth))
        dumper.start(model)
        out = model(x)
        dumper.step()
        dumper.stop()
        assert torch.equal(out[1], x * 2)
        data = read_step(str(tmp_path / "dump"), 0)["data"]
        rec = data["Module.0.Deep.forward.0"]["output"]
        assert rec[1]["Max"] == 6.0  # the shallow tensor is still recorded
        node, levels = rec[0], 1
        while isinstance(node, list):
            node, levels = node[0], levels + 1
        if depth < MAX_DEPTH:
            assert node["type"] == "torch.Tensor" and node["Max"] == 4.0
        else:
            assert node == {"type": "list"}  # cut: recorded by type, nothing probed below
            assert levels == MAX_DEPTH
        # the dumper's own compare reads what it wrote
        from graphprobe.compare import compare

        run = compare(tmp_path / "dump" / "step0", tmp_path / "dump" / "step0", tmp_path / f"cmp{depth}",
                      html=False, progress=False)
        assert run.outcomes[0].error is None, run.outcomes[0].error
        (tmp_path / "dump").rename(tmp_path / f"dump{depth}")


def test_lone_surrogates_in_names_and_values_do_not_break_the_model(write_config, read_step, tmp_path):
    class Named(torch.nn.Module):
        def forward(self, x, tag="ok"):
            return x + 1

    model = torch.nn.Module()
    model.add_module("bad\udc80name", Named())
    model.forward = lambda x: model.get_submodule("bad\udc80name")(x, tag="t\ud800")
    dumper = graphprobe.AclGraphDumper(write_config(level="L0"))
    dumper.start(model)
    out = model(torch.zeros(2))
    dumper.step()
    dumper.stop()
    assert torch.equal(out, torch.ones(2))
    data = read_step(str(tmp_path / "dump"), 0)["data"]
    (name,) = data
    assert name == "Module.bad\\udc80name.Named.forward.0"
    assert data[name]["input_kwargs"]["tag"] == {"type": "str", "value": "t\\ud800"}
    json.dumps(data)  # plain UTF-8 all through


def test_a_wired_model_runs_on_fake_and_meta_tensors_without_recording(write_config, read_step, tmp_path):
    """Eager probes go straight to the engine only for plain CPU/CUDA tensors;
    fake and meta tensors (shape inference, meta-device init) take the op,
    whose fake kernel records nothing."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())
    dumper = graphprobe.AclGraphDumper(write_config(level="mix"))
    dumper.start(model)
    with FakeTensorMode(allow_non_fake_inputs=True) as fake:
        out = model(fake.from_tensor(torch.ones(2, 3)))
    assert out.shape == (2, 3)
    meta = torch.nn.Sequential(torch.nn.Linear(3, 3, device="meta"))
    dumper.stop()
    dumper = graphprobe.AclGraphDumper(write_config(level="L0"))
    dumper.start(meta)
    assert meta(torch.ones(2, 3, device="meta")).is_meta
    dumper.step()
    model(torch.ones(2, 3))  # not wired any more: nothing recorded
    dumper.stop()
    graphprobe.flush()
    assert not (tmp_path / "dump" / "step0").exists()  # a step that recorded nothing writes no folder


def test_api_calls_inside_vmap_do_not_break_the_model(write_config, read_step, tmp_path):
    """transformers builds attention masks with torch.vmap: a probe there sees
    one example of a batched tensor. The model must run; such calls are not
    recorded (eager and compiled alike), and the calls outside are."""

    class Masked(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            mask = torch.vmap(lambda row: torch.sigmoid(row) > 0.5)(x)
            return torch.tanh(x) * mask

    x = torch.randn(3, 4)
    for backend in ("eager", "aot_eager"):
        torch._dynamo.reset()
        model = Masked()
        dumper = graphprobe.AclGraphDumper(write_config(level="L1", dump_path=str(tmp_path / backend)))
        dumper.start(model)
        runner = model if backend == "eager" else torch.compile(model, backend=backend, fullgraph=True)
        out = runner(x)
        dumper.step()
        dumper.stop()
        assert torch.equal(out, torch.tanh(x) * (torch.sigmoid(x) > 0.5))
        data = read_step(str(tmp_path / backend), 0)["data"]
        assert list(data) == ["Torch.tanh.0.forward", "Tensor.__mul__.0.forward"], backend


def test_acl_save_inside_vmap_says_what_to_do(tmp_path):
    import pytest

    with pytest.raises(RuntimeError, match="inside torch.vmap"):
        torch.vmap(lambda row: graphprobe.acl_save(row, str(tmp_path / "x.pt")))(torch.ones(2, 3))
    graphprobe.flush()
    assert list(tmp_path.iterdir()) == []


class Recursive(torch.nn.Module):
    """A child module that calls itself: two open calls of one entry, nested."""

    def __init__(self) -> None:
        super().__init__()
        self.r = _Again()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.r(x, 1)


class _Again(torch.nn.Module):
    def forward(self, x: torch.Tensor, depth: int) -> torch.Tensor:
        if depth:
            x = self(x * 3, depth - 1)
        return x + 1


@pytest.mark.parametrize("compiled", [False, True])
def test_two_nested_open_calls_of_one_entry_close_latest_first(compiled, write_config, read_step, tmp_path):
    """Issue 28, call pairing: an output closes the latest open call of its
    entry. The outer call (n=0) sees x and returns 3x + 2; the inner (n=1)
    sees 3x and returns 3x + 1."""
    model = Recursive()
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    run = torch.compile(model, backend="aot_eager") if compiled else model
    x = torch.linspace(1.0, 2.0, 6)
    run(x)
    dumper.step()
    data = read_step(str(tmp_path / "dump"), 0)["data"]
    dumper.stop()
    x64 = x.double()
    want = {  # entry -> (input, output), float64
        "Module.r._Again.forward.0": (x64, 3 * x64 + 2),
        "Module.r._Again.forward.1": (3 * x64, 3 * x64 + 1),
    }
    assert list(data) == ["Module.r._Again.forward.1", "Module.r._Again.forward.0"]  # inner ends first
    for entry, (inp, out) in want.items():
        got_in, got_out = data[entry]["input_args"][0], data[entry]["output"][0]
        assert got_in["Max"] == pytest.approx(inp.max().item(), rel=1e-6), entry
        assert got_out["Max"] == pytest.approx(out.max().item(), rel=1e-6), entry
        assert got_out["Min"] == pytest.approx(out.min().item(), rel=1e-6), entry


def test_stop_leaves_a_forward_the_user_assigned_after_start(write_config, read_step, tmp_path):
    """Issue 25, item 7: stop() undoes what start() changed, not the
    compiled forward the user put on the model afterwards."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    dumper = graphprobe.AclGraphDumper(write_config(level="L1"))
    dumper.start(model)
    compiled = torch.compile(model.forward, backend="aot_eager")
    model.forward = compiled
    x = torch.randn(2, 4)
    want = torch.relu(x.double() @ model[0].weight.double().T + model[0].bias.double())
    model(x)
    dumper.step()
    assert "Functional.linear.0.forward" in read_step(str(tmp_path / "dump"), 0)["data"]
    dumper.stop()
    assert model.forward is compiled  # still the user's compiled forward
    torch._dynamo.utils.counters.clear()
    out = model(x)
    assert torch._dynamo.utils.counters["stats"]["calls_captured"] > 0  # ran compiled, not eager
    assert torch.allclose(out.double(), want, rtol=1e-5, atol=1e-6)
    graphprobe.flush()
    assert sorted(os.listdir(tmp_path / "dump")) == ["step0"]


class _IntOnly(torch.nn.Module):
    def forward(self, n: int) -> int:
        return n + 1


class _OnlyDeepTensor(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> int:
        return 3


class NoTensorCalls(torch.nn.Module):
    """Issue 28, D8: a call with no tensor (int in, int out) and one whose
    only tensor lies deeper than MAX_DEPTH."""

    def __init__(self) -> None:
        super().__init__()
        self.deep = _OnlyDeepTensor()
        self.count = _IntOnly()
        self.fc = torch.nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = self.count(self.deep(_nest(x, MAX_DEPTH + 4)))
        return self.fc(x) * n


@pytest.mark.parametrize("task", ["statistics", "tensor"])
@pytest.mark.parametrize("compiled", [False, True])
def test_calls_without_a_recorded_tensor_are_written(compiled, task, write_config, read_step, tmp_path):
    model = NoTensorCalls()
    dumper = graphprobe.AclGraphDumper(write_config(task=task))
    dumper.start(model)
    run = torch.compile(model, backend="aot_eager") if compiled else model
    run(torch.ones(1, 2))
    dumper.step()
    data = read_step(str(tmp_path / "dump"), 0)["data"]
    dumper.stop()
    assert list(data) == ["Module.deep._OnlyDeepTensor.forward.0", "Module.count._IntOnly.forward.0",
                          "Module.fc.Linear.forward.0"]
    assert data["Module.count._IntOnly.forward.0"] == {
        "input_args": [{"type": "int", "value": 3}], "input_kwargs": {}, "output": [{"type": "int", "value": 4}],
        "parameters": {}}
    deep = data["Module.deep._OnlyDeepTensor.forward.0"]
    assert deep["output"] == [{"type": "int", "value": 3}]
    levels, value = 0, deep["input_args"][0]
    while isinstance(value, list):
        levels, value = levels + 1, value[0]
    assert levels == MAX_DEPTH - 1 and value == {"type": "list"}  # cut at the bound, as documented
    if task == "tensor":  # no tensor file for the markers, and the Linear's files are there
        (folder,) = [p for p in (tmp_path / "dump" / "step0").iterdir()]
        names = sorted(os.listdir(folder / "dump_tensor_data"))
        assert names and all(n.startswith("Module.fc.Linear.forward.0.") for n in names)

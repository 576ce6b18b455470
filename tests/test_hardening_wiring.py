"""Issue 36: probes must not break the user's program (functorch transforms,
output containers, custom_api targets, repeated backward passes).

References are independent of graphprobe: the same computation on an
unwired copy of the model, in float64.
"""

from __future__ import annotations

import copy
import json
import warnings
from typing import Any

import pytest
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn as nn
from torch.func import functional_call, grad, jacrev, vmap
from torch.utils._pytree import tree_leaves

from graphprobe import AclGraphDumper


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 8)
        self.act = nn.Tanh()
        self.b = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.act(self.a(x)))


def _start(write_config, model: nn.Module, **fields: Any) -> AclGraphDumper:
    dumper = AclGraphDumper(write_config(**fields))
    dumper.start(model)
    return dumper


def _transforms(model: nn.Module, x: torch.Tensor, tangent: torch.Tensor) -> dict[str, Any]:
    """Gradient, per-sample gradients, Jacobian and a forward-mode tangent
    of ``model`` at ``x``, by torch.func and torch.autograd.forward_ad."""
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p: dict[str, torch.Tensor], xb: torch.Tensor) -> torch.Tensor:
        return functional_call(model, p, (xb,)).pow(2).sum()

    out: dict[str, Any] = {
        "grad": grad(loss)(params, x),
        "vmap(grad)": vmap(grad(loss), in_dims=(None, 0))(params, x.unsqueeze(1)),
        "jacrev": jacrev(model)(x),
    }
    with fwAD.dual_level():
        out["forward_ad"] = fwAD.unpack_dual(model(fwAD.make_dual(x, tangent))).tangent
    return out


@pytest.mark.parametrize("level", ["L0", "mix"])
def test_functorch_transforms_and_forward_ad_on_a_wired_model_equal_the_unwired(write_config, level):
    # Before: the gradient probe had no setup_context / jvp, so each raised.
    torch.manual_seed(0)
    model = Net().double()
    reference = copy.deepcopy(model)
    x = torch.randn(5, 4, dtype=torch.float64)
    tangent = torch.randn_like(x)
    expected = _transforms(reference, x, tangent)
    dumper = _start(write_config, model, level=level)  # data_mode: the default, all
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message="graphprobe")
            got = _transforms(model, x, tangent)
    finally:
        dumper.step()
        dumper.stop()
    for name in expected:
        for g, e in zip(tree_leaves(got[name]), tree_leaves(expected[name]), strict=True):
            assert torch.equal(g, e), name


class Pair(tuple):
    """A tuple whose constructor takes its fields as arguments."""

    def __new__(cls, a: torch.Tensor, b: torch.Tensor) -> Pair:
        return super().__new__(cls, (a, b))


class Frozen(dict):
    """A dict that refuses item assignment."""

    def __setitem__(self, key: Any, value: Any) -> None:
        raise TypeError("Frozen is read-only")


class ReturnsPair(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> Pair:
        y = self.lin(x)
        return Pair(y, y * 2)


class ReturnsFrozen(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> Frozen:
        y = self.lin(x)
        return Frozen(a=y, b=[y + 1])


class ContainerNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pair = ReturnsPair()
        self.frozen = ReturnsFrozen()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.pair(x)
        d = self.frozen(a * b)
        return d["a"] + d["b"][0]


@pytest.mark.parametrize("backend", [None, "aot_eager"])
def test_outputs_that_cannot_be_rebuilt_are_left_unprobed_with_one_warning(write_config, read_step, tmp_path, backend):
    # Before: rebuilding the output with probed tensors raised TypeError in the forward.
    torch.manual_seed(0)
    model = ContainerNet().double()
    reference = copy.deepcopy(model)
    x = torch.randn(3, 4, dtype=torch.float64)
    dumper = _start(write_config, model, level="L0")
    run = model if backend is None else torch.compile(model, backend=backend)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(2):
                model.zero_grad()
                out = run(x)
                out.sum().backward()
    finally:
        dumper.step()
        dumper.stop()
    expected = reference(x)
    expected.sum().backward()
    assert torch.equal(out, expected)
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        assert torch.equal(p.grad, q.grad), name
    texts = [str(w.message) for w in caught if "cannot be rebuilt" in str(w.message)]
    assert len([t for t in texts if "Module.pair.ReturnsPair" in t and "Pair" in t]) == 1, texts
    assert len([t for t in texts if "Module.frozen.ReturnsFrozen" in t and "Frozen" in t]) == 1, texts
    data = read_step(str(tmp_path / "dump"), 0)["data"]
    # The inner Linear layers are still probed, their gradients recorded.
    assert data["Module.pair.lin.Linear.backward.0"]["input"]
    assert data["Module.frozen.lin.Linear.backward.0"]["input"]


def test_custom_api_naming_a_class_is_refused_at_start_and_isinstance_keeps_working(write_config):
    # Before: torch.nn.Linear was replaced by a function, and isinstance(m, torch.nn.Linear) raised until stop().
    from graphprobe.wiring.custom_api import CustomApiError

    original = torch.nn.Linear
    model = Net()
    dumper = AclGraphDumper(write_config(task="tensor", tensor={"custom_api": ["torch.nn.Linear"]}))
    with pytest.raises(CustomApiError) as info:
        dumper.start(model)
    text = str(info.value)
    assert "tensor.custom_api[0]" in text and "'torch.nn.Linear'" in text, text
    assert "class torch.nn.modules.linear.Linear" in text and "function or method" in text, text
    assert torch.nn.Linear is original and isinstance(model.a, torch.nn.Linear)
    assert not model.a._forward_pre_hooks  # nothing wired


def test_tensor_task_stop_without_step_leaves_no_failure_for_the_next_dumper(write_config, tmp_path):
    # Before: stop() removed the staging folder while the writer still held the forward's staged tensors;
    # their failed writes were raised by the next dumper's correct step(), naming the first dumper's files.
    import os

    import graphprobe

    torch.manual_seed(0)
    model = Net()
    busy = torch.zeros(16 << 20)  # 64 MiB per file: the writer is still busy when stop() comes
    first = AclGraphDumper(write_config(task="tensor", dump_path=str(tmp_path / "first")))
    first.start(model)
    for i in range(4):
        graphprobe.acl_save(busy, str(tmp_path / "busy" / f"b{i}.pt"))
    model(torch.randn(3, 4))  # staged tensors queued behind the saves
    with pytest.warns(RuntimeWarning, match="never written"):
        first.stop()  # no step(): the records are dropped, with a warning
    assert not [p for p in os.listdir(tmp_path / "first") if p.startswith(".staging")]
    second = AclGraphDumper(write_config(task="tensor", dump_path=str(tmp_path / "second")))
    second.start(model)
    try:
        model(torch.randn(3, 4))
        second.step()
        second.flush()
    finally:
        second.stop()
    graphprobe.flush()  # nothing left over either
    assert sorted(os.listdir(tmp_path / "busy")) == [f"b{i}_0.pt" for i in range(4)]
    (proc,) = os.listdir(tmp_path / "second" / "step0")
    assert os.listdir(tmp_path / "second" / "step0" / proc / "dump_tensor_data")


class AsksIfCompiling(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        for _ in range(3):
            if torch.compiler.is_compiling():
                h = h * 2
        return self.b(torch.relu(h))


@pytest.mark.parametrize("level", ["L0", "mix"])
def test_custom_api_records_only_the_calls_of_user_code(write_config, read_step, tmp_path, level, monkeypatch):
    # Before: with torch.compiler.is_compiling in tensor.custom_api, the calls made by graphprobe's own hooks
    # and probes were recorded too (93 records at mix for 3 calls of the user).
    import os
    import sys

    package = os.path.dirname(sys.modules["graphprobe"].__file__) + os.sep
    torch_dir = os.path.dirname(torch.__file__) + os.sep
    user_calls = 0
    original = torch.compiler.is_compiling

    def spy() -> bool:
        """Counts the calls whose nearest caller outside torch (and outside
        the custom_api wrapper, which calls this spy) is not graphprobe."""
        nonlocal user_calls
        frame = sys._getframe(1)
        while frame is not None and (frame.f_code.co_filename.startswith(torch_dir)
                                     or frame.f_code.co_name == "wrapped"):
            frame = frame.f_back
        if frame is not None and not frame.f_code.co_filename.startswith(package):
            user_calls += 1
        return original()

    monkeypatch.setattr(torch.compiler, "is_compiling", spy)  # graphprobe wraps the spy
    model = AsksIfCompiling()
    dumper = _start(write_config, model, task="tensor", level=level,
                    tensor={"custom_api": ["torch.compiler.is_compiling"], "layout": "dump_json"})
    try:
        model(torch.randn(2, 4, requires_grad=True)).sum().backward()
        dumper.step()
    finally:
        dumper.stop()
    data = read_step(str(tmp_path / "dump"), 0)["data"]
    recorded = [k for k in data if k.startswith("is_compiling.")]
    assert user_calls >= 3
    assert len(recorded) == user_calls, (user_calls, recorded)


@pytest.mark.parametrize("backend", [None, "aot_eager"])
def test_a_second_backward_pass_over_one_forward_call_is_named_as_a_repeated_pass(write_config, read_step, tmp_path,
                                                                                 backend):
    # Before: the second pass of backward(retain_graph=True) was written backward.1, the name of forward.1's
    # gradients (docs/formats.md), for a forward.1 that did not exist.
    from reference import assert_stats_close, stats64

    torch.manual_seed(0)
    model = Net()
    reference = copy.deepcopy(model)
    xs = [torch.randn(3, 4) for _ in range(2)]
    dumper = _start(write_config, model, level="L0")
    run = model if backend is None else torch.compile(model, backend=backend)
    try:
        for x in xs:  # two iterations in one step: forward, backward twice over it
            out = run(x)
            out.sum().backward(retain_graph=True)
            out.pow(2).sum().backward()
        dumper.step()
    finally:
        dumper.stop()
    data = read_step(str(tmp_path / "dump"), 0)["data"]
    names = [k for k in data if k.startswith("Module.b.")]
    assert names == ["Module.b.Linear.forward.0", "Module.b.Linear.backward.0", "Module.b.Linear.backward_pass1.0",
                     "Module.b.Linear.forward.1", "Module.b.Linear.backward.1", "Module.b.Linear.backward_pass1.1",
                     "Module.b.Linear.parameters_grad.0"], names
    for n, x in enumerate(xs):
        out = reference(x).double()
        # The gradients arriving at b's output: of sum() (ones), then of pow(2).sum() (2 * out).
        assert_stats_close(data[f"Module.b.Linear.backward.{n}"]["input"][0], stats64(torch.ones_like(out)), 1e-6,
                           f"backward.{n}")
        assert_stats_close(data[f"Module.b.Linear.backward_pass1.{n}"]["input"][0], stats64(2 * out), 1e-6,
                           f"backward_pass1.{n}")


_SAVE_WITHOUT_RUNTIME = r"""
import glob, json, os, sys, warnings
sys.path.insert(0, {tests!r})
import torch
import graphprobe
from torch.utils import cpp_extension
import fake_npu
# The fake PrivateUse1 device, renamed "npu", WITHOUT registering its runtime
# with graphprobe: a PrivateUse1 backend other than Ascend's.
real_load = cpp_extension.load
class NoRuntime:
    def __init__(self, ext):
        self._ext = ext
    def __getattr__(self, name):
        return getattr(self._ext, name)
    def register_runtime(self, registrar):
        pass
cpp_extension.load = lambda *a, **k: NoRuntime(real_load(*a, **k))
fake_npu.load()
out = sys.argv[1]
x = torch.linspace(-3, 5, 12).reshape(3, 4)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    graphprobe.acl_save(x.to("npu"), os.path.join(out, "act.pt"))
    graphprobe.acl_save((x * 2).to("npu"), os.path.join(out, "act.pt"))
    cfg = out + ".json"
    json.dump({{"dump_path": os.path.join(out, "dump")}}, open(cfg, "w"))
    model = torch.nn.Sequential(torch.nn.Identity())
    dumper = graphprobe.AclGraphDumper(cfg)
    dumper.start(model)
    model(x.to("npu"))  # a probe on the same device: no second warning
    dumper.step()
    dumper.stop()
graphprobe.flush()
print(json.dumps([str(w.message) for w in caught]))
"""


def test_acl_save_on_a_privateuse1_device_without_runtime_saves_from_a_host_copy(tmp_path):
    # Before: acl_save refused the tensor ("no device runtime is registered"), although probes on the same
    # device record from a host copy.
    import os
    import subprocess
    import sys

    tests = os.path.dirname(os.path.abspath(__file__))
    script = tmp_path / "save_no_runtime.py"
    script.write_text(_SAVE_WITHOUT_RUNTIME.format(tests=tests))
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.strip().splitlines()[-1]) + done.stderr.splitlines()
    assert len([w for w in said if "has no graphprobe runtime" in w]) == 1, said
    x = torch.linspace(-3, 5, 12).reshape(3, 4)
    for n, want in enumerate([x, x * 2]):
        got = torch.load(out / f"act_{n}.pt", weights_only=True)
        assert got.device.type == "cpu" and torch.equal(got, want)


class Einsum(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(3, 4))

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return torch.einsum("ij,jk->ik", [a, self.w])


def test_l1_backward_of_an_api_taking_a_list_of_tensors_gives_each_item_its_slot(write_config, read_step, tmp_path):
    """docs/formats.md: ``output`` has one slot per argument position, each
    tensor of a list argument a slot of its own; the equation's slot and the
    list's first tensor (no gradient) are null, the second holds its
    gradient."""
    from reference import assert_stats_close, stats64

    torch.manual_seed(0)
    model = Einsum()
    a = torch.randn(2, 3)
    dumper = _start(write_config, model, level="L1")
    try:
        model(a).sum().backward()
        dumper.step()
    finally:
        dumper.stop()
    record = read_step(str(tmp_path / "dump"), 0)["data"]["Torch.einsum.0.backward"]
    w = model.w.detach().double().requires_grad_(True)
    torch.einsum("ij,jk->ik", [a.double(), w]).sum().backward()
    assert record["output"][:2] == [None, None] and len(record["output"]) == 3, record["output"]
    assert record["output"][2]["shape"] == [3, 4]
    assert_stats_close(record["output"][2], stats64(w.grad), 1e-6, "d einsum / d w")
    assert_stats_close(record["input"][0], stats64(torch.ones(2, 4)), 1e-6, "d sum / d out")


class Small(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.lin(x))


@pytest.mark.parametrize("level", ["L0", "L1"])
def test_data_mode_backward_alone_records_the_backward_records(write_config, read_step, tmp_path, level):
    """``statistics.data_mode: ["backward"]`` keeps the backward records
    (dropping "backward" from the filter would lose them), with gradients
    equal to float64 autograd's."""
    from reference import assert_stats_close, stats64

    torch.manual_seed(0)
    model = Small()
    reference = copy.deepcopy(model).double()
    x = torch.randn(2, 4)
    dumper = _start(write_config, model, level=level, statistics={"data_mode": ["backward"]})
    try:
        model(x).sum().backward()
        dumper.step()
    finally:
        dumper.stop()
    data = read_step(str(tmp_path / "dump"), 0)["data"]
    backward = [k for k in data if "backward" in k]
    name = "Module.lin.Linear.backward.0" if level == "L0" else "Functional.linear.0.backward"
    assert name in backward, list(data)
    out = reference.lin(x.double())
    out.retain_grad()
    torch.tanh(out).sum().backward()
    assert_stats_close(data[name]["input"][0], stats64(out.grad), 1e-6, f"{name} input")

"""L0 statistics: eager and torch.compile against an independent float64 reference."""

from __future__ import annotations

import copy
import math
import os

import pytest
import torch
from dtype_sweep import FLOAT_BLOCK_TOL  # the kernels' float32-block precision (docs/formats.md)
from models import make_transformer
from reference import ReferenceRecorder, assert_stats_close, flatten_dump

import graphprobe
from graphprobe.dumper import DumperStateError
from graphprobe.wiring.probe import probe_output

STEPS = 3


def _run_steps(model, dumper, ref_model, recorder, compiled: bool):
    refs = []
    runner = torch.compile(model, fullgraph=True) if compiled else model
    for step in range(STEPS):
        tokens = torch.randint(0, 64, (2, 5 + 0 * step), generator=torch.Generator().manual_seed(step))
        with torch.no_grad():
            runner(tokens)
            dumper.step()
            recorder.reset()
            ref_model(tokens)
        refs.append(dict(recorder.entries))
    return refs


def _check_against_reference(dump_path, refs, read_step, rtol):
    names = None
    for step, ref in enumerate(refs):
        data = flatten_dump(read_step(dump_path, step)["data"])
        assert list(data) == list(ref), f"step {step}: entry names/order differ from the reference"
        for entry, places in ref.items():
            assert set(data[entry]) == {k for k in places}, f"{entry}: recorded places differ"
            for place, want in places.items():
                got = data[entry][place]
                assert got["shape"] == want["shape"]
                assert_stats_close(got, want, rtol, f"step {step} {entry} {place}")
        names = list(data)
    return names


def test_eager_and_compiled_match_float64_reference(write_config, read_step, tmp_path):
    base = make_transformer()
    ref_model = copy.deepcopy(base)
    recorder = ReferenceRecorder(ref_model)

    eager_cfg = write_config(dump_path=str(tmp_path / "eager"))
    eager = copy.deepcopy(base)
    dumper = graphprobe.AclGraphDumper(eager_cfg)
    dumper.start(eager)
    refs = _run_steps(eager, dumper, ref_model, recorder, compiled=False)
    dumper.stop()
    eager_names = _check_against_reference(str(tmp_path / "eager"), refs, read_step, rtol=FLOAT_BLOCK_TOL)

    torch._dynamo.utils.counters.clear()
    compiled_cfg = write_config(dump_path=str(tmp_path / "compiled"))
    compiled = copy.deepcopy(base)
    dumper = graphprobe.AclGraphDumper(compiled_cfg)
    dumper.start(compiled)
    with torch._dynamo.config.patch(error_on_recompile=True):
        refs = _run_steps(compiled, dumper, ref_model, recorder, compiled=True)
    dumper.stop()
    assert sum(torch._dynamo.utils.counters["graph_break"].values()) == 0
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1
    compiled_names = _check_against_reference(str(tmp_path / "compiled"), refs, read_step, rtol=1e-5)
    assert compiled_names == eager_names
    # One module is called twice per forward: two records in call order.
    assert "Module.norm.LayerNorm.forward.0" in eager_names
    assert "Module.norm.LayerNorm.forward.1" in eager_names
    assert "Module.layers.0.attn.SelfAttention.forward.0" in eager_names
    assert not any(n.startswith("Module.DemoTransformer") for n in eager_names), "the root is not listed"


def test_probe_survives_dead_code_elimination(write_config, read_step, tmp_path):
    class Discard(torch.nn.Module):
        def forward(self, x):
            probe_output("Probe.discarded.{n}", x * 3)
            return x + 1

    model = torch.nn.Sequential(Discard())
    dumper = graphprobe.AclGraphDumper(write_config(statistics={"list": ["nothing-matches"]}))
    dumper.start(model)
    compiled = torch.compile(model, fullgraph=True)
    x = torch.arange(4.0)
    compiled(x)
    dumper.step()
    dumper.stop()
    data = read_step(str(tmp_path / "dump"), 0)["data"]
    assert list(data) == ["Probe.discarded.0"]
    rec = data["Probe.discarded.0"]["output"][0]
    assert (rec["Max"], rec["Min"], rec["Mean"]) == (9.0, 0.0, 4.5)
    assert rec["Norm"] == pytest.approx(math.sqrt(0 + 9 + 36 + 81), rel=1e-12)


class Passthrough(torch.nn.Module):
    def forward(self, *args, **kwargs):
        return args[0]


class Mixed(torch.nn.Module):
    """Feeds one module every kind of tensor the dump must describe."""

    def __init__(self) -> None:
        super().__init__()
        self.sink = Passthrough()

    def forward(self, x):
        special = torch.tensor([1.0, float("nan"), 2.0])
        infs = torch.tensor([float("inf"), -1.0, 3.0])
        self.sink(
            x.to(torch.bfloat16),
            x.to(torch.float16),
            (x * 100).to(torch.int64),
            x > 0,
            torch.empty(0, 3),
            special,
            infs,
            torch.tensor(7.5),
            3,
            scale=0.5,
            flag=True,
            pair=[x, None],
        )
        return x


def test_dtypes_empty_and_non_finite_values(write_config, read_step, tmp_path):
    model = Mixed()
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    x = torch.tensor([[0.5, -1.25], [3.0, 0.0]])
    model(x)
    dumper.step()
    dumper.stop()
    text = open(next((tmp_path / "dump" / "step0").iterdir()) / "dump.json").read()
    assert "NaN" in text and "Infinity" in text
    entry = read_step(str(tmp_path / "dump"), 0)["data"]["Module.sink.Passthrough.forward.0"]
    args = entry["input_args"]
    bf16, f16, i64, b, empty, special, infs, scalar, three = args
    assert bf16["dtype"] == "torch.bfloat16" and f16["dtype"] == "torch.float16"
    for rec in (bf16, f16):
        assert (rec["Max"], rec["Min"]) == (3.0, -1.25)
        assert rec["Mean"] == pytest.approx(0.5625, rel=1e-12)
        assert rec["Norm"] == pytest.approx(math.sqrt(0.25 + 1.5625 + 9), rel=1e-12)
    assert i64 == {**i64, "dtype": "torch.int64", "Max": 300, "Min": -125}
    assert isinstance(i64["Max"], int)
    assert b["dtype"] == "torch.bool" and b["Max"] is True and b["Min"] is False
    assert b["Mean"] is None and b["Norm"] is None
    assert empty["shape"] == [0, 3] and empty["Max"] is None and empty["Norm"] is None
    assert all(math.isnan(special[k]) for k in ("Max", "Min", "Mean", "Norm"))
    assert infs["Max"] == math.inf and infs["Min"] == -1.0 and infs["Norm"] == math.inf
    assert scalar["shape"] == [] and scalar["Max"] == 7.5
    assert three == {"type": "int", "value": 3}
    kwargs = entry["input_kwargs"]
    assert kwargs["scale"] == {"type": "float", "value": 0.5}
    assert kwargs["flag"] == {"type": "bool", "value": True}
    assert kwargs["pair"][0]["shape"] == [2, 2]
    assert kwargs["pair"][1] is None  # msprobe writes None as null


class Branchy(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(2, 2)
        self.b = torch.nn.Linear(2, 2)

    def forward(self, x, use_b: bool):
        return self.b(x) if use_b else self.a(x)


def test_step_protocol_stale_records_and_discard(write_config, read_step, tmp_path):
    model = Branchy()
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    x = torch.ones(1, 2)
    model(x, use_b=False)
    dumper.step(dump=False)  # warm-up: discarded, N stays 0
    assert dumper.step_number == 0
    model(x, use_b=True)
    dumper.step()
    model(x, use_b=False)
    model(x, use_b=False)
    dumper.step()
    dumper.stop()
    assert list(read_step(str(tmp_path / "dump"), 0)["data"]) == ["Module.b.Linear.forward.0"]
    assert list(read_step(str(tmp_path / "dump"), 1)["data"]) == ["Module.a.Linear.forward.0", "Module.a.Linear.forward.1"]
    assert not (tmp_path / "dump" / "step2").exists()


def test_list_filter_and_stop_removes_wiring(write_config, read_step, tmp_path):
    model = make_transformer()
    # Substrings of "{path}.{Class}", case-insensitive: "mlp" also selects mlp.up.
    dumper = graphprobe.AclGraphDumper(write_config(statistics={"list": ["MLP", "attn.QKV"]}))
    dumper.start(model)
    with torch.no_grad():
        model(torch.randint(0, 64, (1, 3)))
    dumper.step()
    names = list(read_step(str(tmp_path / "dump"), 0)["data"])
    expected = []
    for i in range(2):
        expected += [
            f"Module.layers.{i}.attn.qkv.Linear.forward.0",
            f"Module.layers.{i}.mlp.up.Linear.forward.0",
            f"Module.layers.{i}.mlp.act.GELU.forward.0",
            f"Module.layers.{i}.mlp.down.Linear.forward.0",
            f"Module.layers.{i}.mlp.FeedForward.forward.0",  # listed when it completes, after its children
        ]
    assert names == expected
    dumper.stop()
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())
    with pytest.raises(DumperStateError, match="already called"):
        dumper.start(model)


def test_pid_folder_and_second_dumper(write_config, tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    first = graphprobe.AclGraphDumper(write_config())
    first.start(model)
    with pytest.raises(DumperStateError, match="another AclGraphDumper"):
        graphprobe.AclGraphDumper(write_config()).start(torch.nn.Sequential(torch.nn.ReLU()))
    model(torch.ones(1, 2))
    first.step()
    first.stop()
    assert os.listdir(tmp_path / "dump" / "step0") == [f"pid{os.getpid()}"]


def test_step_without_start_raises_and_writes_nothing(write_config, tmp_path):
    with pytest.raises(DumperStateError):
        graphprobe.AclGraphDumper(write_config()).step()
    assert not (tmp_path / "dump").exists()


def test_compiled_unwired_twin_does_not_hide_the_probes(write_config, read_step, tmp_path, hook_guards_off):
    # Same class, compiled once unwired: without hook guards dynamo would
    # reuse that code for the wired instance and record nothing.
    plain, wired = make_transformer(), make_transformer()
    tokens = torch.randint(0, 64, (1, 4))
    with torch.no_grad():
        torch.compile(plain, backend="aot_eager")(tokens)
        dumper = graphprobe.AclGraphDumper(write_config())
        with pytest.warns(RuntimeWarning, match="compiled before start"):
            dumper.start(wired)
        torch.compile(wired, backend="aot_eager")(tokens)
        dumper.step()
        dumper.stop()
    assert len(read_step(str(tmp_path / "dump"), 0)["data"]) == 24


def test_reused_slot_describes_its_latest_call(write_config, read_step, tmp_path):
    # Eager slots are reused across steps; shapes and non-tensor arguments of
    # the latest call must show, not those of the first.
    class Wrapper(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = Passthrough()

        def forward(self, x, scale):
            return self.inner(x, scale=scale)

    model = Wrapper()
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    model(torch.ones(2), scale=1)
    dumper.step()
    model(torch.ones(3, 4, requires_grad=True), scale=2)
    dumper.step()
    dumper.stop()
    entry = read_step(str(tmp_path / "dump"), 1)["data"]["Module.inner.Passthrough.forward.0"]
    assert entry["input_args"][0]["shape"] == [3, 4] and entry["input_args"][0]["requires_grad"] is True
    assert entry["input_kwargs"]["scale"] == {"type": "int", "value": 2}


@pytest.mark.parametrize("compiled", [False, True])
def test_module_records_carry_their_own_parameters(compiled, write_config, read_step, tmp_path):
    """msprobe's `parameters` part: the module's own weights (not its children's),
    float64-exact statistics, `{}` for a module without parameters."""
    from reference import stats64

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Sequential(torch.nn.Linear(3, 2)))
    dumper = graphprobe.AclGraphDumper(write_config(level="L0"))
    dumper.start(model)
    runner = torch.compile(model, backend="aot_eager", fullgraph=True) if compiled else model
    with torch.no_grad():
        runner(torch.randn(5, 4))
    dumper.step()
    dumper.stop()
    data = read_step(str(tmp_path / "dump"), 0)["data"]
    assert data["Module.1.ReLU.forward.0"]["parameters"] == {}
    assert data["Module.2.Sequential.forward.0"]["parameters"] == {}
    for name, module in (("Module.0.Linear.forward.0", model[0]), ("Module.2.0.Linear.forward.0", model[2][0])):
        params = data[name]["parameters"]
        assert list(params) == ["weight", "bias"]
        for key, tensor in (("weight", module.weight), ("bias", module.bias)):
            rec = params[key]
            assert rec["shape"] == list(tensor.shape) and rec["requires_grad"] is True
            assert_stats_close(rec, stats64(tensor), 1e-9, f"{name} {key}")


def test_a_probed_pointwise_result_is_stored_once(write_config, read_step, tmp_path):
    """GELU's result is the act module's output, the next Linear's input and
    that Linear's matmul operand. With inductor's default layout rule for a
    custom op every probe got a private copy of it, so the GELU loop stored
    the same values three times; probes take any strides and must cost no
    extra store (csrc/ops/schemas.cpp)."""
    from torch._inductor.utils import run_and_get_code

    from reference import stats64

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.GELU(), torch.nn.Linear(128, 32))
    x = torch.randn(16, 32)

    def compiled_code(m: torch.nn.Module) -> str:
        torch._dynamo.reset()
        with torch.no_grad():
            _, codes = run_and_get_code(torch.compile(m, backend="inductor", fullgraph=True), x)
        return "\n".join(codes)

    plain = compiled_code(copy.deepcopy(model)).count(".store(")
    dumper = graphprobe.AclGraphDumper(write_config(level="L0"))
    dumper.start(model)
    code = compiled_code(model)
    wired, mirrors = code.count(".store("), code.count("graphprobe.record_mirror.default(")
    dumper.step()
    dumper.stop()
    assert plain >= 1 and wired == plain, f"generated code stores {wired} times with L0 probes, {plain} without"
    # GELU's input is the first Linear's output, the second Linear's input is
    # GELU's output: each value is read once (wiring/shared_probes.py).
    assert mirrors == 2, f"{mirrors} record_mirror calls, want 2 (each module's output is the next one's input)"
    with torch.no_grad():
        act = torch.nn.functional.gelu(model[0](x).double())
    data = read_step(str(tmp_path / "dump"), 0)["data"]
    assert_stats_close(data["Module.1.GELU.forward.0"]["output"][0], stats64(act), 1e-5, "GELU output")
    assert_stats_close(data["Module.2.Linear.forward.0"]["input_args"][0], stats64(act), 1e-5, "Linear input")


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_in_place_update_between_two_probes_is_seen_by_the_second(backend, write_config, read_step, tmp_path):
    """A module's output changed in place before the next module reads it:
    inductor's graph holds two values there, so the second probe reads its
    own (no record_mirror): each record has its own float64 reference."""
    from reference import stats64

    class Shift(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.Linear(8, 8)
            self.b = torch.nn.Tanh()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.a(x)
            y.mul_(3.0).add_(1.0)
            return self.b(y)

    torch.manual_seed(0)
    model, x = Shift(), torch.randn(4, 8)
    with torch.no_grad():
        before = torch.nn.functional.linear(x.double(), model.a.weight.double(), model.a.bias.double())
    dumper = graphprobe.AclGraphDumper(write_config(level="L0"))
    dumper.start(model)
    runner = model if backend == "eager" else torch.compile(model, backend=backend, fullgraph=True)
    with torch.no_grad():
        runner(x)
    dumper.step()
    dumper.stop()
    data = read_step(str(tmp_path / "dump"), 0)["data"]
    assert_stats_close(data["Module.a.Linear.forward.0"]["output"][0], stats64(before), 1e-5, "a's output")
    assert_stats_close(data["Module.b.Tanh.forward.0"]["input_args"][0], stats64(before * 3 + 1), 1e-5, "b's input")

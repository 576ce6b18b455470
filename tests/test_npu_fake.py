"""The NPU path (PrivateUse1 kernels, aten-op statistics table, runtime layer)
through the fake device of tests/fake_npu: statistics against a float64
reference computed on CPU copies, acl_save, the tensor task, the live switch,
and an emulated graph capture replayed several times.

The fake device runs aten ops on CPU kernels, so the values the probes see
equal the CPU model's; the NPU statistics accumulate in float32 (the NPU has
no float64), hence the float32 tolerance.
"""

from __future__ import annotations

import copy
import glob
import os
import warnings
from typing import Any

import pytest
import torch
from reference import (
    OPERATOR_NAMES,
    ApiReferenceRecorder,
    ReferenceRecorder,
    assert_dump_matches,
    assert_stats_close,
    flatten_dump,
    stats64,
)

import graphprobe

RTOL = 1e-5  # float32 accumulation


@pytest.fixture(scope="module")
def npu():
    """The fake device's extension (built once into build/fake_npu)."""
    import fake_npu

    return fake_npu.load()


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))


def _reference(level: str, x: torch.Tensor) -> dict:
    """Float64 statistics of an unwired CPU copy: modules (L0), every torch
    API call (L1), or both (mix)."""
    ref = _model()
    modules = ReferenceRecorder(ref) if level in ("L0", "mix") else None
    apis = ApiReferenceRecorder(ref, set(), OPERATOR_NAMES, sink=modules) if level != "L0" else None
    with torch.no_grad():
        ref(x)
    return dict(modules.entries if modules is not None else apis.entries)  # type: ignore[union-attr]


@pytest.mark.parametrize("level", ["L0", "L1", "mix"])
def test_statistics_eager_and_compiled_equal_float64_reference(npu, level, write_config, read_step, tmp_path):
    inputs = [torch.randn(3, 8, generator=torch.Generator().manual_seed(s)) for s in range(2)]
    refs = [_reference(level, x) for x in inputs]
    for compiled in (False, True):
        model = _model().to("npu")
        dump = str(tmp_path / f"dump{int(compiled)}")
        dumper = graphprobe.AclGraphDumper(write_config(dump_path=dump, level=level))
        dumper.start(model)
        run = torch.compile(model, fullgraph=True, backend="aot_eager") if compiled else model
        with torch.no_grad():
            for x in inputs:
                out = run(x.to("npu"))
                assert out.device.type == "npu"
                dumper.step()
        dumper.stop()
        for step, want in enumerate(refs):
            assert_dump_matches(read_step(dump, step)["data"], want, RTOL, f"{level} compiled={compiled} step {step}")


class _Identity(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


ENTRY = "Module.0._Identity.forward.0"


def _identity() -> torch.nn.Module:
    """A wired module that returns its input (L0 wires submodules only)."""
    return torch.nn.Sequential(_Identity())


@pytest.mark.parametrize(
    "value",
    [
        torch.tensor([1.5, float("nan"), -3.0]),
        torch.tensor([float("inf"), -2.0]),
        torch.tensor([7, -3, 12], dtype=torch.int32),
        torch.tensor([True, False, True]),
        torch.tensor([0.5, -0.25], dtype=torch.bfloat16),
        torch.empty(0, 4),
    ],
    ids=["nan", "inf", "int32", "bool", "bf16", "empty"],
)
def test_dtypes_nan_and_empty_follow_the_reference(npu, value, write_config, read_step, tmp_path):
    model = _identity()
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    model(value.to("npu"))
    dumper.step()
    dumper.stop()
    rec = read_step(str(tmp_path / "dump"), 0)["data"][ENTRY]
    got = flatten_dump({"x": rec})["x"]["output.0"]
    want = stats64(value)
    assert got["dtype"] == str(value.dtype)
    if value.numel() and not value.dtype.is_floating_point:
        # Integers and booleans small enough for float32: exact.
        assert (got["Max"], got["Min"]) == (want["Max"], want["Min"])
    assert_stats_close(got, want, RTOL, str(value.dtype))


def test_acl_save_writes_each_execution(npu, tmp_path):
    x = torch.randn(2, 3)
    for i in range(3):
        graphprobe.acl_save((x + i).to("npu"), str(tmp_path / "act.pt"))
    graphprobe.flush()
    assert sorted(os.listdir(tmp_path)) == ["act_0.pt", "act_1.pt", "act_2.pt"]
    for i in range(3):
        assert torch.equal(torch.load(tmp_path / f"act_{i}.pt"), x + i)


def test_tensor_task_saves_each_record(npu, write_config, tmp_path):
    model = _model()
    ref = _model()
    dumper = graphprobe.AclGraphDumper(write_config(task="tensor"))
    dumper.start(model.to("npu"))
    x = torch.randn(3, 8)
    with torch.no_grad():
        model(x.to("npu"))
        want = ref[0](x)
    dumper.step()
    dumper.stop()
    graphprobe.flush()
    (folder,) = glob.glob(str(tmp_path / "dump" / "step0" / "*" / "dump_tensor_data"))
    got = torch.load(os.path.join(folder, "Module.0.Linear.forward.0.output.0.pt"))
    assert got.device.type == "cpu"
    assert torch.equal(got, want)
    assert torch.equal(torch.load(os.path.join(folder, "Module.0.Linear.forward.0.input.0.pt")), x)


def test_live_switch_eager(npu, write_config, tmp_path):
    model = _identity()
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    for step in range(3):
        dumper.enable(step != 1)
        model(torch.full((2,), float(step)).to("npu"))
        dumper.step()
    dumper.stop()
    assert sorted(os.listdir(tmp_path / "dump")) == ["step0", "step2"]


def test_emulated_capture_replays_stamp_count_and_number(npu, write_config, read_step, tmp_path):
    """A graph captured once and replayed: each step dumps the latest replay's
    values, several replays in one step give write_count, a step with the
    switch off records nothing, and acl_save numbers every replay."""
    import fake_npu

    model = _identity()
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    x = torch.zeros(4).to("npu")
    graph = fake_npu.Graph()
    funcs_before = npu.host_funcs()
    with graph.capture():
        model(x)
        graphprobe.acl_save(x, str(tmp_path / "saved.pt"))
    assert npu.host_funcs() == funcs_before  # recorded, not run
    dumper.step(dump=False)  # nothing ran at capture: nothing to dump either way
    plan = {0: [1.0], 1: [2.0, 3.0], 2: [4.0], 3: [5.0]}  # step -> replays (input value each)
    for step, values in plan.items():
        dumper.enable(step != 2)
        for v in values:
            x.copy_(torch.full((4,), v))
            graph.replay()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            dumper.step()
        assert any("write_count" in str(w.message) for w in caught) == (step == 1)
    dumper.stop()
    graphprobe.flush()
    dump = str(tmp_path / "dump")
    # step(dump=False) takes no number; the step with the switch off wrote nothing.
    assert sorted(os.listdir(dump)) == ["step0", "step1", "step3"]
    for step in (0, 1, 3):
        (rec,) = read_step(dump, step)["data"][ENTRY]["output"]
        last = plan[step][-1]
        assert (rec["Max"], rec["Min"], rec["Mean"]) == (last, last, last)
        assert rec.get("write_count", 1) == len(plan[step])
    # acl_save: one file per replay, switch or not (acl_save is not gated), numbered in replay order.
    saved = sorted(f for f in os.listdir(tmp_path) if f.startswith("saved_"))
    values = [v for vs in plan.values() for v in vs]
    assert saved == [f"saved_{i}.pt" for i in range(len(values))]
    for i, v in enumerate(values):
        assert torch.equal(torch.load(tmp_path / f"saved_{i}.pt"), torch.full((4,), v))


def test_fallback_runs_aten_ops_only(npu):
    """The fake device must not run other namespaces' CPU kernels: a missing
    PrivateUse1 kernel of graphprobe's would otherwise go unnoticed."""
    for op in ("graphprobe::record_stats", "graphprobe::save"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(op, "PrivateUse1"), op
    lib = torch.library.Library("gp_fake_npu_test", "DEF")
    lib.define("cpu_only(Tensor x) -> Tensor")
    lib.impl("cpu_only", lambda x: x + 1, "CPU")
    with pytest.raises(RuntimeError, match="has no PrivateUse1 kernel; only aten ops fall back"):
        torch.ops.gp_fake_npu_test.cpu_only(torch.zeros(1).to("npu"))


def test_fake_tensors_on_npu_record_nothing(npu, write_config, read_step, tmp_path):
    """torchair's npugraph_ex propagates FakeTensors through the wired model
    outside dynamo (msprobe had to skip them): they take the op's Meta kernel."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    model = _identity()
    dumper = graphprobe.AclGraphDumper(write_config(level="mix"))
    dumper.start(model)
    with FakeTensorMode(allow_non_fake_inputs=True) as fake:
        out = model(fake.from_tensor(torch.ones(2, 3).to("npu")) * 2)
    assert out.device.type == "npu"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "recorded nothing": the point of the test
        dumper.step()
    dumper.stop()
    graphprobe.flush()
    assert not (tmp_path / "dump" / "step0").exists()  # a step that recorded nothing writes no folder


def test_table_made_under_inference_mode_serves_later_steps(npu, write_config, read_step, tmp_path):
    """vLLM runs under torch.inference_mode: a table made by the first probe
    there must still take rows written outside it (no inference tensors)."""
    model = _identity()
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    with torch.inference_mode():
        model(torch.full((3,), 2.0).to("npu"))
    dumper.step()
    model(torch.full((3,), 5.0).to("npu"))
    dumper.step()
    dumper.stop()
    for step, value in ((0, 2.0), (1, 5.0)):
        (rec,) = read_step(str(tmp_path / "dump"), step)["data"][ENTRY]["output"]
        assert (rec["Max"], rec["Min"]) == (value, value)


def test_torch_npu_without_npu_extension_leaves_cpu_working(monkeypatch, write_config, read_step, tmp_path):
    """torch_npu loaded but graphprobe built without graphprobe._C_npu: no
    runtime is registered, nothing is raised, CPU models still record."""
    import types

    from graphprobe import npu

    monkeypatch.setitem(__import__("sys").modules, "torch_npu", types.ModuleType("torch_npu"))
    monkeypatch.setattr(npu, "_registered", False)
    assert npu.ensure_runtime() is False
    model = _identity()
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    model(torch.ones(2))
    dumper.step()
    dumper.stop()
    assert read_step(str(tmp_path / "dump"), 0)["data"][ENTRY]["output"][0]["Max"] == 1.0


def test_precomputed_values_are_written_and_stamped(npu, write_config, read_step, tmp_path):
    """record_values (fused statistics) on the NPU table: the values given
    are the record's, stamped like a probe's."""
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(_identity())
    x = torch.tensor([3.0, -1.0, 2.0])
    # The site of a call part, as compiled code carries it; then the fused values in place of the probe.
    site = int(graphprobe._ops._C.open_call("Fused.{n}", [("input_args", "0")], [0], [False], (), 0, 0))
    values = torch.tensor([3.0, -1.0, 4.0, 14.0, 0.0], dtype=torch.float64)  # max, min, sum, sumsq, NaN count
    torch.ops.graphprobe.record_values(values.to("npu"), site, 0, torch.float32, [3])
    dumper.step()
    dumper.stop()
    rec = read_step(str(tmp_path / "dump"), 0)["data"]["Fused.0"]["input_args"][0]
    want = stats64(x)
    assert (rec["Max"], rec["Min"], rec["Mean"]) == (want["Max"], want["Min"], want["Mean"])
    assert abs(rec["Norm"] - want["Norm"]) <= 1e-6 * want["Norm"]  # sqrt of a float32 sum of squares
    assert rec["shape"] == [3] and rec["dtype"] == "torch.float32"


# -- the Sketch (docs/formats.md, "Sketch") on the ATen path ------------------


def _sketch_cases() -> list[tuple[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(5)
    base = torch.randn(33, 47, generator=g)
    return [
        ("float32", torch.randn(5, 7, generator=g)),
        ("float64", torch.randn(129, generator=g, dtype=torch.float64)),
        ("bfloat16", torch.randn(3, 41, generator=g).to(torch.bfloat16)),
        ("float16", torch.randn(17, 3, generator=g).to(torch.float16)),
        ("over-65536", torch.randn(300_001, generator=g)),
        # Two chunks of stats_aten.cpp's 2**20 elements, the second ragged.
        ("two-chunks", torch.randn((1 << 20) + 37, generator=g)),
        ("transposed", base.t()),
        ("strided-slice", base[::2, 3:40:3]),
        ("single", torch.tensor([2.5])),
    ]


def _recorded_on_npu(write_config, read_step, tmp_path, x: torch.Tensor, **config: Any) -> dict:
    """The record of x given to a wired identity module on the fake NPU."""
    dumper = graphprobe.AclGraphDumper(write_config(**config))
    model = _identity()
    dumper.start(model)
    with torch.no_grad():
        model(x)
    dumper.step()
    dumper.stop()
    return read_step(str(tmp_path / "dump"), 0)["data"][ENTRY]["output"][0]


def _npu_copy(x: torch.Tensor) -> torch.Tensor:
    """x on the fake NPU with x's strides (a view of a contiguous device base)."""
    base = x._base if x._base is not None else x
    return torch.as_strided(base.to("npu"), x.size(), x.stride(), x.storage_offset())


@pytest.mark.parametrize("name,x", _sketch_cases(), ids=[c[0] for c in _sketch_cases()])
def test_sketch_equals_the_definition(npu, name, x, write_config, read_step, tmp_path):
    from sketch_reference import sketch

    xd = _npu_copy(x)
    assert xd.is_contiguous() == x.is_contiguous()
    rec = _recorded_on_npu(write_config, read_step, tmp_path, xd)
    want = sketch(x)
    # Summed in float32 and stored as float32 (the NPU has no float64): a
    # few float32 roundings of the Norm, far below the Sketch's float32 floor.
    norm = float(torch.linalg.vector_norm(x.double()))
    for k in range(4):
        assert abs(rec["Sketch"][k] - want[k]) <= 1e-6 * norm, (name, k, rec["Sketch"], want)


def test_sketch_of_a_captured_graph_follows_each_replay(npu, write_config, read_step, tmp_path):
    import fake_npu
    from sketch_reference import sketch

    model = _identity()
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    x = torch.zeros(50).to("npu")
    graph = fake_npu.Graph()
    with graph.capture():
        model(x)
    dumper.step(dump=False)
    values = [torch.randn(50, generator=torch.Generator().manual_seed(s)) for s in range(2)]
    for v in values:
        x.copy_(v)
        graph.replay()
        dumper.step()
    dumper.stop()
    for step, v in enumerate(values):
        got = read_step(str(tmp_path / "dump"), step)["data"][ENTRY]["output"][0]["Sketch"]
        assert got == pytest.approx(sketch(v), abs=1e-6 * float(v.norm()))


@pytest.mark.parametrize("x", [torch.arange(10), torch.tensor([True, False]), torch.zeros(0)], ids=["int", "bool", "empty"])
def test_no_sketch_for_integer_bool_and_empty_tensors(npu, x, write_config, read_step, tmp_path):
    rec = _recorded_on_npu(write_config, read_step, tmp_path, x.to("npu"))
    assert "Sketch" not in rec


def test_sketch_switched_off_and_non_finite_are_left_out(npu, write_config, read_step, tmp_path):
    x = torch.randn(20)
    rec = _recorded_on_npu(write_config, read_step, tmp_path / "off", x.to("npu"), statistics={"sketch": False},
                           dump_path=str(tmp_path / "off" / "dump"))
    assert "Sketch" not in rec and "Norm" in rec
    x[3] = float("inf")
    rec = _recorded_on_npu(write_config, read_step, tmp_path, x.to("npu"))
    assert "Sketch" not in rec


def test_precomputed_sketch_is_written(npu, write_config, read_step, tmp_path):
    """record_values with the Sketch's four sums (the fused path's nine values) on the NPU table."""
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(_identity())
    site = int(graphprobe._ops._C.open_call("Fused.{n}", [("input_args", "0")], [0], [False], (), 0, 0))
    values = torch.tensor([3.0, -1.0, 4.0, 14.0, 0.0, 0.5, -1.5, 2.25, 4.0], dtype=torch.float64)
    torch.ops.graphprobe.record_values(values.to("npu"), site, 0, torch.float32, [3])
    dumper.step()
    dumper.stop()
    rec = read_step(str(tmp_path / "dump"), 0)["data"]["Fused.0"]["input_args"][0]
    assert rec["Sketch"] == [0.5, -1.5, 2.25, 4.0]

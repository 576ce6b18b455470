"""Statistics fused into inductor's code (issue #16, item 1).

Under inductor a probe becomes ordinary reductions that inductor fuses into
the producer of the tensor, plus ``graphprobe::record_values``. Checked here:
the generated code really holds the fused form; its values equal float64
references computed in the test (also for bfloat16 intermediates, which the
compiled code must round as a stored tensor would be); NaN and infinities;
dynamic shapes; the switch and the fallbacks (tensor task, integer dtypes);
and the observer effect on a bfloat16 model does not grow.
"""

from __future__ import annotations

import glob
import json
import math
import os
import re
from typing import Any

import pytest
import torch
from reference import assert_stats_close, stats64
from torch._inductor.utils import run_and_get_code

import graphprobe
from graphprobe.wiring import fused_stats


class Chain(torch.nn.Module):
    """A pointwise chain with a reduction at the end, the shape inductor fuses."""

    def __init__(self, width: int = 256, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(width, width, dtype=dtype)
        self.act = torch.nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(self.lin(x)) * 3.0 + 1.0
        z = self.act(y) * y
        return torch.sum(z, dim=-1)


def _start(tmp_path, level: str, model: torch.nn.Module, **extra: Any) -> graphprobe.AclGraphDumper:
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = tmp_path / f"config-{level}.json"
    config.write_text(json.dumps({"dump_path": str(tmp_path / "dump"), "level": level, **extra}))
    dumper = graphprobe.AclGraphDumper(str(config))
    dumper.start(model)
    return dumper


def _read(tmp_path, step: int = 0) -> dict[str, Any]:
    (path,) = glob.glob(os.path.join(tmp_path, "dump", f"step{step}", "*", "dump.json"))
    with open(path) as f:
        return json.load(f)["data"]


@pytest.fixture(autouse=True)
def _fused_on():
    torch._dynamo.reset()
    before = fused_stats.enabled()
    fused_stats.set_enabled(True)
    yield
    fused_stats.set_enabled(before)
    torch._dynamo.reset()


def _run_compiled(model, x, **kw) -> tuple[torch.Tensor, str]:
    compiled = torch.compile(model, backend="inductor", fullgraph=True, **kw)
    with torch.no_grad():
        out, codes = run_and_get_code(compiled, x)
    return out, "\n".join(codes)


def _probe_calls(code: str) -> dict[tuple[int, int], str]:
    """(site, index) -> which op the generated code calls for that probe,
    sites numbered from 0 in the order registered (the registry is per
    process: other tests registered sites before)."""
    found = re.findall(r"torch\.ops\.graphprobe\.(record_values|record_stats\w*)\.default\(\w+, (\d+), (\d+)", code)
    first = min(int(site) for _, site, _ in found)
    return {(int(site) - first, int(index)): op for op, site, index in found}


def test_probes_fuse_where_inductor_generates_the_producing_loop(tmp_path):
    torch.manual_seed(0)
    model, x = Chain(), torch.randn(8, 256)
    dumper = _start(tmp_path, "L1", model)
    _, code = _run_compiled(model, x)
    dumper.step()
    dumper.stop()
    calls = _probe_calls(code)
    # Site 0 is linear's input part: x, the weight and the bias are graph
    # inputs. Sites 1 and 2 hold linear's output (an extern matmul) as
    # linear's output and as tanh's input. All must be read again: opaque.
    opaque = {(0, 0), (0, 1), (0, 2), (1, 0), (2, 0)}
    assert {k for k, op in calls.items() if op != "record_values"} == opaque, calls
    # Everything after is made by inductor's own pointwise and reduction loops.
    fused = [k for k in calls if k not in opaque]
    assert len(fused) >= 8 and all(calls[k] == "record_values" for k in fused), calls
    assert all(calls[k] == "record_stats_fusable" for k in opaque), calls
    # Inductor names a kernel after the ops fused into it: the reductions of
    # the fused probes share a kernel with the tanh and gelu that they read.
    kernels = [name for name in re.findall(r"cpp_fused_(\w+)", code) if "record_stats_fusable" in name]
    assert any("tanh" in name and "gelu" in name for name in kernels), kernels


def _check_fused_outputs(
    tmp_path, model, x, apis: list[str] | None, want: dict[str, torch.Tensor]
) -> dict[str, Any]:
    """Compiles ``model`` with fused statistics for ``apis`` (L1; None: all),
    runs it on ``x`` and checks each named output's record against float64."""
    dumper = _start(tmp_path, "L1", model, **({} if apis is None else {"statistics": {"list": apis}}))
    _, code = _run_compiled(model, x)
    dumper.step()
    dumper.stop()
    assert "torch.ops.graphprobe.record_values" in code
    data = _read(tmp_path)
    for name, tensor in want.items():
        got = data[name]["output"][0]
        assert got["shape"] == list(tensor.shape), name
        assert_stats_close(got, stats64(tensor) | {"shape": list(tensor.shape)}, 1e-5, name)
    return data


def test_fused_values_equal_float64_reference_l1(tmp_path):
    torch.manual_seed(1)
    model, x = Chain(), torch.randn(16, 256)
    with torch.no_grad():
        lin = model.lin(x)
        tanh = torch.tanh(lin)
        y = tanh * 3.0 + 1.0
        gelu = model.act(y)
        z = gelu * y
        want = {"Functional.linear.0.forward": lin, "Torch.tanh.0.forward": tanh, "Functional.gelu.0.forward": gelu,
                "Torch.sum.0.forward": z.sum(dim=-1)}
    _check_fused_outputs(tmp_path, model, x, None, want)


def test_bfloat16_intermediate_is_rounded_as_a_stored_tensor(tmp_path):
    # y never leaves the fused kernel: inductor carries it in float32. The
    # statistics must still describe y as a bfloat16 tensor (what eager and
    # the opaque probe see): rounding left out moves Norm by ~1e-4 here.
    torch.manual_seed(2)
    a = torch.randn(64, 1024, dtype=torch.bfloat16)
    b = torch.randn(64, 1024, dtype=torch.bfloat16)

    class Mul(torch.nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return torch.sum(torch.exp(torch.mul(a, b)), dim=-1)

    model = Mul()
    want = torch.exp(a.float() * b.float()).to(torch.bfloat16)  # one rounding, as the fused kernel does
    dumper = _start(tmp_path, "L1", model, statistics={"list": ["exp"]})
    compiled = torch.compile(model, backend="inductor", fullgraph=True)
    with torch.no_grad():
        _, codes = run_and_get_code(compiled, a, b)
    dumper.step()
    dumper.stop()
    assert "torch.ops.graphprobe.record_values" in "\n".join(codes)
    got = _read(tmp_path)["Torch.exp.0.forward"]["output"][0]
    assert got["dtype"] == "torch.bfloat16"
    assert_stats_close(got, stats64(want) | {"shape": list(want.shape)}, 1e-5, "exp")


def test_four_million_elements_stay_within_1e5(tmp_path):
    # On these 2**22 values near 1.1 a plain running sum in 16 float32 lanes
    # is off by 1e-4 (checked with numpy while writing this test).
    torch.manual_seed(3)
    x = torch.randn(2048, 2048)

    class NearOne(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.sum(torch.exp(x * 0.01 + 1.1), dim=-1)

    near = x * 0.01 + 1.1
    _check_fused_outputs(tmp_path, NearOne(), x, ["exp", "add"],
                         {"Tensor.__add__.0.forward": near, "Torch.exp.0.forward": torch.exp(near)})


def test_huge_and_tiny_values_keep_finite_sums(tmp_path):
    # An attention mask of finfo.min values (transformers' llama builds one)
    # overflows a float32 sum to -inf, and squares of values below 2**-63
    # vanish in float32: the sums must be float64 as the opaque kernels' are.
    torch.manual_seed(4)
    x = torch.randn(64, 256)
    lowest = torch.finfo(torch.float32).min

    class Extremes(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            mask = torch.where(x > 0.5, 0.0, lowest)
            tiny = torch.mul(torch.tanh(x), 1e-30)
            return torch.sum(mask, dim=-1) + torch.sum(tiny, dim=-1)

    want = {"Torch.where.0.forward": torch.where(x > 0.5, 0.0, lowest), "Torch.mul.0.forward": torch.tanh(x) * 1e-30}
    data = _check_fused_outputs(tmp_path, Extremes(), x, ["where", "mul"], want)
    for name in want:
        got = data[name]["output"][0]
        assert math.isfinite(got["Mean"]) and got["Norm"] > 0, (name, got)


def test_nan_and_infinities_follow_the_opaque_kernel(tmp_path):
    class LogSqrt(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.log(x) * 2.0 + torch.sqrt(x - 1.0)

    x = torch.tensor([[1.0, 0.0, 4.0, 3.0], [2.0, 8.0, 0.5, 3.0]])  # log: -inf; sqrt(x - 1): NaN
    model = LogSqrt()
    dumper = _start(tmp_path, "L1", model, statistics={"list": ["log", "sqrt"]})
    _, code = _run_compiled(model, x)
    dumper.step()
    dumper.stop()
    assert "torch.ops.graphprobe.record_values" in code
    data = _read(tmp_path)
    log = torch.log(x).double()  # float32 values, as the compiled code computes them
    got = data["Torch.log.0.forward"]["output"][0]
    assert got["Max"] == pytest.approx(log.max().item(), rel=1e-6)
    assert got["Min"] == float("-inf") and got["Mean"] == float("-inf") and got["Norm"] == float("inf")
    # A NaN makes all four NaN (docs/formats.md).
    got = data["Torch.sqrt.0.forward"]["output"][0]
    assert all(got[k] != got[k] for k in ("Max", "Min", "Mean", "Norm")), got


def test_dynamic_shapes_record_each_steps_shape(tmp_path):
    torch.manual_seed(3)
    model = Chain(64)
    dumper = _start(tmp_path, "L1", model, statistics={"list": ["tanh"]})
    compiled = torch.compile(model, backend="inductor", dynamic=True, fullgraph=True)
    inputs = [torch.randn(5, 64), torch.randn(9, 64)]
    with torch.no_grad():
        for x in inputs:
            compiled(x)
            dumper.step()
    dumper.stop()
    for step, x in enumerate(inputs):
        got = _read(tmp_path, step)["Torch.tanh.0.forward"]["output"][0]
        want = torch.tanh(model.lin(x)).detach()
        assert got["shape"] == list(want.shape)
        assert_stats_close(got, stats64(want) | {"shape": list(want.shape)}, 1e-5, f"step{step}")


def test_switch_off_recompiles_the_opaque_probe(tmp_path):
    # The same compiled model, run fused, then with the switch off: dynamo
    # must not reuse the fused graph (it guards on the switch), nor compile
    # caches hand back fused code (AOTAutogradCache keys on dynamo's graph).
    model, x = Chain(), torch.randn(4, 256)
    compiled = torch.compile(model, backend="inductor", fullgraph=True)
    dumper = _start(tmp_path, "L1", model)
    with torch.no_grad():
        _, fused = run_and_get_code(compiled, x)
        fused = "\n".join(fused)
        fused_stats.set_enabled(False)
        _, opaque = run_and_get_code(compiled, x)
        opaque = "\n".join(opaque)
    dumper.step()
    dumper.stop()
    assert "torch.ops.graphprobe.record_values" in fused
    assert "torch.ops.graphprobe.record_stats.default" in opaque
    assert "torch.ops.graphprobe.record_values" not in opaque


def test_integer_tensors_keep_the_opaque_probe(tmp_path):
    class Count(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.argmax(x, dim=-1)

    x = torch.randn(4, 16)
    model = Count()
    dumper = _start(tmp_path, "L1", model, statistics={"list": ["argmax"]})
    _, code = _run_compiled(model, x)
    dumper.step()
    dumper.stop()
    assert "torch.ops.graphprobe.record_stats_fusable.default" in code  # declined: stays opaque
    got = _read(tmp_path)["Torch.argmax.0.forward"]["output"][0]
    assert got["Max"] == torch.argmax(x, dim=-1).max().item()
    assert "Sketch" not in got


def test_tensor_task_compiles_the_opaque_probe_and_saves_tensors(tmp_path):
    model, x = Chain(32), torch.randn(2, 32)
    dumper = _start(tmp_path, "L1", model, task="tensor", statistics={"list": ["tanh"]})
    _, code = _run_compiled(model, x)
    dumper.step()
    dumper.stop()
    assert "torch.ops.graphprobe.record_values" not in code
    assert "torch.ops.graphprobe.record_stats.default" in code
    files = glob.glob(os.path.join(tmp_path, "dump", "step0", "*", "dump_tensor_data", "*tanh*"))
    assert files, "the tensor task saved no tensor"


def _observer_shift(dtype: torch.dtype, fused: bool, tmp_path) -> float:
    """Largest change of the compiled model's output when L1 probes are added,
    relative to the output's largest magnitude."""
    fused_stats.set_enabled(fused)
    torch.manual_seed(4)
    model, x = Chain(256, dtype), torch.randn(32, 256, dtype=dtype)
    torch._dynamo.reset()
    with torch.no_grad():
        plain = torch.compile(model, backend="inductor", fullgraph=True)(x).double()
    torch._dynamo.reset()
    dumper = _start(tmp_path / ("fused" if fused else "opaque"), "L1", model)
    with torch.no_grad():
        probed = torch.compile(model, backend="inductor", fullgraph=True)(x).double()
    dumper.step()
    dumper.stop()
    return ((probed - plain).abs().max() / plain.abs().max()).item()


def test_observer_effect_on_bfloat16_model_does_not_grow(tmp_path):
    opaque = _observer_shift(torch.bfloat16, False, tmp_path)
    fused = _observer_shift(torch.bfloat16, True, tmp_path)
    assert fused <= opaque, f"fused probes move the output by {fused:.3g}, opaque ones by {opaque:.3g}"


# -- the Sketch (docs/formats.md, "Sketch") in the fused loop ------------------


class Doubled(torch.nn.Module):
    """x * 2 (exact in every dtype), recorded as Torch.mul, and the same of
    x's transpose, recorded as Torch.mul.1: a strided tensor (eager and
    inductor keep the input's layout), whose Sketch follows its row-major
    order, not its storage's."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.mul(x, 2.0), torch.mul(x.transpose(0, -1), 2.0)


def _fused_sketch_cases() -> list[tuple[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(7)
    return [
        ("float32", torch.randn(5, 7, generator=g)),
        ("float64", torch.randn(9, 13, generator=g, dtype=torch.float64)),
        ("bfloat16", torch.randn(33, 47, generator=g).to(torch.bfloat16)),
        ("float16", torch.randn(17, 3, generator=g).to(torch.float16)),
        ("over-65536", torch.randn(3, 100_003, generator=g)),
        ("single", torch.randn(1, 1, generator=g)),
    ]


def _assert_sketch(got: dict[str, Any], want: torch.Tensor, name: str) -> None:
    from sketch_reference import sketch

    assert "Sketch" in got, (name, got)
    ref = sketch(want)
    # Summed in float64 like Sum and Norm: only float64 rounding apart.
    total = float(want.double().abs().sum())
    for k in range(4):
        assert abs(got["Sketch"][k] - ref[k]) <= 1e-12 * total, (name, k, got["Sketch"], ref)


@pytest.mark.parametrize("name,x", _fused_sketch_cases(), ids=[c[0] for c in _fused_sketch_cases()])
def test_fused_sketch_equals_the_definition(tmp_path, name, x):
    model = Doubled()
    dumper = _start(tmp_path, "L1", model, statistics={"list": ["mul"]})
    _, code = _run_compiled(model, x)
    dumper.step()
    dumper.stop()
    calls = list(_probe_calls(code).values())
    # The two outputs; the inputs are x (a graph input) and its transpose.
    assert calls.count("record_values") == 2, calls
    data = _read(tmp_path)
    _assert_sketch(data["Torch.mul.0.forward"]["output"][0], x * 2.0, name)
    strided = x.transpose(0, -1) * 2.0
    assert not strided.is_contiguous() or x.shape[0] == 1
    _assert_sketch(data["Torch.mul.1.forward"]["output"][0], strided, name + "-transposed")


def test_fused_sketch_under_dynamic_shapes(tmp_path):
    model = Doubled()
    dumper = _start(tmp_path, "L1", model, statistics={"list": ["mul"]})
    compiled = torch.compile(model, backend="inductor", dynamic=True, fullgraph=True)
    inputs = [torch.randn(5, 37), torch.randn(9, 41)]
    with torch.no_grad():
        for x in inputs:
            compiled(x)
            dumper.step()
    dumper.stop()
    for step, x in enumerate(inputs):
        _assert_sketch(_read(tmp_path, step)["Torch.mul.0.forward"]["output"][0], x * 2.0, f"step{step}")


def test_fused_sketch_hash_limbs_equal_fmix64():
    """The limb arithmetic of the lowering (fused_stats._sketch_hash), run on
    int64 tensors, against numpy's wrapping uint64 fmix64 of the reference,
    up to groups far beyond any tensor (g + 1 near 2**62)."""
    import numpy as np
    from sketch_reference import _KEY, _fmix64

    class Tensors:
        const = staticmethod(torch.tensor)
        add = staticmethod(torch.add)
        mul = staticmethod(lambda a, c: a * c)
        mask = staticmethod(lambda a, m: a & m)
        shr = staticmethod(lambda a, s: a >> s)
        xor = staticmethod(lambda a, b: a ^ b)

    g = torch.cat([torch.arange(1 << 16), torch.tensor([(1 << 32) - 1, 1 << 32, (1 << 59) + 12345, (1 << 62) - 2])])
    hi, lo = fused_stats._sketch_hash(Tensors, g + 1)
    assert int(hi.max()) < 1 << 32 and int(lo.max()) < 1 << 32 and int(min(hi.min(), lo.min())) >= 0
    with np.errstate(over="ignore"):
        want = _fmix64((g.numpy().astype(np.uint64) + np.uint64(1)) * _KEY)
    got = (hi.numpy().astype(np.uint64) << np.uint64(32)) | lo.numpy().astype(np.uint64)
    assert (got == want).all()

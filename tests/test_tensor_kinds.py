"""Every tensor a model can hold passes a wired module without breaking it
(issue 28, D2): DTensor (FSDP2, tensor parallelism), sparse (COO and
compressed), nested (jagged and strided), and tensors on a device without a
graphprobe runtime. Each is recorded as msprobe records it: a DTensor by its
local shard, a nested tensor by its packed components (``values()``), a
sparse tensor by its stored values; statistics against float64."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

import graphprobe

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Twice(torch.nn.Module):
    """A module that passes its input through a child, then doubles it (an
    L1 ``Tensor.__mul__``)."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = torch.nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x) * 2


def _check(rec: dict, values: torch.Tensor) -> None:
    v = values.detach().double().flatten()
    assert rec["type"] == "torch.Tensor" and rec["shape"] == list(values.shape)
    assert rec["Max"] == pytest.approx(v.max().item(), rel=1e-6)
    assert rec["Min"] == pytest.approx(v.min().item(), rel=1e-6)
    assert rec["Mean"] == pytest.approx(v.mean().item(), rel=1e-6, abs=1e-9)
    assert rec["Norm"] == pytest.approx(v.norm().item(), rel=1e-6)


def _run(x: torch.Tensor, level: str, compiled: bool, write_config, read_step, tmp_path) -> dict:
    model = Twice()
    dumper = graphprobe.AclGraphDumper(write_config(level=level))
    dumper.start(model)
    run = torch.compile(model, backend="aot_eager") if compiled else model
    with torch.no_grad():
        run(x)
    dumper.step()
    data = read_step(str(tmp_path / "dump"), 0)["data"]
    dumper.stop()
    return data


def _kinds() -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """name -> (the tensor, the dense values its record describes)."""
    torch.manual_seed(0)
    x = torch.randn(4, 6)
    x[x.abs() < 0.5] = 0
    parts = [torch.randn(2, 3), torch.randn(5, 3)]
    jagged = torch.nested.nested_tensor(parts, layout=torch.jagged)
    return {
        "sparse_coo": (x.to_sparse(), x.to_sparse()._values()),
        "sparse_csr": (x.to_sparse_csr(), x.to_sparse_csr().values()),
        "sparse_csc": (x.to_sparse_csc(), x.to_sparse_csc().values()),
        "nested_jagged": (jagged, jagged.values()),
        "nested_strided": (torch.nested.nested_tensor(parts), torch.cat([p.flatten() for p in parts])),
    }


@pytest.mark.parametrize("level", ["L0", "L1"])
@pytest.mark.parametrize("kind", sorted(_kinds()))
def test_sparse_and_nested_tensors_are_recorded_by_their_values(kind, level, write_config, read_step, tmp_path):
    x, values = _kinds()[kind]
    compiled = kind in ("nested_jagged", "sparse_coo") and level == "L0"  # one compiled case per family
    data = _run(x, level, compiled, write_config, read_step, tmp_path)
    if level == "L0":
        _check(data["Module.inner.Identity.forward.0"]["input_args"][0], values)
        _check(data["Module.inner.Identity.forward.0"]["output"][0], values)
    else:
        (rec,) = data["Tensor.__mul__.0.forward"]["output"]
        _check(rec, values * 2)


@pytest.fixture
def one_rank_group():
    import torch.distributed as dist

    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29561")
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("level", ["L0", "L1"])
def test_dtensor_is_recorded_by_its_local_shard(level, compiled, one_rank_group, write_config, read_step, tmp_path):
    """Statistics and shape of the local shard (msprobe's choice), plus
    msprobe's ``placements`` and the whole tensor's ``global_shape``."""
    from torch.distributed.tensor import DeviceMesh, Replicate, Shard, distribute_tensor

    torch.manual_seed(1)
    full = torch.randn(4, 6)
    placement, written = (Shard(1), [{"Shard": {"dim": 1}}]) if level == "L0" else (Replicate(), [{"Replicate": {}}])
    x = distribute_tensor(full, DeviceMesh("cpu", [0]), [placement])
    data = _run(x, level, compiled, write_config, read_step, tmp_path)
    if level == "L0":
        entry = data["Module.inner.Identity.forward.0"]  # one call, not split by a graph break
        records = [(entry["input_args"][0], x.to_local()), (entry["output"][0], x.to_local())]
    else:
        records = [(data["Tensor.__mul__.0.forward"]["output"][0], x.to_local() * 2)]
    for rec, values in records:
        _check(rec, values)
        assert rec["placements"] == written and rec["global_shape"] == [4, 6]


_NO_RUNTIME = r"""
import glob, json, os, sys, warnings
sys.path.insert(0, {tests!r})
import torch
import graphprobe
from torch.utils import cpp_extension
import fake_npu
# The fake PrivateUse1 device, renamed "npu", WITHOUT registering its runtime
# with graphprobe: a backend graphprobe has no runtime for (XPU, MPS, ...).
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
dump = sys.argv[1]
cfg = dump + ".json"
json.dump({{"dump_path": dump, "level": sys.argv[2]}}, open(cfg, "w"))
class Twice(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Identity()
    def forward(self, x):
        return self.inner(x) * 2
model = Twice()
dumper = graphprobe.AclGraphDumper(cfg)
dumper.start(model)
x = torch.linspace(-3, 5, 12).reshape(3, 4)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    y = model(x.to("npu"))
dumper.step()
dumper.stop()
(path,) = glob.glob(os.path.join(dump, "step0", "*", "dump.json"))
print(json.dumps({{"data": json.load(open(path))["data"], "warnings": [str(w.message) for w in caught],
                  "y": y.cpu().tolist()}}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("level", ["L0", "mix"])
def test_a_device_without_runtime_records_from_a_host_copy(level, tmp_path):
    script = tmp_path / "no_runtime.py"
    script.write_text(_NO_RUNTIME.format(tests=os.path.join(ROOT, "tests"), root=ROOT))
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "dump"), level], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    import json

    out = json.loads(done.stdout.strip().splitlines()[-1])
    x = torch.linspace(-3, 5, 12).reshape(3, 4)  # as the child made it
    assert out["y"] == (x * 2).tolist()  # the model ran
    _check(out["data"]["Module.inner.Identity.forward.0"]["output"][0], x)
    if level == "mix":
        _check(out["data"]["Tensor.__mul__.0.forward"]["output"][0], x * 2)
    said = out["warnings"] + done.stderr.splitlines()  # a C++ warning outside Python's handler goes to stderr
    assert any("has no graphprobe runtime" in w for w in said)


def test_compare_reads_a_dtensor_dump(one_rank_group, write_config, read_step, tmp_path):
    """The extra fields of a DTensor record do not disturb graphprobe's own
    compare: a dump compared with itself passes every row."""
    from torch.distributed.tensor import DeviceMesh, Shard, distribute_tensor

    x = distribute_tensor(torch.linspace(-2.0, 3.0, 24).reshape(4, 6), DeviceMesh("cpu", [0]), [Shard(0)])
    _run(x, "L0", False, write_config, read_step, tmp_path)
    step = str(tmp_path / "dump" / "step0")
    copy = shutil.copytree(step, tmp_path / "copy")  # not step itself: that fails --fail-on (issue 40 item 8)
    done = subprocess.run([sys.executable, "-m", "graphprobe", "compare", step, str(copy), "-o", str(tmp_path / "out"),
                           "--no-report", "--fail-on", "unmatched"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (row,) = [line.split() for line in done.stdout.splitlines() if line.startswith("rank0")]
    assert row[1:5] == ["2", "0", "0", "0"], done.stdout  # pass, warning, error, unmatched


class _Wrapper(torch.Tensor):
    """A torchao-style wrapper subclass: one inner tensor, its own
    ``__torch_dispatch__`` that supports aten ops only (a probe op reaching
    it would raise NotImplementedError), traceable by dynamo
    (``__tensor_flatten__``)."""

    @staticmethod
    def __new__(cls, inner: torch.Tensor) -> "_Wrapper":
        return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype, device=inner.device)

    def __init__(self, inner: torch.Tensor) -> None:
        self.inner = inner

    def __tensor_flatten__(self):
        return ["inner"], None

    @staticmethod
    def __tensor_unflatten__(inner_tensors, meta, outer_size, outer_stride):
        return _Wrapper(inner_tensors["inner"])

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        if func.namespace != "aten":
            raise NotImplementedError(f"_Wrapper does not support {func}")
        unwrap = lambda t: t.inner if isinstance(t, _Wrapper) else t  # noqa: E731
        out = func(*torch.utils._pytree.tree_map(unwrap, args), **torch.utils._pytree.tree_map(unwrap, kwargs or {}))
        return torch.utils._pytree.tree_map(lambda t: cls(t) if isinstance(t, torch.Tensor) else t, out)


class _Untraceable(_Wrapper):
    """The same wrapper without ``__tensor_flatten__`` (not traceable)."""

    __tensor_flatten__ = None  # type: ignore[assignment]


class _FunctionOnly(torch.Tensor):
    """A subclass that overrides ``__torch_function__`` only."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


@pytest.mark.parametrize(("cls", "level", "compiled"), [
    (_Wrapper, "L0", False), (_Wrapper, "L1", False), (_Wrapper, "L0", True), (_Untraceable, "L0", False),
    (_Untraceable, "L1", False)])
def test_a_wrapper_subclass_is_described_by_type_and_never_breaks_the_forward(
        cls, level, compiled, write_config, read_step, tmp_path):
    inner = torch.randn(4, 6)
    data = _run(cls(inner), level, compiled, write_config, read_step, tmp_path)
    shown = f"{cls.__module__}.{cls.__name__}(torch.strided)"
    if level == "L0":
        entry = data["Module.inner.Identity.forward.0"]
        recs = [entry["input_args"][0], entry["output"][0]]
    else:
        entry = data["Tensor.__mul__.0.forward"]
        recs = [entry["input_args"][0], entry["output"][0]]
    for rec in recs:
        assert rec["type"] == shown and "Max" not in rec, rec


def test_a_subclass_with_torch_function_only_is_recorded_as_a_tensor(write_config, read_step, tmp_path):
    x = torch.randn(4, 6).as_subclass(_FunctionOnly)
    data = _run(x, "L0", False, write_config, read_step, tmp_path)
    _check(data["Module.inner.Identity.forward.0"]["input_args"][0], x.as_subclass(torch.Tensor))

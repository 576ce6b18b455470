"""L1 and mix statistics: eager and torch.compile against an independent float64 reference.

The reference (``reference.ApiReferenceRecorder``) records *every* torch API
call of an unwired copy of the model, except the views named here, so a
computing API that the default table missed, or a view that it recorded,
shows up as a name mismatch.
"""

from __future__ import annotations

import copy
import json

import pytest
import torch
import torch.nn.functional as F
from dtype_sweep import FLOAT_BLOCK_TOL  # the kernels' float32-block precision (docs/formats.md)
from models import make_transformer
from reference import (
    OPERATOR_NAMES,
    TRANSFORMER_VIEWS,
    ApiReferenceRecorder,
    ReferenceRecorder,
    assert_dump_matches,
)

import graphprobe
from graphprobe.wiring.probe import probe_output
from graphprobe.wiring.apis import DEFAULT_APIS, INLINED_BY_DYNAMO, OPERATOR_METHODS, ApiWiring, resolve_apis

STEPS = 2


def _reference(base: torch.nn.Module, level: str, skip: set[str]):
    ref_model = copy.deepcopy(base)
    modules = ReferenceRecorder(ref_model) if level == "mix" else None
    apis = ApiReferenceRecorder(ref_model, skip, OPERATOR_NAMES, sink=modules)

    def run(x: torch.Tensor) -> dict:
        if modules is not None:
            modules.reset()
        apis.reset()
        with torch.no_grad():
            ref_model(x)
        return dict(modules.entries if modules is not None else apis.entries)

    return run


def _dump(model, level, inputs, write_config, read_step, dump_path, compiled, keywords=None, backend="inductor"):
    fields = {"dump_path": dump_path, "level": level}
    if keywords is not None:
        fields["statistics"] = {"list": keywords}
    dumper = graphprobe.AclGraphDumper(write_config(**fields))
    dumper.start(model)
    runner = torch.compile(model, fullgraph=True, backend=backend) if compiled else model
    with torch._dynamo.config.patch(error_on_recompile=True), torch.no_grad():
        for x in inputs:
            runner(x)
            dumper.step()
    dumper.stop()
    return [read_step(dump_path, step)["data"] for step in range(len(inputs))]


def _check(dumps, refs, rtol):
    for step, (data, ref) in enumerate(zip(dumps, refs)):
        assert_dump_matches(data, ref, rtol, f"step {step}")


@pytest.mark.parametrize("level", ["L1", "mix"])
def test_transformer_eager_and_compiled_match_float64_reference(level, write_config, read_step, tmp_path):
    base = make_transformer()
    reference = _reference(base, level, TRANSFORMER_VIEWS)
    inputs = [torch.randint(0, 64, (2, 5), generator=torch.Generator().manual_seed(s)) for s in range(STEPS)]
    refs = [reference(x) for x in inputs]

    eager = _dump(copy.deepcopy(base), level, inputs, write_config, read_step, str(tmp_path / "eager"), False)
    # Eager probes see the very tensors the reference sees.
    _check(eager, refs, rtol=FLOAT_BLOCK_TOL)

    torch._dynamo.utils.counters.clear()
    compiled = _dump(copy.deepcopy(base), level, inputs, write_config, read_step, str(tmp_path / "compiled"), True)
    assert sum(torch._dynamo.utils.counters["graph_break"].values()) == 0
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1
    # Inductor computes layer_norm, gelu and softmax with its own decompositions
    # (and fuses the arithmetic between probes), so fp32 results differ from
    # eager by a few ulps; 1e-5 is the fp32 tolerance used throughout.
    _check(compiled, refs, rtol=1e-5)
    assert [list(d) for d in compiled] == [list(d) for d in eager]

    names = list(eager[0])
    assert "Functional.linear.8.forward" in names and "Functional.linear.9.forward" not in names
    assert "Tensor.__matmul__.3.forward" in names and "Functional.embedding.0.forward" in names
    assert any(n.startswith("Module.") for n in names) == (level == "mix")
    if level == "mix":
        # Calls are listed as they complete: the module's API calls, then the module.
        i = names.index("Module.layers.0.attn.qkv.Linear.forward.0")
        assert names[i - 1] == "Functional.linear.0.forward"


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)  # Functional.linear
        a, b = h.chunk(2, dim=-1)  # view: skipped
        g = a * torch.sigmoid(b)  # Torch.sigmoid, Tensor.__mul__
        g = g.mul(b[0])  # method spelling and __getitem__: Tensor.__mul__ again, the index skipped
        s = g.transpose(0, 1) @ g  # Tensor.__matmul__ (transpose skipped)
        s = 1 - s  # Tensor.__rsub__
        s = s**2  # Tensor.__pow__
        s += s.size(0)  # Tensor.__iadd__ (size skipped)
        y = F.relu(s).mean(0)  # Functional.relu, Tensor.mean
        return y.to(torch.float64).view(-1)  # Tensor.to (view skipped)


TINY_L1 = [
    "Functional.linear.0.forward",
    "Torch.sigmoid.0.forward",
    "Tensor.__mul__.0.forward",
    "Tensor.__mul__.1.forward",
    "Tensor.__matmul__.0.forward",
    "Tensor.__rsub__.0.forward",
    "Tensor.__pow__.0.forward",
    "Tensor.__iadd__.0.forward",
    "Functional.relu.0.forward",
    "Tensor.mean.0.forward",
    "Tensor.to.0.forward",
]


def test_tiny_model_records_exactly_these_calls(write_config, read_step, tmp_path):
    torch.manual_seed(0)
    model = Tiny()
    x = torch.randn(3, 4)
    views = {"Tensor.chunk", "Tensor.__getitem__", "Tensor.transpose", "Tensor.size", "Tensor.view"}
    reference = _reference(model, "L1", views)
    refs = [reference(x)]
    assert list(refs[0]) == TINY_L1  # the reference itself sees what the comments above say

    eager = _dump(copy.deepcopy(model), "L1", [x], write_config, read_step, str(tmp_path / "eager"), False)
    assert list(eager[0]) == TINY_L1
    _check(eager, refs, rtol=FLOAT_BLOCK_TOL)
    # Which functions reach the mode, and with which arguments, is dynamo's
    # business; inductor's numerics are covered by the transformer test, so
    # aot_eager spares a C++ compile here.
    torch._dynamo.utils.counters.clear()
    compiled = _dump(
        copy.deepcopy(model), "L1", [x], write_config, read_step, str(tmp_path / "c"), True, backend="aot_eager"
    )
    assert sum(torch._dynamo.utils.counters["graph_break"].values()) == 0
    assert list(compiled[0]) == TINY_L1
    _check(compiled, refs, rtol=1e-6)

    rsub = eager[0]["Tensor.__rsub__.0.forward"]["input_args"]
    assert rsub[1] == {"type": "int", "value": 1}  # __rsub__(s, 1): non-tensor arguments are kept
    assert eager[0]["Tensor.to.0.forward"]["output"][0]["dtype"] == "torch.float64"
    mix = _dump(copy.deepcopy(model), "mix", [x], write_config, read_step, str(tmp_path / "mix"), False)
    assert list(mix[0]) == TINY_L1[:1] + ["Module.fc.Linear.forward.0"] + TINY_L1[1:]


def test_functions_that_dynamo_inlines_keep_their_name(write_config, read_step, tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.RMSNorm(4))
    x = torch.randn(2, 4)
    refs = [_reference(model, "L1", set())(x)]
    eager = _dump(copy.deepcopy(model), "L1", [x], write_config, read_step, str(tmp_path / "e"), False)
    compiled = _dump(copy.deepcopy(model), "L1", [x], write_config, read_step, str(tmp_path / "c"), True,
                     backend="aot_eager")
    assert list(refs[0]) == ["Functional.rms_norm.0.forward"]
    _check(eager, refs, rtol=FLOAT_BLOCK_TOL)
    _check(compiled, refs, rtol=1e-6)
    args = compiled[0]["Functional.rms_norm.0.forward"]["input_args"]
    assert args[1] == [{"type": "int", "value": 4}] and args[3] is None  # None as msprobe writes it: null


def test_list_filters_apis_and_modules(write_config, read_step, tmp_path):
    model = make_transformer()
    x = torch.randint(0, 64, (1, 3))
    l1 = _dump(model, "L1", [x], write_config, read_step, str(tmp_path / "l1"), False, ["LINEAR", "__Add__"])
    # Case-insensitive substrings of "{Prefix}.{api}": "__add__" does not select __iadd__ or Torch.add.
    expected = []
    for i in range(2):  # per block: qkv, proj, residual add, up, down, residual add
        linears = [f"Functional.linear.{4 * i + k}.forward" for k in range(4)]
        expected += linears[:2] + [f"Tensor.__add__.{2 * i}.forward"]
        expected += linears[2:] + [f"Tensor.__add__.{2 * i + 1}.forward"]
    expected.append("Functional.linear.8.forward")
    assert list(l1[0]) == expected

    mix = _dump(model, "mix", [x], write_config, read_step, str(tmp_path / "mix"), False, ["norm"])
    expected = []
    for i in range(2):
        for j, ln in enumerate(("norm1", "norm2")):
            expected += [f"Functional.layer_norm.{2 * i + j}.forward", f"Module.layers.{i}.{ln}.LayerNorm.forward.0"]
    for k in range(2):
        expected += [f"Functional.layer_norm.{4 + k}.forward", f"Module.norm.LayerNorm.forward.{k}"]
    assert list(mix[0]) == expected


class OwnProbe(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        probe_output("Probe.user.{n}", x)
        return torch.nn.functional.relu(x)


@pytest.mark.parametrize("level", ["L1", "mix"])
def test_graphprobe_operations_are_never_recorded(level, write_config, read_step, tmp_path):
    model = torch.nn.Sequential(OwnProbe())
    x = torch.randn(2, 3)
    # A keyword that matches every name keeps the whole default table.
    data = _dump(model, level, [x], write_config, read_step, str(tmp_path / "d"), False, ["."])[0]
    expected = ["Probe.user.0", "Functional.relu.0.forward"]
    if level == "mix":
        expected.append("Module.0.OwnProbe.forward.0")
    assert list(data) == expected  # neither the probes of L0 and L1 nor their tensor accesses
    assert not resolve_apis(("record_stats", "requires_grad", "graphprobe"))


def test_mode_is_active_only_during_forward_and_stop_unwires(write_config, read_step, tmp_path):
    class Fails(torch.nn.Module):
        def forward(self, x):
            torch.nn.functional.relu(x)
            raise ValueError("boom")

    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    dumper = graphprobe.AclGraphDumper(write_config(level="L1"))
    dumper.start(model)
    assert "forward" in model.__dict__
    x = torch.ones(1, 2)
    with torch.no_grad():
        model(x)
        torch.nn.functional.linear(x, torch.eye(2))  # outside the forward: not recorded
    dumper.step()
    assert list(read_step(str(tmp_path / "dump"), 0)["data"]) == ["Functional.linear.0.forward"]
    dumper.stop()
    assert "forward" not in model.__dict__

    fails = Fails()
    wiring = ApiWiring(fails, ())
    with pytest.raises(ValueError, match="boom"):
        fails(x)
    assert torch._C._len_torch_function_stack() == 0  # the mode was exited on the way out
    wiring.remove()
    assert "forward" not in fails.__dict__
    assert ApiWiring(fails, ("no-such-api",)).entries == {} and "forward" not in fails.__dict__


def test_default_table_is_well_formed():
    entries = resolve_apis()
    for prefix, names in DEFAULT_APIS.items():
        assert len(set(names)) == len(names), f"{prefix}: duplicates"
    # Every listed API exists on this torch, except where an earlier prefix
    # already holds the same function (F.conv2d is torch.conv2d).
    listed = sum(len(v) for v in DEFAULT_APIS.values())
    shared = [n for n in DEFAULT_APIS["Torch"] if getattr(F, n, None) is getattr(torch, n)]
    assert len(entries) == listed - len(shared) + len(INLINED_BY_DYNAMO)
    # Operators are listed by their own name, never by the method that carries them.
    assert not set(OPERATOR_METHODS.values()) & set(DEFAULT_APIS["Tensor"])
    views = ("size", "dim", "view", "reshape", "permute", "transpose", "chunk", "split", "contiguous", "__getitem__")
    for skipped in views:
        assert getattr(torch.Tensor, skipped) not in entries
    assert entries[torch.Tensor.mul] == "Tensor.__mul__.{n}.forward"
    assert entries[F.conv2d] == "Functional.conv2d.{n}.forward"


def test_level_is_accepted_by_config(write_config):
    for level in ("L1", "mix"):
        assert graphprobe.load_config(write_config(level=level)).level == level


class TwoMuls(torch.nn.Module):
    def forward(self, x, y):
        return (x * 2) * y


def test_one_api_with_different_tensor_arguments(write_config, read_step, tmp_path):
    x, y = torch.ones(2), torch.full((2,), 3.0)
    model = TwoMuls()
    dumper = graphprobe.AclGraphDumper(write_config(level="L1"))
    dumper.start(model)
    model(x, y)
    dumper.step()
    dumper.stop()
    data = read_step(str(tmp_path / "dump"), 0)["data"]
    first, second = data["Tensor.__mul__.0.forward"], data["Tensor.__mul__.1.forward"]
    assert first["input_args"][1] == {"type": "int", "value": 2}
    assert second["input_args"][1]["Max"] == 3.0


def test_keyword_arguments_without_tensors_are_kept(write_config, read_step, tmp_path):
    class Sum(torch.nn.Module):
        def forward(self, x):
            return x.sum(dim=0)

    data = _dump(Sum(), "L1", [torch.ones(2, 2)], write_config, read_step, str(tmp_path / "d"), False)[0]
    assert data["Tensor.sum.0.forward"]["input_kwargs"] == {"dim": {"type": "int", "value": 0}}


def test_dump_json_header_names_the_level(write_config, tmp_path):
    model = torch.nn.Sequential(torch.nn.ReLU())
    dumper = graphprobe.AclGraphDumper(write_config(level="mix"))
    dumper.start(model)
    model(torch.ones(1))
    dumper.step()
    dumper.stop()
    path = next((tmp_path / "dump" / "step0").iterdir()) / "dump.json"
    doc = json.loads(path.read_text())
    assert doc["level"] == "mix"
    assert list(doc["data"]) == ["Functional.relu.0.forward", "Module.0.ReLU.forward.0"]


def test_none_is_null_and_pairs_with_msprobes_row(write_config, read_step, tmp_path):
    # msprobe writes a None argument as a plain null (F.linear's bias of a
    # Linear without one); a {"type": "NoneType"} object did not pair with it.
    import shutil

    from graphprobe.compare import compare

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4, bias=False))
    dumper = graphprobe.AclGraphDumper(write_config(level="L1"))
    dumper.start(model)
    model(torch.randn(2, 4))
    dumper.step()
    dumper.stop()
    doc = read_step(str(tmp_path / "dump"), 0)
    assert doc["data"]["Functional.linear.0.forward"]["input_args"][2] is None
    # The bench as msprobe writes the same call: the bias place holds null.
    shutil.copytree(tmp_path / "dump" / "step0", tmp_path / "msprobe" / "step0")
    (bench,) = (tmp_path / "msprobe" / "step0").glob("*/dump.json")
    doc["data"]["Functional.linear.0.forward"]["input_args"][2] = None
    bench.write_text(json.dumps(doc))
    run = compare(tmp_path / "dump" / "step0", tmp_path / "msprobe" / "step0", tmp_path / "out",
                  html=False, progress=False)
    (outcome,) = run.outcomes
    assert outcome.counts.get("unmatched", 0) == 0, outcome.counts
    assert outcome.counts.get("error", 0) == 0, outcome.counts

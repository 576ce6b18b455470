"""statistics.slice (issue 29 item 1): statistics over exactly msprobe's slice
of each tensor, on the device inside the graph; the record's shape is the
slice's (msprobe's acl_stat takes the sliced tensor).

References are computed here, in float64, on the slice written out by hand
(``x[:4]``, ``x[:, 2:6]``), never by the code under test.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest
import torch

import graphprobe
from graphprobe.config import ConfigTypeError, ConfigValueError, parse_config

BASE = {"dump_path": "./d"}


class Two(torch.nn.Module):
    """One module whose input is the 2-D tensor under test."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = torch.nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x) * 2


def _stats(t: torch.Tensor) -> dict[str, float]:
    d = t.double()
    return {"Max": d.max().item(), "Min": d.min().item(), "Mean": d.mean().item(), "Norm": d.norm().item()}


def _record(dump_path: str, read_step, step: int = 0) -> dict:
    doc = read_step(dump_path, step)
    return doc["data"]["Module.inner.Identity.forward.0"]["input_args"][0]


def _check(record: dict, want: torch.Tensor, rel: float = 0.0) -> None:
    """Max and Min exact; Mean within 2e-6 of the rms and Norm within 2e-6
    relative (docs/formats.md: float32 is summed in float32 blocks), or
    ``rel`` when that is looser."""
    assert record["shape"] == list(want.shape)
    ref = _stats(want)
    assert (record["Max"], record["Min"]) == (ref["Max"], ref["Min"])
    rms = ref["Norm"] / want.numel() ** 0.5
    assert record["Mean"] == pytest.approx(ref["Mean"], rel=rel, abs=2e-6 * rms)
    assert record["Norm"] == pytest.approx(ref["Norm"], rel=max(rel, 2e-6))


X = torch.randn(60, 8, generator=torch.Generator().manual_seed(1))

CASES = [
    ([{"end": 4}], X[:4]),
    ([{"dim": 1, "begin": 2, "end": 6}], X[:, 2:6]),
    ([{"size": 60, "begin": 10, "end": 20}], X[10:20]),  # dim 0 has length 60: applies
    ([{"size": 50, "begin": 10, "end": 20}], X),  # 60 != 50: the rule is skipped
    ([{"dim": 1, "size": 8, "begin": -3}], X[:, -3:]),
    ([{"begin": 5, "end": -50}], X[5:-50]),
    ([{"begin": -7, "end": -2}], X[-7:-2]),
    ([{"end": 1000}], X),  # clamped, as Python slicing
    # rules on two dims combine; a later rule on the same dim replaces the earlier one
    ([{"end": 30}, {"dim": 1, "end": 3}, {"begin": 40}], X[40:, :3]),
    ([{"dim": 2, "end": 1}], X),  # no dim 2: skipped
    ([{}], X),  # an empty rule does nothing
    ([{"end": 4}, {}], X[:4]),  # and is skipped: not a rule on dim 0 replacing the first (msprobe)
]


@pytest.mark.parametrize("rules,want", CASES)
def test_eager_statistics_are_exactly_those_of_the_slice(rules, want, write_config, read_step, tmp_path):
    model = Two()
    dumper = graphprobe.AclGraphDumper(write_config(statistics={"slice": rules}))
    dumper.start(model)
    with torch.no_grad():
        model(X)
    dumper.step()
    dumper.stop()
    _check(_record(str(tmp_path / "dump"), read_step), want)


def test_an_empty_slice_records_its_shape_without_statistics(write_config, read_step, tmp_path):
    """begin >= end gives an empty slice (msprobe: an empty tensor, whose
    statistics are 0 in its graph mode); graphprobe writes an empty tensor's
    statistics as null, as for every empty tensor."""
    model = Two()
    dumper = graphprobe.AclGraphDumper(write_config(statistics={"slice": [{"begin": 10, "end": 5}]}))
    dumper.start(model)
    with torch.no_grad():
        model(X)
    dumper.step()
    dumper.stop()
    record = _record(str(tmp_path / "dump"), read_step)
    assert record["shape"] == [0, 8]
    assert [record[k] for k in ("Max", "Min", "Mean", "Norm")] == [None] * 4


@pytest.mark.parametrize("level", ["L1", "mix"])
def test_api_records_are_sliced_at_l1_and_mix(level, write_config, read_step, tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8))
    dumper = graphprobe.AclGraphDumper(write_config(level=level, statistics={"slice": [{"size": 60, "end": 4}]}))
    dumper.start(model)
    with torch.no_grad():
        out = model(X)
    dumper.step()
    dumper.stop()
    data = read_step(str(tmp_path / "dump"), 0)["data"]
    linear = data["Functional.linear.0.forward"]
    _check(linear["input_args"][0], X[:4])
    _check(linear["output"][0], out[:4])
    assert linear["input_args"][1]["shape"] == [8, 8]  # the weight's dim 0 has length 8, not 60: whole
    if level == "mix":
        _check(data["Module.0.Linear.forward.0"]["input_args"][0], X[:4])


def test_inductor_computes_the_slice_statistics_in_the_graph(write_config, read_step, tmp_path):
    model = Two()
    rules = [{"size": 60, "begin": -7, "end": -2}, {"dim": 1, "begin": 2, "end": 6}]
    dumper = graphprobe.AclGraphDumper(write_config(statistics={"slice": rules}))
    dumper.start(model)
    compiled = torch.compile(model, backend="inductor", fullgraph=True)
    with torch.no_grad():
        compiled(X)
        dumper.step()
        compiled(X[:50])  # size 50: the first rule does not apply
        dumper.step()
    dumper.stop()
    _check(_record(str(tmp_path / "dump"), read_step, 0), X[-7:-2, 2:6], rel=1e-6)
    _check(_record(str(tmp_path / "dump"), read_step, 1), X[:50, 2:6], rel=1e-6)
    out = read_step(str(tmp_path / "dump"), 0)["data"]["Module.inner.Identity.forward.0"]["output"][0]
    _check(out, X[-7:-2, 2:6], rel=1e-6)


def test_slice_with_dump_enable_and_discarded_steps(tmp_path, read_step):
    cfg = tmp_path / "c.json"
    dump = tmp_path / "dump"
    cfg.write_text(json.dumps({"dump_path": str(dump), "dump_enable": False, "statistics": {"slice": [{"end": 4}]}}))
    model = Two()
    dumper = graphprobe.AclGraphDumper(str(cfg))
    dumper.start(model)
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    with torch.no_grad():
        compiled(X)
        dumper.step()  # off: nothing written
        cfg.write_text(json.dumps({"dump_path": str(dump), "dump_enable": True, "statistics": {"slice": [{"end": 4}]}}))
        os.utime(cfg, ns=(1, 10**18))
        dumper.step(dump=False)  # re-reads the switch; writes nothing
        compiled(X)
        dumper.step(dump=False)  # discarded
        compiled(X[1:])
        dumper.step()
    dumper.stop()
    assert sorted(os.listdir(dump)) == ["step1"]
    _check(_record(str(dump), read_step, 1), X[1:5])


@pytest.mark.parametrize("value,error,field", [
    ({"end": 4}, ConfigTypeError, "'statistics.slice'"),
    ([4], ConfigTypeError, "'statistics.slice[0]'"),
    ([{"end": 4.0}], ConfigTypeError, "'statistics.slice[0].end'"),
    ([{"end": True}], ConfigTypeError, "'statistics.slice[0].end'"),
    ([{"dim": -1}], ConfigValueError, "'statistics.slice[0].dim'"),
    ([{"end": 1}, {"size": -2}], ConfigValueError, "'statistics.slice[1].size'"),
    ([{"dims": 1}], ConfigValueError, "did you mean 'dim'"),
])
def test_config_errors_name_the_field(value, error, field):
    with pytest.raises(error) as info:
        parse_config({**BASE, "statistics": {"slice": value}})
    assert field in str(info.value) and "allowed" in str(info.value)


def test_config_rules_and_the_tensor_task():
    cfg = parse_config({**BASE, "statistics": {"slice": [{"dim": 1, "size": 50, "begin": -10}]}})
    assert [r.as_tuple() for r in cfg.slices] == [(1, 50, -10, None)]
    with pytest.warns(UserWarning, match="statistics.slice' is ignored by the tensor task"):
        cfg = parse_config({**BASE, "task": "tensor", "statistics": {"slice": [{"end": 4}]}})
    assert cfg.slices == ()
    # tensor.slice: msprobe's eager dumper slices the saved tensors, graphprobe saves them whole: said, not silent.
    with pytest.warns(UserWarning, match="'tensor.slice' is ignored: the tensor task saves tensors whole"):
        cfg = parse_config({**BASE, "task": "tensor", "tensor": {"slice": [{"end": 4}]}})
    assert cfg.slices == ()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parse_config({**BASE, "task": "tensor", "tensor": {"slice": []}})  # empty: nothing to ignore


def test_the_slice_example_config(tmp_path, read_step):
    """examples/statistics_slice.json: a batch padded to a 1024 bucket on dim 1."""
    example = json.loads((Path(__file__).resolve().parent.parent / "examples" / "statistics_slice.json").read_text())
    example["dump_path"] = str(tmp_path / "dump")
    (tmp_path / "c.json").write_text(json.dumps(example))
    x = torch.randn(2, 1024, 8, generator=torch.Generator().manual_seed(3))
    model = Two()
    dumper = graphprobe.AclGraphDumper(str(tmp_path / "c.json"))
    dumper.start(model)
    with torch.no_grad():
        model(x)
        dumper.step()
        model(x[:, :1000])  # another bucket: whole
        dumper.step()
    dumper.stop()
    _check(_record(str(tmp_path / "dump"), read_step, 0), x[:, :1000])
    _check(_record(str(tmp_path / "dump"), read_step, 1), x[:, :1000])


def test_size_is_checked_on_every_call_under_dynamic_shapes(write_config, read_step, tmp_path):
    """dynamic=True: one graph for every length; the size condition is a guard
    or a symbolic check, never the traced length frozen in."""
    model = Two()
    dumper = graphprobe.AclGraphDumper(write_config(statistics={"slice": [{"size": 60, "end": 4},
                                                                          {"dim": 1, "begin": -2}]}))
    dumper.start(model)
    compiled = torch.compile(model, backend="aot_eager", dynamic=True, fullgraph=True)
    inputs = [torch.randn(n, 8, generator=torch.Generator().manual_seed(n)) for n in (60, 50, 70, 60)]
    with torch.no_grad():
        for x in inputs:
            compiled(x)
            dumper.step()
    dumper.stop()
    for step, x in enumerate(inputs):
        want = x[:4, -2:] if x.shape[0] == 60 else x[:, -2:]
        _check(_record(str(tmp_path / "dump"), read_step, step), want)


def test_the_rules_equal_msprobes_own_slice_by_config():
    """Differential check against the installed msprobe (26.2.0):
    msprobe.core.common.utils.slice_by_config on random rules and shapes."""
    utils = pytest.importorskip("msprobe.core.common.utils")
    from graphprobe.wiring import slicing

    gen = torch.Generator().manual_seed(0)

    def pick(*choices):
        return choices[int(torch.randint(len(choices), (1,), generator=gen))]

    for _ in range(500):
        shape = tuple(int(s) for s in torch.randint(0, 7, (pick(0, 1, 2, 3),), generator=gen))
        x = torch.arange(torch.Size(shape).numel()).reshape(shape)
        rules = []
        for _ in range(pick(0, 1, 2, 3)):
            rule = {}
            for key, values in (("dim", (0, 1, 2, 3)), ("size", (0, 1, 3, 5, 6)), ("begin", (-7, -2, 0, 1, 4)),
                                ("end", (-7, -1, 0, 2, 5, 9))):
                if pick(True, False):
                    rule[key] = pick(*values)
            rules.append(rule)
        want = utils.slice_by_config(x, rules)
        slicing.install(parse_config({**BASE, "statistics": {"slice": rules}}).slices)
        try:
            (got,) = slicing.sliced([x])
        finally:
            slicing.install(())
        assert got.shape == want.shape and torch.equal(got, want), (shape, rules)


@pytest.mark.parametrize("backend", [None, "aot_eager"])
def test_gradients_are_sliced_as_every_recorded_tensor(backend, write_config, read_step, tmp_path):
    # msprobe's eager dumper slices every tensor it analyses (its _analyze_tensor), gradients included; before,
    # the forward records of this Linear were [4, ...] and its backward and parameter-gradient records whole.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8))
    x = torch.randn(6, 6, generator=torch.Generator().manual_seed(2))
    cfg = write_config(task="statistics", level="L0", statistics={"slice": [{"end": 4}]})
    dumper = graphprobe.AclGraphDumper(cfg)
    dumper.start(model)
    run = model if backend is None else torch.compile(model, backend=backend)
    run(x).pow(2).sum().backward()
    dumper.step()
    dumper.stop()
    data = read_step(str(tmp_path / "dump"), 0)["data"]
    # References: the gradients of an unwired twin (plain autograd), sliced by hand, float64 statistics.
    ref = torch.nn.Linear(6, 8)
    ref.load_state_dict(model[0].state_dict())
    out = ref(x)
    out.retain_grad()
    out.pow(2).sum().backward()
    _check(data["Module.0.Linear.backward.0"]["input"][0], out.grad[:4])
    grads = data["Module.0.Linear.parameters_grad.0"]
    _check(grads["weight"][0], ref.weight.grad[:4])
    _check(grads["bias"][0], ref.bias.grad[:4])


class Masked(torch.nn.Module):
    """The probed input's length depends on the data (a boolean mask)."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = torch.nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x[x > 0]) * 2


@pytest.mark.parametrize("rules, keep", [([{"size": 4, "end": 2}], slice(None)), ([{"end": 2}], slice(0, 2))])
def test_a_data_dependent_length_never_raises_in_the_users_graph(rules, keep, write_config, read_step, tmp_path):
    # Inside a compiled graph the masked length is unbacked: comparing it with `size` raised
    # "Could not guard on data-dependent expression" from the user's compiled forward (fullgraph).
    # It cannot match `size` (the rule is skipped); a rule without `size` still slices.
    x = torch.tensor([1.0, -1.0, 2.0, 3.0, -5.0, 4.0])
    model = Masked()
    dumper = graphprobe.AclGraphDumper(write_config(task="statistics", level="L0", statistics={"slice": rules}))
    dumper.start(model)
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        out = torch.compile(model, backend="aot_eager", fullgraph=True)(x)
    dumper.step()
    dumper.stop()
    assert torch.equal(out, x[x > 0] * 2)
    _check(_record(str(tmp_path / "dump"), read_step), x[x > 0][keep])

"""Records of a tensor updated in place hold the updated value (issue #35, item 3).

Inductor's post-grad passes put mutation back into its functional graph
(``reinplace_inplaceable_ops``: ``t[0, 0] = 7`` becomes a copy into a view of
``t``, ``index_put`` becomes ``index_put_``) and point every later use of the
update's result at the node of ``t`` itself. A probe lowered as a mirror of
an earlier probe of that node (wiring/shared_probes.py) then repeated the
value from before the update: a module's output, its consumer's input and
``Tensor.float``'s input were all stale at mix and L1, and compiled L0 too
when the caller updated a module's output.

Each test computes the updated tensor itself, eagerly and without
graphprobe, and compares the records' statistics with float64 statistics of
it (reference.stats64), and eager records with compiled ones.
"""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest
import torch
from reference import assert_stats_close, stats64

import graphprobe
from graphprobe.wiring import fused_stats

_STATS = ("Max", "Min", "Mean", "Norm")
_BACKENDS = ("eager", "aot_eager", "inductor")


def _rows(t: torch.Tensor) -> torch.Tensor:
    return torch.arange(t.shape[0], device=t.device)


# Each update is written as model code writes it; several reach the graph as
# an update of a view (select/slice), which inductor turns back into a
# mutation of the whole tensor's memory.
UPDATES: dict[str, Callable[[torch.Tensor], None]] = {
    "setitem_element": lambda t: t.__setitem__((0, 0), 7.0),
    "setitem_slice": lambda t: t.__setitem__((slice(None), 1), -2.0),
    "setitem_mask": lambda t: t.__setitem__(t > 0.5, 0.25),
    "setitem_index": lambda t: t.__setitem__(_rows(t)[::2], 3.0),
    "index_put_": lambda t: t.index_put_((_rows(t), _rows(t)), torch.full_like(t[:, 0], 5.0)),
    "add_": lambda t: t[1].add_(2.0),
    "add_whole": lambda t: t.add_(1.0),
    "iadd_view": lambda t: t[0].__iadd__(t[2]),
    "sub_": lambda t: t[:, 3].sub_(4.0),
    "mul_": lambda t: t[:, 0].mul_(3.0),
    "div_": lambda t: t[2].div_(0.25),
    "masked_fill_": lambda t: t.masked_fill_(t < 0, -9.0),
    "copy_": lambda t: t[2].copy_(torch.arange(t.shape[1], dtype=t.dtype)),
    "zero_": lambda t: t[1].zero_(),
    "fill_": lambda t: t[:, 2].fill_(4.0),
    "clamp_": lambda t: t[0].clamp_(max=-1.0),
    "scatter_": lambda t: t.scatter_(1, torch.zeros_like(t[:, :1], dtype=torch.long), 6.0),
    "index_add_": lambda t: t.index_add_(0, _rows(t)[1:], torch.ones_like(t[1:])),
}
"""Name -> an in-place update of a 3x4 float32 tensor, as the model writes it."""

SELF_RECORDED: dict[str, tuple[str, Callable[[torch.Tensor], torch.Tensor]]] = {
    "add_": ("Tensor.__iadd__.0.forward", lambda t: t[1]),
    "add_whole": ("Tensor.__iadd__.0.forward", lambda t: t),
    "iadd_view": ("Tensor.__iadd__.0.forward", lambda t: t[0]),
    "sub_": ("Tensor.__isub__.0.forward", lambda t: t[:, 3]),
    "mul_": ("Tensor.__imul__.0.forward", lambda t: t[:, 0]),
    "div_": ("Tensor.__itruediv__.0.forward", lambda t: t[2]),
    "masked_fill_": ("Tensor.masked_fill_.0.forward", lambda t: t),
}
"""Updates that L1 records as APIs of their own (wiring/apis.py names the
in-place arithmetic methods after their operators) -> the record and the
part of ``t`` they update: input ``self`` before, output after the update."""


class Make(torch.nn.Module):
    """Computes ``t`` with a recorded API (a probe of the value before the
    update in the same graph), updates it in place and returns it."""

    def __init__(self, update: Callable[[torch.Tensor], None]) -> None:
        super().__init__()
        self.update = update

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = torch.mul(x, 1.5)
        self.update(t)
        return t


class Use(torch.nn.Module):
    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return torch.tanh(t)


class Net(torch.nn.Module):
    def __init__(self, update: Callable[[torch.Tensor], None]) -> None:
        super().__init__()
        self.make = Make(update)
        self.use = Use()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.use(self.make(x))


def _input() -> torch.Tensor:
    return torch.linspace(-1.0, 1.0, 12).reshape(3, 4)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    # One forward code for every update: without a reset dynamo would reach
    # its recompile limit and run later cases eagerly.
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _dump(tmp_path, name: str, level: str, model: torch.nn.Module, x: torch.Tensor, backend: str) -> dict[str, Any]:
    """Runs ``model`` once under ``backend``, wired at ``level``; dump.json's data."""
    folder = tmp_path / name
    folder.mkdir()
    config = folder / "config.json"
    config.write_text(json.dumps({"dump_path": str(folder / "dump"), "level": level}))
    dumper = graphprobe.AclGraphDumper(str(config))
    dumper.start(model)
    try:
        runner = model if backend == "eager" else torch.compile(model, backend=backend, fullgraph=True)
        with torch.no_grad():
            runner(x)
        dumper.step()
    finally:
        dumper.stop()
    graphprobe.flush()
    (path,) = (folder / "dump" / "step0").glob("*/dump.json")
    return json.loads(path.read_text())["data"]


def _record(data: dict[str, Any], entry: str, part: str, backend: str) -> dict[str, Any]:
    """``part`` is ``input_args`` or ``output``, optionally with an index (``output.1``)."""
    assert entry in data, f"{backend}: no record {entry}; records: {sorted(data)}"
    name, _, index = part.partition(".")
    return data[entry][name][int(index or 0)]


def _check(runs: dict[str, dict[str, Any]], places: list[tuple[str, str]], want: dict[str, Any], what: str) -> None:
    """Each place holds ``want`` in every run, and compiled runs equal eager."""
    for entry, part in places:
        eager = _record(runs["eager"], entry, part, "eager")
        for backend, data in runs.items():
            got = _record(data, entry, part, backend)
            assert_stats_close(got, want, 1e-6, f"{backend} {entry} {part} ({what})")
            for key in _STATS:
                assert got[key] == pytest.approx(eager[key], rel=1e-6, abs=1e-7), (
                    f"{backend} {entry} {part} {key}: {got[key]!r}, eager {eager[key]!r} ({what})")


def _assert_update_moves(before: torch.Tensor, after: torch.Tensor, what: str) -> None:
    """Guards the test itself: a stale record must be distinguishable."""
    b, a = stats64(before), stats64(after)
    assert any(abs(a[k] - b[k]) > 1e-3 for k in _STATS), f"{what}: the update leaves the statistics unchanged"


@pytest.mark.parametrize("level", ["mix", "L1"])
@pytest.mark.parametrize("name", sorted(UPDATES))
def test_consumer_records_the_updated_value(name: str, level: str, tmp_path) -> None:
    """After ``t`` is updated in place, the records that hold ``t`` (Make's
    output, Use's input, ``torch.tanh``'s input) hold the updated value, and
    ``torch.mul``'s output (read before the update) the value before it."""
    update = UPDATES[name]
    x = _input()
    before = x * 1.5
    after = before.clone()
    update(after)
    _assert_update_moves(before, after, name)
    runs = {b: _dump(tmp_path, b, level, Net(update), x, b) for b in _BACKENDS}
    places = [("Torch.tanh.0.forward", "input_args")]
    if level == "mix":
        places += [("Module.make.Make.forward.0", "output"), ("Module.use.Use.forward.0", "input_args")]
    _check(runs, places, stats64(after), f"{name}, after the update")
    _check(runs, [("Torch.mul.0.forward", "output")], stats64(before), f"{name}, before the update")
    if name in SELF_RECORDED:
        entry, part_of = SELF_RECORDED[name]
        _check(runs, [(entry, "output")], stats64(part_of(after)), f"{name}'s own output")
        _check(runs, [(entry, "input_args")], stats64(part_of(before)), f"{name}'s own input")


@pytest.mark.parametrize("name", ["setitem_element", "index_put_", "copy_"])
def test_fused_statistics_record_the_updated_value(name: str, tmp_path) -> None:
    """The same with statistics fused into inductor's code (opt-in): the
    probes of ``t`` are lowered to reductions, not mirrors."""
    update = UPDATES[name]
    x = _input()
    before = x * 1.5
    after = before.clone()
    update(after)
    was = fused_stats.enabled()
    fused_stats.set_enabled(True)
    try:
        runs = {b: _dump(tmp_path, b, "mix", Net(update), x, b) for b in ("eager", "inductor")}
    finally:
        fused_stats.set_enabled(was)
    places = [
        ("Torch.tanh.0.forward", "input_args"),
        ("Module.make.Make.forward.0", "output"),
        ("Module.use.Use.forward.0", "input_args"),
    ]
    _check(runs, places, stats64(after), f"{name}, after the update, fused")
    _check(runs, [("Torch.mul.0.forward", "output")], stats64(before), f"{name}, before the update, fused")


class Router(torch.nn.Module):
    """The issue's case: top-2 expert indices, one overridden in place."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idx = torch.topk(x, 2).indices.clone()
        idx[0, 0] = 7
        return idx


class Experts(torch.nn.Module):
    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return idx.float() * 2


class MoE(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.router = Router()
        self.experts = Experts()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.experts(self.router(x))


@pytest.mark.parametrize("level", ["mix", "L1"])
def test_routing_indices_updated_in_place(level: str, tmp_path) -> None:
    """Issue #35's case: under inductor the router's output, ``Tensor.float``'s
    input and the experts' input held the indices before ``idx[0, 0] = 7``."""
    x = torch.arange(12.0).reshape(3, 4)
    idx = torch.topk(x, 2).indices.clone()
    chosen = stats64(idx)
    idx[0, 0] = 7
    assert stats64(idx)["Max"] != chosen["Max"]
    runs = {b: _dump(tmp_path, b, level, MoE(), x, b) for b in _BACKENDS}
    places = [("Tensor.float.0.forward", "input_args")]
    if level == "mix":
        places += [("Module.router.Router.forward.0", "output"), ("Module.experts.Experts.forward.0", "input_args")]
    _check(runs, places, stats64(idx), "routing indices after idx[0, 0] = 7")
    _check(runs, [("Torch.topk.0.forward", "output.1")], chosen, "topk's indices")


class Caller(torch.nn.Module):
    """L0: the caller updates a module's output before the next module reads it."""

    def __init__(self, update: Callable[[torch.Tensor], None]) -> None:
        super().__init__()
        self.first = torch.nn.Identity()
        self.second = torch.nn.Tanh()
        self.update = update

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = self.first(x * 1.5)
        self.update(t)
        return self.second(t)


@pytest.mark.parametrize("name", ["setitem_element", "index_put_"])
def test_l0_caller_updates_a_module_output(name: str, tmp_path) -> None:
    """At L0 the first module's output is the value before the caller's
    update, the second module's input the value after it."""
    update = UPDATES[name]
    x = _input()
    before = x * 1.5
    after = before.clone()
    update(after)
    runs = {b: _dump(tmp_path, b, "L0", Caller(update), x, b) for b in _BACKENDS}
    _check(runs, [("Module.second.Tanh.forward.0", "input_args")], stats64(after), f"{name}, after the update")
    _check(runs, [("Module.first.Identity.forward.0", "output")], stats64(before), f"{name}, before the update")


class Cache(torch.nn.Module):
    """A buffer updated in place (a KV cache's write), read before and after."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("kv", torch.linspace(0.0, 1.0, 12).reshape(3, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        old = torch.mul(self.kv, 2.0)
        self.kv[:, 1] = x[:, 0]
        return torch.tanh(self.kv) + old


def test_buffer_updated_in_place(tmp_path) -> None:
    """A graph input's memory updated inside the graph (inductor writes into
    the buffer itself): ``torch.mul``'s input holds the buffer before the
    write, ``torch.tanh``'s input after it."""
    x = _input()
    before = Cache().kv.clone()
    after = before.clone()
    after[:, 1] = x[:, 0]
    _assert_update_moves(before, after, "buffer")
    runs = {b: _dump(tmp_path, b, "L1", Cache(), x, b) for b in _BACKENDS}
    _check(runs, [("Torch.tanh.0.forward", "input_args")], stats64(after), "buffer after the write")
    _check(runs, [("Torch.mul.0.forward", "input_args")], stats64(before), "buffer before the write")


class Twice(torch.nn.Module):
    """L0: the model's input updated in place between two modules that read it."""

    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Tanh()
        self.second = torch.nn.Sigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.first(x)
        x[0, 0] = 7.0
        return a + self.second(x)


def test_l0_model_input_updated_in_place(tmp_path) -> None:
    x = _input()
    after = x.clone()
    after[0, 0] = 7.0
    runs = {b: _dump(tmp_path, b, "L0", Twice(), x.clone(), b) for b in _BACKENDS}
    _check(runs, [("Module.second.Sigmoid.forward.0", "input_args")], stats64(after), "input after the update")
    _check(runs, [("Module.first.Tanh.forward.0", "input_args")], stats64(x), "input before the update")

"""graphprobe/aclgraph_layout.py: renaming a step's files into msprobe's
aclgraph layout, and what happens when a rename fails (nothing is lost: the
file keeps its name, dump.json stays, step() raises naming the file)."""

from __future__ import annotations

import json
import os

import pytest
import torch

import graphprobe
from graphprobe import aclgraph_layout
from graphprobe.aclgraph_layout import CallCounter, convert_process_folder
from graphprobe.compare import compare


def _record(name: str) -> dict:
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "data_name": name}


def _folder(tmp_path, data: dict) -> str:
    folder = tmp_path / "step0" / "pid1"
    (folder / "dump_tensor_data").mkdir(parents=True)
    for entry in data.values():
        for part in entry.values():
            items = part.values() if isinstance(part, dict) else part
            for rec in _flat(items):
                torch.save(torch.ones(2), folder / "dump_tensor_data" / rec["data_name"])
    (folder / "dump.json").write_text(json.dumps({"task": "tensor", "level": "mix", "data": data}))
    return str(folder)


def _flat(items):
    for item in items:
        if isinstance(item, list):
            yield from _flat(item)
        elif isinstance(item, dict) and "data_name" in item:
            yield item


def test_names_follow_msprobe(tmp_path):
    data = {
        "Module.a.Linear.forward.0": {"input_args": [_record("m0i0.pt")], "input_kwargs": {},
                                      "output": [_record("m0o0.pt")], "parameters": {"weight": _record("m0w.pt")}},
        "Functional.f.1.forward": {"input_args": [[_record("f1i00.pt"), {"type": "int", "value": 3}],
                                                  _record("f1i1.pt")],
                                   "input_kwargs": {"mask": _record("f1mask.pt"), "k": {"type": "int", "value": 1}},
                                   "output": [_record("f1o0.pt"), _record("f1o1.pt")]},
        "Functional.f.0.forward": {"input_args": [], "input_kwargs": {}, "output": [{"type": "int", "value": 2}]},
    }
    folder = _folder(tmp_path, data)
    counter = CallCounter()
    counter.advance({"Functional.f": 3})  # three calls in an earlier step
    assert convert_process_folder(folder, counter) == []
    assert sorted(os.listdir(folder)) == ["dump_tensor_data"]
    assert sorted(os.listdir(os.path.join(folder, "dump_tensor_data"))) == sorted([
        "Module.a.Linear.0.input.0.pt", "Module.a.Linear.0.output.pt", "Module.a.Linear.0.parameters.weight.pt",
        # Functional.f.0 saved no tensor: as in msprobe it takes no call index
        "Functional.f.3.input.0.0.pt", "Functional.f.3.input.1.pt", "Functional.f.3.input_kwargs.mask.pt",
        "Functional.f.3.output.0.pt", "Functional.f.3.output.1.pt",
    ])
    assert counter.advance({"Functional.f": 1, "Module.a.Linear": 1}) == {"Functional.f": 4, "Module.a.Linear": 1}


def test_a_failed_rename_loses_nothing(tmp_path, monkeypatch):
    data = {"Module.a.Linear.forward.0": {"input_args": [_record("in.pt")], "input_kwargs": {},
                                          "output": [_record("out.pt")]}}
    folder = _folder(tmp_path, data)
    real = os.rename

    def rename(src, dst):
        if str(src).endswith("out.pt"):
            raise OSError(28, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(aclgraph_layout.os, "rename", rename)
    errors = convert_process_folder(folder, CallCounter())
    assert len(errors) == 1 and "out.pt" in errors[0] and "No space left" in errors[0]
    assert sorted(os.listdir(folder)) == ["dump.json", "dump_tensor_data"]
    assert sorted(os.listdir(os.path.join(folder, "dump_tensor_data"))) == ["Module.a.Linear.0.input.0.pt", "out.pt"]


def test_step_raises_naming_the_file_that_could_not_be_renamed(write_config, tmp_path, monkeypatch):
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    dumper = graphprobe.AclGraphDumper(write_config(task="tensor", tensor={"layout": "aclgraph"}))
    dumper.start(model)
    real = os.rename

    def rename(src, dst):
        if str(src).endswith("output.0.pt") and ".aclgraph_names" in str(dst):
            raise OSError(13, "Permission denied")
        return real(src, dst)

    monkeypatch.setattr(aclgraph_layout.os, "rename", rename)
    with torch.no_grad():
        model(torch.ones(1, 2))
    with pytest.raises(graphprobe.DumpWriteError, match=r"Module\.0\.Linear\.forward\.0\.output\.0\.pt.*Permission"):
        dumper.step()
    monkeypatch.undo()
    dumper.stop()
    (proc,) = os.listdir(tmp_path / "dump" / "step0")
    assert "dump.json" in os.listdir(tmp_path / "dump" / "step0" / proc)


def test_compare_takes_the_tensor_folder_for_its_process_folder(write_config, tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    dumper = graphprobe.AclGraphDumper(write_config(task="tensor", tensor={"layout": "aclgraph"}))
    dumper.start(model)
    with torch.no_grad():
        model(torch.ones(1, 2))
    dumper.step()
    dumper.stop()
    (proc,) = os.listdir(tmp_path / "dump" / "step0")
    data = tmp_path / "dump" / "step0" / proc / "dump_tensor_data"
    run = compare(data, data, tmp_path / "out", html=False, progress=False)
    (o,) = run.outcomes
    assert o.error is None and o.counts["pass"] == 4 and o.counts["unmatched"] == 0


def _msprobe_file_names(calls: list[tuple[str, str, bool]]) -> list[str]:
    """The file names msprobe's C++ extension gives its acl_tensor_save
    calls: get_call_index and build_indexed_tensor_path of
    ccsrc/aclgraph_dump/aclgraph_dump.cpp, line by line."""
    index: dict[str, int] = {}
    names = []
    for path, api, is_call_start in calls:
        if is_call_start or api not in index:
            index[api] = index[api] + 1 if api in index else 0
        stem = os.path.basename(path).rsplit(".", 1)[0]
        pos = stem.find(api)
        stem = stem[: pos + len(api)] + f".{index[api]}" + stem[pos + len(api):] if pos >= 0 else f"{stem}.{index[api]}"
        names.append(stem + ".pt")
    return names


def test_file_names_equal_those_of_msprobes_own_aclgraph_dumper(tmp_path, monkeypatch):
    """Differential check against the installed msprobe's AclGraphDumper
    (its Python half, run on CPU with its NPU extension stubbed to record
    what it would save): the same model, config and steps give the same file
    names, step by step."""
    import sys
    import types

    import custom_api_target as target

    pytest.importorskip("msprobe.core.common.utils")
    saved: list[tuple[str, str, bool]] = []
    stub = types.ModuleType("msprobe.pytorch.aclgraph_dump")
    stub.acl_tensor_save = lambda x, path, api, start, switch=None: saved.append((path, api, start)) or x
    stub.acl_stat = lambda x, tag, switch=None: x
    stub.get_acl_stat_dict = lambda clear=False: {}
    stub.set_acl_stat_switch = lambda *args: None
    monkeypatch.setitem(sys.modules, "msprobe.pytorch.aclgraph_dump", stub)
    monkeypatch.delitem(sys.modules, "msprobe.pytorch.aclgraph_dumper", raising=False)
    for name in ("scale_add", "split_pair", "ident"):  # msprobe never unwraps: restored at teardown
        monkeypatch.setattr(target, name, getattr(target, name))
    from msprobe.pytorch.aclgraph_dumper import AclGraphDumper as MsprobeDumper

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x, *, scale):
            return self.lin(x) * scale

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.blocks = torch.nn.ModuleList([Block(), Block()])

        def forward(self, x):
            target.ident(3)
            for block in self.blocks:
                x = block(x, scale=torch.full((4,), 0.5))
            a, b = target.split_pair(x)
            return target.scale_add(target.ident(a), b, alpha=0.5, bias=x)

    section = {"list": ["blocks"], "custom_api": ["custom_api_target.scale_add", "custom_api_target.split_pair",
                                                  "custom_api_target.ident"]}
    steps = [torch.randn(2, 4, generator=torch.Generator().manual_seed(s)) for s in range(2)]

    ours_cfg = tmp_path / "ours.json"
    ours_cfg.write_text(json.dumps({"dump_path": str(tmp_path / "ours"), "task": "tensor", "level": "L0",
                                    "tensor": {**section, "layout": "aclgraph"}}))
    dumper = graphprobe.AclGraphDumper(str(ours_cfg))
    model = Net()
    dumper.start(model)
    with torch.no_grad():
        for x in steps:
            model(x)
            dumper.step()
    dumper.stop()

    ms_cfg = tmp_path / "ms.json"
    ms_cfg.write_text(json.dumps({"dump_path": str(tmp_path / "ms"), "task": "tensor", "level": "L0",
                                  "tensor": section}))
    ms = MsprobeDumper(str(ms_cfg))
    ms_model = Net()
    ms.start(ms_model)
    per_step = []
    with torch.no_grad():
        for x in steps:
            saved.clear()
            ms_model(x)
            ms.step()
            per_step.append(list(saved))
    index_calls: list[tuple[str, str, bool]] = []
    for step, step_calls in enumerate(per_step):
        names = _msprobe_file_names(index_calls + step_calls)[len(index_calls):]  # its index is never reset
        index_calls += step_calls
        (proc,) = os.listdir(tmp_path / "ours" / f"step{step}")
        ours = sorted(n for n in os.listdir(tmp_path / "ours" / f"step{step}" / proc / "dump_tensor_data")
                      if ".parameters." not in n)  # graphprobe also saves parameters
        assert ours == sorted(names), step


class _TwoKeys(torch.nn.Module):
    """Two modules whose paths differ only in a character msprobe's file
    names replace by '_' ("d.a b" and "d.a_b")."""

    def __init__(self) -> None:
        super().__init__()
        self.d = torch.nn.ModuleDict({"a b": torch.nn.Linear(2, 2), "a_b": torch.nn.Linear(2, 2)})
        with torch.no_grad():
            self.d["a b"].weight.fill_(1.0)
            self.d["a_b"].weight.fill_(-3.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.d["a b"](x) + self.d["a_b"](x)


def test_two_apis_with_one_file_stem_take_two_call_indices_and_lose_no_file(write_config, tmp_path):
    # msprobe's get_call_index counts per file stem: calls 0 and 1 of "Module.d.a_b.Linear", in call order.
    # Before: each API counted on its own, both calls were named .0 and one file replaced the other.
    model = _TwoKeys()
    dumper = graphprobe.AclGraphDumper(write_config(task="tensor", level="L0", tensor={"layout": "aclgraph"}))
    dumper.start(model)
    x = torch.tensor([[1.0, 2.0]])
    with torch.no_grad():
        model(x)
    dumper.step()
    dumper.stop()
    (proc,) = os.listdir(tmp_path / "dump" / "step0")
    data = tmp_path / "dump" / "step0" / proc / "dump_tensor_data"
    names = sorted(os.listdir(data))
    assert len(names) == 8 and not os.path.exists(data.parent / "dump.json"), names
    for call, name in enumerate(("a b", "a_b")):
        linear = model.d[name]
        expected = x.double() @ linear.weight.double().T + linear.bias.double()  # float64, in the test
        saved = torch.load(data / f"Module.d.a_b.Linear.{call}.output.pt")
        assert torch.allclose(saved.double(), expected), (call, saved, expected)
        assert torch.equal(torch.load(data / f"Module.d.a_b.Linear.{call}.parameters.weight.pt"), linear.weight)


def test_two_places_with_one_file_name_keep_the_second_under_its_dump_json_name(tmp_path):
    data = {"Functional.f.0.forward": {"input_args": [], "input_kwargs": {"a b": _record("k1.pt"),
                                                                          "a_b": _record("k2.pt")},
                                       "output": []}}
    folder = _folder(tmp_path, data)
    errors = convert_process_folder(folder, CallCounter())
    assert len(errors) == 1 and "k2.pt" in errors[0] and "Functional.f.0.input_kwargs.a_b.pt" in errors[0]
    assert sorted(os.listdir(folder)) == ["dump.json", "dump_tensor_data"]
    assert sorted(os.listdir(os.path.join(folder, "dump_tensor_data"))) == ["Functional.f.0.input_kwargs.a_b.pt",
                                                                            "k2.pt"]


def test_compare_pairs_the_two_layouts_when_file_stems_coincide(write_config, tmp_path):
    sides = {}
    for layout in ("aclgraph", "dump_json"):
        cfg = tmp_path / f"{layout}.json"
        cfg.write_text(json.dumps({"dump_path": str(tmp_path / layout), "task": "tensor", "level": "L0",
                                   "tensor": {"layout": layout}}))
        model = _TwoKeys()
        dumper = graphprobe.AclGraphDumper(str(cfg))
        dumper.start(model)
        with torch.no_grad():
            model(torch.tensor([[1.0, 2.0]]))
        dumper.step()
        dumper.stop()
        sides[layout] = tmp_path / layout
    run = compare(sides["aclgraph"], sides["dump_json"], tmp_path / "out", html=False, progress=False)
    (o,) = run.outcomes
    # Two calls, each: input, output, weight, bias.
    assert o.error is None and o.counts["unmatched"] == 0 and o.counts["pass"] == 8, o.counts


def test_a_training_step_in_the_aclgraph_layout_leaves_only_files_of_the_layout(write_config, tmp_path):
    # Backward and parameter-gradient records (e83019f) have no name in msprobe's aclgraph layout, whose dumper
    # records forward calls only: their files were left under dump.json names with dump.json removed, and
    # compare read "Module.0.Linear.backward.0.input.0.pt" as a forward call of "Module.0.Linear.backward".
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    dumper = graphprobe.AclGraphDumper(write_config(task="tensor", level="L0", tensor={"layout": "aclgraph"}))
    dumper.start(model)
    model(torch.ones(1, 2)).sum().backward()
    dumper.step()
    dumper.stop()
    (proc,) = os.listdir(tmp_path / "dump" / "step0")
    folder = tmp_path / "dump" / "step0" / proc
    assert sorted(os.listdir(folder)) == ["dump_tensor_data"]
    assert sorted(os.listdir(folder / "dump_tensor_data")) == [
        "Module.0.Linear.0.input.0.pt", "Module.0.Linear.0.output.pt", "Module.0.Linear.0.parameters.bias.pt",
        "Module.0.Linear.0.parameters.weight.pt"]


@pytest.mark.parametrize("fails", ["unlink", "makedirs"])
def test_a_failure_outside_the_renames_is_an_error_naming_the_path_not_an_exception(tmp_path, monkeypatch, fails):
    # Before: os.unlink(dump.json) / os.makedirs(staging) raised a bare OSError out of step().
    data = {"Module.a.Linear.forward.0": {"input_args": [_record("in.pt")], "input_kwargs": {}, "output": []}}
    folder = _folder(tmp_path, data)

    def refuse(*args, **kwargs):
        raise OSError(13, "Permission denied")

    monkeypatch.setattr(aclgraph_layout.os, fails, refuse)
    errors = convert_process_folder(folder, CallCounter())
    assert len(errors) == 1 and "Permission denied" in errors[0], errors
    assert ("dump.json" if fails == "unlink" else ".aclgraph_names") in errors[0]
    assert "dump.json" in os.listdir(folder)  # every file is still there, under one name or the other
    assert len(os.listdir(os.path.join(folder, "dump_tensor_data"))) == 1

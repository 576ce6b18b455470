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

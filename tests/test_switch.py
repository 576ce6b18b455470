"""The live switch: dumper.enable() and config dump_enable, without recompiling."""

from __future__ import annotations

import json
import os

import pytest
import torch

import graphprobe


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))


def test_switch_off_on_steps_2_and_4_without_recompiling(write_config, read_step, tmp_path):
    model = _model()
    ref = _model()
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    torch._dynamo.utils.counters.clear()
    with torch._dynamo.config.patch(error_on_recompile=True), torch.no_grad():
        for step in range(6):
            dumper.enable(step not in (2, 4))
            x = torch.randn(3, 4)
            compiled(x)
            dumper.step()
            if step in (2, 4):
                assert not (tmp_path / "dump" / f"step{step}").exists()
                continue
            data = read_step(str(tmp_path / "dump"), step)["data"]
            assert list(data) == ["Module.0.Linear.forward.0", "Module.1.ReLU.forward.0", "Module.2.Linear.forward.0"]
            want = ref(x).double()
            got = data["Module.2.Linear.forward.0"]["output"][0]
            assert abs(got["Max"] - want.max().item()) <= 1e-6 * abs(want.max().item()) + 1e-7
            assert abs(got["Norm"] - want.norm().item()) <= 1e-6 * want.norm().item()
    dumper.stop()
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1
    assert sorted(os.listdir(tmp_path / "dump")) == ["step0", "step1", "step3", "step5"]


def test_config_file_dump_enable_is_reread_between_steps(tmp_path, read_step):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"dump_path": str(tmp_path / "dump"), "dump_enable": False}))
    model = _model()
    dumper = graphprobe.AclGraphDumper(str(cfg))
    dumper.start(model)
    model(torch.randn(1, 4))
    dumper.step()  # off from the start: nothing
    cfg.write_text(json.dumps({"dump_path": str(tmp_path / "dump"), "dump_enable": True}))
    os.utime(cfg, ns=(1, 10**18))  # make sure the mtime moves on coarse file systems
    model(torch.randn(1, 4))
    dumper.step()  # the edit is seen at this step: the *next* step records
    model(torch.randn(1, 4))
    dumper.step()
    dumper.stop()
    assert sorted(os.listdir(tmp_path / "dump")) == ["step2"]
    assert len(read_step(str(tmp_path / "dump"), 2)["data"]) == 3


def test_config_file_switch_on_off_on_off_on_follows_the_current_value(tmp_path, read_step):
    """Issue 28 (a planted bug survived): the config's dump_enable must be
    compared with the switch's current value, not with its value at start().
    The file is edited before each step() and takes effect for the next
    step: on (start), off, on, off, on over five steps."""
    cfg = tmp_path / "config.json"
    dump = tmp_path / "dump"
    cfg.write_text(json.dumps({"dump_path": str(dump), "dump_enable": True}))
    model = _model()
    ref = _model()
    dumper = graphprobe.AclGraphDumper(str(cfg))
    dumper.start(model)
    after_step = [False, True, False, True, True]  # the file's value written before step k
    recording = [True] + after_step[:-1]  # the switch during step k
    inputs = []
    for k, value in enumerate(after_step):
        x = torch.full((1, 4), float(k + 1))
        inputs.append(x)
        with torch.no_grad():
            model(x)
        cfg.write_text(json.dumps({"dump_path": str(dump), "dump_enable": value}))
        os.utime(cfg, ns=(1, 10**18 + k))  # a distinct mtime for every edit
        dumper.step()
        assert dumper.enabled == value
    dumper.stop()
    assert sorted(os.listdir(dump)) == [f"step{k}" for k in range(5) if recording[k]] == ["step0", "step2", "step4"]
    for k in (0, 2, 4):
        got = read_step(str(dump), k)["data"]["Module.2.Linear.forward.0"]["output"][0]
        with torch.no_grad():
            want = ref(inputs[k]).double()
        assert got["Max"] == pytest.approx(want.max().item(), rel=1e-6)


def test_enable_on_off_on_off_on_over_five_steps(write_config, read_step, tmp_path):
    """The same through dumper.enable(): each step follows the latest call."""
    model = _model()
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    for k, on in enumerate([True, False, True, False, True]):
        dumper.enable(on)
        model(torch.randn(1, 4))
        dumper.step()
    dumper.stop()
    assert sorted(os.listdir(tmp_path / "dump")) == ["step0", "step2", "step4"]

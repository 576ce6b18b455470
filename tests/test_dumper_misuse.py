"""Orders of calls a new user gets wrong: none may end in a silent empty dump."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from torch import nn
from models import Small
from reference import ReferenceRecorder, assert_stats_close, flatten_dump, stats64

import graphprobe
from graphprobe.dumper import DumperStateError


def _model() -> Small:
    torch.manual_seed(0)
    return Small().eval()


X = torch.linspace(-1.0, 1.0, 24).reshape(3, 8)


def _nothing_recorded(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record if "recorded nothing" in str(w.message)]


def _check_against_float64(model: nn.Module, dump_path: str, step: int, read_step) -> None:
    """The step's dump holds every module with its eager name and float64 stats."""
    ref_model = copy.deepcopy(model)
    recorder = ReferenceRecorder(ref_model)
    with torch.no_grad():
        ref_model(X)
    data = flatten_dump(read_step(dump_path, step)["data"])
    assert sorted(data) == sorted(recorder.entries) == [
        "Module.act.ReLU.forward.0", "Module.fc1.Linear.forward.0", "Module.fc2.Linear.forward.0"]
    for entry, places in recorder.entries.items():
        for place, want in places.items():
            assert_stats_close(data[entry][place], want, 1e-5, f"{entry} {place}")


def test_compiled_and_run_before_start_records_after_all(write_config, read_step, tmp_path, hook_guards_off) -> None:
    # A fresh process: dynamo does not guard on module hooks until start(),
    # so the code compiled here has no probes and would be reused as it is.
    model = _model()
    compiled = torch.compile(model, backend="eager")
    with torch.no_grad():
        compiled(X)
    dumper = graphprobe.AclGraphDumper(write_config(dump_path=str(tmp_path / "d")))
    with pytest.warns(RuntimeWarning, match=r"compiled before start\(\) for Small\.forward.*graphprobe dropped it"):
        dumper.start(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and no "recorded nothing"
        with torch.no_grad():
            compiled(X)
        dumper.step()
    dumper.stop()
    _check_against_float64(model, str(tmp_path / "d"), 0, read_step)


def test_step_recording_nothing_warns_once(write_config, tmp_path, hook_guards_off) -> None:
    # Compiled through a function: no module code to detect at start(), so
    # the first empty step is where the user hears of it.
    model = _model()
    run = torch.compile(lambda x: model(x), backend="eager")
    with torch.no_grad():
        run(X)
    dumper = graphprobe.AclGraphDumper(write_config(dump_path=str(tmp_path / "d")))
    dumper.start(model)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        dumper.step(dump=False)  # warm-up steps are not judged
        for _ in range(3):
            with torch.no_grad():
                run(X)
            dumper.step()
    dumper.stop()
    (message,) = _nothing_recorded(record)
    assert "step 0 recorded nothing" in message and "before start()" in message and "torch._dynamo.reset()" in message


def test_switched_off_step_does_not_warn(write_config, tmp_path) -> None:
    model = _model()
    dumper = graphprobe.AclGraphDumper(write_config(dump_path=str(tmp_path / "d")))
    dumper.start(model)
    dumper.enable(False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with torch.no_grad():
            model(X)
        dumper.step()
    dumper.stop()


def test_start_accepts_the_compiled_wrapper_with_eager_names(write_config, read_step, tmp_path) -> None:
    model = _model()
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    dumper = graphprobe.AclGraphDumper(write_config(dump_path=str(tmp_path / "d")))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dumper.start(compiled)
        with torch.no_grad():
            compiled(X)
        dumper.step()
    dumper.stop()
    _check_against_float64(model, str(tmp_path / "d"), 0, read_step)


def test_step_before_start_raises(write_config, tmp_path) -> None:
    dumper = graphprobe.AclGraphDumper(write_config(dump_path=str(tmp_path / "d")))
    with pytest.raises(DumperStateError, match=r"step was called before start\(model\)"):
        dumper.step()
    # The dumper is still usable once started.
    model = _model()
    dumper.start(model)
    with torch.no_grad():
        model(X)
    dumper.step()
    dumper.stop()
    assert (tmp_path / "d" / "step0").is_dir()


@pytest.mark.parametrize("level", ["L0", "L1"])
def test_second_dumper_on_a_compiled_model_recompiles_and_records(write_config, read_step, tmp_path, level) -> None:
    # Dump two phases of a job with one compiled model: stop() forgets the
    # sites that the first dumper's compiled code carries, so the second
    # dumper must get code of its own (it recorded nothing before).
    from torch._dynamo.testing import CompileCounterWithBackend

    model = _model()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(model, backend=counter)
    with torch.no_grad():
        fc1 = model.fc1(X)
        act = model.act(fc1)
        fc2 = model.fc2(act)
    want = {"Functional.linear.0.forward": fc1, "Functional.relu.0.forward": act, "Functional.linear.1.forward": fc2}
    for phase in ("a", "b"):
        path = str(tmp_path / phase)
        dumper = graphprobe.AclGraphDumper(write_config(dump_path=path, level=level))
        dumper.start(model)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no "recorded nothing"
            for _ in range(3):
                with torch.no_grad():
                    compiled(X)
                dumper.step()
        dumper.stop()
        for step in range(3):
            if level == "L0":
                _check_against_float64(model, path, step, read_step)
                continue
            data = read_step(path, step)["data"]
            assert sorted(data) == sorted(want), (phase, step)
            for name, tensor in want.items():
                got = data[name]["output"][0]
                assert_stats_close(got, stats64(tensor) | {"shape": list(tensor.shape)}, 1e-5, f"{phase} {name}")
    assert counter.frame_count == 2  # one compile per dumper, not one per step

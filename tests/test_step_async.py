"""step() hands the writing to the writer thread: nothing is lost or reordered.

The writer is kept busy by one large acl_save ahead of the steps, so that
several steps (and, in the tensor task, the next step's staged tensors, which
reuse the same slot files) queue up behind it before anything is written.
Values are checked against float64 references computed here.
"""

from __future__ import annotations

import glob
import json
import math
import os
import subprocess
import sys
import textwrap

import torch

import graphprobe
from reference import stats64

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
NAME = "Module.0.ReLU.forward.0"


def _inputs(n: int) -> list[torch.Tensor]:
    # Distinct per step: a step filed with another step's rows or files shows.
    return [torch.linspace(-1.0, 1.0, 1000) * (k + 1) + 0.25 * k for k in range(n)]


def _busy_writer(tmp_path) -> None:
    graphprobe.acl_save(torch.randn(1 << 22), tmp_path / "busy.pt")


def _assert_stats(record: dict, reference: torch.Tensor) -> None:
    for key, want in stats64(reference).items():
        assert math.isclose(record[key], want, rel_tol=1e-5, abs_tol=1e-6), (key, record[key], want)


def _folder(dump: str, step: int) -> str:
    (found,) = glob.glob(os.path.join(dump, f"step{step}", "*"))
    return found


def _dump_steps(config: str, tmp_path, n: int, discard_after: int, junk: torch.Tensor) -> list[torch.Tensor]:
    """Runs ``n`` steps of a wired ReLU queued behind a busy writer, with one
    discarded step (input ``junk``) after step ``discard_after``; returns the
    inputs of the kept steps."""
    model = torch.nn.Sequential(torch.nn.ReLU())
    dumper = graphprobe.AclGraphDumper(config)
    dumper.start(model)
    inputs = _inputs(n)
    _busy_writer(tmp_path)
    try:
        for k, x in enumerate(inputs):
            model(x)
            dumper.step()
            if k == discard_after:
                model(junk)
                dumper.step(dump=False)  # discarded: must appear nowhere
    finally:
        dumper.stop()  # waits for every step's files (and removes the tensor task's staging folder)
    return inputs


def test_statistics_of_queued_steps_stay_with_their_step(write_config, tmp_path):
    inputs = _dump_steps(write_config(), tmp_path, 6, 2, torch.full((3,), 99.0))
    dump = str(tmp_path / "dump")
    assert sorted(os.listdir(dump)) == [f"step{k}" for k in range(6)]
    for k, x in enumerate(inputs):
        with open(os.path.join(_folder(dump, k), "dump.json")) as f:
            data = json.load(f)["data"]
        assert list(data) == [NAME]
        _assert_stats(data[NAME]["input_args"][0], x)
        _assert_stats(data[NAME]["output"][0], torch.relu(x))


def test_tensor_task_files_each_step_its_own_tensors(write_config, tmp_path):
    # The discarded step stages the same slot files again.
    inputs = _dump_steps(write_config(task="tensor"), tmp_path, 5, 1, torch.full((1000,), -7.0))
    dump = str(tmp_path / "dump")
    assert not glob.glob(os.path.join(dump, ".staging*"))
    for k, x in enumerate(inputs):
        data_dir = os.path.join(_folder(dump, k), "dump_tensor_data")
        assert sorted(os.listdir(data_dir)) == [f"{NAME}.input.0.pt", f"{NAME}.output.0.pt"]
        assert torch.equal(torch.load(os.path.join(data_dir, f"{NAME}.input.0.pt")), x)
        assert torch.equal(torch.load(os.path.join(data_dir, f"{NAME}.output.0.pt")), torch.relu(x))


def test_steps_pending_at_exit_are_written(tmp_path):
    dump = tmp_path / "dump"
    (tmp_path / "config.json").write_text(json.dumps({"dump_path": str(dump), "task": "tensor"}))
    code = f"""
        import torch, graphprobe
        model = torch.nn.Sequential(torch.nn.ReLU())
        dumper = graphprobe.AclGraphDumper({str(tmp_path / "config.json")!r})
        dumper.start(model)
        graphprobe.acl_save(torch.randn(1 << 22), {str(tmp_path / "busy.pt")!r})
        for k in range(4):
            model(torch.linspace(-1.0, 1.0, 1000) * (k + 1) + 0.25 * k)
            dumper.step()
        # no flush() or stop(): the atexit hook writes the steps still queued
    """
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "failed" not in r.stderr, r.stderr
    for k, x in enumerate(_inputs(4)):
        folder = _folder(str(dump), k)
        with open(os.path.join(folder, "dump.json")) as f:
            data = json.load(f)["data"]
        _assert_stats(data[NAME]["input_args"][0], x)
        assert torch.equal(torch.load(os.path.join(folder, "dump_tensor_data", f"{NAME}.input.0.pt")), x)


def test_discarded_steps_take_no_number_and_leave_nothing_behind(write_config, tmp_path):
    """Issue 28 (a weak test): step(dump=False) is checked by the step
    folders, not by a warning's text. Two warm-up steps are discarded, then
    one between kept steps (with the switch off once, too): the kept steps are
    step0..step2, each holding only its own call with its own values."""
    model = torch.nn.Sequential(torch.nn.ReLU())
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    junk = torch.full((7,), 99.0)
    inputs = _inputs(3)
    plan = ["discard", "discard", 0, "discard", "discard_off", 1, 2]
    for item in plan:
        if item == "discard_off":
            dumper.enable(False)
            model(junk)
            dumper.step(dump=False)
            dumper.enable(True)
        elif item == "discard":
            model(junk)
            dumper.step(dump=False)
        else:
            assert dumper.step_number == item
            model(inputs[item])
            dumper.step()
    assert dumper.step_number == 3
    dumper.stop()
    dump = str(tmp_path / "dump")
    assert sorted(os.listdir(dump)) == ["step0", "step1", "step2"]
    for k, x in enumerate(inputs):
        with open(os.path.join(_folder(dump, k), "dump.json")) as f:
            data = json.load(f)["data"]
        assert list(data) == [NAME]  # no call of a discarded step leaked in (no forward.1)
        _assert_stats(data[NAME]["input_args"][0], x)
        _assert_stats(data[NAME]["output"][0], torch.relu(x))


def test_rows_of_held_steps_keep_their_own_dtype_shape_and_values(write_config, tmp_path):
    """Issue 39: step() hands the writer thread each step's raw rows, which
    it converts later against the slots' descriptions (dtype, shape). With
    the writer held, step N's rows wait unconverted while step N+1's forward
    records into the same slots with another dtype, shape and values (step()
    waits for the previous step's job, so one step at a time can wait); each
    dump.json must still hold its own step's records, equal to float64
    statistics computed here. The last steps run without a hold, reusing the
    buffers of converted steps, and are checked the same way."""
    from graphprobe import _ops

    model = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Tanh())
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    dtypes = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.float32,
              torch.float64, torch.bfloat16, torch.float32]
    inputs = [(torch.linspace(-2.0, 2.0, (k + 2) * (k + 3), dtype=torch.float64) * (k + 1) + 0.1 * k)
              .reshape(k + 2, k + 3).to(dtype) for k, dtype in enumerate(dtypes)]
    held = 5  # steps 0-4 are queued behind a hold
    holding = False
    try:
        with torch.no_grad():
            for k, x in enumerate(inputs):
                model(x)  # records while the previous step's rows wait behind the hold
                if holding:
                    # Not converted yet: the hold and the previous step's job are both queued.
                    assert _ops._C.writer_stats()["pending"] == 2, k
                    _ops._C._writer_test_release()
                    holding = False
                if k < held:
                    _ops._C._writer_test_hold()  # ahead of this step's job
                    holding = True
                dumper.step()
    finally:
        if holding:
            _ops._C._writer_test_release()
        dumper.stop()
    dump = str(tmp_path / "dump")
    assert sorted(os.listdir(dump)) == sorted(f"step{k}" for k in range(len(inputs)))
    for k, x in enumerate(inputs):
        with open(os.path.join(_folder(dump, k), "dump.json")) as f:
            data = json.load(f)["data"]
        relu = torch.relu(x)
        expected = {"Module.0.ReLU.forward.0": (x, relu), "Module.1.Tanh.forward.0": (relu, torch.tanh(relu))}
        assert list(data) == list(expected), k
        for name, (given, made) in expected.items():
            for record, tensor in ((data[name]["input_args"][0], given), (data[name]["output"][0], made)):
                assert record["dtype"] == str(tensor.dtype), (k, name)
                assert record["shape"] == list(tensor.shape), (k, name)
                _assert_stats(record, tensor)

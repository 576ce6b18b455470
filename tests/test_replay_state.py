"""Replay leaves the user's state as it found it, and saves the inputs graph
mode had (references: the generators' states taken before ``step()``, the
tensors the test passed in)."""

from __future__ import annotations

import glob
import json
import os
import random
from typing import Any

import numpy as np
import torch
from torch import nn

from graphprobe import AclGraphDumper


def _replay_file(dump_path: str, step: int) -> tuple[str, dict[str, Any]]:
    found = glob.glob(os.path.join(dump_path, f"step{step}", "*", "replay.json"))
    assert len(found) == 1, f"expected one replay.json for step {step}, found {found}"
    with open(found[0]) as f:
        return os.path.dirname(found[0]), json.load(f)


class PythonDropout(nn.Module):
    """Drops its input at random with Python's and numpy's generators (a
    layer-drop written with ``random``/``np.random``)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        keep = random.random() < 0.5 and np.random.uniform() < 0.5
        return x * 2 if keep else x * 0


class HoldsDropout(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.drop = PythonDropout()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(x)


def test_python_and_numpy_generators_are_restored(write_config, tmp_path) -> None:
    random.seed(0)
    np.random.seed(0)
    model = HoldsDropout()
    dumper = AclGraphDumper(write_config(replay={"list": ["drop"]}))
    dumper.start(model)
    with torch.no_grad():
        model(torch.ones(4))
    py_state, np_state = random.getstate(), np.random.get_state()
    dumper.step()
    dumper.stop()
    assert random.getstate() == py_state
    after = np.random.get_state()
    assert after[0] == np_state[0] and np.array_equal(after[1], np_state[1]) and after[2:] == np_state[2:]
    (call,) = _replay_file(str(tmp_path / "dump"), 0)[1]["modules"]
    # Its output cannot be reproduced: not judged, as for torch's own generators.
    assert call["verdict"] == "not judged" and "draws random numbers" in call["reason"], call


class ShiftsInPlace(nn.Module):
    """Writes into its inputs (an index and a float64 offset) before using them."""

    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Embedding(10, 4)

    def forward(self, idx: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
        idx.add_(1)
        offset.mul_(3)
        return self.table(idx) + offset.to(self.table.weight.dtype)


class HoldsShift(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.shift = ShiftsInPlace()

    def forward(self, idx: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
        return self.shift(idx, offset)


def test_saved_inputs_are_the_inputs_of_the_call(write_config, tmp_path) -> None:
    torch.manual_seed(0)
    model = HoldsShift()
    idx = torch.tensor([1, 2, 3])
    offset = torch.tensor([0.5, 1.5, 2.5], dtype=torch.float64).unsqueeze(1)
    given_idx, given_offset = idx.clone(), offset.clone()
    dumper = AclGraphDumper(write_config(replay={"list": ["ShiftsInPlace"], "save_inputs": True}))
    dumper.start(model)
    with torch.no_grad():
        model(idx, offset)
    dumper.step()
    dumper.stop()
    folder, doc = _replay_file(str(tmp_path / "dump"), 0)
    (call,) = doc["modules"]
    assert call["verdict"] == "inherits", call
    saved = torch.load(os.path.join(folder, call["inputs_file"]), weights_only=True)
    assert torch.equal(saved["args"][0], given_idx) and torch.equal(saved["args"][1], given_offset)


class Checkpointed(nn.Module):
    """Two Linears; the first block's forward is recomputed in the backward
    pass (non-reentrant activation checkpointing)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.utils.checkpoint.checkpoint(self.a, x, use_reentrant=False)
        return self.b(torch.relu(h))


def test_forwards_recomputed_in_backward_keep_no_call(write_config, tmp_path, read_step) -> None:
    """The program calls each module once: a checkpointed forward re-run by
    the backward pass is not a call (as dump.json's L0 records leave it out)."""
    torch.manual_seed(0)
    model = Checkpointed()
    dumper = AclGraphDumper(write_config(replay=True))
    dumper.start(model)
    model(torch.randn(3, 4, requires_grad=True)).sum().backward()
    dumper.step()
    dumper.stop()
    _, doc = _replay_file(str(tmp_path / "dump"), 0)
    assert [m["entry"] for m in doc["modules"]] == ["Module.a.Linear.forward.0", "Module.b.Linear.forward.0"]
    assert all(m["verdict"] == "inherits" for m in doc["modules"]), doc["modules"]
    forwards = sorted(e for e in read_step(str(tmp_path / "dump"), 0)["data"] if ".forward." in e)
    assert forwards == ["Module.a.Linear.forward.0", "Module.b.Linear.forward.0"]


class _DeviceGenerator:
    """A PrivateUse1 device module's generator API (as torch_npu's
    ``torch.npu``), its state one counter per device."""

    def __init__(self) -> None:
        self.counter = torch.zeros(2, dtype=torch.int64)

    def draw(self) -> float:
        self.counter[0] += 1
        return float(self.counter[0] % 2)

    def is_initialized(self) -> bool:
        return True

    def get_rng_state_all(self) -> list[torch.Tensor]:
        return [self.counter.clone()]

    def set_rng_state_all(self, states: list[torch.Tensor]) -> None:
        self.counter.copy_(states[0])


_DEVICE = _DeviceGenerator()


class DeviceDropout(nn.Module):
    """Drops its input with the device's generator (dropout on an NPU)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * _DEVICE.draw()


class HoldsDeviceDropout(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.drop = DeviceDropout()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(x)


def test_privateuse1_generators_are_restored(write_config, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(torch._C, "_get_privateuse1_backend_name", lambda: "gp_test_device")
    monkeypatch.setattr(torch, "gp_test_device", _DEVICE, raising=False)
    model = HoldsDeviceDropout()
    dumper = AclGraphDumper(write_config(replay={"list": ["drop"]}))
    dumper.start(model)
    with torch.no_grad():
        model(torch.ones(4))
    before = _DEVICE.counter.clone()
    dumper.step()
    dumper.stop()
    assert torch.equal(_DEVICE.counter, before)
    (call,) = _replay_file(str(tmp_path / "dump"), 0)[1]["modules"]
    assert call["verdict"] == "not judged" and "draws random numbers" in call["reason"], call

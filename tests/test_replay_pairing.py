"""Replay: each kept call's outputs are paired with its own inputs.

The reference is the module's own arithmetic: the wired modules compute
``2 * x`` exactly in eager mode, so every correctly paired call has a local
error of 0 and inherits; a call paired with another call's outputs would
show an error of the size of the difference between the two inputs.
"""

from __future__ import annotations

import glob
import json
import os
import threading
from typing import Any

import torch
from torch import nn

from graphprobe import AclGraphDumper


def _replay_file(dump_path: str, step: int) -> dict[str, Any]:
    found = glob.glob(os.path.join(dump_path, f"step{step}", "*", "replay.json"))
    assert len(found) == 1, f"expected one replay.json for step {step}, found {found}"
    with open(found[0]) as f:
        return json.load(f)


class Picky(nn.Module):
    """Doubles its input; refuses (raises) an input with large values."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if bool(x.abs().max() > 100):
            raise ValueError("input out of range")
        return x * 2


class CatchesAndRetries(nn.Module):
    """Calls ``inner`` on a scaled input, and on the input itself when that raises."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = Picky()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        try:
            return self.inner(x * 1000)
        except ValueError:
            return self.inner(x)


def test_a_call_that_raised_does_not_take_the_next_calls_outputs(write_config, tmp_path) -> None:
    torch.manual_seed(0)
    model = CatchesAndRetries()
    x = torch.randn(3, 5)
    dumper = AclGraphDumper(write_config(replay=True))
    dumper.start(model)
    with torch.no_grad():
        model(x)
    dumper.step()
    dumper.stop()
    calls = {m["entry"]: m for m in _replay_file(str(tmp_path / "dump"), 0)["modules"]}
    raised, retried = calls["Module.inner.Picky.forward.0"], calls["Module.inner.Picky.forward.1"]
    # The first call raised: it has no graph-mode outputs to judge.
    assert raised["verdict"] == "not judged" and "outputs were not kept" in raised["reason"], raised
    # The second call's own outputs, 2 * x exactly as eager mode computes them.
    assert retried["verdict"] == "inherits", retried
    assert retried["outputs"][0]["local_error"] == 0.0, retried


# Module-level: replay deep-copies the module, and an Event cannot be copied.
_A_INSIDE, _B_DONE = threading.Event(), threading.Event()


class Gate(nn.Module):
    """Doubles its input; in thread "A" it first waits until thread "B" has
    made a whole call, so that the two calls interleave."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if threading.current_thread().name == "A":
            _A_INSIDE.set()
            assert _B_DONE.wait(30), "thread B did not finish its call"
        return x * 2


class HoldsGate(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gate = Gate()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gate(x)


def test_calls_of_two_threads_keep_their_own_outputs(write_config, tmp_path) -> None:
    _A_INSIDE.clear()
    _B_DONE.clear()
    model = HoldsGate()
    xa, xb = torch.full((4,), 1.0), torch.full((4,), -3.0)
    errors: list[BaseException] = []

    def call(x: torch.Tensor, after: threading.Event | None) -> None:
        try:
            with torch.no_grad():
                model(x)
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            if after is not None:
                after.set()

    dumper = AclGraphDumper(write_config(replay={"list": ["gate"]}))
    dumper.start(model)
    a = threading.Thread(target=call, args=(xa, None), name="A")
    a.start()
    assert _A_INSIDE.wait(30)
    b = threading.Thread(target=call, args=(xb, _B_DONE), name="B")
    b.start()
    b.join(30)
    a.join(30)
    assert not errors, errors
    dumper.step()
    dumper.stop()
    modules = _replay_file(str(tmp_path / "dump"), 0)["modules"]
    assert len(modules) == 2, modules
    for m in modules:
        assert m["verdict"] == "inherits", m
        assert m["outputs"][0]["local_error"] == 0.0, m

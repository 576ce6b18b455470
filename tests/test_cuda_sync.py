"""flush() and the exit hook synchronise only the CUDA devices graphprobe
used: synchronising every visible device creates a context on each one (in
every rank process) and fails under EXCLUSIVE_PROCESS. torch.cuda is mocked;
tests/gpu/test_cuda_fixes.py checks the real list on a GPU."""

from __future__ import annotations

from typing import Any

import pytest

from graphprobe import writer


class _UsedDevices:
    """The engine module with a chosen list of used devices."""

    def __init__(self, real: Any, used: list[int]) -> None:
        self._real = real
        self._used = used

    def cuda_devices_used(self) -> list[int]:
        return list(self._used)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


@pytest.fixture
def fake_cuda(monkeypatch):
    synced: list[int] = []
    cuda = writer.torch.cuda
    monkeypatch.setattr(cuda, "is_available", lambda: True)
    monkeypatch.setattr(cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(cuda, "device_count", lambda: 8)
    monkeypatch.setattr(cuda, "synchronize", lambda device=None: synced.append(device))
    return synced


def test_flush_synchronises_only_used_devices(fake_cuda, monkeypatch):
    monkeypatch.setattr(writer, "_C", _UsedDevices(writer._C, [1, 3]))
    writer.flush()
    assert fake_cuda == [1, 3]


def test_nothing_used_nothing_synchronised(fake_cuda, monkeypatch):
    monkeypatch.setattr(writer, "_C", _UsedDevices(writer._C, []))
    writer.flush()
    assert fake_cuda == []


def test_uninitialised_cuda_is_not_touched(monkeypatch):
    monkeypatch.setattr(writer.torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(writer, "_C", _UsedDevices(writer._C, [0]))
    assert writer._devices_to_synchronize() == []


def test_the_engine_reports_no_device_without_cuda():
    # This build has no CUDA: nothing can have been used.
    assert list(writer._C.cuda_devices_used()) == []

"""The fake PrivateUse1 device of the NPU tests (fake_npu.cpp), renamed "npu".

:func:`load` builds it once with ``torch.utils.cpp_extension.load`` into
``build/fake_npu`` (about 30 s the first time; later runs only load it),
renames PrivateUse1 to ``npu`` and registers the device's runtime with
graphprobe's engine, as ``graphprobe._C_npu`` does on a real Ascend machine.
A process can rename PrivateUse1 once, so the device is loaded once per
process.
"""

from __future__ import annotations

import contextlib
import os
import types
from collections.abc import Iterator
from typing import Any

import torch

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(os.path.dirname(_HERE))
_ext: Any = None


def load() -> Any:
    """The fake device's extension module, built, renamed and registered."""
    global _ext
    if _ext is not None:
        return _ext
    from torch.utils import cpp_extension

    from graphprobe import _C

    build = os.path.join(_ROOT, "build", "fake_npu")
    os.makedirs(build, exist_ok=True)
    ext = cpp_extension.load(
        name="graphprobe_fake_npu",
        sources=[os.path.join(_HERE, "fake_npu.cpp")],
        extra_include_paths=[os.path.join(_ROOT, "csrc")],
        extra_cflags=["-O1", "-g0"],
        build_directory=build,
        verbose=False,
    )
    if torch._C._get_privateuse1_backend_name() != "npu":
        torch.utils.rename_privateuse1_backend("npu")
    if not hasattr(torch, "npu"):
        # What dynamo and torch.device("npu") ask of a device module.
        module = types.ModuleType("torch.npu")
        module.is_available = lambda: True  # type: ignore[attr-defined]
        module.device_count = lambda: 1  # type: ignore[attr-defined]
        module.current_device = lambda: 0  # type: ignore[attr-defined]
        module.is_initialized = lambda: True  # type: ignore[attr-defined]
        module._is_in_bad_fork = lambda: False  # type: ignore[attr-defined]
        module.manual_seed_all = lambda seed: None  # type: ignore[attr-defined]
        # torch.accelerator now reports this device: torch's test helpers
        # (opcheck's freeze_rng_state) save and restore its RNG state.
        module.get_rng_state = lambda device="npu": torch.zeros(0, dtype=torch.uint8)  # type: ignore[attr-defined]
        module.set_rng_state = lambda state, device="npu": None  # type: ignore[attr-defined]
        module.manual_seed = lambda seed: None  # type: ignore[attr-defined]
        module.synchronize = lambda device=None: None  # type: ignore[attr-defined]
        torch._register_device_module("npu", module)
        torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
    ext.register_runtime(_C.runtime_registrar())
    _ext = ext
    return ext


class Graph:
    """An emulated ACL graph: device work between ``capture()`` and its end is
    recorded, and :meth:`replay` runs it (like ``torch.npu.NPUGraph``)."""

    def __init__(self) -> None:
        self.id: int | None = None

    @contextlib.contextmanager
    def capture(self) -> Iterator[None]:
        """Records the device work done inside the block."""
        ext = load()
        ext.capture_begin()
        try:
            yield
        finally:
            self.id = int(ext.capture_end())

    def replay(self) -> None:
        """Runs the recorded work once."""
        assert self.id is not None, "replay() before capture()"
        load().replay(self.id)

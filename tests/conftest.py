from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import sys
import tempfile
from typing import Any, Callable

import pytest

sys.path.insert(0, os.path.dirname(__file__))

# Inductor's on-disk caches key on the traced graph, not on graphprobe's
# lowerings (wiring/fused_stats.py): a cache left by an earlier build of this
# tree let a compile test pass on code the current tree no longer generates.
# So a test session compiles into a cache of its own, removed at the end,
# unless the caller chose one. Spawned workers inherit it.
_OWN_INDUCTOR_CACHE = None
if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    _OWN_INDUCTOR_CACHE = os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="graphprobe-test-inductor-")


# A test run started in the background by a non-interactive shell (`cmd &`,
# nohup) inherits SIGINT ignored, and every process a test starts would too
# (an ignored disposition survives exec; Python then installs no handler):
# the tests that interrupt a child (diagnose, the tensor task) would wait on
# a child that cannot be interrupted. A run from a terminal has Python's
# handler; this one gets it too, and its children SIGINT's default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_sessionfinish(session, exitstatus):
    if _OWN_INDUCTOR_CACHE is not None:
        shutil.rmtree(_OWN_INDUCTOR_CACHE, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    """The fake NPU device (tests/fake_npu) changes process-wide state once
    loaded: PrivateUse1 becomes the accelerator "npu", which torch's own
    helpers then consult (torch.accelerator). Its tests run last."""
    items.sort(key=lambda item: os.path.basename(str(item.fspath)) == "test_npu_fake.py")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On a device run (scripts/gpu_check.sh, scripts/npu_check.sh set
    GRAPHPROBE_FAIL_ON_SKIP=1) a skip in tests/gpu or tests/npu, a missing
    feature or a guard inside a test included, is a failure: device time is
    scarce and a silent skip would read as a pass."""
    outcome = yield
    report = outcome.get_result()
    path = str(item.fspath).replace(os.sep, "/")
    device_test = "/tests/gpu/" in path or "/tests/npu/" in path
    if report.skipped and device_test and os.environ.get("GRAPHPROBE_FAIL_ON_SKIP") == "1":
        report.outcome = "failed"
        report.longrepr = f"skipped during a device run (GRAPHPROBE_FAIL_ON_SKIP=1): {report.longrepr}"


@pytest.fixture
def write_config(tmp_path) -> Callable[..., str]:
    """Writes a config.json into tmp_path and returns its path."""

    def write(**fields: Any) -> str:
        fields.setdefault("dump_path", str(tmp_path / "dump"))
        path = tmp_path / "config.json"
        path.write_text(json.dumps(fields))
        return str(path)

    return write


@pytest.fixture
def read_step() -> Callable[[str, int], dict[str, Any]]:
    """Loads dump_path/step{N}/<the one process folder>/dump.json."""

    def read(dump_path: str, step: int) -> dict[str, Any]:
        import graphprobe

        graphprobe.flush()  # dump.json is written by the background writer
        found = glob.glob(os.path.join(dump_path, f"step{step}", "*", "dump.json"))
        assert len(found) == 1, f"expected one dump.json for step {step}, found {found}"
        with open(found[0]) as f:
            return json.load(f)

    return read


@pytest.fixture(autouse=True)
def _no_dumper_left_started():
    """A test that fails before stop() must not leave its dumper started:
    every later test would fail with DumperStateError."""
    yield
    import graphprobe

    started = graphprobe.AclGraphDumper._started() if graphprobe.AclGraphDumper._started else None
    if started is not None:
        try:
            started.stop()
        except Exception:  # the test has failed already; its own error is the one to read
            pass


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    import torch

    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def hook_guards_off():
    """dynamo as in a fresh process: no guards on module hooks until a
    dumper's start() turns them on. ``config.patch`` restores the previous
    value afterwards (pytest's monkeypatch would delete the attribute, which
    torch's config module then hides)."""
    import torch

    with torch._dynamo.config.patch(skip_nnmodule_hook_guards=True):
        yield

"""GPU tests: skipped without CUDA, unless GRAPHPROBE_FAIL_ON_SKIP=1 (the GPU
check script sets it) turns a skip into a failure, because device time is
scarce and a silent skip there would look like a pass.

Around every test: GRAPHPROBE_TEST_TIMEOUT (seconds) ends a hung test with
every thread's stack, and a dumper the test left started is stopped."""

from __future__ import annotations

import os

import pytest
import torch
from harness import arm_timeout, disarm_timeout, per_test_timeout, stop_leftover_dumper


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    if os.environ.get("GRAPHPROBE_FAIL_ON_SKIP") == "1":
        raise pytest.UsageError("GRAPHPROBE_FAIL_ON_SKIP=1 but CUDA is not available")
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "tests/gpu" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(skip)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    arm_timeout(per_test_timeout())
    try:
        yield
    finally:
        disarm_timeout()


@pytest.fixture(autouse=True)
def _no_dumper_left_started():
    yield
    stop_leftover_dumper()

"""The GPU smoke cases (tests/gpu/smoke.py) under pytest, each in a fresh
process: the first probe of a device, the writer thread against a capture,
dtypes CUDA cannot reduce inside a capture, the live switch against queued
replays, and the record lists of eager, graph and reduce-overhead runs.
scripts/gpu_check.sh runs smoke.py directly and leaves this file out."""

from __future__ import annotations

import pytest
import smoke
from harness import per_test_timeout


@pytest.mark.parametrize("name", list(smoke.CASES))
def test_smoke_case(name):
    # Within the per-test timeout, if one is set, so that the case's own
    # stack dump comes first.
    limit = per_test_timeout()
    timeout = min(smoke.DEFAULT_TIMEOUT, limit - 5) if limit > 10 else smoke.DEFAULT_TIMEOUT
    result = smoke.run_in_subprocess(name, timeout=timeout)
    assert result["status"] == "PASS", f"{name}: {result['status']}\n{result['output'][-6000:]}"

"""What every GPU test needs around it: no dumper left started by a failed
test, and a per-test timeout that shows where a hang is (pytest-timeout may
be absent on the GPU machine)."""

from __future__ import annotations

import faulthandler
import os
import sys


def stop_leftover_dumper() -> bool:
    """Stops the dumper a failed test left started (its stop() was never
    reached), so that later tests do not all fail with DumperStateError.
    Returns whether there was one. Errors of that stop() propagate."""
    from graphprobe.dumper import AclGraphDumper

    ref = AclGraphDumper._started
    dumper = ref() if ref is not None else None
    if dumper is None or not dumper._active:
        return False
    dumper.stop()
    return True


def per_test_timeout() -> float:
    """Seconds one test may run: GRAPHPROBE_TEST_TIMEOUT, 0 (none) when unset."""
    raw = os.environ.get("GRAPHPROBE_TEST_TIMEOUT", "0")
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"GRAPHPROBE_TEST_TIMEOUT must be a number of seconds, got {raw!r}") from None
    if value < 0:
        raise ValueError(f"GRAPHPROBE_TEST_TIMEOUT must not be negative, got {raw!r}")
    return value


def arm_timeout(seconds: float) -> None:
    """After `seconds`, prints every thread's stack and ends the process
    (a hung CUDA callback cannot be interrupted any other way)."""
    if seconds > 0:
        faulthandler.dump_traceback_later(seconds, exit=True, file=sys.stderr)


def disarm_timeout() -> None:
    faulthandler.cancel_dump_traceback_later()

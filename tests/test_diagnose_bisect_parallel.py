"""The bisect's parallel, memoized predicate (issue #37): the same answers
and the same tests asked as torch's bisector driven sequentially.

The reference is torch's ``CompilerBisector.do_bisect`` with a plain
predicate; the fake compiler below decides each test from the bisector's
state alone (a backend from the first failing one on fails; disabling the
faulty subsystem fixes it; in the binary search, the faulty application
number ``bad`` of ``calls`` counted through the bisector's own
``disable_subsystem``), so both drivers see the same verdicts. Cost: under
a second per case, no subprocess."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from graphprobe.diagnose.bisect import _drive, _Key, _Outcome
from graphprobe.diagnose.commands import StopSignal

BACKENDS = ["eager", "aot_eager", "aot_eager_decomp_partition", "aot_eager_decomp_partition_crossref", "inductor"]


class Fake:
    """A compiler whose error is in ``backend`` (None: none), fixed by
    disabling ``subsystem`` (None: by none), at application ``bad`` of
    ``calls`` (a bisected subsystem); ``abort``: a test that cannot be judged."""

    def __init__(self, backend: str | None, subsystem: str | None = None, bad: int = 0, calls: int = 8,
                 abort: tuple[str, str | None] | None = None) -> None:
        self.backend, self.subsystem, self.bad, self.calls, self.abort = backend, subsystem, bad, calls, abort

    def verdict(self, backend: str, subsystem: str | None, state: str | None) -> bool | None:
        """True: the test passes; None: it cannot be judged."""
        from torch._inductor.compiler_bisector import CompilerBisector as CB

        if self.abort == (backend, subsystem):
            return None
        if self.backend is None or BACKENDS.index(backend) < BACKENDS.index(self.backend):
            return True
        if subsystem is None or subsystem != self.subsystem or backend != self.backend:
            return False  # the faulty backend (or a later one) with the fault's subsystem on
        if state == "test_disable":
            return True
        # find_max_bounds and bisect: what a child would do, the applications counted by the bisector itself.
        applied = [not CB.disable_subsystem(backend, subsystem, lambda i=i: f"node{i}") for i in range(self.calls)]
        return not applied[self.bad]

    def child(self, key: _Key, cache: Path) -> bool | None:
        """The verdict of a child process with ``TORCHINDUCTOR_CACHE_DIR=cache``:
        the bisector's state read from (and, as its child does, written to)
        the files there, as torch 2.13's ``disable_subsystem`` does."""
        if key.state in (None, "test_disable") or key.subsystem != self.subsystem or key.backend != self.backend:
            return self.verdict(key.backend, key.subsystem, key.state)
        folder = cache / "bisect" / key.backend
        state = (folder / f"{key.subsystem}_run_state.txt").read_text().strip()
        span = folder / f"{key.subsystem}_bisect_range.txt"
        if state == "find_max_bounds":
            span.write_text(f"low=0\nhigh={self.calls - 1}\n")
            return False  # every application on: the error
        assert state == "bisect", state
        low, high = (int(line.split("=")[1]) for line in span.read_text().split()[-2:])
        if high - low <= 2:
            with open(folder / f"{key.subsystem}_call_counter_debug_info.txt", "a") as f:
                f.writelines(f"{i}=node{i}\n" for i in range(low, high + 1))
        return self.bad > (low + high) // 2  # applications after the midpoint are off


def _state() -> tuple[str, str | None, str | None, tuple[int, int] | None]:
    """The test the bisector asks for: backend, subsystem, state, range."""
    from torch._inductor.compiler_bisector import CompilerBisector as CB

    backend, subsystem = CB.get_backend(), CB.get_subsystem()
    assert backend is not None
    state = CB.get_run_state(backend, subsystem) if subsystem else None
    return backend, subsystem, state, CB.get_bisect_range(backend, subsystem) if state == "bisect" else None


def _sequential(fake: Fake, cache: Path) -> tuple[Any, list[tuple[str, str | None, str | None, Any]]]:
    """torch's bisector with a plain predicate: (its answer, the tests it asked for)."""
    from torch._inductor.compiler_bisector import CompilerBisector as CB

    asked: list[tuple[str, str | None, str | None, tuple[int, int] | None]] = []

    def fn() -> bool:
        asked.append(_state())
        v = fake.verdict(*asked[-1][:3])
        if v is None:
            raise RuntimeError("not judged")
        return v

    CB.in_process_cache = str(cache)
    try:
        found = CB.do_bisect(fn)
    except RuntimeError:
        found = "stopped"
    finally:
        CB.in_process_cache = None
    return found, asked


def _parallel(fake: Fake, tmp: Path, jobs: int) -> tuple[Any, list[dict[str, Any]]]:
    """The memoized, parallel driver on the same fake: (its answer, its tests[])."""
    rng = random.Random(jobs)
    lock = threading.Lock()

    def run_one(key: _Key, k: int, stop: StopSignal, cache: Path) -> _Outcome:
        with lock:
            pause = rng.uniform(0, 0.02)
        time.sleep(pause)  # the tests finish in another order than they started
        ok = fake.child(key, cache)
        return _Outcome(ok, {"passed": ok, "seen": "fake", "local_error": None, "seconds": pause, "log": f"t{k}"})

    tmp.mkdir()
    res = _drive(run_one, tmp / "cache", tmp / "bisector.log", jobs, lambda m: None)
    found = "stopped" if res.note.startswith("bisect stopped") else (
        None if res.backend is None else (res.backend, res.subsystem, res.bisect_number, res.debug_info))
    return found, res.tests


CASES = [
    Fake("eager"),
    Fake("aot_eager"),
    Fake("aot_eager_decomp_partition", "aot_eager_decomp_partition_cse"),
    Fake("aot_eager_decomp_partition", "decomposition", bad=3, calls=11),
    Fake("inductor", "lowerings", bad=9, calls=39),
    Fake("inductor", "lowerings", bad=0, calls=1),
    Fake("inductor", "post_grad_passes", bad=6, calls=7),
    Fake("inductor", "inductor_emulate_precision_casts"),
    Fake("inductor", "cudagraphs", bad=0, calls=2),
    Fake("inductor", None),  # no subsystem's disabling fixes it
    Fake(None),  # every backend passes
    Fake("inductor", "lowerings", bad=2, calls=5, abort=("inductor", "layout_optimization")),
    Fake("inductor", "lowerings", bad=2, calls=5, abort=("aot_eager", None)),
]


@pytest.mark.parametrize("jobs", [1, 2, 5])
@pytest.mark.parametrize("fake", CASES, ids=lambda f: f"{f.backend}-{f.subsystem}-{f.bad}-{f.abort}")
def test_parallel_bisect_asks_and_answers_as_the_sequential_one(tmp_path, fake, jobs):
    expected, asked = _sequential(fake, tmp_path / "seq")
    if expected not in (None, "stopped"):
        expected = (expected.backend, expected.subsystem, expected.bisect_number, expected.debug_info)
    found, tests = _parallel(fake, tmp_path / "par", jobs)
    assert found == expected
    used = [t for t in tests if t["used"]]
    # The bisector asked for the same tests (those run ahead in another order). It may ask for one twice (when no
    # inductor subsystem fixes the error it disables them again from the second on: 45 questions, 9 tests): the
    # memo answers the second time.
    assert sorted(str((t["backend"], t["subsystem"], t["state"], t["range"] and tuple(t["range"]))) for t in used) == sorted(
        set(map(str, asked)))
    assert [t["test"] for t in tests] == list(range(len(tests)))
    if jobs == 1:  # one at a time, each when asked: the sequential bisect
        assert len(tests) == len(set(asked)) and not any(t["speculative"] for t in tests)
    for t in tests:  # find_max_bounds never runs ahead: its child writes the bisector's state
        assert not (t["speculative"] and t["state"] == "find_max_bounds"), t
        assert t["used"] or t["speculative"]


def test_tests_run_ahead_at_once_and_unneeded_ones_stop(tmp_path):
    # Inductor's lowering: the 5 backends and 9 subsystem tests are independent; with 4 at once they overlap.
    fake = Fake("inductor", "lowerings", bad=9, calls=39)
    running, peak = 0, 0
    lock = threading.Lock()

    def run_one(key: _Key, k: int, stop: StopSignal, cache: Path) -> _Outcome:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        try:
            t0 = time.monotonic()
            while time.monotonic() - t0 < 0.05 and not stop.is_set():
                time.sleep(0.005)
            ok = None if stop.is_set() else fake.child(key, cache)
        finally:
            with lock:
                running -= 1
        return _Outcome(ok, {"passed": ok, "seen": "fake", "local_error": None, "seconds": 0.05, "log": ""})

    res = _drive(run_one, tmp_path / "cache", tmp_path / "bisector.log", 4, lambda m: None)
    assert (res.backend, res.subsystem, res.bisect_number, res.debug_info) == ("inductor", "lowerings", 9, "node9")
    assert peak == 4
    _, asked = _sequential(fake, tmp_path / "seq")
    assert len(asked) == 5 + 9 + 1 + 5  # 39 lowerings: find_max_bounds, then 5 steps of the binary search
    assert sum(t["used"] for t in res.tests) == len(asked)
    stopped = [t for t in res.tests if t["seen"].startswith("stopped")]
    assert all(not t["used"] and t["passed"] is None for t in stopped)
    assert not (tmp_path / "cache").exists()


def test_the_eager_answer_stops_the_tests_run_ahead(tmp_path):
    started: list[str] = []

    def run_one(key: _Key, k: int, stop: StopSignal, cache: Path) -> _Outcome:
        started.append(key.backend)
        if key.backend == "eager":
            time.sleep(0.05)
            return _Outcome(False, {"passed": False, "seen": "1 of 1 calls create", "local_error": 0.5,
                                    "seconds": 0.05, "log": ""})
        while not stop.is_set():  # a long test: only the stop ends it
            time.sleep(0.005)
        return _Outcome(True, {"passed": True, "seen": "x", "local_error": None, "seconds": 1.0, "log": ""})

    res = _drive(run_one, tmp_path / "cache", tmp_path / "bisector.log", 2, lambda m: None)
    assert res.backend == "eager" and started == ["eager", "aot_eager"]
    assert [(t["used"], t["speculative"], t["passed"]) for t in res.tests] == [(True, False, False),
                                                                             (False, True, None)]
    assert res.tests[1]["seen"].startswith("stopped (not needed")


def test_a_failure_beside_other_tests_runs_again_alone(tmp_path):
    # The eager test's command fails whenever another test runs beside it (the machine's failure: memory, a shared
    # GPU); alone it passes. Counted as a failing test, it would answer 'eager'; run again alone, the answer is
    # the compiler's, as the sequential bisect finds it.
    fake = Fake("inductor", "lowerings", bad=9, calls=39)
    running: set[int] = set()
    lock = threading.Lock()
    # The eager test's first run and the first other test started meet here
    # before either looks whether it has company: on a loaded machine the
    # other thread could otherwise start or end outside the eager run's
    # window (a CI run saw the eager test alone and passing at once). A run
    # that nothing meets within the timeout has no company.
    meet = threading.Barrier(2, timeout=5.0)
    first = {"eager": True, "other": True}

    def run_one(key: _Key, k: int, stop: StopSignal, cache: Path) -> _Outcome:
        side = "eager" if key.backend == "eager" else "other"
        with lock:
            running.add(k)
            wait, first[side] = first[side], False
        try:
            met = False
            if wait:
                try:
                    meet.wait()
                    met = True  # another test was running beside this one
                except threading.BrokenBarrierError:
                    pass
            time.sleep(0.05)
            with lock:
                crowded = met or len(running) > 1
        finally:
            with lock:
                running.discard(k)
        if key.backend == "eager" and crowded:
            return _Outcome(False, {"passed": False, "seen": "the command failed (exit None, killed by SIGKILL)",
                                    "local_error": None, "seconds": 0.05, "log": ""}, crashed=True)
        ok = fake.child(key, cache)
        return _Outcome(ok, {"passed": ok, "seen": "fake", "local_error": None, "seconds": 0.05, "log": ""})

    res = _drive(run_one, tmp_path / "cache", tmp_path / "bisector.log", 2, lambda m: None)
    assert (res.backend, res.subsystem, res.bisect_number, res.debug_info) == ("inductor", "lowerings", 9, "node9")
    eager = [t for t in res.tests if t["backend"] == "eager"]
    assert [t["used"] for t in eager] == [False, True] and "runs again alone" in eager[0]["seen"]
    assert eager[1]["passed"] is True

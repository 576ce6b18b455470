"""Stage 3, bisect: torch's CompilerBisector (torch/_inductor/compiler_bisector.py)
driven with replay's verdict on the origin module as the pass/fail predicate.

The bisector's state lives in files under ``{cache}/bisect``; each test is
the user's command in a subprocess with ``TORCHINDUCTOR_CACHE_DIR={cache}``
and the bisector's variables (``TORCH_BISECT_BACKEND``, which
``torch.compile`` obeys, ``TORCH_BISECT_SUBSYSTEM``, ``TORCH_BISECT_MAX=-1``
to disable a subsystem whole), as the bisector's own ``run`` mode does. A
test passes when the command exits 0 and replay judges no call of the
origin "creates" in the compared steps.

Parallel tests (issue #37): the bisector stays the driver (its answers and
``debug_info`` are torch's), but its predicate is memoized. Most of its
tests are independent of each other: a backend alone, a subsystem disabled
whole (``TORCH_BISECT_MAX=-1``: no state file read) and a config change
(its value read from ``{cache}/bisect/{backend}/{name}_config.txt``, which
is written before the test starts, with the bisector's own writer). Those
run ahead of the bisector's questions, up to ``jobs`` at once, in the
bisector's order (:meth:`_Tests.candidates`), and a test whose verdict can
no longer be asked for is stopped. ``find_max_bounds`` and the asked steps
of the binary search, whose children read and write the bisector's state
files, run when asked; the next step for either outcome of the current one
runs ahead in a state folder of its own (:func:`_drive`). The tests share
``{cache}``: inductor's compiled C++ kernels (cached by their source) are
compiled once for all of them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from graphprobe.diagnose.commands import Runner, StopSignal
from graphprobe.diagnose.configs import write_config
from graphprobe.diagnose.replay_files import find_replays, read_replay

__all__ = ["BisectResult", "MAX_DEFAULT_JOBS", "bisect", "default_jobs"]


class _Abort(Exception):
    """A test that cannot be judged: the bisect stops."""


#: The most tests run at once by default: the bisector has at most 14 independent tests (5 backends, 9 inductor
#: subsystems) and the binary search 2 steps ahead, and each test is a full run of the user's script (its memory).
MAX_DEFAULT_JOBS = 8


def default_jobs() -> int:
    """How many bisect tests run at once by default: the CPUs this process
    may run on, at most :data:`MAX_DEFAULT_JOBS`."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity on this platform
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_DEFAULT_JOBS))


@dataclass
class BisectResult:
    """The bisector's answer (``backend`` None: no backend reproduces the
    error, or the bisect stopped, see ``note``), every test run (those it
    asked for and those run ahead, in the order started) and ``jobs``, the
    tests run at once."""

    backend: str | None = None
    subsystem: str | None = None
    bisect_number: int | None = None
    debug_info: str | None = None
    note: str = ""
    tests: list[dict[str, Any]] = field(default_factory=list)
    jobs: int = 1

    def as_json(self) -> dict[str, Any]:
        """The ``bisect`` object of diagnosis.json."""
        return {"backend": self.backend, "subsystem": self.subsystem, "bisect_number": self.bisect_number,
                "debug_info": self.debug_info, "note": self.note, "jobs": self.jobs, "tests": self.tests}


@dataclass(frozen=True)
class _Key:
    """A test the bisector can ask for: the backend, the subsystem (None:
    the backend alone), the bisector's state for it and, in the binary
    search, the range."""

    backend: str
    subsystem: str | None = None
    state: str | None = None
    span: tuple[int, int] | None = None

    def describe(self) -> str:
        """The test in words, for progress lines."""
        what = f"backend {self.backend}"
        if self.subsystem:
            what += f", {self.subsystem} ({self.state}"
            what += f", range [{self.span[0]}, {self.span[1]}])" if self.span else ")"
        return what

    def environment(self, cache: Path) -> dict[str, str]:
        """The variables that make a run of the user's command this test
        (torch's CompilerBisector reads them), with its own inductor cache."""
        env = {"TORCHINDUCTOR_CACHE_DIR": str(cache), "TORCH_COMPILE_BACKEND": self.backend,
               "TORCH_BISECT_BACKEND": self.backend}
        if self.subsystem:
            env["TORCH_BISECT_SUBSYSTEM"] = self.subsystem
            if self.state == "test_disable":
                env["TORCH_BISECT_MAX"] = "-1"
        return env


@dataclass
class _Outcome:
    """What one test gave: ``ok`` (None: not judged), the tests[] entry,
    ``crashed`` (the command failed: exit code not 0, or killed) and, for a
    binary-search step run ahead in a folder of its own, the bisector's
    notes on the applications it saw (``debug``)."""

    ok: bool | None
    entry: dict[str, Any]
    debug: list[str] | None = None
    crashed: bool = False


#: Runs one test: (key, test number, stop signal, its TORCHINDUCTOR_CACHE_DIR) -> its outcome (``entry`` holds
#: the tests[] fields it knows: passed, seen, local_error, seconds, log).
TestFn = Callable[[_Key, int, StopSignal, Path], _Outcome]


def _judge(dump: Path, module: str, steps: int | None) -> tuple[bool | None, str, float | None]:
    """(passes, what was seen, largest local error) for the origin's calls
    in a test's dump; passes None when no call of it was judged."""
    judged, creates, worst = 0, 0, None
    for step, f in find_replays(dump):
        if steps is not None and step >= steps:
            continue
        for m in read_replay(f, step):
            if m.module != module or m.verdict == "not judged":
                continue
            judged += 1
            le = m.error("local_error")
            worst = le if worst is None or (le is not None and le > worst) else worst
            creates += m.verdict == "creates"
    if not judged:
        return None, f"no judged call of {module} in {dump}", None
    return creates == 0, f"{creates} of {judged} calls create", worst


class _Tests:
    """The bisector's memoized predicate: runs the tests it will ask for
    ahead of it, ``jobs`` at once, and answers from what ran.

    Every method runs in the bisector's (the calling) thread; a test runs in
    a thread of its own, which only runs it and files the outcome. With
    ``jobs`` 1 a test starts only when asked: the sequential bisect.
    ``run(key, k, stop, ahead)`` runs test number ``k``; ``ahead``: a step
    of the binary search run before it is asked (in a state folder of its
    own). ``before_start(key)`` runs before a test starts, ``adopt(key,
    outcome)`` when the verdict of a step run ahead is used.

    A command that failed while other tests ran beside it gives no verdict:
    the failure may be the machine's (memory, a GPU shared by the tests),
    not the compiler's, and the sequential bisect would count it as a
    failing test. When asked for, it runs again alone, nothing beside it."""

    def __init__(self, run: Callable[[_Key, int, StopSignal, bool], _Outcome], jobs: int,
                 plan: dict[str, list[Any]], say: Callable[[str], None],
                 before_start: Callable[[_Key], None] = lambda key: None,
                 adopt: Callable[[_Key, _Outcome], None] = lambda key, o: None) -> None:
        if jobs < 1:
            raise ValueError(f"jobs: {jobs!r} given; at least 1 test must run at a time")
        self._run, self._jobs, self._plan, self._say = run, jobs, plan, say
        self._before_start, self._adopt = before_start, adopt
        self._cond = threading.Condition()
        self._done: dict[_Key, _Outcome] = {}
        self._running: dict[_Key, tuple[threading.Thread, StopSignal, int]] = {}  # and the test's number
        self._asked: set[_Key] = set()
        self._company: set[int] = set()  # the tests that ran while another one did
        self._rerun_alone: set[_Key] = set()  # failed beside another test: to run alone when asked
        self._alone: _Key | None = None  # the test running alone now
        self._error: BaseException | None = None
        self._t0 = time.monotonic()
        self.entries: list[dict[str, Any]] = []

    def candidates(self) -> list[_Key]:
        """The independent tests the bisector may still ask for, in its
        order: each backend not yet known to pass, up to the first known to
        fail; then that backend's subsystems disabled, up to the first that
        fixes the error. While no backend is known to fail, inductor's
        subsystems are guessed (torch.compile's default backend: its tests
        are the longest, and the usual answer)."""
        out: list[_Key] = []
        failing = None
        for backend in self._plan:
            o = self._done.get(_Key(backend))
            if o is None:
                out.append(_Key(backend))
                continue
            if o.ok is None:  # the bisect stops when it asks for this one: nothing after it is asked
                return out
            if not o.ok:
                failing = backend
                break
        if failing is None:
            if _Key("inductor") not in out:
                return out
            failing = "inductor"
        for sub in self._plan[failing]:
            key = _Key(failing, sub.name, "test_disable")
            o = self._done.get(key)
            if o is None:
                out.append(key)
            elif o.ok is not False:  # disabling it fixes the error (or it cannot be judged): the last asked
                break
        return out

    @staticmethod
    def next_steps(asked: _Key) -> list[_Key]:
        """The binary-search steps the bisector asks for after ``asked``:
        the lower half (its test fails) first, then the upper half."""
        if asked.state != "bisect" or asked.span is None:
            return []
        low, high = asked.span
        mid = (low + high) // 2
        return [replace(asked, span=span) for span in ((low, mid), (mid + 1, high)) if span[0] != span[1]]

    def ask(self, key: _Key) -> bool:
        """The verdict of ``key``'s test (True: passes), run now unless it
        ran or runs already; raises _Abort when it could not be judged."""
        with self._cond:
            self._asked.add(key)
            while key not in self._done:
                if self._error is not None:
                    raise self._error
                self._schedule(key)
                self._cond.wait()
            o = self._done[key]
            o.entry["used"] = True
            if o.ok is None:
                raise _Abort(f"test {o.entry['test']}: {o.entry['seen']} (log {o.entry['log']})")
            if o.debug is not None:
                self._adopt(key, o)
            return o.ok

    def close(self, reason: str) -> None:
        """Stops every test still running (``reason`` in its record) and
        waits for their threads."""
        with self._cond:
            running = list(self._running.values())
            for _, stop, _ in running:
                stop.set(reason)
        for thread, _, _ in running:
            thread.join()
        self.entries.sort(key=lambda e: e["test"])

    def _schedule(self, asked: _Key) -> None:
        """Starts ``asked`` (over the limit if need be: the bisector waits
        for it), stops what can no longer be asked for, and fills the free
        places with the next candidates. Holds the lock."""
        if asked in self._rerun_alone and asked not in self._running:
            for _, stop, _ in self._running.values():
                stop.set("stopped so that a test that failed beside others runs again alone")
            if self._running:
                return  # woken again as each one ends
            self._rerun_alone.discard(asked)
            self._alone = asked
        alone = self._alone is not None and self._alone not in self._done
        cands = self.candidates() + self.next_steps(asked) if self._jobs > 1 and not alone else []
        if asked not in self._running:
            self._start(asked)
        for key, (_, stop, _) in self._running.items():
            if key not in cands and key not in self._asked:
                stop.set("not needed: the bisector will not ask for this test")
        busy = sum(not stop.is_set() for _, stop, _ in self._running.values())
        for key in cands:
            if busy >= self._jobs:
                break
            if key not in self._done and key not in self._running:
                self._start(key)
                busy += 1

    def _start(self, key: _Key) -> None:
        """Starts ``key``'s test in a thread. Holds the lock."""
        self._before_start(key)
        k = len(self.entries)
        ahead = key not in self._asked
        entry: dict[str, Any] = {"test": k, "backend": key.backend, "subsystem": key.subsystem, "state": key.state,
                                 "range": list(key.span) if key.span else None, "passed": None, "seen": "",
                                 "local_error": None, "seconds": None, "log": None, "speculative": ahead,
                                 "used": False, "started": round(time.monotonic() - self._t0, 2)}
        self.entries.append(entry)
        if self._running:
            self._company.update([k, *(n for _, _, n in self._running.values())])
        stop = StopSignal()
        thread = threading.Thread(target=self._work, args=(key, k, stop, entry, ahead and key.state == "bisect"),
                                  name=f"bisect-{k}", daemon=True)
        self._running[key] = (thread, stop, k)
        thread.start()

    def _work(self, key: _Key, k: int, stop: StopSignal, entry: dict[str, Any], own_state: bool) -> None:
        """A test's thread: runs it and files the outcome."""
        try:
            o = self._run(key, k, stop, own_state)
        except BaseException as e:  # noqa: BLE001  handed to the bisector's thread, which raises it
            with self._cond:
                self._running.pop(key, None)
                if self._error is None:
                    self._error = e
                self._cond.notify_all()
            return
        with self._cond:
            self._running.pop(key, None)
            entry.update({f: v for f, v in o.entry.items() if f in _RUN_FIELDS})
            if stop.is_set():
                # Stopped: no verdict. It is not kept as one, so that a test asked for after all runs again.
                entry["passed"], entry["seen"] = None, f"stopped ({stop.reason})"
            elif o.crashed and k in self._company:
                entry["seen"] += "; it failed while other tests ran: it runs again alone before a verdict is used"
                self._rerun_alone.add(key)
            else:
                self._done[key] = _Outcome(o.ok, entry, o.debug)
            self._cond.notify_all()
            said = entry["seen"] if stop.is_set() else (
                f"{ {True: 'pass', False: 'FAIL', None: 'not judged'}[o.ok]} ({entry['seen']})")
            how = "run ahead" if entry["speculative"] else "asked"
            self._say(f"    test {k}: {key.describe()}: {said} in {entry['seconds'] or 0:.1f} s, {how}")


#: The tests[] fields a test's run gives.
_RUN_FIELDS = ("passed", "seen", "local_error", "seconds", "log")


def bisect(runner: Runner, out: Path, target_cmd: list[str], module: str, steps: int | None,
           say: Callable[[str], None], select: str | None = None, backward: bool = False,
           jobs: int | None = None) -> BisectResult:
    """Runs the bisect; see the module docstring. ``select``: the
    ``replay.list`` item that selects ``module`` (default its path, which
    also replays its submodules and modules such as ``layers.10`` for
    ``layers.1``: judged the same, at more cost). ``jobs``: tests run at
    once (default :func:`default_jobs`; 1: one at a time, when asked)."""
    work = out / "runs" / "bisect"
    work.mkdir(parents=True, exist_ok=True)

    def run_one(key: _Key, k: int, stop: StopSignal, cache: Path) -> _Outcome:
        env = key.environment(cache)
        dump = work / f"test{k}"
        cfg = write_config(work / f"test{k}.json", dump, "L0", [select or module], replay=True, backward=backward)
        env["GRAPHPROBE_CONFIG"] = str(cfg)
        rec = runner.run(f"bisect-{k}", target_cmd, env, stop=stop)
        if rec.exit_code != 0:
            why = f"exit {rec.exit_code}" + (f", {rec.note}" if rec.note else "")
            ok, seen, le = False, f"the command failed ({why})", None
        else:
            ok, seen, le = _judge(dump, module, steps)
        shutil.rmtree(dump, ignore_errors=True)  # the verdict is kept; the dumps of ~20 tests are not needed
        return _Outcome(ok, {"passed": ok, "seen": seen, "local_error": le, "seconds": rec.seconds, "log": rec.log},
                        crashed=rec.exit_code != 0)

    return _drive(run_one, work / "inductor_cache", work / "bisector.log", jobs or default_jobs(), say)


def _link_tree(src: Path, dst: Path, skip: str) -> None:
    """``dst``: ``src``'s folders, its files hard-linked (inductor's
    compiled kernels, which it reads by their source's hash), except the
    entry ``skip``. Files that go away meanwhile are left out."""
    for root, dirs, files in os.walk(src):
        rel = Path(root).relative_to(src)
        if rel == Path("."):
            dirs[:] = [d for d in dirs if d != skip]
            files = [f for f in files if f != skip]
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for name in files:
            with contextlib.suppress(OSError):
                os.link(Path(root) / name, dst / rel / name)


def _drive(run_one: TestFn, cache: Path, log: Path, jobs: int, say: Callable[[str], None]) -> BisectResult:
    """Runs torch's bisector with ``run_one`` as its (memoized, parallel)
    predicate, its state in ``cache``/bisect and its prints in ``log``.

    A binary-search step run ahead gets a cache folder of its own next to
    ``cache``: ``cache``'s files hard-linked (the kernels compiled so far)
    and the bisector's state for that step (run state ``bisect``, its
    range) written there; the notes its child writes on the applications
    it saw are handed to the bisector's folder when its verdict is used."""
    from torch._inductor.compiler_bisector import BACKENDS, ConfigChange
    from torch._inductor.compiler_bisector import CompilerBisector as CB

    result = BisectResult(jobs=jobs)

    def write_config_change(key: _Key) -> None:
        # A config change's child reads its value from the bisector's state folder; the bisector writes it only
        # when it reaches that test, so a test run ahead has it written here first (the bisector's own writer,
        # the same line), in the bisector's thread.
        if key.state == "test_disable":
            sub = next(s for s in BACKENDS[key.backend] if s.name == key.subsystem)
            if isinstance(sub, ConfigChange):
                CB.set_config_values(key.backend, sub.name, {sub.config_field: sub.config_value})

    def debug_file(root: Path, key: _Key) -> Path:
        return root / "bisect" / key.backend / f"{key.subsystem}_call_counter_debug_info.txt"

    def run(key: _Key, k: int, stop: StopSignal, own_state: bool) -> _Outcome:
        if not own_state:
            return run_one(key, k, stop, cache)
        assert key.span is not None and key.subsystem is not None
        own = cache.parent / f"{cache.name}_test{k}"
        try:
            _link_tree(cache, own, skip="bisect")
            state = own / "bisect" / key.backend
            CB.write_lines_to_file(str(state / f"{key.subsystem}_run_state.txt"), ["bisect"])
            CB.write_lines_to_file(str(state / f"{key.subsystem}_bisect_range.txt"),
                                   [f"low={key.span[0]}\n", f"high={key.span[1]}\n"])
            o = run_one(key, k, stop, own)
            o.debug = CB.read_lines_from_file(str(debug_file(own, key)))
            return o
        finally:
            shutil.rmtree(own, ignore_errors=True)

    def adopt(key: _Key, o: _Outcome) -> None:
        # The bisector emptied its notes before asking (reset_counters); the child run ahead wrote them elsewhere.
        CB.write_lines_to_file(str(debug_file(cache, key)), o.debug or [])

    tests: _Tests | None = None

    def predicate() -> bool:
        nonlocal tests
        if tests is None:  # the plan is read once the bisector has started (it may add pre_grad_graph then)
            tests = _Tests(run, jobs, {b: list(subs) for b, subs in BACKENDS.items()}, say, write_config_change,
                           adopt)
        backend, subsystem = CB.get_backend(), CB.get_subsystem()
        assert backend is not None, "the bisector asked for a test without a backend"
        state = CB.get_run_state(backend, subsystem) if subsystem else None
        span = CB.get_bisect_range(backend, subsystem) if subsystem and state == "bisect" else None
        return tests.ask(_Key(backend, subsystem, state, span))

    saved = CB.in_process_cache
    CB.in_process_cache = str(cache)
    try:
        with open(log, "w", encoding="utf-8") as f, contextlib.redirect_stdout(f):
            try:
                found = CB.do_bisect(predicate, cli_interface=False)
            except BaseException as e:
                if tests is not None:
                    tests.close("the bisect stopped")
                # The bisector empties its state folder (our cache) when its frame goes; a traceback kept by the
                # caller (a Ctrl-C handled above) would delay that until in_process_cache is no longer ours.
                traceback.clear_frames(e.__traceback__)
                raise
            if tests is not None:
                tests.close("not needed: the bisector has its answer")
    except _Abort as e:
        result.note = f"bisect stopped: {e}"
        return result
    finally:
        CB.in_process_cache = saved
        if tests is not None:
            result.tests = tests.entries
        # A test stopped after the bisector emptied the folder may have written into it again.
        shutil.rmtree(cache, ignore_errors=True)
    if found is None:
        result.note = ("no backend reproduces the error: every test passed (the error is not in code the "
                       "compiler bisector controls, or it needs more than torch.compile)")
    else:
        result.backend, result.subsystem = found.backend, found.subsystem
        result.bisect_number, result.debug_info = found.bisect_number, found.debug_info
        result.note = _explain(found.backend, found.subsystem)
    return result


def _explain(backend: str, subsystem: str | None) -> str:
    """What the bisector's answer means, in a sentence."""
    if backend == "eager":
        return ("the error appears with dynamo alone (backend 'eager': no AOTAutograd, no inductor): code that "
                "behaves differently under tracing, e.g. a branch on torch.compiler.is_compiling(), or a dynamo bug")
    if backend == "aot_eager":
        return "the error appears with AOTAutograd's tracing (backend 'aot_eager'), before decompositions and inductor"
    if backend == "aot_eager_decomp_partition":
        return "the error appears with decompositions or the partitioner (backend 'aot_eager_decomp_partition')"
    if subsystem:
        return f"the error comes from {backend}'s '{subsystem}'; disabling it removes the error"
    return f"the error appears with backend '{backend}'; no subsystem's disabling removes it"

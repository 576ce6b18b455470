"""Stage 3, bisect: torch's CompilerBisector (torch/_inductor/compiler_bisector.py)
driven with replay's verdict on the origin module as the pass/fail predicate.

The bisector's state lives in files under ``{cache}/bisect``; each test is
the user's command in a subprocess with ``TORCHINDUCTOR_CACHE_DIR={cache}``
and the bisector's variables (``TORCH_BISECT_BACKEND``, which
``torch.compile`` obeys, ``TORCH_BISECT_SUBSYSTEM``, ``TORCH_BISECT_MAX=-1``
to disable a subsystem whole), as the bisector's own ``run`` mode does. A
test passes when the command exits 0 and replay judges no call of the
origin "creates" in the compared steps.
"""

from __future__ import annotations

import contextlib
import shutil
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from graphprobe.diagnose.commands import Runner
from graphprobe.diagnose.configs import write_config
from graphprobe.diagnose.replay_files import find_replays, read_replay

__all__ = ["BisectResult", "bisect"]


class _Abort(Exception):
    """A test that cannot be judged: the bisect stops."""


@dataclass
class BisectResult:
    """The bisector's answer (``backend`` None: no backend reproduces the
    error, or the bisect stopped, see ``note``), and every test it ran."""

    backend: str | None = None
    subsystem: str | None = None
    bisect_number: int | None = None
    debug_info: str | None = None
    note: str = ""
    tests: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The ``bisect`` object of diagnosis.json."""
        return {"backend": self.backend, "subsystem": self.subsystem, "bisect_number": self.bisect_number,
                "debug_info": self.debug_info, "note": self.note, "tests": self.tests}


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


def bisect(runner: Runner, out: Path, target_cmd: list[str], module: str, steps: int | None,
           say: Callable[[str], None], select: str | None = None, backward: bool = False) -> BisectResult:
    """Runs the bisect; see the module docstring. ``select``: the
    ``replay.list`` item that selects ``module`` (default its path, which
    also replays its submodules and modules such as ``layers.10`` for
    ``layers.1``: judged the same, at more cost)."""
    from torch._inductor.compiler_bisector import CompilerBisector as CB

    work = out / "runs" / "bisect"
    cache = work / "inductor_cache"
    work.mkdir(parents=True, exist_ok=True)
    result = BisectResult()

    def test() -> bool:
        k = len(result.tests)
        backend, subsystem = CB.get_backend(), CB.get_subsystem()
        env = {"TORCHINDUCTOR_CACHE_DIR": str(cache)}
        state = None
        if backend:
            env["TORCH_COMPILE_BACKEND"] = backend
            env["TORCH_BISECT_BACKEND"] = backend
        if subsystem:
            env["TORCH_BISECT_SUBSYSTEM"] = subsystem
            state = CB.get_run_state(backend, subsystem)
            if state == "test_disable":
                env["TORCH_BISECT_MAX"] = "-1"
        span = ""
        if subsystem and state == "bisect":
            low, high = CB.get_bisect_range(backend, subsystem)
            span = f", range [{low}, {high}]"
        dump = work / f"test{k}"
        cfg = write_config(work / f"test{k}.json", dump, "L0", [select or module], replay=True, backward=backward)
        env["GRAPHPROBE_CONFIG"] = str(cfg)
        rec = runner.run(f"bisect-{k}", target_cmd, env)
        if rec.exit_code != 0:
            why = f"exit {rec.exit_code}" + (f", {rec.note}" if rec.note else "")
            ok, seen, le = False, f"the command failed ({why})", None
        else:
            ok, seen, le = _judge(dump, module, steps)
            if ok is None:
                result.tests.append({"test": k, "backend": backend, "subsystem": subsystem, "state": state,
                                     "passed": None, "seen": seen, "local_error": None, "seconds": rec.seconds,
                                     "log": rec.log})
                raise _Abort(f"test {k}: {seen} (log {rec.log})")
        result.tests.append({"test": k, "backend": backend, "subsystem": subsystem, "state": state, "passed": ok,
                             "seen": seen, "local_error": le, "seconds": rec.seconds, "log": rec.log})
        what = f"backend {backend}" + (f", {subsystem} ({state}{span})" if subsystem else "")
        say(f"    test {k}: {what}: {'pass' if ok else 'FAIL'} ({seen}) in {rec.seconds:.1f} s")
        shutil.rmtree(dump, ignore_errors=True)  # the verdict is kept; the dumps of ~20 tests are not needed
        return bool(ok)

    log = work / "bisector.log"
    saved = CB.in_process_cache
    CB.in_process_cache = str(cache)
    try:
        with open(log, "w", encoding="utf-8") as f, contextlib.redirect_stdout(f):
            try:
                found = CB.do_bisect(test, cli_interface=False)
            except BaseException as e:
                # The bisector empties its state folder (our cache) when its frame goes; a traceback kept by the
                # caller (a Ctrl-C handled above) would delay that until in_process_cache is no longer ours.
                traceback.clear_frames(e.__traceback__)
                raise
    except _Abort as e:
        result.note = f"bisect stopped: {e}"
        return result
    finally:
        CB.in_process_cache = saved
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

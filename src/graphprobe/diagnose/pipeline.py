"""The four stages in order, with progress, and what they found."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from graphprobe.diagnose.commands import Runner, say_to
from graphprobe.diagnose.entries import selector
from graphprobe.diagnose.out_folder import MARK, OWN_ENTRIES, OutFolderError, prepare_out
from graphprobe.diagnose.replay_files import ReplayFormatError
from graphprobe.diagnose.report import SCHEMA_VERSION, write_reports
from graphprobe.diagnose.screen import StageError

__all__ = ["DiagnoseOptions", "EXIT_INTERRUPTED", "MARK", "OWN_ENTRIES", "OutFolderError", "diagnose", "find_kernels",
           "prepare_out"]

#: The exit code of a diagnose stopped by Ctrl-C or SIGTERM (as a shell reports SIGINT: 128 + 2).
EXIT_INTERRUPTED = 130


class _Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP while diagnose runs: handled as a Ctrl-C (the
    commands run in their own process groups, so a signal to diagnose's
    group no longer reaches them; diagnose stops them)."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise _Terminated(signal.Signals(signum).name)


def find_kernels(runner: Runner, out: Path, command: list[str], module: str, outputs: int,
                 select: str | None = None) -> tuple[list[str], str]:
    """Runs the target recording only ``module`` (the ``statistics.list``
    item ``select``, :func:`.entries.selector`; default the path) with
    ``TORCH_LOGS=output_code`` and names the kernels that wrote its outputs
    (:mod:`.kernels`); returns (kernels, how they were found or why none was)."""
    from graphprobe.diagnose.configs import write_config
    from graphprobe.diagnose.kernels import kernels_from_log

    dump = out / "runs" / "kernels"
    # The origin's probes must be the last of each graph: nothing after it may be recorded (layers.10 after
    # layers.1), so the module is selected with its class.
    cfg = write_config(out / "runs" / "kernels.json", dump, "L0", [select or module])
    rec = runner.run("kernels", command, {"GRAPHPROBE_CONFIG": str(cfg), "TORCH_LOGS": "output_code",
                                          "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"})
    if rec.exit_code != 0:
        return [], f"the run with TORCH_LOGS=output_code failed (exit {rec.exit_code}); log {rec.log}"
    found = kernels_from_log(Path(rec.log), outputs)
    if found:
        return found, ("from inductor's output code: the kernels that last wrote the buffers graphprobe's probes "
                       f"read as {module}'s outputs (log {rec.log})")
    return [], (f"no inductor output code with a probe on {module} in the run's log (the target does not compile "
                f"with inductor, or the output is an input or a view); log {rec.log}")


def kernels_skipped(bisect: dict[str, Any] | None, bisect_skipped: str | None) -> str:
    """Why the kernels stage did not run: it runs only when the bisect
    implicates inductor (its first failing backend)."""
    if bisect is None:
        return (f"not looked up: the bisect did not run ({bisect_skipped}); the kernels are looked up only when "
                "the bisect implicates inductor")
    if bisect.get("backend") is None:
        return "not looked up: the bisect implicated no backend (see bisect.note), so not inductor's kernels"
    return (f"not looked up: the bisect implicates backend {bisect['backend']!r}, before inductor: the "
            "generated kernels are not the cause")


@dataclass
class DiagnoseOptions:
    """What ``graphprobe diagnose`` runs: ``command`` (the user's target
    command), ``reference_command`` (None: the same with
    ``TORCHDYNAMO_DISABLE=1``), the screen's ``level``, ``steps`` compared
    (None: all), ``bisect`` on or off, ``out`` folder, per-command
    ``timeout`` in seconds (None: none), bisect tests run at once
    ``jobs`` (None: one per CPU, :func:`.bisect.default_jobs`),
    ``fork_server``: fork the runs of ``python SCRIPT`` from one process
    that imported torch once (:mod:`.forkserver`; False: every run a
    fresh subprocess)."""

    command: list[str]
    out: str = "graphprobe_diagnose"
    reference_command: list[str] | None = None
    level: str = "L0"
    steps: int | None = None
    bisect: bool = True
    timeout: float | None = None
    jobs: int | None = None
    fork_server: bool = True


def diagnose(opts: DiagnoseOptions, say: Callable[[str], None] | None = None) -> tuple[int, dict[str, Any]]:
    """Runs the stages; returns (exit code, diagnosis). Exit code: 0 nothing
    diverges, 1 a divergence was diagnosed, 2 a stage could not run (the
    diagnosis then holds ``error``), 130 (:data:`EXIT_INTERRUPTED`) a
    Ctrl-C, SIGTERM or SIGHUP stopped it (the running command is stopped
    with its child processes; ``error`` says where and what ran). diagnosis.json, summary.txt and
    report.html are written in every case. Raises OutFolderError, before
    anything runs, when ``opts.out`` cannot be used (:func:`prepare_out`:
    files diagnose did not write, a link as its mark, another diagnose
    writing into it)."""
    from graphprobe.diagnose.attribute import attribute
    from graphprobe.diagnose.screen import screen

    say = say or say_to(sys.stdout)
    out = Path(opts.out).resolve()
    folder = prepare_out(out)
    runner = Runner(out / "logs", opts.timeout)
    fork = None
    if opts.fork_server:
        from graphprobe.diagnose.commands import CONTROLLED_ENV
        from graphprobe.diagnose.forkserver import ForkServer

        (out / "runs").mkdir(parents=True, exist_ok=True)
        fork = ForkServer(opts.command, out / "runs" / "fork_server.log",
                          {k: v for k, v in os.environ.items() if k not in CONTROLLED_ENV})
        runner.fork = fork
    d: dict[str, Any] = {"version": SCHEMA_VERSION, "command": opts.command, "reference_command":
                         opts.reference_command, "level": opts.level, "steps": opts.steps, "conclusion": "",
                         "first_divergence": None, "attribution": None, "origin": None, "bisect": None,
                         "bisect_skipped": None, "kernels": [], "kernels_note": None, "repro": None,
                         "screen": None, "stages": {}, "error": None, "commands": [],
                         "runner": {"path": "subprocess", "note": "not used: --no-fork-server", "preloaded": [],
                                    "preload_seconds": None, "forked": 0}}
    code = 1
    t_all = time.monotonic()
    stage = "screen"
    saved_handlers = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            saved_handlers[sig] = signal.signal(sig, _raise_terminated)
    try:
        t0 = time.monotonic()
        say(f"[1/4] screen: reference and target at {opts.level}, compared")
        from graphprobe.diagnose.bisect import default_jobs

        sc = screen(runner, out, opts.command, opts.reference_command, opts.level, opts.steps, say,
                    at_once=(opts.jobs or default_jobs()) > 1)
        d["stages"]["screen"] = round(time.monotonic() - t0, 2)
        d["screen"] = {"reference_dump": str(sc.reference_dump), "target_dump": str(sc.target_dump),
                       "compare_dir": str(sc.compare_dir), "pairs": sc.pairs}
        if sc.first is None:
            say("  no first divergence: graph mode agrees with the reference within noise")
            d["conclusion"] = "no divergence: the target agrees with the reference within the noise floor"
            d["bisect_skipped"] = "nothing diverges"
            code = 0
            return code, d
        first = sc.first
        d["first_divergence"] = first.as_json()
        say(f"  first divergence: step {first.step}, {first.entry} ({', '.join(first.kinds)})")

        stage = "attribute"
        t0 = time.monotonic()
        say(f"[2/4] attribute: the target again, replaying {first.module or 'every module'} eagerly on its "
            "graph-mode inputs")
        at = attribute(runner, out, opts.command, first, opts.steps, say)
        d["stages"]["attribute"] = round(time.monotonic() - t0, 2)
        d["attribution"] = {"scope": at.scope, "why": at.why, "dump": str(at.dump), "modules": [
            {"module": m.module, "entry": m.entry, "step": m.step, "verdict": m.verdict, "reason": m.reason,
             "local_error": m.error("local_error"), "eager_local_error": m.error("eager_local_error"),
             "float64_error": m.error("float64_error"), "floor": m.error("floor")} for m in at.modules]}
        d["origin"] = at.origin_json()
        if at.origin is None:
            say(f"  no origin: {at.why}")
            d["conclusion"] = f"{first.entry} diverges, but no origin could be named: {at.why}"
            d["bisect_skipped"] = "no origin module"
            return code, d
        say(f"  origin: {at.origin.module} ({at.why})")
        from graphprobe.diagnose.repro import write_repro

        d["repro"] = write_repro(out, at.origin, at.inputs_file, out / "runs" / "module", at.scope)

        stage = "bisect"
        if not opts.bisect:
            d["bisect_skipped"] = "--no-bisect"
            say("[3/4] bisect: skipped (--no-bisect)")
        else:
            from graphprobe.diagnose.bisect import bisect

            t0 = time.monotonic()
            from graphprobe.diagnose.bisect import default_jobs

            jobs = opts.jobs or default_jobs()
            say(f"[3/4] bisect: torch's CompilerBisector, pass = replay judges {at.origin.module} not 'creates' "
                f"(one run of the command per test, up to {jobs} at once)")
            b = bisect(runner, out, opts.command, at.origin.module, opts.steps, say,
                       select=selector(at.origin.module, at.origin.entry), backward=".backward." in first.entry,
                       jobs=jobs)
            d["stages"]["bisect"] = round(time.monotonic() - t0, 2)
            d["bisect"] = b.as_json()
            say(f"  result: backend {b.backend}, subsystem {b.subsystem}, bisect number {b.bisect_number}, "
                f"debug info {b.debug_info} -- {b.note}")
        stage = "kernels"
        backend = (d["bisect"] or {}).get("backend")
        if backend == "inductor":
            t0 = time.monotonic()
            say(f"  kernels: the target once more, recording only {at.origin.module}, with inductor's output code")
            d["kernels"], d["kernels_note"] = find_kernels(runner, out, opts.command, at.origin.module,
                                                           max(1, len(at.origin.outputs)),
                                                           select=selector(at.origin.module, at.origin.entry))
            d["stages"]["kernels"] = round(time.monotonic() - t0, 2)
            say(f"  kernels computing {at.origin.module}'s output: {', '.join(d['kernels']) or '-'} "
                f"({d['kernels_note']})")
        else:
            # A run of the whole command for kernels the bisect says are not the cause: not worth its minutes.
            d["kernels_note"] = kernels_skipped(d["bisect"], d["bisect_skipped"])
            say(f"  kernels: skipped ({d['kernels_note']})")
        stage = "repro"
        if d["repro"] is not None:
            from graphprobe.diagnose.repro import run_repro

            t0 = time.monotonic()
            say(f"  repro: python {d['repro']['script']}")
            d["repro"]["reproduces"], d["repro"]["reproduces_note"] = run_repro(runner, d["repro"], d["bisect"])
            d["stages"]["repro"] = round(time.monotonic() - t0, 2)
            said = {True: "reproduces", False: "does NOT reproduce", None: "not judged"}[d["repro"]["reproduces"]]
            say(f"    {said}: {d['repro']['reproduces_note']}")
        where = ""
        if d["bisect"] and d["bisect"]["backend"]:
            bb = d["bisect"]
            where = f"; compiler stage: backend {bb['backend']}" + (f", {bb['subsystem']}" if bb["subsystem"] else "")
            if bb["debug_info"]:
                where += f" ({bb['debug_info']})"
        d["conclusion"] = f"{at.origin.module} creates the error (first divergence {first.entry}){where}"
        if d["repro"] is not None and d["repro"]["reproduces"] is False:
            d["conclusion"] += "; the repro does NOT reproduce it alone (repro.reproduces_note says why)"
        return code, d
    except KeyboardInterrupt as e:
        why = f"{e}" if isinstance(e, _Terminated) else "Ctrl-C"
        done = ", ".join(f"{r.stage} (exit {r.exit_code})" for r in runner.records) or "none"
        d["error"] = (f"{stage}: interrupted ({why}); the running command was stopped with its child processes; "
                      f"commands run: {done}")
        d["conclusion"] = f"interrupted in stage {stage} ({why}); what ran before is below"
        say(f"graphprobe diagnose: {d['error']}")
        return EXIT_INTERRUPTED, d
    except (StageError, ReplayFormatError, OSError) as e:
        d["error"] = f"{stage}: {e}"
        d["conclusion"] = f"stopped in stage {stage}: {e}"
        say(f"graphprobe diagnose: error: {d['error']}")
        return 2, d
    except Exception as e:  # noqa: BLE001  a stage's own failure (the bisector's, compare's): exit 2 with a report
        d["error"] = f"{stage}: {type(e).__name__}: {e}"
        d["conclusion"] = f"stopped in stage {stage}: {type(e).__name__}: {e}"
        say(f"graphprobe diagnose: error: {d['error']}")
        return 2, d
    finally:
        for sig, handler in saved_handlers.items():
            signal.signal(sig, handler)
        if fork is not None:
            fork.close()
            d["runner"] = fork.as_json()
            d["runner"]["forked"] = sum(r.via == "fork server" for r in runner.records)
        d["stages"]["total"] = round(time.monotonic() - t_all, 2)
        d["commands"] = [r.as_json() for r in runner.records]
        try:
            say("[4/4] report")
            text = write_reports(out, d)
            say(text)
        finally:
            folder.finish()  # the manifest of what this run wrote; the lock on OUT released

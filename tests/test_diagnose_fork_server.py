"""The fork server (issue #37, the time goals): runs of ``python SCRIPT``
forked from one process that imported torch once behave as fresh runs.

References are independent of the fork server: the same script run by
``python`` itself as a plain subprocess (what it prints, its exit code),
and torch's ``CompilerBisector.do_bisect`` driven sequentially in process
on the fake compiler of tests/test_diagnose_bisect_parallel.py, whose
verdicts the forked children compute from the bisector's own state (its
environment variables, read through a cache torch fills at import, and its
state files under ``TORCHINDUCTOR_CACHE_DIR``). Cost: about 30 s (one
server start, about 10 s of imports, per test; a forked run takes well
under a second)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from graphprobe.diagnose.bisect import _drive, _Key, _Outcome
from graphprobe.diagnose.commands import CONTROLLED_ENV, Runner, StopSignal
from graphprobe.diagnose.forkserver import ForkServer, fork_form
from test_diagnose_bisect_parallel import Fake, _sequential

PY = sys.executable
REPO = Path(__file__).resolve().parents[1]

#: A fake compiler's child: the bisector's question read from its state, as a compiled run would read it (through
#: CompilerBisector's class methods), the verdict as the exit code (0 passes, 1 fails, 2 cannot be judged).
CHILD = textwrap.dedent('''
    import sys
    from torch._inductor.compiler_bisector import CompilerBisector as CB

    backends = ["eager", "aot_eager", "aot_eager_decomp_partition", "aot_eager_decomp_partition_crossref", "inductor"]
    fault, subsystem, bad, calls = sys.argv[1], sys.argv[2] or None, int(sys.argv[3]), int(sys.argv[4])
    assert CB.bisection_enabled, "the bisector's variables were not seen"
    backend, asked = CB.get_backend(), CB.get_subsystem()
    if backends.index(backend) < backends.index(fault):
        sys.exit(0)
    if asked is None or asked != subsystem or backend != fault:
        sys.exit(1)
    # The faulty subsystem, disabled whole (TORCH_BISECT_MAX=-1) or bisected from the state files.
    applied = [not CB.disable_subsystem(backend, asked, lambda i=i: f"node{i}") for i in range(calls)]
    sys.exit(1 if applied[bad] else 0)
''')


def _base() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in CONTROLLED_ENV}


@pytest.fixture(scope="module")
def child_script(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("child") / "child.py"
    p.write_text(CHILD)
    return p


@pytest.mark.parametrize("fake", [Fake("inductor", "lowerings", bad=9, calls=39),
                                  Fake("aot_eager_decomp_partition", "decomposition", bad=3, calls=11),
                                  Fake("eager")], ids=lambda f: f"{f.backend}-{f.subsystem}")
def test_forked_bisect_answers_as_torch_sequential_bisect(tmp_path, child_script, fake):
    expected, asked = _sequential(fake, tmp_path / "seq")
    cmd = [PY, str(child_script), fake.backend, fake.subsystem or "", str(fake.bad), str(fake.calls)]
    server = ForkServer(cmd, tmp_path / "server.log", _base())
    runner = Runner(tmp_path / "logs", fork=server)

    def run_one(key: _Key, k: int, stop: StopSignal, cache: Path) -> _Outcome:
        rec = runner.run(f"bisect-{k}", cmd, key.environment(cache), stop=stop)
        ok = {0: True, 1: False}.get(rec.exit_code)  # type: ignore[arg-type]
        return _Outcome(ok, {"passed": ok, "seen": rec.note, "local_error": None, "seconds": rec.seconds,
                             "log": rec.log}, crashed=ok is None)

    try:
        res = _drive(run_one, tmp_path / "cache", tmp_path / "bisector.log", 2, lambda m: None)
    finally:
        server.close()
    assert (res.backend, res.subsystem, res.bisect_number, res.debug_info) == (
        expected.backend, expected.subsystem, expected.bisect_number, expected.debug_info)
    used = [t for t in res.tests if t["used"]]
    assert len(used) == len(set(asked))
    forked = [r for r in runner.records if r.via == "fork server"]
    assert forked and len(forked) == len(runner.records), [(r.via, r.note) for r in runner.records]


SCRIPT = textwrap.dedent('''
    import atexit, os, sys, threading, time
    import torch

    def bye():
        print("atexit ran", flush=True)

    atexit.register(bye)
    t = threading.Thread(target=lambda: (time.sleep(0.2), print("thread joined", flush=True)))
    t.start()
    print("name", __name__, "argv", sys.argv, "path0", sys.path[0])
    print("env", os.environ.get("GRAPHPROBE_CONFIG"), os.environ.get("KEEP_ME"))
    print("leader", os.getpgid(0) == os.getpid(), "stdin", sys.stdin.read() == "")
    print("dynamo disabled", os.environ.get("TORCHDYNAMO_DISABLE") == "1")
    x = torch.arange(4.0)
    print("sum", float(torch.compile(lambda v: v * 2)(x).sum()) if len(sys.argv) > 2 else float(x.sum()))
    mode = sys.argv[1]
    if mode == "exit3":
        sys.exit(3)
    if mode == "raise":
        raise ValueError("boom")
    if mode == "message":
        sys.exit("a message")
''')


@pytest.mark.parametrize("mode", ["ok", "exit3", "raise", "message"])
def test_a_forked_run_is_a_python_run(tmp_path, mode):
    script = tmp_path / "s.py"
    script.write_text(SCRIPT)
    cmd = [PY, str(script), mode]
    env = {"GRAPHPROBE_CONFIG": str(tmp_path / "c.json"), "TORCHDYNAMO_DISABLE": "1"}
    base = dict(_base(), KEEP_ME="yes")
    # The reference: python itself.
    ref = subprocess.run(cmd, env=dict(base, **env), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         start_new_session=True, cwd=tmp_path, timeout=300)
    server = ForkServer(cmd, tmp_path / "server.log", base)
    old = os.environ.get("KEEP_ME")
    os.environ["KEEP_ME"] = "yes"  # the runner's environment is the server's (else the run is not forked)
    try:
        rec = Runner(tmp_path / "logs", fork=server).run("t", cmd, env)
    finally:
        server.close()
        if old is None:
            del os.environ["KEEP_ME"]
        else:
            os.environ["KEEP_ME"] = old
    assert rec.via == "fork server", server.note
    assert rec.exit_code == ref.returncode
    log = Path(rec.log).read_text()
    body = log.split("# via: fork server\n", 1)[1]
    # The same lines (stdout and stderr in one log: compared as sets of lines, the traceback's too).
    ref_lines = set((ref.stdout + ref.stderr).splitlines())
    assert set(body.splitlines()) == ref_lines, (body, ref.stdout, ref.stderr)
    assert "atexit ran" in ref_lines and "thread joined" in ref_lines


def test_stops_timeouts_leftovers_and_what_is_not_forked(tmp_path):
    script = tmp_path / "s.py"
    script.write_text(textwrap.dedent('''
        import subprocess, sys, time
        if sys.argv[1] == "leave":
            subprocess.Popen(["sleep", "60"])  # left running in the run's process group
            sys.exit(0)
        time.sleep(60)
    '''))
    server = ForkServer([PY, str(script), "x"], tmp_path / "server.log", _base())
    runner = Runner(tmp_path / "logs", timeout=3, fork=server)
    try:
        t0 = time.monotonic()
        rec = runner.run("slow", [PY, str(script), "sleep"], {})
        assert rec.via == "fork server" and rec.exit_code is None and "killed after 3 s" in rec.note
        assert time.monotonic() - t0 < 30
        rec = runner.run("leave", [PY, str(script), "leave"], {})
        assert rec.exit_code == 0 and "1 child process(es) still running after it exited were stopped" in rec.note
        stop = StopSignal()
        stop.set("asked")
        rec = runner.run("stopped", [PY, str(script), "sleep"], {}, stop=stop)
        assert rec.exit_code is None and "stopped with its child processes: asked" in rec.note
        # A variable torch reads only at import (TORCH_LOGS), another form, another interpreter: a subprocess.
        assert runner.run("logs", [PY, "-c", "pass"], {}).via == "subprocess"
        assert runner.run("logs", [PY, str(script), "leave"], {"TORCH_LOGS": "dynamo"}).via == "subprocess"
    finally:
        server.close()
    assert fork_form(["python", "-m", "pkg.mod", "a"]) == ("module", "pkg.mod")
    assert fork_form(["python", "-u", "x.py"]) is None and fork_form(["python"]) is None

"""A fork server for the runs of the user's command (issue #37: the time goals).

Every run of ``python SCRIPT ARGS`` (or ``python -m MODULE ARGS``) used to be
a fresh process that imports torch, graphprobe and inductor's compiler
before the script's first line (about 10 s of CPU on the project's 2-core
machine). The fork server is one process of the command's own interpreter
that imports them once (and the installed packages the script imports at
its top level), then forks one child per run: the child takes the run's
environment, log file, working folder and arguments, becomes the leader of
a process group of its own (as a subprocess of diagnose is), and runs the
script with :mod:`runpy` as ``python`` would.

The server only imports: it runs no torch operation (no thread pool, no
compile worker, no CUDA context is created before a fork), as a
``DataLoader`` worker is forked after ``import torch``. What torch reads
from the environment at import time is refreshed in the child for the
variables diagnose changes from run to run (:data:`FORK_ENV`: the compiler
bisector's, read through a cache, ``TORCHDYNAMO_DISABLE`` and
``TORCHINDUCTOR_CACHE_DIR``, read when used); a run that sets any other
variable (the kernels stage's ``TORCH_LOGS``), a command of another form
(``python -c``, a shell, options before the script) or another interpreter
runs as a subprocess, as before.

Protocol: JSON lines on the server's stdin (requests) and stdout (replies).
``{"op": "run", "id", "argv", "env", "cwd", "log"}`` -> ``{"id", "pid"}``
when forked, ``{"id", "exit", "left"}`` once it exited (its process group's
leftovers stopped, then reaped); ``{"op": "stop", "id"}`` stops a child's
process group (SIGTERM, SIGKILL after the grace time). End of input: the
server stops every child and exits.
"""

from __future__ import annotations

import ast
import json
import os
import select
import signal
import subprocess
import sys
import sysconfig
import threading
import time
import traceback
from pathlib import Path
from typing import Any

__all__ = ["FORK_ENV", "ForkServer", "PRELOAD", "fork_form", "serve"]

#: The variables a forked run may set or change from the server's environment: read by torch and graphprobe
#: when used (or refreshed in the child, :func:`_refresh`), never only at import.
FORK_ENV = frozenset({"GRAPHPROBE_CONFIG", "GRAPHPROBE_REPRO_MODULE", "GRAPHPROBE_REPRO_DIR", "TORCHDYNAMO_DISABLE",
                      "TORCH_BISECT_BACKEND", "TORCH_BISECT_SUBSYSTEM", "TORCH_BISECT_MAX", "TORCH_COMPILE_BACKEND",
                      "TORCHINDUCTOR_CACHE_DIR"})

#: Imported by the server before any fork: torch, dynamo and inductor's C++ code generation (about 6 s of the
#: 10 s a fresh run spends importing on the project's machine), and graphprobe.
PRELOAD = ("torch", "torch._dynamo", "torch._inductor.compile_fx", "torch._inductor.codegen.cpp",
           "torch._inductor.codegen.cpp_wrapper_cpu", "torch._inductor.compiler_bisector", "graphprobe",
           "graphprobe.replay")

#: Seconds a stopped child's process group has between SIGTERM and SIGKILL (as :data:`.commands.STOP_GRACE_S`).
GRACE_S = 5.0


def fork_form(argv: list[str]) -> tuple[str, str] | None:
    """``("path", SCRIPT)`` for ``python SCRIPT ...``, ``("module", NAME)``
    for ``python -m NAME ...``; None for any other form (an option before
    the script, ``-c``, no script)."""
    if len(argv) >= 2 and not argv[1].startswith("-"):
        return "path", argv[1]
    if len(argv) >= 3 and argv[1] == "-m" and argv[2] and not argv[2].startswith("-"):
        return "module", argv[2]
    return None


def _is_python(exe: str) -> bool:
    name = os.path.basename(exe)
    return name.startswith("python") and all(c.isdigit() or c == "." for c in name[len("python"):])


# ----------------------------------------------------------------------------------------------- the server


def _installed_imports(kind: str, target: str) -> list[str]:
    """The top-level absolute imports of the script (or module) that are
    installed packages (under the interpreter's library folders): imported
    by the server too. The script's own modules (next to it) are not: they
    may read what a run changes."""
    try:
        if kind == "module":
            import importlib.util

            spec = importlib.util.find_spec(target)
            path = spec.origin if spec and spec.origin else None
        else:
            path = target
        if not path or not path.endswith(".py"):
            return []
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except Exception:  # noqa: BLE001  best effort: nothing preloaded beyond PRELOAD
        return []
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    roots = {os.path.realpath(p) for k in ("purelib", "platlib", "stdlib", "platstdlib")
             if (p := sysconfig.get_paths().get(k))}
    out = []
    import importlib.util

    for name in dict.fromkeys(names):
        try:
            spec = importlib.util.find_spec(name.split(".")[0])
        except (ImportError, ValueError):
            continue
        origin = spec.origin if spec else None
        if spec and (origin in ("built-in", "frozen") or (origin and any(
                os.path.realpath(origin).startswith(r + os.sep) for r in roots))):
            out.append(name)
    return out


def _refresh() -> None:
    """In a child, after its environment is set: what torch read from the
    environment before the fork and keeps (the bisector's variables are
    read through a cache, and its ``bisection_enabled`` at import)."""
    cb = sys.modules.get("torch._inductor.compiler_bisector")
    if cb is not None:
        cb.get_env_val.cache_clear()
        cb.CompilerBisector.bisection_enabled = cb.get_is_bisection_enabled()


def _child(req: dict[str, Any], kind: str, target: str) -> int:
    """The forked child: becomes a run of ``python SCRIPT`` and returns its
    exit code (never returns to the server's loop)."""
    import atexit
    import runpy

    os.setsid()
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    fd = os.open(req["log"], os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    _refresh()
    argv = req["argv"]
    code = 0
    try:
        if kind == "path":
            sys.argv = [target, *argv[2:]]
            sys.path[0] = os.path.dirname(os.path.realpath(target))
            runpy.run_path(target, run_name="__main__")
        else:
            sys.argv = [target, *argv[3:]]  # runpy puts the module's file in argv[0]
            sys.path[0] = os.getcwd()
            runpy.run_module(target, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code & 0xFF
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt as e:
        _print_uncaught(e)
        code = 128 + signal.SIGINT
    except BaseException as e:  # noqa: BLE001  as python prints an uncaught exception
        _print_uncaught(e)
        code = 1
    try:  # what the interpreter does at exit: join the script's threads, run atexit functions, flush
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    return code


def _print_uncaught(e: BaseException) -> None:
    """Prints ``e`` as python does for an uncaught exception: the frames of
    the script, not those of runpy and this module that ran it."""
    import runpy

    own = {os.path.realpath(__file__), os.path.realpath(runpy.__file__), "<frozen runpy>"}
    tb = e.__traceback__
    while tb is not None and (tb.tb_frame.f_code.co_filename in own
                              or os.path.realpath(tb.tb_frame.f_code.co_filename) in own):
        tb = tb.tb_next
    traceback.print_exception(type(e), e, tb)


def _members(pgid: int) -> list[int]:
    from graphprobe.diagnose.commands import _group_members

    return _group_members(pgid) or []


def serve() -> None:
    """The server's main loop (``python -m graphprobe.diagnose.forkserver
    KIND TARGET``): preloads, says ``ready``, then forks a child per request."""
    proto_in, proto_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)  # what an import prints goes to the server's log, not into the protocol
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # diagnose ends the server by closing its input

    def reply(msg: dict[str, Any]) -> None:
        data = (json.dumps(msg) + "\n").encode()
        while data:
            data = data[os.write(proto_out, data):]

    kind, target = sys.argv[1], sys.argv[2]
    # As `python SCRIPT` / `python -m MODULE` set it, so that the preloaded imports resolve as the run's would.
    sys.path[0] = os.path.dirname(os.path.realpath(target)) if kind == "path" else os.getcwd()
    t0 = time.monotonic()
    loaded, failed = [], []
    for name in dict.fromkeys([*PRELOAD, *_installed_imports(kind, target)]):
        try:
            __import__(name)
            loaded.append(name)
        except BaseException as e:  # noqa: BLE001  not fatal: the child imports what it needs
            failed.append(f"{name}: {type(e).__name__}: {e}")
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else None
    reply({"ready": True, "pid": os.getpid(), "preloaded": loaded, "failed": failed,
           "seconds": round(time.monotonic() - t0, 2), "python_threads": threading.active_count(),
           "threads": threads})
    children: dict[int, dict[str, Any]] = {}  # request id -> pid, stop and leftover deadlines
    buf = b""
    open_input = True
    while open_input or children:
        ready, _, _ = select.select([proto_in] if open_input else [], [], [], 0.02)
        if ready:
            data = os.read(proto_in, 1 << 16)
            if not data:
                open_input = False
                for c in children.values():  # diagnose went away: stop everything
                    _signal(c["pid"], signal.SIGTERM)
                    c.setdefault("kill_at", time.monotonic() + GRACE_S)
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                req = json.loads(line)
                if req["op"] == "run":
                    form = fork_form(req["argv"])
                    assert form is not None
                    sys.stdout.flush()
                    sys.stderr.flush()
                    pid = os.fork()
                    if pid == 0:
                        code = 1
                        try:
                            os.close(proto_in)
                            os.close(proto_out)
                            code = _child(req, *form)
                        finally:
                            os._exit(code)
                    children[req["id"]] = {"pid": pid}
                    reply({"id": req["id"], "pid": pid})
                elif req["op"] == "stop" and req["id"] in children:
                    c = children[req["id"]]
                    _signal(c["pid"], signal.SIGTERM)
                    c.setdefault("kill_at", time.monotonic() + GRACE_S)
        now = time.monotonic()
        for rid, c in list(children.items()):
            pid = c["pid"]
            if "kill_at" in c and now >= c["kill_at"]:
                _signal(pid, signal.SIGKILL)
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
                continue  # running; its leader, unreaped, keeps the group id from being reused
            if "left" not in c:
                c["left"] = len(_members(pid))
                if c["left"]:
                    _signal(pid, signal.SIGTERM)
                    c["left_at"] = now + GRACE_S
            if c["left"] and _members(pid) and now < c["left_at"]:
                continue
            _signal(pid, signal.SIGKILL)  # a no-op for the zombie leader; ends what ignored SIGTERM
            _, status = os.waitpid(pid, 0)
            del children[rid]
            if open_input:
                reply({"id": rid, "exit": os.waitstatus_to_exitcode(status), "left": c["left"]})


def _signal(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


# ----------------------------------------------------------------------------------------------- the client


class _ServerGone(Exception):
    """The fork server exited or broke its protocol."""


class ForkServer:
    """diagnose's side: starts the server for ``command``'s interpreter
    (``python`` and the script or module, :func:`fork_form`) and runs
    commands through it (:meth:`run`). ``note`` says why it is not used
    (None while it may be); ``info`` is the server's ``ready`` message."""

    def __init__(self, command: list[str], log: Path, env: dict[str, str]) -> None:
        self.python = command[0]
        self.base = dict(env)
        self.note: str | None = None
        self.info: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._replies: dict[int, dict[str, Any]] = {}
        self._next = 0
        self._ready = threading.Event()
        self._proc: subprocess.Popen | None = None
        form = fork_form(command)
        if not _is_python(command[0]) or form is None:
            self.note = "not used: COMMAND is not `python SCRIPT ...` or `python -m MODULE ...`"
            return
        src = str(Path(__file__).resolve().parents[2])  # graphprobe's own folder, for the server's first import
        full = dict(env)
        code = (f"import sys; sys.path.insert(0, {src!r}); import graphprobe.diagnose.forkserver as f; "
                "sys.path.pop(0); f.serve()")
        try:
            with open(log, "w", encoding="utf-8") as f:
                self._proc = subprocess.Popen([self.python, "-c", code, *form], env=full, stdin=subprocess.PIPE,
                                              stdout=subprocess.PIPE, stderr=f, start_new_session=True)
        except OSError as e:
            self.note = f"not used: cannot start {self.python!r}: {e.strerror or e}"
            return
        self._log = log
        threading.Thread(target=self._read, name="fork-server-reader", daemon=True).start()

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            with self._cond:
                if msg.get("ready"):
                    self.info = msg
                    self._ready.set()
                else:
                    self._replies.setdefault(msg["id"], {}).update(msg)
                self._cond.notify_all()
        with self._cond:
            if not self._ready.is_set():
                self.note = f"not used: the fork server exited before it was ready (log {self._log})"
            self._gone = True
            self._ready.set()
            self._cond.notify_all()

    _gone = False

    def usable(self, argv: list[str], env: dict[str, str]) -> bool:
        """Whether a run of ``argv`` with the full environment ``env`` can be
        forked: the server's interpreter, a script or module form, and no
        variable outside :data:`FORK_ENV` different from the server's
        environment. Waits for the server to be ready."""
        base = self.base
        if self._proc is None or argv[0] != self.python or fork_form(argv) is None:
            return False
        if any(base.get(k) != env.get(k) for k in set(base) | set(env) if k not in FORK_ENV):
            return False
        self._ready.wait()
        return not self._gone and self.note is None

    def run(self, argv: list[str], env: dict[str, str], log: Path, timeout: float | None,
            stop: Any = None) -> tuple[int | None, str]:
        """Runs ``argv`` forked, its output appended to ``log``; returns
        (exit code, note) as :meth:`.commands.Runner.run` records them. A
        timeout or ``stop`` stops its process group; a Ctrl-C too, and is
        raised again once the child is gone."""
        assert self._proc is not None and self._proc.stdin is not None
        with self._cond:
            rid = self._next
            self._next += 1
            self._send({"op": "run", "id": rid, "argv": argv, "env": env, "cwd": os.getcwd(), "log": str(log)})
        t0 = time.monotonic()
        note = ""
        try:
            with self._cond:
                while True:
                    r = self._replies.get(rid, {})
                    if "exit" in r or self._gone:
                        break
                    if not note and timeout is not None and time.monotonic() - t0 >= timeout:
                        note = f"killed after {timeout:.0f} s (--timeout), with its child processes"
                        self._send({"op": "stop", "id": rid})
                    elif not note and stop is not None and stop.is_set():
                        note = f"stopped with its child processes: {stop.reason}"
                        self._send({"op": "stop", "id": rid})
                    self._cond.wait(0.05)
        except BaseException:
            with self._cond:  # Ctrl-C: stop the child, wait until it is gone, go on up
                self._send({"op": "stop", "id": rid})
                while "exit" not in self._replies.get(rid, {}) and not self._gone:
                    self._cond.wait(0.05)
            raise
        r = self._replies.pop(rid, {})
        if "exit" not in r:
            return None, f"the fork server exited (log {self._log})"
        code: int | None = r["exit"]
        if note:
            code = None
        elif code is not None and code < 0:
            try:
                note = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                note = f"killed by signal {-code}"
        if r.get("left"):
            note = (note + "; " if note else "") + (
                f"{r['left']} child process(es) still running after it exited were stopped")
        return code, note

    def _send(self, msg: dict[str, Any]) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write((json.dumps(msg) + "\n").encode())
            self._proc.stdin.flush()
        except (OSError, ValueError):
            self._gone = True

    def close(self) -> None:
        """Ends the server (it stops any child still running) and waits for it."""
        if self._proc is None:
            return
        try:
            self._proc.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass
        try:
            self._proc.wait(timeout=GRACE_S + 5)
        except subprocess.TimeoutExpired:
            _signal(self._proc.pid, signal.SIGKILL)
            self._proc.wait()

    def as_json(self) -> dict[str, Any]:
        """The ``runner`` object of diagnosis.json."""
        return {"path": "fork server" if self.note is None and self._proc is not None else "subprocess",
                "note": self.note or ("runs of `python SCRIPT`/`python -m MODULE` forked from one process that "
                                      "imported torch, inductor and graphprobe once; other runs are subprocesses"),
                "preloaded": self.info.get("preloaded", []), "preload_seconds": self.info.get("seconds")}


if __name__ == "__main__":
    serve()

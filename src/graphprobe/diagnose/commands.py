"""Running the user's command: one subprocess per run, its output in a log
file, each run kept for ``diagnosis.json``'s ``commands``."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

__all__ = ["CONTROLLED_ENV", "CommandRecord", "Runner", "StopSignal", "printable", "say_to"]

#: The variables diagnose sets in some runs: removed from every run's inherited
#: environment first, so that a value left in the user's shell (or by a tool
#: that runs diagnose) cannot change a run that does not set it (a
#: TORCHDYNAMO_DISABLE=1 would make the target eager, a TORCH_BISECT_BACKEND
#: would bisect the screen).
CONTROLLED_ENV = ("GRAPHPROBE_CONFIG", "GRAPHPROBE_REPRO_MODULE", "GRAPHPROBE_REPRO_DIR", "TORCHDYNAMO_DISABLE",
                  "TORCH_BISECT_BACKEND", "TORCH_BISECT_SUBSYSTEM", "TORCH_BISECT_MAX")

#: Seconds a stopped command's process group has between SIGTERM and SIGKILL.
STOP_GRACE_S = 5.0


@dataclass
class CommandRecord:
    """One command diagnose ran: the stage, the argv, the environment
    variables diagnose set for it, its exit code, wall time and log file,
    and how it ran (``via``: ``"subprocess"``, or ``"fork server"``, see
    :mod:`.forkserver`)."""

    stage: str
    argv: list[str]
    env: dict[str, str]
    exit_code: int | None
    seconds: float
    log: str
    note: str = ""
    via: str = "subprocess"

    def as_json(self) -> dict[str, object]:
        """The ``commands[]`` item of diagnosis.json."""
        return asdict(self)

    def shell(self) -> str:
        """The command as one shell line (environment first)."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        return (env + " " if env else "") + shlex.join(self.argv)


def printable(text: str) -> str:
    """``text`` with what UTF-8 cannot encode (the surrogate escapes of a
    non-UTF-8 file name in ``sys.argv``) written as ``\\udcff``: for text
    files, HTML and terminals, which must stay valid UTF-8."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def say_to(stream=None) -> Callable[[str], None]:
    """A progress printer writing whole lines to ``stream`` (default: the
    stdout of now, so that the bisector's redirected prints do not take
    diagnose's progress with them). Progress is best effort: once the
    stream fails (its reader went away, ``diagnose ... | head``) it prints
    nothing more, and the stages and the report files go on."""
    out = stream if stream is not None else sys.stdout
    broken = False

    def say(msg: str) -> None:
        nonlocal broken
        if broken:
            return
        try:
            try:
                out.write(msg + "\n")
            except UnicodeEncodeError:  # a non-UTF-8 argument (surrogate-escaped) on a strict stream: shown escaped
                out.write(printable(msg) + "\n")
            out.flush()
        except (OSError, ValueError):  # a closed pipe or file: the report files still say everything
            broken = True
    return say


class StopSignal:
    """Asks a command that another thread runs (:meth:`Runner.run`) to
    stop: its process group is stopped and its record's note says why."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = ""

    def set(self, reason: str) -> None:
        """Asks the command to stop; ``reason`` goes into its record's note."""
        if not self._event.is_set():
            self.reason = reason
            self._event.set()

    def is_set(self) -> bool:
        """Whether a stop was asked."""
        return self._event.is_set()


class _Stopped(Exception):
    """The command's :class:`StopSignal` was set."""


@dataclass
class Runner:
    """Runs commands into ``log_dir`` and keeps their records. Several
    threads may run commands at once (the bisect's parallel tests): the log
    numbers and ``records`` are kept under a lock."""

    log_dir: Path
    timeout: float | None = None
    records: list[CommandRecord] = field(default_factory=list)
    #: A :class:`.forkserver.ForkServer`: the runs it can take are forked from it (None: every run a subprocess).
    fork: object | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _started: int = field(default=0, repr=False, compare=False)

    def run(self, stage: str, argv: list[str], env: dict[str, str], unset: tuple[str, ...] = (),
            stop: StopSignal | None = None) -> CommandRecord:
        """Runs ``argv`` with ``env`` added to (and ``unset`` and
        :data:`CONTROLLED_ENV` removed from) this process's environment;
        stdout and stderr go to a log file. The command runs in its own
        process group (session): a timeout, a Ctrl-C of diagnose or a set
        ``stop`` stops the whole group (SIGTERM, then SIGKILL after
        :data:`STOP_GRACE_S`), so that no child of the command (a shell's
        python, a compile worker) is left running. A command that cannot
        start or is killed has exit code None and says why in ``note``; a
        Ctrl-C is recorded, then re-raised."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with self._lock:
            # Numbered when started (records are kept when done): two commands running at once get two numbers.
            number = self._started
            self._started += 1
        log = self.log_dir / f"{number:03d}_{stage}.log"
        full = {k: v for k, v in os.environ.items() if k not in CONTROLLED_ENV and k not in unset}
        full.update(env)
        forked = self.fork is not None and self.fork.usable(list(argv), full)  # type: ignore[attr-defined]
        t0 = time.monotonic()
        note = ""
        code: int | None = None
        if forked:
            with open(log, "w", encoding="utf-8", errors="surrogateescape") as f:
                f.write(f"$ {shlex.join(argv)}\n# env: {env}\n# via: fork server\n")
            try:
                code, note = self.fork.run(list(argv), full, log, self.timeout, stop)  # type: ignore[attr-defined]
            except BaseException:
                with self._lock:
                    self.records.append(CommandRecord(stage, list(argv), dict(env), None,
                                                      round(time.monotonic() - t0, 2), str(log),
                                                      "interrupted: stopped with its child processes", "fork server"))
                raise
            rec = CommandRecord(stage, list(argv), dict(env), code, round(time.monotonic() - t0, 2), str(log), note,
                                "fork server")
            with self._lock:
                self.records.append(rec)
            return rec
        # surrogateescape: an argument that is not UTF-8 (a legal POSIX file name, as sys.argv holds it) is
        # logged as the bytes it was given.
        with open(log, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(f"$ {shlex.join(argv)}\n# env: {env}\n")
            f.flush()
            try:
                proc = subprocess.Popen(argv, env=full, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
            except OSError as e:  # not found, not executable
                note = f"cannot start {argv[0]!r}: {e.strerror or e}"
            else:
                try:
                    _wait_unreaped(proc, self.timeout, stop)
                    # The command is done; its children may not be (a server it started, a `sleep &`): diagnose
                    # runs it up to 25 times, so what is left of its process group is stopped now.
                    left = _stop_leftovers(proc.pid)
                    code = proc.wait()
                    if code < 0:  # a signal ended it (the OOM killer's SIGKILL, a SIGSEGV)
                        try:
                            note = f"killed by {signal.Signals(-code).name}"
                        except ValueError:
                            note = f"killed by signal {-code}"
                    if left:
                        note = (note + "; " if note else "") + (
                            f"{left} child process(es) still running after it exited were stopped")
                except subprocess.TimeoutExpired:
                    _stop(proc)
                    note = f"killed after {self.timeout:.0f} s (--timeout), with its child processes"
                except _Stopped:
                    _stop(proc)
                    note = f"stopped with its child processes: {stop.reason if stop else ''}"
                except BaseException:  # Ctrl-C (or SIGTERM, see diagnose): stop the command, record it, go on up
                    _stop(proc)
                    with self._lock:
                        self.records.append(CommandRecord(stage, list(argv), dict(env), None,
                                                          round(time.monotonic() - t0, 2), str(log),
                                                          "interrupted: stopped with its child processes"))
                    raise
        rec = CommandRecord(stage, list(argv), dict(env), code, round(time.monotonic() - t0, 2), str(log), note)
        with self._lock:
            self.records.append(rec)
        return rec


def _wait_unreaped(proc: subprocess.Popen, timeout: float | None, stop: StopSignal | None = None) -> None:
    """Waits until ``proc`` exits (TimeoutExpired after ``timeout`` s,
    _Stopped once ``stop`` is set) without reaping it: while the leader is
    a zombie its pid, which is its process group's id, cannot be reused, so
    signalling the group after it exited cannot reach an unrelated process."""
    deadline = None if timeout is None else time.monotonic() + timeout
    pause = 0.001
    while os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        if deadline is not None and time.monotonic() >= deadline:
            raise subprocess.TimeoutExpired(proc.args, timeout)
        if stop is not None and stop.is_set():
            raise _Stopped()
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _group_members(pgid: int) -> list[int] | None:
    """The live (not zombie) processes of process group ``pgid`` other than
    its leader; None where /proc cannot tell."""
    try:
        pids = [int(n) for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return None
    members = []
    for pid in pids:
        if pid == pgid:
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if len(fields) > 2 and fields[0] != b"Z" and fields[2] == str(pgid).encode():
            members.append(pid)
    return members


def _stop_leftovers(pgid: int) -> int:
    """Stops what is left of an exited command's process group (its leader
    not yet reaped): SIGTERM, SIGKILL after :data:`STOP_GRACE_S`; returns
    how many processes were left."""
    members = _group_members(pgid)
    if members == []:
        return 0
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return 0
    if members is None:  # no /proc: nothing to wait on or count; the SIGTERM is the best effort
        return 0
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline and _group_members(pgid):
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)  # a no-op for the zombie leader; ends what ignored SIGTERM
    except (ProcessLookupError, PermissionError):
        pass
    return len(members)


def _stop(proc: subprocess.Popen) -> None:
    """Stops ``proc``'s process group: SIGTERM, SIGKILL after the grace time."""
    for sig, wait in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):  # the group is gone already
            pass
        try:
            proc.wait(timeout=wait)
            if sig == signal.SIGTERM:
                # The leader is gone; its group may not be: kill what is left.
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            return
        except subprocess.TimeoutExpired:
            continue


def tail(path: str, lines: int = 15, max_bytes: int = 16384) -> str:
    """The last ``lines`` lines of a log file (for an error message), read
    from its last ``max_bytes`` only (a command may have printed gigabytes)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    if size > max_bytes:
        text = text.split("\n", 1)[-1]  # the first line read is likely cut
    return "\n".join(text.splitlines()[-lines:]) + ("\n" if text.endswith("\n") else "")

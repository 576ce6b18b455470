"""Running the user's command: one subprocess per run, its output in a log
file, each run kept for ``diagnosis.json``'s ``commands``."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

__all__ = ["CommandRecord", "Runner", "say_to"]


@dataclass
class CommandRecord:
    """One command diagnose ran: the stage, the argv, the environment
    variables diagnose set for it, its exit code, wall time and log file."""

    stage: str
    argv: list[str]
    env: dict[str, str]
    exit_code: int | None
    seconds: float
    log: str
    note: str = ""

    def as_json(self) -> dict[str, object]:
        """The ``commands[]`` item of diagnosis.json."""
        return asdict(self)

    def shell(self) -> str:
        """The command as one shell line (environment first)."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        return (env + " " if env else "") + shlex.join(self.argv)


def say_to(stream=None) -> Callable[[str], None]:
    """A progress printer writing whole lines to ``stream`` (default: the
    stdout of now, so that the bisector's redirected prints do not take
    diagnose's progress with them)."""
    out = stream if stream is not None else sys.stdout

    def say(msg: str) -> None:
        out.write(msg + "\n")
        out.flush()
    return say


@dataclass
class Runner:
    """Runs commands into ``log_dir`` and keeps their records."""

    log_dir: Path
    timeout: float | None = None
    records: list[CommandRecord] = field(default_factory=list)

    def run(self, stage: str, argv: list[str], env: dict[str, str], unset: tuple[str, ...] = ()) -> CommandRecord:
        """Runs ``argv`` with ``env`` added to (and ``unset`` removed from)
        this process's environment; stdout and stderr go to a log file. A
        command that cannot start has exit code None and says why in
        ``note``."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"{len(self.records):03d}_{stage}.log"
        full = dict(os.environ)
        for k in unset:
            full.pop(k, None)
        full.update(env)
        t0 = time.monotonic()
        note = ""
        code: int | None
        with open(log, "w", encoding="utf-8") as f:
            f.write(f"$ {shlex.join(argv)}\n# env: {env}\n")
            f.flush()
            try:
                code = subprocess.run(argv, env=full, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      timeout=self.timeout).returncode
            except FileNotFoundError as e:
                code, note = None, f"cannot start {argv[0]!r}: {e.strerror}"
            except subprocess.TimeoutExpired:
                code, note = None, f"killed after {self.timeout:.0f} s (--timeout)"
        rec = CommandRecord(stage, list(argv), dict(env), code, round(time.monotonic() - t0, 2), str(log), note)
        self.records.append(rec)
        return rec


def tail(path: str, lines: int = 15) -> str:
    """The last ``lines`` lines of a log file (for an error message)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""

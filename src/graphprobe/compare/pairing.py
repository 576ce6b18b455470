"""Pairs what TARGET and BENCH hold: dump files, process folders, steps.

Each side may be

* a ``dump.json`` file (any file name),
* a process folder holding ``dump.json``: ``rank{R}``, ``pid{P}`` or
  ``proc{P}`` (msprobe's eager dumper),
* a step folder ``step{N}`` holding process folders,
* a dump root holding ``step{N}`` folders.

Two dump roots are paired step by step (by number). Otherwise each side must
come down to a single step (a root with one step is that step). Within a step
pair, ``rank{R}`` folders are paired by R. Single-process folders carry a pid,
which differs between two runs, so they are paired by position: when each side
holds exactly one process folder (of any kind) the two are paired; otherwise
``pid``/``proc`` folders are paired in ascending pid order. Everything without
a partner is listed in :attr:`Pairing.unpaired`.

The rank label of a pair (the ``{rank}`` of ``compare_result_{rank}_...``) is
R for ``rank{R}`` folders, ``0`` when a single process is compared, and the
target's pid when several ``pid``/``proc`` folders are paired.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Pair", "Pairing", "PairingError", "Unpaired", "pair_paths"]

_STEP = re.compile(r"^step(\d+)$")
_PROC = re.compile(r"^(rank|pid|proc)(\d+)$")
DUMP_FILE = "dump.json"


class PairingError(ValueError):
    """TARGET or BENCH is not something that can be compared, or the two
    cannot be paired."""


@dataclass(frozen=True)
class Pair:
    """One dump.json pair to compare."""

    step: int | None  # set when two dump roots were paired step by step
    rank: str
    target: Path
    bench: Path

    @property
    def label(self) -> str:
        """``step3/rank1``-style name used in messages."""
        return (f"step{self.step}/" if self.step is not None else "") + f"rank{self.rank}"


@dataclass(frozen=True)
class Unpaired:
    """Something on one side without a partner on the other."""

    side: str  # "target" or "bench"
    what: str  # "step4", "step0/rank3", "step0/pid123 (no dump.json)"
    path: Path


@dataclass
class Pairing:
    pairs: list[Pair] = field(default_factory=list)
    unpaired: list[Unpaired] = field(default_factory=list)
    by_step: bool = False  # two roots: results go to per-step folders


@dataclass(frozen=True)
class _Proc:
    kind: str  # "rank", "pid" ("proc" folds into it) or "single"
    number: int
    path: Path  # the dump.json (may not exist)

    @property
    def name(self) -> str:
        return "dump" if self.kind == "single" else f"{self.kind}{self.number}"


def _subdirs(path: Path, pattern: re.Pattern[str]) -> dict[str, tuple[int, Path]]:
    out: dict[str, tuple[int, Path]] = {}
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError as e:
        raise PairingError(f"cannot list '{path}': {e.strerror}") from None
    for e in entries:
        m = pattern.match(e.name)
        if m and e.is_dir():
            out[e.name] = (int(m.groups()[-1]), Path(e.path))
    return out


def _procs(step_dir: Path) -> list[_Proc]:
    procs = []
    for name, (number, path) in _subdirs(step_dir, _PROC).items():
        kind = "rank" if name.startswith("rank") else "pid"
        procs.append(_Proc(kind, number, path / DUMP_FILE))
    return procs


def _classify(path: Path) -> tuple[str, dict[int | None, list[_Proc]]]:
    """Returns (kind, {step number or None: process dumps})."""
    if not path.exists():
        raise PairingError(f"'{path}' does not exist")
    if path.is_file():
        return "file", {None: [_Proc("single", 0, path)]}
    if (path / DUMP_FILE).is_file():
        m = _PROC.match(path.name)
        if m:
            kind = "rank" if m.group(1) == "rank" else "pid"
            return "process", {None: [_Proc(kind, int(m.group(2)), path / DUMP_FILE)]}
        return "process", {None: [_Proc("single", 0, path / DUMP_FILE)]}
    steps = _subdirs(path, _STEP)
    if steps:
        return "root", {number: _procs(p) for number, p in sorted(steps.values())}
    procs = _procs(path)
    if procs:
        m = _STEP.match(path.name)
        return "step", {int(m.group(1)) if m else None: procs}
    raise PairingError(
        f"'{path}' holds no {DUMP_FILE} and no step*, rank*, pid* or proc* folder: not a graphprobe/msprobe dump"
    )


def _single_step(side: str, path: Path, steps: dict[int | None, list[_Proc]]) -> list[_Proc]:
    if len(steps) != 1:
        found = ", ".join(f"step{n}" for n in steps)
        raise PairingError(
            f"{side} '{path}' holds several steps ({found}) but the other side is a single step or dump: "
            "pass the step folder, or two dump roots"
        )
    return next(iter(steps.values()))


def _pair_procs(step: int | None, target: list[_Proc], bench: list[_Proc], out: Pairing) -> None:
    prefix = f"step{step}/" if step is not None else ""

    def add(t: _Proc, b: _Proc, rank: str) -> None:
        missing = [(side, p) for side, p in (("target", t), ("bench", b)) if not p.path.is_file()]
        if missing:
            for side, p in missing:
                out.unpaired.append(Unpaired(side, f"{prefix}{p.name} (no {DUMP_FILE})", p.path.parent))
            return
        out.pairs.append(Pair(step, rank, t.path, b.path))

    if len(target) == 1 and len(bench) == 1:
        t, b = target[0], bench[0]
        rank = str(t.number) if t.kind == "rank" else str(b.number) if b.kind == "rank" else "0"
        add(t, b, rank)
        return
    t_ranks = {p.number: p for p in target if p.kind == "rank"}
    b_ranks = {p.number: p for p in bench if p.kind == "rank"}
    for n in sorted(t_ranks.keys() | b_ranks.keys()):
        if n in t_ranks and n in b_ranks:
            add(t_ranks[n], b_ranks[n], str(n))
        else:
            side, p = ("target", t_ranks[n]) if n in t_ranks else ("bench", b_ranks[n])
            out.unpaired.append(Unpaired(side, f"{prefix}{p.name}", p.path.parent))
    t_pids = sorted((p for p in target if p.kind != "rank"), key=lambda p: p.number)
    b_pids = sorted((p for p in bench if p.kind != "rank"), key=lambda p: p.number)
    for t, b in zip(t_pids, b_pids):
        add(t, b, str(t.number))
    for side, rest in (("target", t_pids[len(b_pids):]), ("bench", b_pids[len(t_pids):])):
        for p in rest:
            out.unpaired.append(Unpaired(side, f"{prefix}{p.name}", p.path.parent))


def pair_paths(target: str | os.PathLike[str], bench: str | os.PathLike[str]) -> Pairing:
    """Finds the dump.json pairs to compare. Raises :class:`PairingError`."""
    t_path, b_path = Path(target), Path(bench)
    t_kind, t_steps = _classify(t_path)
    b_kind, b_steps = _classify(b_path)
    out = Pairing()
    if t_kind == "root" and b_kind == "root":
        out.by_step = True
        for n in sorted(t_steps.keys() | b_steps.keys()):  # type: ignore[type-var]
            if n in t_steps and n in b_steps:
                _pair_procs(n, t_steps[n], b_steps[n], out)
            else:
                side, root = ("target", t_path) if n in t_steps else ("bench", b_path)
                out.unpaired.append(Unpaired(side, f"step{n}", root / f"step{n}"))
        return out
    _pair_procs(None, _single_step("TARGET", t_path, t_steps), _single_step("BENCH", b_path, b_steps), out)
    return out

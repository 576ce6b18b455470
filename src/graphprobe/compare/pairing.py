"""Pairs what TARGET and BENCH hold: dump files, process folders, steps.

Each side may be

* a ``dump.json`` file (any file name),
* a process folder holding ``dump.json``: ``rank{R}``, ``pid{P}`` or
  ``proc{P}`` (msprobe's eager dumper),
* a step folder ``step{N}`` holding process folders,
* a dump root holding ``step{N}`` folders.

Two dump roots are paired step by step (by number). Otherwise each side must
come down to a single step (a root with one step is that step). Within a step
pair, ``rank{R}`` folders are paired by R only: a step whose one rank folder
is ``rank0`` on one side and ``rank3`` on the other has no pair (both are
listed without a partner; when nothing at all pairs, :class:`PairingError`
says so). Two process folders (or dump.json files) passed as TARGET and
BENCH are the pair the user chose, whatever their ranks.

Single-process dumps are ``pid{P}`` folders (``proc{P}`` from msprobe's eager
dumper), named after the process id, which differs between two runs and says
nothing about which folders belong together. So they are paired without
guessing: when each side of a step holds exactly one process folder (of any
kind), the two are paired. When either side holds several ``pid``/``proc``
folders -- most often a second run into a used ``dump_path``, which adds a
folder of its own next to the first run's -- nothing is guessed:
:class:`PairingError` lists what each side holds (with the time each
dump.json was written) and the ways out: pass the two process folders, or
choose a rule with ``pid_pairing`` (``--pid-pairing``):

* ``"single"`` (default): one process folder per side, or refuse;
* ``"newest"``: in order of their dump.json times, newest with newest (the
  surplus older folders are listed without a partner, so ``--fail-on
  unmatched`` fails): the rule for re-runs into a used ``dump_path``;
* ``"order"``: in ascending pid order (the surplus listed without a partner):
  several processes of one run that have no rank.

Everything without a partner is listed in :attr:`Pairing.unpaired`.

Folder numbers are read only in the form the dumper writes them: ASCII
digits without leading zeros (``step1``, ``rank0``, ``pid4711``). A folder
that only looks like one (``step01``, ``rank٣`` with an Arabic-Indic digit,
``step1`` followed by a newline) is never read as that number -- two such
folders would otherwise both be step 1 and one of them dropped -- and is
listed without a partner, naming the folder it would clash with.

A ``step{N}`` folder that holds nothing but compare results
(``compare_result_*.csv``, ``compare_report_*.html``: ``-o`` pointed inside
a dump) is graphprobe's own output, not a dump step, and is skipped.

A pair is named after what it compares (:attr:`Pair.label`): ``rank{R}``
for rank folders, ``pid{P}`` (the target's pid) for process folders, and
``rank0`` for two plain dump.json files outside any process folder (msprobe's
name for a single-process compare). The ``{tag}`` of
``compare_result_{tag}_...`` is ``R`` for ranks (msprobe's names), ``pid{P}``
for process folders and ``0`` for plain files.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["PID_PAIRINGS", "Pair", "Pairing", "PairingError", "Unpaired", "pair_paths"]

# The names the dumper writes: ASCII digits, no leading zero. fullmatch: "$"
# would also accept a trailing newline.
_STEP = re.compile(r"step(0|[1-9][0-9]*)", re.ASCII)
_PROC = re.compile(r"(rank|pid|proc)(0|[1-9][0-9]*)", re.ASCII)
# What only looks like one: any Unicode decimal digits (step01, step١).
_STEP_LIKE = re.compile(r"step(\d+)\s*")
_PROC_LIKE = re.compile(r"(rank|pid|proc)(\d+)\s*")
# What a compare writes into its output folders.
_OUTPUT_FILE = re.compile(r"compare_(result_.*\.(csv|xlsx)|report_.*\.html)|index\.html")
DUMP_FILE = "dump.json"
#: The rules for pid folders: see the module's docstring.
PID_PAIRINGS = ("single", "newest", "order")


class PairingError(ValueError):
    """TARGET or BENCH is not something that can be compared, or the two
    cannot be paired."""


@dataclass(frozen=True)
class Pair:
    """One dump.json pair to compare."""

    step: int | None  # set when two dump roots were paired step by step
    rank: str  # R of rank{R}, P of pid{P} (the target's), "0" for plain files
    target: Path
    bench: Path
    kind: str = "rank"  # "rank" or "pid"

    @property
    def process(self) -> str:
        """``rank1`` or ``pid4711``: what the pair compares."""
        return f"{self.kind}{self.rank}"

    @property
    def label(self) -> str:
        """``step3/rank1``- or ``step0/pid4711``-style name used in messages."""
        return (f"step{self.step}/" if self.step is not None else "") + self.process

    @property
    def tag(self) -> str:
        """The ``{tag}`` of ``compare_result_{tag}_{time}.csv``: R for ranks
        (msprobe's names), ``pid{P}`` for process folders."""
        return self.rank if self.kind == "rank" else self.process


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
    ambiguous: list[str] = field(default_factory=list)  # steps whose pid folders "single" refuses to pair
    other_ranks: list[str] = field(default_factory=list)  # steps whose one rank folder per side differ in rank
    example: tuple[Path, Path] = (Path("TARGET/step0/pidP"), Path("BENCH/step0/pidQ"))  # for the refusal


@dataclass(frozen=True)
class _Proc:
    kind: str  # "rank", "pid" ("proc" folds into it) or "single"
    number: int
    path: Path  # the dump.json (may not exist)

    @property
    def name(self) -> str:
        """The process folder's name as it is on disk, for messages (msprobe's
        ``proc{P}`` stays ``proc{P}``, though it pairs as a pid folder)."""
        if self.kind == "single":
            return "dump"
        folder = self.path.parent.name
        return folder if _PROC.fullmatch(folder) else f"{self.kind}{self.number}"


@dataclass(frozen=True)
class _Odd:
    """A folder named like a step or process folder but not as the dumper
    names them: never read as a number, always reported."""

    what: str
    path: Path


def _digits(text: str) -> int:
    # int() reads any Unicode decimal digit (int("١") == 1).
    return int(text.strip())


def _is_compare_output(path: Path) -> bool:
    """True for a folder holding only compare results: a per-step output
    folder of an earlier compare whose -o pointed inside this dump."""
    try:
        entries = list(os.scandir(path))
    except OSError:
        return False
    return bool(entries) and all(e.is_file(follow_symlinks=False) and _OUTPUT_FILE.fullmatch(e.name) for e in entries)


def _subdirs(path: Path, pattern: re.Pattern[str], like: re.Pattern[str], odd: list[_Odd],
             prefix: str = "") -> dict[str, tuple[int, Path]]:
    """The folders of ``path`` named as ``pattern`` says, by name. Folders
    that only match ``like`` (non-canonical numbers) go to ``odd``, their
    names shown after ``prefix``."""
    out: dict[str, tuple[int, Path]] = {}
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError as e:
        raise PairingError(f"cannot list '{path}': {e.strerror}") from None
    lookalikes = []
    for e in entries:
        if not e.is_dir():
            continue
        m = pattern.fullmatch(e.name)
        if m:
            out[e.name] = (int(m.groups()[-1]), Path(e.path))
        elif like.fullmatch(e.name):
            lookalikes.append(e)
    for e in lookalikes:
        m = like.fullmatch(e.name)
        assert m is not None
        canonical = e.name[: m.start(m.lastindex or 0)] + str(_digits(m.groups()[-1]))
        clash = f"; {canonical} is here too, and only {canonical} is compared" if canonical in out else ""
        odd.append(_Odd(f"{prefix}{ascii(e.name)} (not a folder name the dumper writes: it would write "
                        f"{canonical}{clash}; rename it to compare it)", Path(e.path)))
    return out


def _mtime(p: _Proc) -> float:
    """When the process folder's dump was written (its folder's time when
    there is no dump.json)."""
    for candidate in (p.path, p.path.parent):
        try:
            return candidate.stat().st_mtime
        except OSError:
            continue
    return 0.0


def _procs(step_dir: Path, odd: list[_Odd], prefix: str = "") -> list[_Proc]:
    procs = []
    for name, (number, path) in _subdirs(step_dir, _PROC, _PROC_LIKE, odd, prefix).items():
        kind = "rank" if name.startswith("rank") else "pid"
        procs.append(_Proc(kind, number, path / DUMP_FILE))
    return procs


def _classify(path: Path) -> tuple[str, dict[int | None, list[_Proc]], list[_Odd]]:
    """Returns (kind, {step number or None: process dumps}, odd folders)."""
    if not path.exists():
        raise PairingError(f"'{path}' does not exist")
    odd: list[_Odd] = []
    if path.is_file():
        # .../pid4711/dump.json is process pid4711's dump, named so.
        m = _PROC.fullmatch(path.parent.name) if path.name == DUMP_FILE else None
        if m:
            kind = "rank" if m.group(1) == "rank" else "pid"
            return "file", {None: [_Proc(kind, int(m.group(2)), path)]}, odd
        return "file", {None: [_Proc("single", 0, path)]}, odd
    if (path / DUMP_FILE).is_file():
        m = _PROC.fullmatch(path.name)
        if m:
            kind = "rank" if m.group(1) == "rank" else "pid"
            return "process", {None: [_Proc(kind, int(m.group(2)), path / DUMP_FILE)]}, odd
        return "process", {None: [_Proc("single", 0, path / DUMP_FILE)]}, odd
    steps = {name: found for name, found in _subdirs(path, _STEP, _STEP_LIKE, odd).items()
             if not _is_compare_output(found[1])}
    if steps:
        step_odd: list[_Odd] = []
        by_number = {number: _procs(p, step_odd, f"step{number}/") for number, p in sorted(steps.values())}
        return "root", by_number, odd + step_odd
    procs = _procs(path, odd)
    if procs:
        m = _STEP.fullmatch(path.name)
        return "step", {int(m.group(1)) if m else None: procs}, odd
    seen = "".join(f"; found {o.what}" for o in odd)
    raise PairingError(
        f"'{path}' holds no {DUMP_FILE} and no step*, rank*, pid* or proc* folder: not a graphprobe/msprobe dump{seen}"
    )


def _single_step(side: str, path: Path, steps: dict[int | None, list[_Proc]]) -> list[_Proc]:
    if len(steps) != 1:
        found = ", ".join(f"step{n}" for n in steps)
        raise PairingError(
            f"{side} '{path}' holds several steps ({found}) but the other side is a single step or dump: "
            "pass the step folder, or two dump roots"
        )
    return next(iter(steps.values()))


def _written(p: _Proc) -> str:
    """``pid4711 (dump.json of 2026-12-01 17:03:12)``: a process folder and
    when its dump was written, for the messages that list them."""
    try:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(p.path.stat().st_mtime))
        return f"{p.name} (dump.json of {stamp})"
    except OSError:
        return f"{p.name} (no {DUMP_FILE})"


def _pair_procs(step: int | None, target: list[_Proc], bench: list[_Proc], out: Pairing, pid_pairing: str,
                chosen: bool = False) -> None:
    """``chosen``: TARGET and BENCH are the two process folders (or files)
    themselves, paired as given."""
    prefix = f"step{step}/" if step is not None else ""

    def add(t: _Proc, b: _Proc, kind: str, number: str) -> None:
        missing = [(side, p) for side, p in (("target", t), ("bench", b)) if not p.path.is_file()]
        if missing:
            for side, p in missing:
                out.unpaired.append(Unpaired(side, f"{prefix}{p.name} (no {DUMP_FILE})", p.path.parent))
            return
        out.pairs.append(Pair(step, number, t.path, b.path, kind))

    def add_one(t: _Proc, b: _Proc) -> None:
        # A rank on either side names the pair; else the target's pid; two
        # plain files are msprobe's single-process compare, "rank0".
        named = (next((p for p in (t, b) if p.kind == "rank"), None)
                 or next((p for p in (t, b) if p.kind == "pid"), None))
        if named is None:
            add(t, b, "rank", "0")
        else:
            add(t, b, named.kind, str(named.number))

    one_rank_each = (len(target) == 1 and len(bench) == 1 and target[0].kind == bench[0].kind == "rank"
                     and target[0].number != bench[0].number)
    if one_rank_each and not chosen:
        out.other_ranks.append(f"{prefix.rstrip('/') or 'the step'}: TARGET holds only {target[0].name}, BENCH only "
                               f"{bench[0].name}")
    if len(target) == 1 and len(bench) == 1 and not (one_rank_each and not chosen):
        add_one(target[0], bench[0])
        return
    t_ranks = {p.number: p for p in target if p.kind == "rank"}
    b_ranks = {p.number: p for p in bench if p.kind == "rank"}
    for n in sorted(t_ranks.keys() | b_ranks.keys()):
        if n in t_ranks and n in b_ranks:
            add(t_ranks[n], b_ranks[n], "rank", str(n))
        else:
            side, p = ("target", t_ranks[n]) if n in t_ranks else ("bench", b_ranks[n])
            out.unpaired.append(Unpaired(side, f"{prefix}{p.name}", p.path.parent))
    t_pids = [p for p in target if p.kind != "rank"]
    b_pids = [p for p in bench if p.kind != "rank"]
    if not t_pids or not b_pids:
        for side, p in [("target", p) for p in t_pids] + [("bench", p) for p in b_pids]:
            out.unpaired.append(Unpaired(side, f"{prefix}{p.name}", p.path.parent))
        return
    if len(t_pids) == 1 and len(b_pids) == 1:
        add_one(t_pids[0], b_pids[0])
        return
    if pid_pairing == "single":
        # pids say nothing about which folders belong together: refuse,
        # saying what is there (the caller raises once for all steps).
        t_list = ", ".join(_written(p) for p in sorted(t_pids, key=lambda p: (_mtime(p), p.number)))
        b_list = ", ".join(_written(p) for p in sorted(b_pids, key=lambda p: (_mtime(p), p.number)))
        if not out.ambiguous:  # the example of the way out: this step's newest folders
            out.example = (max(t_pids, key=lambda p: (_mtime(p), p.number)).path.parent,
                           max(b_pids, key=lambda p: (_mtime(p), p.number)).path.parent)
        out.ambiguous.append(f"{prefix.rstrip('/') or 'the step'}: TARGET holds {len(t_pids)} pid folders ({t_list}); "
                             f"BENCH holds {len(b_pids)} ({b_list})")
        return
    if pid_pairing == "order":
        t_pids.sort(key=lambda p: p.number)
        b_pids.sort(key=lambda p: p.number)
        n = min(len(t_pids), len(b_pids))
        for t, b in zip(t_pids, b_pids):
            add(t, b, "pid", str(t.number))
        for side, procs in (("target", t_pids), ("bench", b_pids)):
            for p in procs[n:]:
                out.unpaired.append(Unpaired(side, f"{prefix}{p.name} (--pid-pairing order: no pid folder left on "
                                                   "the other side)", p.path.parent))
        return
    # "newest": by the time each dump.json was written, newest with newest;
    # the surplus older ones are older runs, reported (never dropped).
    t_pids.sort(key=lambda p: (_mtime(p), p.number))
    b_pids.sort(key=lambda p: (_mtime(p), p.number))
    n = min(len(t_pids), len(b_pids))
    for t, b in zip(t_pids[len(t_pids) - n:], b_pids[len(b_pids) - n:]):
        add(t, b, "pid", str(t.number))
    counts = f"target {len(t_pids)}, bench {len(b_pids)} pid/proc folders"
    for side, procs in (("target", t_pids), ("bench", b_pids)):
        newest = ", ".join(p.name for p in procs[len(procs) - n:]) or "none"
        for p in procs[: len(procs) - n]:
            out.unpaired.append(Unpaired(
                side, f"{prefix}{p.name} (an older run: {counts}; the newest ({newest}) were paired by "
                      "--pid-pairing newest)", p.path.parent))


def _refuse_ambiguous(out: Pairing) -> None:
    """Raises the one error that lists every step where pid folders could
    not be paired without guessing, and the ways out."""
    if not out.ambiguous:
        return
    shown = out.ambiguous[:5] + ([f"... ({len(out.ambiguous)} steps in all)"] if len(out.ambiguous) > 5 else [])
    raise PairingError(
        "cannot pair single-process (pid) folders without guessing: " + "; ".join(shown) + ". "
        "A pid is the process id of a run, different in every run, so it cannot say which folders belong "
        "together; several in one step most often means several runs into one dump_path (start() warned). "
        "Either pass the two process folders to compare (e.g. the newest of each side: "
        f"graphprobe compare {out.example[0]} {out.example[1]}), remove the older run's folders, or choose a rule: "
        "--pid-pairing newest (by dump.json time, newest with newest; older ones listed without a partner) or "
        "--pid-pairing order (ascending pid: several processes of one run without ranks)."
    )


def _refuse_other_ranks(out: Pairing, target: Path, bench: Path) -> None:
    """Raises when nothing pairs because each side's one rank folder is
    another rank: comparing them would judge two ranks' data as one."""
    if out.pairs or not out.other_ranks:
        return
    t = next(u.path for u in out.unpaired if u.side == "target")
    b = next(u.path for u in out.unpaired if u.side == "bench")
    raise PairingError(
        "nothing to compare: rank folders are paired by rank number, and " + "; ".join(out.other_ranks[:5]) +
        f" (TARGET {target}, BENCH {bench}). Different ranks hold different data (their shard, their part of "
        "the batch), so they are not compared as a pair unless you ask: to compare these two anyway, pass the two "
        f"rank folders themselves: graphprobe compare {t} {b}")


def pair_paths(target: str | os.PathLike[str], bench: str | os.PathLike[str], pid_pairing: str = "single") -> Pairing:
    """Finds the dump.json pairs to compare. ``pid_pairing``: how several
    pid folders in one step are paired (:data:`PID_PAIRINGS`, see the
    module's docstring). Raises :class:`PairingError`."""
    if pid_pairing not in PID_PAIRINGS:
        raise PairingError(f"pid_pairing: got {pid_pairing!r}; allowed: {', '.join(PID_PAIRINGS)}")
    t_path, b_path = Path(target), Path(bench)
    t_kind, t_steps, t_odd = _classify(t_path)
    b_kind, b_steps, b_odd = _classify(b_path)
    out = Pairing()
    for side, odd in (("target", t_odd), ("bench", b_odd)):
        out.unpaired.extend(Unpaired(side, o.what, o.path) for o in odd)
    if t_kind == "root" and b_kind == "root":
        out.by_step = True
        for n in sorted(t_steps.keys() | b_steps.keys()):  # type: ignore[type-var]
            if n in t_steps and n in b_steps:
                _pair_procs(n, t_steps[n], b_steps[n], out, pid_pairing)
            else:
                side, root = ("target", t_path) if n in t_steps else ("bench", b_path)
                out.unpaired.append(Unpaired(side, f"step{n}", root / f"step{n}"))
        _refuse_ambiguous(out)
        _refuse_other_ranks(out, t_path, b_path)
        return out
    chosen = t_kind in ("file", "process") and b_kind in ("file", "process")
    _pair_procs(None, _single_step("TARGET", t_path, t_steps), _single_step("BENCH", b_path, b_steps), out,
                pid_pairing, chosen)
    _refuse_ambiguous(out)
    _refuse_other_ranks(out, t_path, b_path)
    return out

"""The flight recorder: a whole training run's statistics in the history,
full step dumps kept only around a trigger (docs/history.md, "Flight recorder").

The dumper writes every step's dump.json as usual (on its writer thread).
:meth:`FlightRecorder.step` ends the step with ``dumper.step()`` -- which
waits for the *previous* step's files, so reading them needs no extra
synchronisation -- then hands that previous step to the recorder's own
thread, which reads its dump.json into the history (one Parquet file per
``every`` steps) and judges every value while the next iteration runs:

* a NaN or infinity in any statistic (computed in the graph already),
* the running-mean rule (rules.py) on each record, and on the loss handed to
  ``step(loss=...)`` (the history record ``loss``),
* an explicit :meth:`FlightRecorder.trigger`.

A trigger keeps the full dumps of its step, the ``keep`` steps before it and
the ``after`` steps after it; every other step's dump folder is deleted once
no future trigger can need it. Triggers are returned, passed to
``on_trigger`` and appended to ``HIST/triggers_rank{R}.jsonl``.

The steps are read and judged in order by one thread, so the history, the
triggers and the dumps kept are those of reading them on the caller's
thread; a step's triggers (and its failures, raised) reach the caller at the
next :meth:`FlightRecorder.step` after the one that handed it over, i.e.
two calls after the step itself, or at :meth:`FlightRecorder.close`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import queue
import shutil
import threading
import warnings
import weakref
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from graphprobe.history.records import STATS, StepRows, read_dump_json
from graphprobe.history.rules import AnomalyRule, RunningWindow
from graphprobe.history.writer import HistoryWriter

__all__ = ["FlightRecorder", "Trigger"]

_DIR_RE_RANK = "rank"


def _run(ingest: Callable[..., Any], pending: tuple[Any, ...], explicit: list[str]) -> tuple[bool, Any]:
    """One step read and judged: (True, its result) or (False, the exception, raised by _collect)."""
    try:
        return True, ingest(*pending, explicit)
    except BaseException as exc:  # handed to the caller's thread, never dropped; the thread lives on
        return False, exc


def _work(inbox: queue.SimpleQueue[Any], outbox: queue.SimpleQueue[tuple[bool, Any]],
          ingest: Callable[..., Any]) -> None:
    """The recorder's thread: steps in order until None."""
    while (job := inbox.get()) is not None:
        outbox.put(_run(ingest, *job))


def _at_exit(inbox: queue.SimpleQueue[Any], thread: threading.Thread) -> None:
    """Lets ``thread`` finish its queued steps when the interpreter exits (before daemon threads are
    stopped), the way concurrent.futures' executors do; ends at once after close() joined it."""
    ref = weakref.ref(thread)

    def finish() -> None:
        t = ref()
        if t is not None and t.is_alive():
            inbox.put(None)
            t.join()

    register = getattr(threading, "_register_atexit", None)  # private; concurrent.futures relies on it
    if register is not None:
        register(finish)


def _set_sketches(on: bool) -> None:
    """The engine's Sketch switch (statistics.sketch), read by each record at run time, so code
    already compiled follows it. Imported here: the history's queries run without the native engine."""
    from graphprobe import _C

    _C.set_sketches(on)


@dataclass(frozen=True)
class Trigger:
    """Why a step's full dump was kept."""

    step: int
    rank: int
    record: str | None
    kind: str  # "nonfinite", "deviation", "loss" or "explicit"
    value: float | None
    reason: str
    others: int = 0  # further records of the step flagged for the same kind (later in program order)

    def __str__(self) -> str:
        what = f" {self.record} = {self.value}" if self.record else ""
        more = f"; {self.others} more records" if self.others else ""
        return f"graphprobe trigger at step {self.step}, rank {self.rank}: {self.kind}{what} ({self.reason}{more})"


class FlightRecorder:
    """Wraps a started :class:`graphprobe.AclGraphDumper`; call :meth:`step`
    instead of ``dumper.step()`` and :meth:`close` at the end.

    ``history``: the history folder; ``every``: steps per Parquet file;
    ``keep``/``after``: full dumps kept before/after a trigger; ``rule``:
    the anomaly rule (None: NaN/Inf and explicit triggers only);
    ``max_triggers``: after this many triggered steps, anomalies still go to the history and
    the triggers file but keep no more dumps (a NaN that spreads would
    otherwise keep every step); ``on_trigger``: called on the caller's
    thread with each :class:`Trigger`.

    ``background``: reading and judging run on one thread of the
    recorder's (see the module docstring) and a step's triggers come two
    :meth:`step` calls after it; False reads and judges on the caller's
    thread inside :meth:`step`, which then returns the triggers of the step
    it ended before (one call after it, at the cost of the reading).

    ``sketch``: whether records keep the dumper's ``statistics.sketch``
    while the recorder runs. False (the default) turns the Sketch off
    where it costs a pass of its own over every tensor (the CPU kernel and
    the ATen path of NPU and other devices): the history does not keep it,
    and on the CPU it was most of what leaving the recorder on costs a
    compiled training step (benchmarks/results/always_on.md: L0 1.08x with
    it, 1.01-1.03x without). The dumps kept around a trigger then hold the four
    statistics alone there, and compare judges them on those; the CUDA
    kernel and fused statistics compute the Sketch in their one pass
    whatever this says. ``close()`` gives the dumper its own setting back.
    """

    def __init__(self, dumper: Any, history: str | os.PathLike[str], every: int = 100, keep: int = 5,
                 after: int = 2, rule: AnomalyRule | None = AnomalyRule(), max_triggers: int = 10,
                 on_trigger: Callable[[Trigger], None] | None = None, background: bool = True,
                 sketch: bool = False) -> None:
        for name, value, low in (("keep", keep, 0), ("after", after, 0), ("max_triggers", max_triggers, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"FlightRecorder: {name} must be an int >= {low}, got {value!r}")
        if not isinstance(sketch, bool):
            raise ValueError(f"FlightRecorder: sketch must be True or False, got {sketch!r}")
        if not getattr(dumper, "_started_once", False):
            raise ValueError("FlightRecorder: start the dumper first (dumper.start(model)), then wrap it")
        self.dumper = dumper
        self.history = Path(history)
        self.every = every
        self.keep = keep
        self.after = after
        self.rule = rule
        self.max_triggers = max_triggers
        self.on_trigger = on_trigger
        self.background = bool(background)
        self.triggers: list[Trigger] = []
        self._writer: HistoryWriter | None = None
        self._windows: dict[str, RunningWindow] = {}
        self._pending: tuple[int, str, float | None] | None = None  # (step, folder, loss) written, not yet read
        self._on_disk: dict[int, str] = {}  # step -> its dump folder, not yet deleted
        self._pinned: set[int] = set()
        self._pin_until = -1
        self._explicit: list[str] = []
        self._warned_max = False
        self._trigger_steps = 0  # steps whose triggers kept dumps
        # One thread, so steps are read and judged in order (the rule's windows, the ring of dumps);
        # its state (_writer, _windows, _on_disk, _pinned, ...) is touched by that thread alone.
        # Steps go in through _inbox and come back, in order, through _outbox as (ok, result or
        # exception); _in_flight counts those not yet taken back. Plain queues, not an executor:
        # submit() and its Future were a third of what step() cost the caller (~0.03 ms).
        self._inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._outbox: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()
        self._in_flight = 0
        self._thread: threading.Thread | None = None
        self.sketch = sketch
        self._sketch_off = not sketch and self._dumper_live() and dumper.config.sketch
        if self._sketch_off:
            _set_sketches(False)

    def step(self, dump: bool = True, loss: float | Any | None = None) -> list[Trigger]:
        """``dumper.step(dump)``, then the previous step into the history;
        returns the triggers of that previous step. ``loss``: this step's loss
        (a number or a one-element tensor), judged with the records."""
        folder = self.dumper._step_dir() if dump else None
        number = self.dumper.step_number
        self.dumper.step(dump)
        self._submit()
        if dump:
            self._pending = (number, folder, None if loss is None else float(loss))
        # The step handed over by the previous call had this whole iteration to be read: wait for it
        # (and so keep at most one step in flight), not for the one just handed over.
        return self._collect(keep=1 if self.background else 0)

    def trigger(self, reason: str = "explicit call") -> None:
        """Keeps the full dump of the step just ended (and the ``keep`` before it)."""
        self._explicit.append(str(reason))

    def close(self) -> list[Trigger]:
        """Waits for the last step's files, reads them and writes the rest of
        the history; returns the triggers not yet returned by :meth:`step`."""
        self.dumper.flush()
        self._submit()
        try:
            fired = self._collect(keep=0)
        finally:
            self._stop_thread()
            if self._sketch_off:
                self._sketch_off = False
                if self._dumper_live():  # stop() already reset the switch otherwise
                    _set_sketches(self.dumper.config.sketch)
        if self._writer is not None:
            self._writer.close()
        return fired

    # -- internals ---------------------------------------------------------

    def _dumper_live(self) -> bool:
        """Whether the wrapped dumper is the one recording now (started, not stopped)."""
        from graphprobe.dumper import AclGraphDumper

        wired = getattr(self.dumper, "_wired", None)
        return bool(getattr(self.dumper, "_active", False)) and wired is not None and AclGraphDumper._live is wired

    def _submit(self) -> None:
        """Hands the pending step (with the explicit triggers given since it ended) to the thread."""
        explicit, self._explicit = self._explicit, []
        if self._pending is None:
            if explicit:
                warnings.warn("FlightRecorder.trigger: no step was recorded yet; nothing kept", RuntimeWarning,
                              stacklevel=3)
            return
        pending, self._pending = self._pending, None
        self._in_flight += 1
        if not self.background:
            self._outbox.put(_run(self._ingest, pending, explicit))
            return
        if self._thread is None:
            self._thread = threading.Thread(target=_work, args=(self._inbox, self._outbox, self._ingest),
                                            name="graphprobe-flight-recorder", daemon=True)
            self._thread.start()
            # A run that ends without close(): the step in flight is finished at interpreter exit (as
            # an executor's would be), not cut off with the daemon thread.
            _at_exit(self._inbox, self._thread)
        self._inbox.put((pending, explicit))

    def _stop_thread(self) -> None:
        if self._thread is not None:
            self._inbox.put(None)
            self._thread.join()
            self._thread = None

    def _collect(self, keep: int) -> list[Trigger]:
        """Waits for all but the ``keep`` newest steps handed over; on the
        caller's thread: their warnings, ``on_trigger`` and the first failure
        raised (after the steps before it are delivered)."""
        fired: list[Trigger] = []
        failure: BaseException | None = None
        while self._in_flight > keep:
            ok, result = self._outbox.get()
            self._in_flight -= 1
            if not ok:  # the other steps are still delivered; the first failure is raised
                failure = failure or result
                continue
            found, notes = result
            for note in notes:
                warnings.warn(note, RuntimeWarning, stacklevel=3)
            self.triggers += found
            for t in found:
                if self.on_trigger is not None:
                    self.on_trigger(t)
            fired += found
        if failure is not None:
            raise failure
        return fired

    def _ingest(self, step: int, folder: str, loss: float | None,
                explicit: list[str]) -> tuple[list[Trigger], list[str]]:
        """One step into the history, judged (on the recorder's thread);
        returns its triggers and the warnings to give on the caller's."""
        notes: list[str] = []
        rank = self._rank(folder)
        dump_json = os.path.join(folder, "dump.json")
        rows = read_dump_json(dump_json, step, rank) if os.path.isfile(dump_json) else StepRows(step, rank)
        if loss is not None:
            rows.record.append("loss")
            rows.dtype.append(None)
            for s in STATS:
                rows.stats[s].append(loss)
            rows.checksum.append(None)
        if self._writer is None:
            self._writer = HistoryWriter(self.history, rank, every=self.every)
        self._writer.append(rows)
        if os.path.isdir(folder):
            self._on_disk[step] = folder
        fired = self._judge(rows, rank)
        fired += [Trigger(step, rank, None, "explicit", None, r) for r in explicit]
        if fired:
            self._log(fired)
            if self._trigger_steps < self.max_triggers:
                self._trigger_steps += 1
                self._pinned.update(range(step - self.keep, step + 1))
                self._pin_until = max(self._pin_until, step + self.after)
            elif not self._warned_max:
                self._warned_max = True
                notes.append(f"graphprobe: FlightRecorder: {self.max_triggers} triggered steps kept their dumps; "
                             "later ones are only logged (max_triggers)")
        if step <= self._pin_until:
            self._pinned.add(step)
        # No future trigger (at step + 1 or later) needs step - keep any more.
        for old in [s for s in self._on_disk if s <= step - self.keep and s not in self._pinned]:
            self._delete(old)
        return fired, notes

    def _judge(self, rows: StepRows, rank: int) -> list[Trigger]:
        """One trigger per kind per step: its first record in program order,
        with the count of the others (a NaN spreads to most records)."""
        first: dict[str, Trigger] = {}
        count: dict[str, int] = {}
        stat = self.rule.stat if self.rule else "Norm"
        for i, name in enumerate(rows.record):
            found = []
            bad = next((v for s in STATS if (v := rows.stats[s][i]) is not None and not math.isfinite(v)), None)
            if bad is not None:
                found.append(Trigger(rows.step, rank, name, "nonfinite", bad, "NaN/Inf in a statistic"))
            if self.rule is not None:
                window = self._windows.get(name)
                if window is None:
                    window = self._windows[name] = RunningWindow(self.rule.window)
                x = rows.stats[stat][i]
                if window.judge(x, self.rule):
                    found.append(Trigger(rows.step, rank, name, "loss" if name == "loss" else "deviation", x,
                                         f"{stat} leaves its running mean by more than {self.rule.k} std"))
            for t in found:
                count[t.kind] = count.get(t.kind, 0) + 1
                first.setdefault(t.kind, t)
        return [dataclasses.replace(t, others=count[k] - 1) for k, t in first.items()]

    def _rank(self, folder: str) -> int:
        leaf = os.path.basename(folder)
        return int(leaf[len(_DIR_RE_RANK):]) if leaf.startswith(_DIR_RE_RANK) else 0

    def _delete(self, step: int) -> None:
        folder = self._on_disk.pop(step)
        # A statistics step folder holds dump.json alone: two system calls, where
        # rmtree's fd-safe walk costs milliseconds per step; anything else, rmtree.
        try:
            os.unlink(os.path.join(folder, "dump.json"))
            os.rmdir(folder)
        except OSError:
            shutil.rmtree(folder)
        try:
            os.rmdir(os.path.dirname(folder))  # the step folder, once no other rank's is left in it
        except OSError:
            pass

    def _log(self, fired: list[Trigger]) -> None:
        self.history.mkdir(parents=True, exist_ok=True)
        with open(self.history / f"triggers_rank{fired[0].rank:05d}.jsonl", "a", encoding="utf-8") as f:
            for t in fired:
                f.write(json.dumps(asdict(t)) + "\n")

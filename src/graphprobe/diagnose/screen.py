"""Stage 1, screen: the reference and the target at one level, compared;
the first divergence."""

from __future__ import annotations

import shlex
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from graphprobe.diagnose.commands import CommandRecord, Runner, StopSignal, tail
from graphprobe.diagnose.configs import write_config
from graphprobe.diagnose.entries import parse_entry

__all__ = ["FirstDivergence", "ScreenResult", "StageError", "screen"]


class StageError(RuntimeError):
    """A stage could not run (a command failed, a dump is missing); the
    message says which command and where its log is."""


@dataclass
class FirstDivergence:
    """The first divergence over the compared steps: ``step``, the target
    ``entry``, its ``module`` (dotted path; None for an API entry), the
    kinds (parameter, output, unrecorded-input) and the compare's message."""

    step: int | None
    entry: str
    module: str | None
    cls: str | None
    kinds: tuple[str, ...]
    message: str
    last_agreeing: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The ``first_divergence`` object of diagnosis.json."""
        return {"step": self.step, "entry": self.entry, "module": self.module, "class": self.cls,
                "kinds": list(self.kinds), "message": self.message, "last_agreeing": self.last_agreeing}


@dataclass
class ScreenResult:
    """What the screen found; ``first`` is None when nothing diverges."""

    reference_dump: Path
    target_dump: Path
    compare_dir: Path
    steps: list[int] = field(default_factory=list)
    first: FirstDivergence | None = None
    pairs: list[dict[str, Any]] = field(default_factory=list)


def check_run(rec: Any, what: str, dump: Path) -> None:
    """Raises StageError when the command failed or wrote no dump."""
    if rec.exit_code != 0:
        why = rec.note or f"exit code {rec.exit_code}"
        raise StageError(f"{what}: `{rec.shell()}` failed ({why}); log {rec.log}, last lines:\n{tail(rec.log)}")
    if not any(dump.glob("step*/*/dump.json")):
        raise StageError(
            f"{what}: `{rec.shell()}` wrote no dump under {dump}: the script must create AclGraphDumper() (which "
            f"reads $GRAPHPROBE_CONFIG), start() it on the model and call step() after each iteration; log {rec.log}")


def _order_as_started(runner: Runner, first: CommandRecord, second: CommandRecord) -> None:
    """Swaps ``first`` and ``second`` in ``runner.records`` when ``second`` is listed before it."""
    where = {id(r): k for k, r in enumerate(runner.records)}
    i, j = where.get(id(first)), where.get(id(second))
    if i is not None and j is not None and j < i:
        runner.records[i], runner.records[j] = runner.records[j], runner.records[i]


def screen(runner: Runner, out: Path, target_cmd: list[str], reference_cmd: list[str] | None, level: str,
           steps: int | None, say: Callable[[str], None], at_once: bool = True) -> ScreenResult:
    """Runs the reference and the target at ``level`` (at once, unless
    ``at_once`` is False: one after the other) and compares them."""
    from graphprobe.compare import compare

    work = out / "runs"
    ref_dump, tgt_dump = work / "reference", work / "target"
    ref_cfg = write_config(work / "reference.json", ref_dump, level)
    tgt_cfg = write_config(work / "target.json", tgt_dump, level)
    # The two runs are independent: they run at once (issue #37), the reference in a thread of its own.
    if reference_cmd is None:
        say("  reference: the same command with TORCHDYNAMO_DISABLE=1 (eager)")
        ref_args = (target_cmd, {"GRAPHPROBE_CONFIG": str(ref_cfg), "TORCHDYNAMO_DISABLE": "1"})
    else:
        say(f"  reference: {shlex.join(reference_cmd)}")
        ref_args = (reference_cmd, {"GRAPHPROBE_CONFIG": str(ref_cfg)})
    say(f"  target: {shlex.join(target_cmd)}")
    stop, stop_target = StopSignal(), StopSignal()
    got: dict[str, Any] = {}

    def reference() -> None:
        try:
            got["rec"] = runner.run("screen-reference", *ref_args, stop=stop)
            if got["rec"].exit_code != 0:  # the screen fails with the reference's error: the target is not needed
                stop_target.set("the reference failed: the screen stops")
        except BaseException as e:  # noqa: BLE001  raised in the caller's thread
            got["error"] = e

    thread = threading.Thread(target=reference, name="screen-reference", daemon=True)
    if at_once:
        thread.start()
    else:
        reference()
    try:
        rec = runner.run("screen-target", target_cmd, {"GRAPHPROBE_CONFIG": str(tgt_cfg)}, stop=stop_target)
    finally:
        if sys.exc_info()[0] is not None:
            stop.set("the target's run was interrupted")
        if at_once:
            thread.join()
    if "error" in got:
        raise got["error"]
    ref = got["rec"]
    # Recorded as they finished: listed as they started, reference first, so
    # that diagnosis.json's commands read the same whichever ended first.
    _order_as_started(runner, ref, rec)
    say(f"    reference: exit {ref.exit_code} in {ref.seconds:.1f} s -> {ref_dump}")
    say(f"    target: exit {rec.exit_code} in {rec.seconds:.1f} s -> {tgt_dump}")
    check_run(ref, "screen (reference)", ref_dump)
    check_run(rec, "screen (target)", tgt_dump)
    compare_dir = out / "compare"
    run = compare(tgt_dump, ref_dump, compare_dir, progress=False, jobs=1)
    result = ScreenResult(ref_dump, tgt_dump, compare_dir)
    outcomes = [o for o in run.outcomes if steps is None or o.pair.step is None or o.pair.step < steps]
    outcomes.sort(key=lambda o: (o.pair.step if o.pair.step is not None else -1, o.first_divergence_index or 0))
    for o in outcomes:
        result.steps.append(o.pair.step)
        d = o.divergence
        result.pairs.append({"pair": o.pair.label, "error": o.error, "counts": dict(o.counts),
                             "first_divergence": o.first_divergence,
                             "csv": str(o.csv_path) if o.csv_path else None,
                             "report": str(o.report_path) if o.report_path else None})
        if o.error:
            raise StageError(f"screen: comparing {o.pair.label} failed: {o.error}")
        if d is not None and result.first is None:
            name = parse_entry(d.entry)
            result.first = FirstDivergence(o.pair.step, d.entry, name.module, name.cls, tuple(d.kinds), d.message,
                                           d.last_agreeing)
    for u in run.unpaired:
        say(f"  note: unpaired {u}")
    if not outcomes:
        raise StageError(f"screen: no step of {tgt_dump} pairs with {ref_dump} (steps limited to {steps})")
    return result

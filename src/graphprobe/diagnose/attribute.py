"""Stage 2, attribute: the target again with replay on the first divergent
module and its submodules; the origin is the deepest module that creates
the error."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from graphprobe.diagnose.commands import Runner
from graphprobe.diagnose.configs import write_config
from graphprobe.diagnose.entries import within
from graphprobe.diagnose.replay_files import ModuleVerdict, find_replays, read_replay, worst
from graphprobe.diagnose.screen import FirstDivergence, StageError, check_run

__all__ = ["AttributeResult", "attribute", "pick_origin", "replay_scope", "why_not_judged"]


@dataclass
class AttributeResult:
    """The replayed modules (worst call of each, in call order), the scope
    replayed, the origin (None when no module creates the error) and why."""

    scope: str
    dump: Path
    modules: list[ModuleVerdict] = field(default_factory=list)
    origin: ModuleVerdict | None = None
    why: str = ""
    inputs_file: Path | None = None

    def origin_json(self) -> dict[str, Any] | None:
        """The ``origin`` object of diagnosis.json."""
        o = self.origin
        if o is None:
            return None
        return {"module": o.module, "entry": o.entry, "step": o.step, "verdict": o.verdict, "reason": o.reason,
                "local_error": o.error("local_error"), "eager_local_error": o.error("eager_local_error"),
                "float64_error": o.error("float64_error"), "floor": o.error("floor"), "outputs": o.outputs,
                "inputs": str(self.inputs_file) if self.inputs_file else None}


def replay_scope(first: FirstDivergence) -> tuple[str, str]:
    """The module whose subtree is replayed, and why: the divergent module
    itself when its output or a parameter is the cause; its parent when an
    input already differs (the code that made it runs in the parent's
    forward); everything for an API entry."""
    if first.module is None:
        return "", f"{first.entry} is not a module call: every module is replayed"
    # "bitwise-pair" says how the cause was judged, not what it is.
    causes = [k for k in first.kinds if k != "bitwise-pair"]
    if causes and all(k == "unrecorded-input" for k in causes):
        parent = first.module.rpartition(".")[0]
        return parent, (f"{first.entry} diverges by its input (code not recorded computed it): its parent "
                        f"{parent or 'the model'} and submodules are replayed")
    return first.module, f"{first.module} and its submodules are replayed"


def why_not_judged(m: ModuleVerdict) -> str:
    """A "not judged" module's reason without the verdict repeated (replay's
    reasons start with ``not judged:``)."""
    reason = m.reason.strip()
    if reason.lower().startswith("not judged:"):
        reason = reason[len("not judged:"):].strip()
    return reason or "replay gave no reason"


def _no_origin(modules: list[ModuleVerdict]) -> str:
    """Why no module is the origin when none creates the error: "outside
    the scope" only when every module in it was judged; else exactly which
    could not be, and why, and for one whose judged submodules all inherit,
    that the error is then in its own code (outside those submodules)."""
    judged = [m for m in modules if m.verdict != "not judged"]
    unjudged = [m for m in modules if m.verdict == "not judged"]
    if not judged:
        return "no replayed module could be judged: " + "; ".join(
            f"{m.module or '(model)'}: {why_not_judged(m)}" for m in unjudged)
    if not unjudged:
        return "every replayed module inherits its error: the divergence comes from outside the scope"
    # The deepest unjudged modules (none of their own submodules unjudged) say the most.
    deepest = [u for u in unjudged if not any(o is not u and o.module != u.module and within(o.module, u.module)
                                              for o in unjudged)]
    parts = []
    for u in deepest:
        name = u.module or "(model)"
        kids = [m.module for m in judged if m.module != u.module and within(m.module, u.module)]
        if kids:
            parts.append(f"{name} could not be judged ({why_not_judged(u)}) and its judged submodules "
                         f"({', '.join(kids)}) inherit their error: the error is then in {name}'s own code, "
                         "outside those submodules")
        else:
            parts.append(f"{name} could not be judged ({why_not_judged(u)})")
    others = [m.module or "(model)" for m in unjudged if m not in deepest]
    if others:
        parts.append(f"not judged either, as they hold the above: {', '.join(others)}")
    names = [m.module or "(model)" for m in judged]
    parts.append("judged, and each inherits its error: " + ", ".join(names[:8]) + (" ..." if len(names) > 8 else ""))
    return ("no judged module creates the error, and not every module in the scope could be judged, so the "
            "origin cannot be named: " + "; ".join(parts))


def pick_origin(modules: list[ModuleVerdict]) -> tuple[ModuleVerdict | None, str]:
    """The deepest module that creates the error: one judged "creates"
    none of whose submodules is; the first in call order when several.
    None, with the reason (:func:`_no_origin`), when none creates it."""
    creates = [m for m in modules if m.verdict == "creates"]
    if not creates:
        return None, _no_origin(modules)
    leaves = [m for m in creates if not any(o is not m and within(o.module, m.module) for o in creates)]
    origin = leaves[0]
    others = [m.module for m in leaves[1:]]
    unjudged = [f"{m.module} ({why_not_judged(m)})" for m in modules if m.verdict == "not judged"
                and m.module != origin.module and within(m.module, origin.module)]
    if unjudged:
        why = (f"{origin.module} creates the error and none of its judged submodules does; not judged, so the "
               f"error may be theirs: {'; '.join(unjudged)}")
    else:
        why = f"{origin.module} creates the error and none of its submodules does"
    if others:
        why += f"; also creating, later in call order: {', '.join(others)}"
    return origin, why


def attribute(runner: Runner, out: Path, target_cmd: list[str], first: FirstDivergence, steps: int | None,
              say: Callable[[str], None]) -> AttributeResult:
    """Runs the target with replay on the divergent subtree and picks the origin."""
    scope, why = replay_scope(first)
    say(f"  {why}")
    dump = out / "runs" / "attribute"
    # A first divergence in the backward pass is attributed by replaying the modules' backward too.
    cfg = write_config(out / "runs" / "attribute.json", dump, "L0", [scope] if scope else None, replay=True,
                       save_inputs=True, backward=".backward." in first.entry)
    # The dumper also saves the scope's module at start() for the repro (graphprobe.config_env).
    rec = runner.run("attribute", target_cmd, {"GRAPHPROBE_CONFIG": str(cfg), "GRAPHPROBE_REPRO_MODULE": scope,
                                               "GRAPHPROBE_REPRO_DIR": str(out / "runs" / "module")})
    say(f"    exit {rec.exit_code} in {rec.seconds:.1f} s -> {dump}")
    check_run(rec, "attribute", dump)
    files = [(s, f) for s, f in find_replays(dump) if steps is None or s < steps]
    if not files:
        raise StageError(f"attribute: the target wrote no replay.json under {dump} (log {rec.log}): the dumper "
                         "did not replay (is this graphprobe's dumper one with the 'replay' config key?)")
    calls: dict[str, list[ModuleVerdict]] = {}
    for step, f in files:
        for m in read_replay(f, step):
            if within(m.module, scope):
                calls.setdefault(m.module, []).append(m)
    result = AttributeResult(scope, dump)
    result.modules = [w for w in (worst(c) for c in calls.values()) if w is not None]
    result.origin, result.why = pick_origin(result.modules)
    if result.origin is not None:
        # The file replay.json names: the entry with odd characters replaced ('/' in a ModuleDict key), cut
        # when long; never a name rebuilt here from the entry.
        result.inputs_file = result.origin.inputs_path()
    for m in result.modules:
        le = m.error("local_error")
        say(f"    {m.module or '(model)'}: {m.verdict}" + (f" (local error {le:.3g})" if le is not None else "")
            + ("" if m.verdict != "not judged" else f": {why_not_judged(m)}"))
    return result

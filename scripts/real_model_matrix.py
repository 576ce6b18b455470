"""The first-divergence matrix (issue #35): third-party architectures from
tiny configs, graph-only faults of seven kinds and clean eager-vs-inductor
pairs (inference and training), judged against an independent eager
reference; results as a Markdown table.

Usage::

    .venv/bin/python scripts/real_model_matrix.py --part faults [--models gpt2,llama] [--dtypes fp32,bf16]
        [--levels L0,mix] [--out /tmp/real_model_matrix]
    .venv/bin/python scripts/real_model_matrix.py --part lowering|grad|clean|train ...
    .venv/bin/python scripts/real_model_matrix.py --table [--md benchmarks/results/real_model_matrix.md]

Parts: ``faults`` -- per model, dtype and level one eager dump and the
switchable faults (scale, softmax, precision, routing) on one aot_eager
compile plus the decomposition fault on a custom AOT backend; ``lowering``
-- the custom inductor lowering (one inductor compile each); ``grad`` -- the
backward-only gradient scale in a training step (aot_eager); ``clean`` /
``train`` -- the clean eager-vs-inductor pairs of :data:`CLEAN` /
:data:`CLEAN_TRAIN`. Each part appends its cases to
``{out}/results-{part}-{pid}.jsonl`` as they finish, so parts can run in
parallel into one folder; ``--table`` merges every results file there and
writes the table. Where each fault must be named comes from
tests/real_model_faults.py (a differential eager trace), never from
graphprobe's dumps.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import subprocess
import sys
import time
import traceback
from dataclasses import asdict
from typing import Any

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

import real_model_faults as F  # noqa: E402
import real_model_training as T  # noqa: E402
import torch  # noqa: E402

LEVELS = ("L0", "mix")
CLEAN, CLEAN_TRAIN = T.CLEAN, T.CLEAN_TRAIN
PARTS = ("faults", "lowering", "grad", "clean", "train")


def _head() -> str:
    """The commit checked out, with a mark when tracked files differ from it."""
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return commit + ("+uncommitted" if dirty else "")


def _jobs(part: str, models: list[str], dtypes: list[str], levels: list[str]) -> list[tuple[str, str, str]]:
    if part in ("clean", "train"):
        plan = CLEAN if part == "clean" else CLEAN_TRAIN
        return [j for j in plan if j[0] in models and j[1] in dtypes and j[2] in levels]
    return [(m, d, lv) for m in models for d in dtypes for lv in levels]


def _run(part: str, job: tuple[str, str, str], out: str) -> list[T.Case]:
    name, dt, level = job
    # A folder per switch backend: parts may run in parallel into one --out.
    sub = part + ("-inductor" if T.SWITCH_BACKEND == "inductor" and part in ("faults", "grad") else "")
    sub += f"-{T.LOSS}-loss" if T.LOSS != "square-mean" and part in ("grad", "train") else ""
    root = os.path.join(out, sub, name, dt, level)
    if part == "faults":
        return T.forward_faults(name, dt, level, root, ("scale", "softmax", "precision", "routing", "decomp"))
    if part == "lowering":
        return T.forward_faults(name, dt, level, root, ("lowering",))
    if part == "grad":
        return [T.grad_fault(name, dt, level, root)]
    if part == "clean":
        return [T.clean_inference(name, dt, level, root)]
    return T.clean_training(name, dt, level, root)


def load_cases(out: str) -> list[T.Case]:
    """Every case in ``{out}/results-*.jsonl``; a case run again replaces the earlier one."""
    known: dict[tuple[Any, ...], T.Case] = {}
    for path in sorted(glob.glob(os.path.join(out, "results-*.jsonl")), key=os.path.getmtime):
        with open(path) as f:
            for line in f:
                d = json.loads(line)
                d.pop("ok", None)
                stamp = d.pop("recorded", None)
                c = T.Case(**d)
                c.__dict__["recorded"] = stamp
                known[(c.model, c.dtype, c.level, c.fault, c.mode, c.step)] = c
    return list(known.values())


OUTCOMES = ("named exactly", "first consumer", "missed", "wrong place", "error", "no effect")


def write_markdown(cases: list[T.Case], path: str, header: str) -> None:
    """The summary per fault kind x dtype x level, the clean pairs, every
    case not as expected, and every case."""
    # A fault that changes no record of its level in the eager reference has
    # nothing to be named: counted apart, not in the rate.
    no_effect = [c for c in cases if c.fault in F.FAULT_KINDS and c.outcome == "no effect"]
    faults = [c for c in cases if c.fault in F.FAULT_KINDS and c.outcome != "no effect"]
    clean = [c for c in cases if c.fault in ("clean", "clean-train", "control")]
    ok_f = sum(c.outcome in ("named exactly", "first consumer") for c in faults)
    lines = [header, "",
             f"**Faults:** {ok_f} of {len(faults)} ({100 * ok_f / max(len(faults), 1):.1f} %) named at the reference's place "
             f"({sum(c.outcome == 'named exactly' for c in faults)} exactly, "
             f"{sum(c.outcome == 'first consumer' for c in faults)} at the first consumer of unrecorded code), "
             f"{sum(c.outcome == 'missed' for c in faults)} missed, {sum(c.outcome == 'wrong place' for c in faults)} "
             f"at a wrong place, {sum(c.outcome == 'error' for c in faults)} errors; {len(no_effect)} more changed no "
             f"record of their level even in eager mode (no effect: nothing to name, left out). "
             f"**Clean pairs** (eager vs inductor): {sum(c.outcome == 'silent' for c in clean if c.fault != 'control')} "
             f"of {sum(c.fault != 'control' for c in clean)} silent "
             f"({sum(c.fault == 'clean-train' for c in clean)} of them training steps); "
             f"controls (the compiled fault model, every fault switched off): "
             f"{sum(c.outcome == 'silent' for c in clean if c.fault == 'control')} of "
             f"{sum(c.fault == 'control' for c in clean)} silent.", "",
             "## Faults per kind, dtype and level", "",
             "| fault | dtype | level | cases | named exactly | first consumer | missed | wrong place | error | no effect |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple[str, str, str], list[T.Case]] = {}
    for c in faults + no_effect:
        groups.setdefault((c.fault, c.dtype, c.level), []).append(c)
    for key in sorted(groups, key=lambda k: (F.FAULT_KINDS.index(k[0]), k[1] != "fp32", k[2])):
        g = groups[key]
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {len(g)} | "
                     + " | ".join(str(sum(c.outcome == o for c in g)) for o in OUTCOMES) + " |")
    lines += ["", "## Clean pairs", "",
              "| pair | model | dtype | level | step | backend | first divergence | --fail-on error | output rel. L2 | s (cpu s) |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for c in sorted(clean, key=lambda c: (c.fault, c.model, c.dtype, c.level, c.step)):
        lines.append(f"| {c.fault} | {c.model} | {c.dtype} | {c.level} | {c.step} | {c.mode} | "
                     f"{'`' + c.got + '`' if c.got else 'none'} | {'fails' if c.gate_fails else 'passes'} | "
                     f"{_fmt(c.effect)} | {c.seconds} ({c.cpu}) |{' ' + c.error if c.error else ''}")
    bad = [c for c in faults if c.outcome not in ("named exactly", "first consumer")]
    lines += ["", "## Faults not named at their place", "",
              "| model | dtype | level | fault | backend | expected | got | --fail-on error | output rel. L2 |",
              "|---|---|---|---|---|---|---|---|---|"]
    for c in bad:
        lines.append(f"| {c.model} | {c.dtype} | {c.level} | {c.fault} | {c.mode} | `{c.expected}` ({c.how}) | "
                     f"{'`' + c.got + '`' if c.got else '**none**'} | {'fails' if c.gate_fails else 'passes'} | "
                     f"{_fmt(c.effect)} |{' ' + (c.error or '')[:200]}")
    broken = [c for c in cases if c.outcome == "error" and c.fault not in F.FAULT_KINDS]
    if broken:
        lines += ["", "## Runs that did not finish", ""]
        lines += [f"* {c.model} {c.dtype} {c.level} ({c.fault}): {c.error}" for c in broken]
    lines += ["", "## Every fault case", "",
              "| model | dtype | level | fault | backend | expected (how) | outcome | output rel. L2 | s (cpu s) |",
              "|---|---|---|---|---|---|---|---|---|"]
    order = {n: i for i, n in enumerate(F.ARCHS)}
    for c in sorted(faults + no_effect, key=lambda c: (order.get(c.model, 99), c.dtype != "fp32", c.level,
                                           F.FAULT_KINDS.index(c.fault))):
        lines.append(f"| {c.model} | {c.dtype} | {c.level} | {c.fault} | {c.mode} | `{c.expected}` ({c.how}) | "
                     f"{c.outcome} | {_fmt(c.effect)} | {c.seconds} ({c.cpu}) |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.2g}"


def main(argv: list[str] | None = None) -> int:
    """Runs one part of the matrix, or (``--table``) writes the table; exit 0
    when every case run (or tabled) is as expected."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--part", choices=PARTS)
    p.add_argument("--models", default=",".join(F.ARCHS))
    p.add_argument("--dtypes", default="fp32,bf16")
    p.add_argument("--levels", default=",".join(LEVELS))
    p.add_argument("--out", default="/tmp/real_model_matrix")
    p.add_argument("--table", action="store_true", help="merge {out}/results-*.jsonl and write the table")
    p.add_argument("--md", default=None, help="Markdown table to write (default: {out}/real_model_matrix.md)")
    p.add_argument("--switch-backend", default=T.SWITCH_BACKEND, choices=("aot_eager", "inductor"),
                   help="the compile serving the switchable faults and the grad fault (inductor: the faults "
                        "against inductor's noise, and the control step is one more clean inductor pair)")
    p.add_argument("--loss", default=T.LOSS, choices=("square-mean", "head"),
                   help="the training parts' loss: the mean square of each output (after a final LayerNorm a "
                        "scale-invariant loss: every gradient is rounding residue) or cross entropy through a fixed "
                        "random head (tests/real_model_training.py, LOSS)")
    p.add_argument("--recompare", action="store_true",
                   help="no dumping: compare again the kept dumps of {out}/results-*.jsonl (after a change of the "
                        "compare rule), into {out}/results-recompare-{pid}.jsonl")
    p.add_argument("--note", default="", help="a line for the table's header (what the run covers)")
    args = p.parse_args(argv)
    if not (args.table or args.part or args.recompare):
        p.error("--part, --recompare or --table")
    models, dtypes, levels = args.models.split(","), args.dtypes.split(","), args.levels.split(",")
    for what, given, allowed in (("--models", models, F.ARCHS), ("--dtypes", dtypes, ("fp32", "bf16")),
                                 ("--levels", levels, ("L0", "L1", "mix"))):
        bad = [x for x in given if x not in allowed]
        if bad:
            p.error(f"{what}: {', '.join(bad)} not known; allowed: {', '.join(allowed)}")
    os.makedirs(args.out, exist_ok=True)
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(args.out, "inductor-cache"))
    if args.table:
        cases = load_cases(args.out)
        stamps = sorted(c.__dict__.get("recorded") or "" for c in cases)
        header = (f"# First-divergence matrix (issue #35)\n\nWritten "
                  f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; cases recorded and compared "
                  f"{stamps[0] if stamps else '?'} .. {stamps[-1] if stamps else '?'} (commit, UTC time); torch "
                  f"{torch.__version__}, transformers {__import__('transformers').__version__}, CPU. "
                  f"`scripts/real_model_matrix.py` (parts: {', '.join(PARTS)}; then `--table`). {args.note}\n\n"
                  "Faults are graph-only, x1.001 (fp32) / x1.01 (bf16) (precision: mantissa rounded to 9 / 5 bits; "
                  "routing: one token's two experts swapped); target: the compiled model, bench: the eager dump "
                  "of the same model; compare with its defaults. Expected place: the first record whose tensors "
                  "differ between an eager run with the fault forced on and a clean one (tests/real_model_faults.py); "
                  "'first consumer': that record's input already differs (the fault is unrecorded code before it). "
                  "Output rel. L2: the model output's change against eager (faults) or the clean compile's noise.")
        md = args.md or os.path.join(args.out, "real_model_matrix.md")
        write_markdown(cases, md, header)
        print(f"wrote {md}; {sum(c.ok for c in cases)} of {len(cases)} as expected", flush=True)
        return 0 if all(c.ok for c in cases) else 1
    if args.recompare:
        # Dumps recorded by an older wiring lack what a newer one writes (a
        # new statistic): this measures the rule, not the recording.
        results = os.path.join(args.out, f"results-recompare-{os.getpid()}.jsonl")
        all_ok = True
        for c in load_cases(args.out):
            if not (c.target and c.bench and os.path.exists(c.target) and os.path.exists(c.bench)):
                continue
            stamp = c.__dict__.pop("recorded", None)
            T.judge(c, c.target, c.bench, os.path.join(os.path.dirname(c.target), "recompare"))
            with open(results, "a") as f:
                f.write(json.dumps(asdict(c) | {"ok": c.ok, "recorded": f"{stamp} recompared at {_head()}"}) + "\n")
            print(T.describe(c), flush=True)
            all_ok &= c.ok
        return 0 if all_ok else 1
    T.SWITCH_BACKEND = args.switch_backend
    T.LOSS = args.loss
    results = os.path.join(args.out, f"results-{args.part}-{os.getpid()}.jsonl")
    all_ok = True
    for job in _jobs(args.part, models, dtypes, levels):
        started = time.time()
        try:
            cases = _run(args.part, job, args.out)
        except Exception as exc:  # one broken case must not stop the matrix: recorded as an error
            traceback.print_exc()
            cases = [T.Case(job[0], job[1], job[2], args.part, "-", outcome="error",
                            error=f"{type(exc).__name__}: {exc}"[:300])]
        stamp = f"{_head()} {datetime.datetime.now(datetime.timezone.utc):%H:%M}"
        with open(results, "a") as f:
            for c in cases:
                f.write(json.dumps(asdict(c) | {"ok": c.ok, "recorded": stamp}) + "\n")
                print(T.describe(c), f"{c.seconds}s", flush=True)
                all_ok &= c.ok
        print(f"-- {job} {time.time() - started:.0f} s", flush=True)
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())

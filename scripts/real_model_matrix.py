"""The real-model matrix (issue #25, item 6): third-party models from tiny
configs under eager / aot_eager / inductor, float32 and bfloat16, L0 / L1 /
mix; clean pairs and graph-only faults; results as a Markdown table.

Usage::

    .venv/bin/python scripts/real_model_matrix.py [--models qwen2,t5] [--dtypes fp32,bf16]
        [--levels L0,L1,mix] [--modes aot_eager,inductor] [--clean-only]
        [--out /tmp/real_model_matrix] [--md benchmarks/results/real_model_matrix.md]

For each model, dtype and level: one eager dump (the bench); per compiled
mode one compiled model with fault A wired (steps: clean with scale 1.0,
fault A, weight x1.3 = fault W); under inductor one more compile with the
post-grad pass of fault B. Every compiled step is compared with the eager
dump by graphprobe's compare (defaults); the script checks, independently
of the tool, that the record lists are equal, where the first divergence
must be (tests/real_models.py: ReferenceTrace), and measures the noise of
the clean pairs (scale-aware errors, float64, from the two dump.json
files). Writes ``{out}/results.json`` and the Markdown table.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Any

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

import real_models as rm  # noqa: E402
import torch  # noqa: E402


@dataclass
class Case:
    """One compared pair: a compiled step against the eager dump."""

    model: str
    dtype: str
    level: str
    mode: str
    case: str  # clean | A | B | W
    records_equal: bool | None = None
    records: tuple[int, int] | None = None  # (target, bench) entries
    first_divergence: str | None = None
    expected: str | None = None
    gate_error_fails: bool | None = None
    counts: dict[str, int] = field(default_factory=dict)
    # clean: noise per (row dtype, class) -> [max, p99, n, worst "entry place stat"]
    noise: dict[str, list[Any]] = field(default_factory=dict)
    # faults: the expected entry's max e and z (and where), the clean pair's max z
    fault_e: float | None = None
    fault_z: float | None = None
    fault_where: str | None = None
    clean_max_z: float | None = None
    error: str | None = None
    seconds: float = 0.0
    recorded: str | None = None  # "commit time" of the dump (the wiring that made it)
    target_path: str | None = None  # the dumps, for --recompare
    bench_path: str | None = None

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        """Identity of the case in results.json."""
        return (self.model, self.dtype, self.level, self.mode, self.case)

    @property
    def ok(self) -> bool:
        """Records equal, and the first divergence where it must be (none for clean)."""
        if self.error or not self.records_equal:
            return False
        if self.case == "clean":
            return self.first_divergence is None and not self.gate_error_fails
        return self.first_divergence == self.expected and bool(self.gate_error_fails)


def _noise(rows: list[rm.NoiseRow]) -> dict[str, list[Any]]:
    groups: dict[str, list[tuple[float, str]]] = {}
    for r in rows:
        for stat, e in r.errors.items():
            cls = "aggregate" if stat in rm.AGGREGATE else "extreme"
            groups.setdefault(f"{r.dtype.replace('torch.', '')} {cls}", []).append((e, f"{r.entry} {r.place} {stat}"))
    out = {}
    for key, vals in sorted(groups.items()):
        worst = max(vals)
        out[key] = [worst[0], rm.percentile([v for v, _ in vals], 99), len(vals), worst[1]]
    return out


def _max_z(rows: list[rm.NoiseRow]) -> tuple[float, str]:
    best = (0.0, "")
    floor_dtype = rm.coarsest_dtype(rows)
    for r in rows:
        z = rm.z_score(floor_dtype, r.errors)
        if z > best[0]:
            best = (z, f"{r.entry} {r.place}")
    return best


def _head() -> str:
    """The commit checked out, with a mark when tracked files differ from it."""
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return commit + ("+uncommitted" if dirty else "")


def _stamp() -> str:
    return f"{_head()} {datetime.datetime.now(datetime.timezone.utc):%H:%M}"


def _judge(case: Case, target_path: str, bench_path: str, bench: dict[str, Any], out: str,
           clean_z: float | None) -> None:
    case.target_path, case.bench_path = target_path, bench_path
    target = rm.load_data(target_path)
    case.records_equal = rm.record_list(target) == rm.record_list(bench)
    case.records = (len(target), len(bench))
    res = rm.compare_dumps(target_path, bench_path, out)
    case.first_divergence, case.counts = res.first_divergence, res.counts
    case.gate_error_fails = bool(res.gate_error)
    rows = rm.noise_rows(target, bench)
    if case.case == "clean":
        case.noise = _noise(rows)
        case.clean_max_z = _max_z(rows)[0]
    else:
        case.clean_max_z = clean_z
        if case.expected:
            best = (0.0, 0.0, "")
            floor_dtype = rm.coarsest_dtype(rows)
            for r in rows:
                if r.entry == case.expected:
                    z = rm.z_score(floor_dtype, r.errors)
                    if z > best[1]:
                        best = (max(r.errors.values()), z, r.place)
            case.fault_e, case.fault_z, case.fault_where = best


def run_model(name: str, dt: str, levels: list[str], modes: list[str], clean_only: bool, out_root: str,
              sink: list[Case]) -> None:
    """All cases of one model in one dtype, appended to ``sink`` as they finish."""
    spec = rm.SPECS[name]
    dtype = rm.DTYPES[dt]
    model, inputs = rm.build(name, dtype)
    trace = rm.ReferenceTrace.run(model, inputs)
    for level in levels:
        base = os.path.join(out_root, name, dt, level)
        for sub in ["eager"] + modes + (["inductor-B"] if "inductor" in modes and not clean_only else []):
            shutil.rmtree(os.path.join(base, sub), ignore_errors=True)
        eager_model, _ = rm.build(name, dtype)
        bench_path = rm.record(eager_model, inputs, level, "eager", os.path.join(base, "eager"), [rm.Phase("clean")])["clean"]
        bench = rm.load_data(bench_path)
        for mode in modes:
            cases = ["clean"] if clean_only else ["clean", "A", "W"]
            started = time.time()
            results = {c: Case(name, dt, level, mode, c) for c in cases}
            for c in cases:
                if c != "clean":
                    results[c].expected = rm.expected_first_divergence(trace, spec, c, level)
            try:
                m, _ = rm.build(name, dtype)
                scale = rm.graph_only_scale(m, spec.target)
                weight: list[Any] = []

                def w_on() -> None:
                    weight.append(rm.scaled_parameter(m, spec.weight, rm.WEIGHT_SCALE))
                    weight[-1].__enter__()

                phases = [rm.Phase("clean")]
                if not clean_only:
                    phases += [rm.Phase("A", lambda: scale.fill_(rm.FAULT_SCALE[dt]), lambda: scale.fill_(1.0)),
                               rm.Phase("W", w_on, lambda: weight[-1].__exit__(None, None, None))]
                paths = rm.record(m, inputs, level, mode, os.path.join(base, mode), phases)
                for r in results.values():
                    r.recorded = _stamp()
                clean_z = None
                for c in cases:
                    _judge(results[c], paths[c], bench_path, bench, os.path.join(base, f"cmp-{mode}-{c}"), clean_z)
                    if c == "clean":
                        clean_z = results[c].clean_max_z
            except Exception as e:  # one failing compile must not stop the matrix
                for r in results.values():
                    r.error = f"{type(e).__name__}: {e}".splitlines()[0][:300]
                traceback.print_exc()
                clean_z = None
            for r in results.values():
                r.seconds = round(time.time() - started, 1)
                sink.append(r)
                _print(r)
            if mode == "inductor" and not clean_only:
                r = Case(name, dt, level, mode, "B", expected=rm.expected_first_divergence(trace, spec, "B", level))
                started = time.time()
                try:
                    m, _ = rm.build(name, dtype)
                    p = rm.ScaleModuleOutput(spec.target, rm.FAULT_SCALE[dt])
                    paths = rm.record(m, inputs, level, "inductor", os.path.join(base, "inductor-B"),
                                      [rm.Phase("B")], post_grad=p)
                    r.recorded = _stamp()
                    if len(p.applied) != 1:
                        raise RuntimeError(f"the post-grad pass scaled {p.applied}, not exactly one node")
                    _judge(r, paths["B"], bench_path, bench, os.path.join(base, "cmp-inductor-B"), clean_z)
                except Exception as e:
                    r.error = f"{type(e).__name__}: {e}".splitlines()[0][:300]
                    traceback.print_exc()
                r.seconds = round(time.time() - started, 1)
                sink.append(r)
                _print(r)


def _print(c: Case) -> None:
    status = "ok  " if c.ok else "FAIL"
    extra = f" noise={ {k: f'{v[0]:.2e}' for k, v in c.noise.items()} }" if c.noise else ""
    if c.case != "clean":
        extra = f" z={c.fault_z and round(c.fault_z, 1)} clean_z={c.clean_max_z and round(c.clean_max_z, 2)}"
    print(f"{status} {c.model:9} {c.dtype} {c.level:3} {c.mode:9} {c.case:5} rec={c.records_equal} "
          f"fd={c.first_divergence} exp={c.expected} gate={c.gate_error_fails}{extra} "
          f"{c.error or ''} ({c.seconds}s)", flush=True)


EXPECTATIONS = """## What "named exactly" means

The expected entry comes from the injection site alone (tests/real_models.py: `ReferenceTrace`, an eager
run of an unwired copy that tracks which module call and which L1 API call produced and read each
tensor), never from a dump:

* **L0**: A: the target module's record (its output differs, everything recorded before agrees). W: the
  record of the module whose weight was scaled (a parameter differs). B: the record of the innermost
  module that computed the scaled value -- the pass scales the node that *is* the target's output, which
  is also the output of the child that computed it (`down_proj` of a Qwen2 MLP, the `pooler`
  MaxPool2d of ResNet's embedder).
* **L1**: W: the first API call that reads the scaled weight (`Functional.linear`/`conv2d`, `Torch.addmm`
  for GPT-2's Conv1D). B: the API call inside the target that computed its output (its output probe reads
  the scaled node). A: the multiply is `torch.ops.aten.mul`, which L1 does not record, so no record inside
  the target differs: the first API call after the target returned that reads its output (an entry whose
  input differs although every recorded producer agrees: "the error came from code that is not recorded").
* **mix**: as L1 for W and B (the API call ends before its module); for A the target's module record
  (its output differs while every call inside it agrees), which ends before that consumer.
"""


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.2g}"


def write_markdown(cases: list[Case], path: str, header: str) -> None:
    """The committed results table."""
    lines = [header, ""]
    ok = sum(c.ok for c in cases)
    lines.append(f"{ok} of {len(cases)} cases as expected.\n")
    lines.append("## Clean pairs (compiled vs eager): record lists, noise, false first divergences\n")
    lines.append("Noise: max scale-aware error e over matched rows, per row dtype; aggregate = Mean, Norm; "
                 "extreme = Max, Min (e = |t-b|/max(|b|, rms_b), Norm: |t-b|/|b|). `max z`: the largest "
                 "e/floor, floors per dtype as in the issue's design (float32 1e-4; bfloat16 2e-3 aggregate, "
                 "1.6e-2 extreme), every row of a pair measured against the coarsest float dtype of the "
                 "pair (a bf16 model's float32 rows carry bf16 noise). graphprobe's rule (docs/formats.md) "
                 "is what decides the first divergence; z only shows the margins.\n")
    lines.append("| model | dtype | level | mode | records equal | rows | fp32 agg | fp32 ext | bf16 agg | bf16 ext "
                 "| max z | first divergence | --fail-on error | ok |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for c in cases:
        if c.case != "clean":
            continue
        n = c.noise
        cell = lambda k: _fmt(n[k][0]) if k in n else "-"  # noqa: E731
        lines.append(f"| {c.model} | {c.dtype} | {c.level} | {c.mode} | {_yn(c.records_equal)} | "
                     f"{c.records[0] if c.records else '-'} | {cell('float32 aggregate')} | {cell('float32 extreme')} | "
                     f"{cell('bfloat16 aggregate')} | {cell('bfloat16 extreme')} | {_fmt(c.clean_max_z)} | "
                     f"{c.first_divergence or 'none'} | {'fails' if c.gate_error_fails else 'passes'} | "
                     f"{'yes' if c.ok else '**no**'}{' ' + c.error if c.error else ''} |")
    lines.append("\n## Faults: named exactly?\n")
    lines.append("A: `is_compiling()` branch x1.001 (fp32) / x1.01 (bf16) on the target's output; B: inductor "
                 "post-grad pass scaling the node of the target's output; W: one weight x1.3. `e`, `z`: the "
                 "expected entry's largest error and e/floor (floors as above); `clean z`: the largest on the "
                 "clean pair of the same compiled model (the margin is z / clean z).\n")
    lines.append("| model | dtype | level | mode | fault | expected | got | e | z | clean z | --fail-on error | ok |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for c in cases:
        if c.case == "clean":
            continue
        got = c.first_divergence or "none"
        lines.append(f"| {c.model} | {c.dtype} | {c.level} | {c.mode} | {c.case} | `{c.expected}` | "
                     f"{'same' if got == c.expected else '`' + got + '`'} | {_fmt(c.fault_e)} | {_fmt(c.fault_z)} | "
                     f"{_fmt(c.clean_max_z)} | {'fails' if c.gate_error_fails else 'passes'} | "
                     f"{'yes' if c.ok else '**no**'}{' ' + c.error if c.error else ''} |")
    lines.append("")
    lines.append(EXPECTATIONS)
    lines.append(calibration_table(cases))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def calibration_table(cases: list[Case]) -> str:
    """Noise over all clean pairs, per model dtype, row dtype and class: max, p99 of per-pair p99, worst row."""
    agg: dict[tuple[str, str, str], list[Any]] = {}
    for c in cases:
        if c.case != "clean":
            continue
        for key, (mx, p99, n, where) in c.noise.items():
            k = (c.dtype, c.mode, key)
            cur = agg.setdefault(k, [0.0, 0.0, 0, ""])
            if mx > cur[0]:
                cur[0], cur[3] = mx, f"{c.model} {c.level}: {where}"
            cur[1] = max(cur[1], p99)
            cur[2] += n
    lines = ["## Calibration: clean-pair noise over the whole matrix\n",
             "Per model dtype, compiled mode and row dtype (fp32 rows of a bf16 model are casts, softmax/norm "
             "internals upcast by the model). max: over all matched rows of all clean pairs; p99: the largest "
             "per-pair 99th percentile.\n",
             "| model dtype | mode | row dtype, class | max e | p99 e | values | worst row |",
             "|---|---|---|---|---|---|---|"]
    for (dt, mode, key), (mx, p99, n, where) in sorted(agg.items()):
        lines.append(f"| {dt} | {mode} | {key} | {mx:.3g} | {p99:.3g} | {n} | {where} |")
    return "\n".join(lines) + "\n"


def _yn(v: bool | None) -> str:
    return "-" if v is None else ("yes" if v else "**no**")


def main(argv: list[str] | None = None) -> int:
    """Runs the matrix; exit 0 when every case is as expected."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(rm.SPECS))
    p.add_argument("--dtypes", default="fp32,bf16")
    p.add_argument("--levels", default="L0,L1,mix")
    p.add_argument("--modes", default="aot_eager,inductor")
    p.add_argument("--clean-only", action="store_true")
    p.add_argument("--recompare", action="store_true",
                   help="do not dump: compare again the dumps listed in {out}/results.json (after a change of the "
                        "compare rule) and rewrite the table")
    p.add_argument("--out", default="/tmp/real_model_matrix")
    p.add_argument("--md", default=None, help="Markdown table to write (default: {out}/real_model_matrix.md)")
    args = p.parse_args(argv)
    for what, given, allowed in (("--models", args.models, rm.SPECS), ("--dtypes", args.dtypes, rm.DTYPES),
                                 ("--levels", args.levels, rm.LEVELS), ("--modes", args.modes, rm.MODES[1:])):
        bad = [x for x in given.split(",") if x not in allowed]
        if bad:
            p.error(f"{what}: {', '.join(bad)} not known; allowed: {', '.join(allowed)}")
    os.makedirs(args.out, exist_ok=True)
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(args.out, "inductor-cache"))
    started = time.time()
    results_path = os.path.join(args.out, "results.json")
    known: dict[tuple[str, ...], Case] = {}
    if os.path.exists(results_path):  # earlier runs into the same folder: kept unless run again
        with open(results_path) as f:
            for d in json.load(f):
                d.pop("ok", None)
                c = Case(**d)
                c.records = tuple(c.records) if c.records else None  # type: ignore[assignment]
                known[c.key] = c

    def save(cases: list[Case]) -> None:
        for c in cases:
            known[c.key] = c
        with open(results_path, "w") as f:
            json.dump([asdict(c) | {"ok": c.ok} for c in known.values()], f, indent=1)

    if args.recompare:
        for c in known.values():
            if c.target_path and c.bench_path and not c.error:
                clean = known.get((c.model, c.dtype, c.level, c.mode if c.case != "B" else "inductor", "clean"))
                _judge(c, c.target_path, c.bench_path, rm.load_data(c.bench_path),
                       os.path.join(os.path.dirname(c.target_path), f"recmp-{c.mode}-{c.case}"),
                       clean.clean_max_z if clean else None)
                _print(c)
        save([])
    else:
        for name in args.models.split(","):
            for dt in args.dtypes.split(","):
                cases: list[Case] = []
                run_model(name, dt, args.levels.split(","), args.modes.split(","), args.clean_only, args.out, cases)
                save(cases)
    order = {n: i for i, n in enumerate(rm.SPECS)}
    cases = sorted(known.values(), key=lambda c: (order.get(c.model, 99), c.dtype != "fp32", rm.LEVELS.index(c.level),
                                                 c.mode, ["clean", "A", "B", "W"].index(c.case)))
    stamps = sorted((c.recorded.split()[1], c.recorded.split()[0]) for c in cases if c.recorded)
    span = (f"{stamps[0][0]}-{stamps[-1][0]} UTC, from {stamps[0][1]} to {stamps[-1][1]}"
            f"{' (the tree moved while it ran)' if stamps[0][1] != stamps[-1][1] else ''}") if stamps else "?"
    header = (f"# Real-model matrix (issue #25)\n\nWritten {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; "
              f"compare (the first-divergence rule) at {_head()}; dumps recorded {span}; "
              f"torch {torch.__version__}, transformers {__import__('transformers').__version__}, CPU. "
              f"`scripts/real_model_matrix.py {' '.join(argv if argv is not None else sys.argv[1:])}`"
              f"{' (--recompare: the kept dumps compared again)' if args.recompare else f', {time.time() - started:.0f} s'}.\n\n"
              "Models from tiny configs with random weights (tests/real_models.py); target: the compiled "
              "model; bench: the eager dump of the same model; compare with its defaults.")
    md = args.md or os.path.join(args.out, "real_model_matrix.md")
    write_markdown(cases, md, header)
    print(f"wrote {md}; {sum(c.ok for c in cases)} of {len(cases)} as expected", flush=True)
    return 0 if all(c.ok for c in cases) else 1


if __name__ == "__main__":
    sys.exit(main())

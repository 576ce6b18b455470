"""Time and peak memory of ``graphprobe compare`` against Python's
``json.load`` of the same files, and where the time goes.

Writes two synthetic dump.json files of about ``--mb`` MB each (graphprobe's
own layout, indent 1, or ``--compact``; no checksums in them, as issue 38
measured), then, ``--repeat`` times in one run, each in a fresh process
(its CPU time, from ``wait4``, and its peak resident set size, VmHWM):

* ``json.load`` of both files (one interpreter);
* ``graphprobe compare T B -o OUT -q -j 1`` (CSV + HTML report; the CLI's
  main() in a fresh interpreter);
* with ``--before``: the same with the checksum compare done as before
  issue 38 (both files parsed again with ``json`` and walked in Python:
  tests/checksum_compare_reference.py put in place of the engine's);
* ``import graphprobe.cli`` alone (the interpreter's own memory and start).

It prints the medians: compare's speed as json.load CPU / compare CPU, and
peak RSS / input size (issue 17 and 38 bound it: <= 2). ``--breakdown``
adds where one compare's CPU time goes, in this process: the engine's
stages (``_compare.profile_files``), the CSV, the digest, the HTML page and
the checksum compare. ``--old-pythonpath`` runs another checkout's compare
(a worktree of the last commit with its .so files) in the same rounds, the
two in alternating order, and prints old / new (use an even ``--repeat``).
``--python`` runs another interpreter or checkout;
``--append`` adds the table rows to ``benchmarks/results/compare.md``.
Run: ``python benchmarks/compare_memory.py [--mb 100] [--repeat 3] [--before] [--breakdown]``
(``--mb 20`` on a small shared machine).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "compare.md"
ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

#: graphprobe compare with the checksum pass as it was before issue 38: the
#: reference Python pass (json.load of both files, a walk of every record)
#: in place of the engine's, as command.py then called it.
BEFORE_DRIVER = """
import sys
sys.path.insert(0, {tests!r})
import checksum_compare_reference as ref
import graphprobe.compare.checksums as checksums
checksums.checksum_lines = ref.checksum_lines
from graphprobe.cli import main
sys.exit(main(sys.argv[1:]))
"""


def write_dump(path: Path, mb: float, seed: int, noise: float, compact: bool) -> int:
    """Entries with one input and one output each, streamed to ``path``."""
    rng = random.Random(seed)
    indent = None if compact else 1

    def rec(base: float) -> dict:
        k = 1.0 + rng.uniform(-noise, noise)
        return {"type": "torch.Tensor", "dtype": "torch.bfloat16", "shape": [8, 4096], "Max": base * k,
                "Min": -base * k, "Mean": 0.01 * k, "Norm": 40.0 * base * k, "requires_grad": False}

    with open(path, "w") as f:
        f.write('{"task": "statistics", "level": "L0", "framework": "pytorch", "dump_data_dir": null, "data": {\n')
        i = 0
        while f.tell() < mb * 1e6:
            e = {"input_args": [rec(1.0 + i % 7)], "input_kwargs": {}, "output": [rec(2.0 + i % 5)]}
            sep = ",\n" if i else ""
            f.write(f'{sep}"Module.layers.{i % 64}.block{i // 64}.Linear.forward.0": {json.dumps(e, indent=indent)}')
            i += 1
        f.write("}}\n")
        return f.tell()


@dataclass(frozen=True)
class Usage:
    code: int
    cpu_s: float  # user + system CPU seconds of the child
    wall_s: float
    peak_rss: int  # bytes: the child's own VmHWM


#: Run first in every child: its peak RSS (VmHWM, the high-water mark of its
#: own memory map) written out at exit. The kernel's ru_maxrss would not do:
#: a child started by (v)fork from a larger parent reports the parent's peak.
_PEAK_PRELUDE = """
import atexit as _atexit, os as _os
def _peak():
    with open("/proc/self/status") as f:
        kb = next(line.split()[1] for line in f if line.startswith("VmHWM:"))
    with open(_os.environ["GP_PEAK_OUT"], "w") as f:
        f.write(kb)
_atexit.register(_peak)
"""

CLI = "import sys\nfrom graphprobe.cli import main\nsys.exit(main(sys.argv[1:]))"
JSON_LOAD = "import json, sys\nfor p in sys.argv[1:]:\n    with open(p) as f: json.load(f)"
IMPORT = "import graphprobe.cli"


def run_child(python: str, code: str, args: list[str], env: dict[str, str]) -> Usage:
    """Runs ``python -c code args`` and reads its CPU time (wait4) and peak RSS."""
    fd, peak_file = tempfile.mkstemp(prefix="gp_peak_")
    os.close(fd)
    env = dict(env, GP_PEAK_OUT=peak_file)
    try:
        t0 = time.perf_counter()
        proc = subprocess.Popen([python, "-c", _PEAK_PRELUDE + code, *args], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        if proc.stderr:
            proc.stderr.close()
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode not in (0, 1):
            print(err[-2000:], file=sys.stderr)
        text = Path(peak_file).read_text().strip()
        peak = int(text) * 1024 if text else 0
    finally:
        os.unlink(peak_file)
    return Usage(proc.returncode, usage.ru_utime + usage.ru_stime, wall, peak)


def measure(python: str, env: dict[str, str], t: Path, b: Path, out: Path, before: bool,
            old_pythonpath: str | None = None, swap: bool = False) -> dict[str, Usage]:
    """One round: json.load, compare (and the version before, and an older
    checkout's compare), import alone. ``swap``: the older checkout's
    compare runs before this one's (rounds alternate: the process right
    after json.load's, which frees ~500 MB, measured up to 1.18x slower in
    the same round, whichever code it ran)."""
    compare_args = ["compare", str(t), str(b), "-o", str(out), "-q", "-j", "1"]
    runs = {
        "json.load": (JSON_LOAD, [str(t), str(b)], env),
        "compare": (CLI, compare_args, env),
        "import": (IMPORT, [], env),
    }
    if before:
        runs["before"] = (BEFORE_DRIVER.format(tests=str(ROOT / "tests")), compare_args, env)
    if old_pythonpath:
        runs["old"] = (CLI, compare_args, dict(env, PYTHONPATH=old_pythonpath))
        if swap:
            runs = {k: runs[k] for k in ("json.load", "old", "compare", *(k for k in runs if k not in
                                                                             ("json.load", "old", "compare")))}
    got = {}
    for name, (code, args, child_env) in runs.items():
        shutil.rmtree(out, ignore_errors=True)
        got[name] = run_child(python, code, args, child_env)
    return got


def breakdown(t: Path, b: Path, out: Path) -> list[tuple[str, float]]:
    """CPU seconds of each step of one compare_pair, in this process."""
    sys.path.insert(0, str(SRC))
    from graphprobe.compare.checksums import checksum_csv_path, pair_checksum_line
    from graphprobe.compare.native import native
    from graphprobe.compare.outcome import digest_divergence, digest_rows, report_rows
    from graphprobe.compare.report import ROW_LIMIT, render_html
    from graphprobe.output_files import write_text_atomic

    eng = native()
    steps: list[tuple[str, float]] = []
    c0 = time.process_time()
    result, stages = eng.profile_files(str(t), str(b), eng.CompareOptions())
    total_engine = time.process_time() - c0
    steps.extend((f"engine: {name}", s) for name, s in stages)
    steps.append(("engine: the rest (counts, Python objects)", max(0.0, total_engine - sum(s for _, s in stages))))

    def step(name: str, fn):  # noqa: ANN001
        c = time.process_time()
        value = fn()
        steps.append((name, time.process_time() - c))
        return value

    out.mkdir(parents=True, exist_ok=True)
    step("CSV (write_csv)", lambda: result.write_csv(str(out / "compare_result.csv")))
    step("checksum compare (none here: skipped)",
         lambda: pair_checksum_line(result, "pair", checksum_csv_path(out / "compare_result.csv", out, "p")))
    worst, plot = step("digest (worst rows, plot points, divergence)", lambda: digest_rows(result, 10))
    divergence, noise, coverage, floors = step("digest: divergence", lambda: digest_divergence(result))
    listed = step("rows for the HTML page", lambda: report_rows(result, ROW_LIMIT))
    counts, n_rows = dict(result.counts), len(result)
    del result
    page = step("HTML: render", lambda: render_html(
        title="bench", target=str(t), bench=str(b), counts=counts, first_divergence=None, points=plot.points, rows=listed,
        total_rows=n_rows, thresholds={"warning": 10.0, "error (outputs)": 50.0}, divergence=divergence,
        noise=noise, floors_used=floors, entries=plot.entries))
    step("HTML: write", lambda: write_text_atomic(out / "report.html", page))
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=100.0, help="size of each dump in MB (20 on a small machine)")
    parser.add_argument("--compact", action="store_true", help="compact JSON (fewer bytes per record)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; medians are reported")
    parser.add_argument("--before", action="store_true",
                        help="also run compare with the Python checksum pass as before issue 38")
    parser.add_argument("--breakdown", action="store_true", help="where one compare's CPU time goes")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--pythonpath", default=str(SRC), help="'' for the interpreter's installed graphprobe")
    parser.add_argument("--label", default="this checkout")
    parser.add_argument("--old-pythonpath", default=None,
                        help="also run the compare of another checkout's src (e.g. a git worktree of the last "
                             "commit, its .so files copied in) in the same rounds, for ratios old vs new")
    parser.add_argument("--old-label", default="previous commit")
    parser.add_argument("--append", action="store_true")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="gp_compare_mem_"))
    try:
        t, b = tmp / "t.json", tmp / "b.json"
        size = write_dump(t, args.mb, 1, 0.02, args.compact) + write_dump(b, args.mb, 2, 0.0, args.compact)
        env = dict(os.environ)
        if args.pythonpath:
            env["PYTHONPATH"] = args.pythonpath
        else:
            env.pop("PYTHONPATH", None)
        rounds = [measure(args.python, env, t, b, tmp / "out", args.before, args.old_pythonpath, swap=k % 2 == 1)
                  for k in range(args.repeat)]
        layout = "compact" if args.compact else "indent 1"

        def med(name: str, field: str) -> float:
            return statistics.median(getattr(r[name], field) for r in rounds)

        def ratio(name: str) -> float:  # json.load CPU / this CPU, per round, median
            return statistics.median(r["json.load"].cpu_s / r[name].cpu_s for r in rounds)

        rows = []
        labels = {"before": f"{args.label}, checksum pass in Python (as before #38)", "old": args.old_label,
                  "compare": args.label}
        for name in ("before", "old", "compare"):
            if name not in rounds[0]:
                continue
            label = labels[name]
            code = rounds[0][name].code
            rows.append(f"| {label} | {layout} | {size / 1e6:,.0f} | {med(name, 'cpu_s'):.2f} | "
                        f"{med('json.load', 'cpu_s'):.2f} | {ratio(name):.2f} | {med(name, 'peak_rss') / 1e6:,.0f} | "
                        f"{med(name, 'peak_rss') / size:.2f} | {med('import', 'peak_rss') / 1e6:,.0f} | "
                        f"{'ok' if code in (0, 1) else f'exit {code}'} |")
        print("| version | layout | input MB | compare CPU s | json.load CPU s | json.load / compare | "
              "peak RSS MB | peak / input | import alone MB | result |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        print("\n".join(rows))
        print(f"({args.repeat} rounds, medians; json.load peak {med('json.load', 'peak_rss') / 1e6:,.0f} MB)")
        if "old" in rounds[0]:
            cpu = statistics.median(r["old"].cpu_s / r["compare"].cpu_s for r in rounds)
            own = statistics.median((r["old"].cpu_s - r["import"].cpu_s) / (r["compare"].cpu_s - r["import"].cpu_s)
                                    for r in rounds)
            peak = statistics.median(r["old"].peak_rss / r["compare"].peak_rss for r in rounds)
            print(f"old / new, per round, medians: CPU {cpu:.2f}x (less the import: {own:.2f}x), peak RSS {peak:.2f}x")
        if args.breakdown:
            steps = breakdown(t, b, tmp / "bd")
            total = sum(s for _, s in steps)
            print("\n| step | CPU s | share |\n| --- | ---: | ---: |")
            for name, s in steps:
                print(f"| {name} | {s:.3f} | {100 * s / total:.0f} % |")
            print(f"| total | {total:.3f} | |")
        if args.append:
            with open(RESULTS, "a") as f:
                f.write("\n".join(rows) + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Peak memory of ``graphprobe compare`` against the size of its input.

Writes two synthetic dump.json files of about ``--mb`` MB each (graphprobe's
own layout, indent 1, or ``--compact``), runs ``graphprobe compare`` on them
in a fresh process and reads that process's peak resident set size
(``ru_maxrss``). The ratio peak / (size of both dumps) is what issue 17 bounds
(<= 2). ``--python`` runs another interpreter or checkout (e.g. to measure
the version before a change); ``--append`` adds the table rows to
``benchmarks/results/compare.md``.
Run: ``python benchmarks/compare_memory.py [--mb 100] [--compact]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "compare.md"
SRC = Path(__file__).resolve().parents[1] / "src"


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


def peak_rss(python: str, env: dict[str, str], args: list[str]) -> tuple[int, int]:
    """(exit code, peak RSS in bytes) of ``python -m graphprobe args``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    proc = subprocess.run([python, "-m", "graphprobe", *args], env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if proc.returncode not in (0, 1):
        print(proc.stderr[-2000:], file=sys.stderr)
    # ru_maxrss of children is the largest of any child so far: measure one per process.
    assert after >= before
    return proc.returncode, after * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=100.0, help="size of each dump in MB")
    parser.add_argument("--compact", action="store_true", help="compact JSON (fewer bytes per record)")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--pythonpath", default=str(SRC), help="'' for the interpreter's installed graphprobe")
    parser.add_argument("--label", default="this checkout")
    parser.add_argument("--append", action="store_true")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="gp_compare_mem_"))
    try:
        size = write_dump(tmp / "t.json", args.mb, 1, 0.02, args.compact)
        size += write_dump(tmp / "b.json", args.mb, 2, 0.0, args.compact)
        env = dict(os.environ)
        if args.pythonpath:
            env["PYTHONPATH"] = args.pythonpath
        else:
            env.pop("PYTHONPATH", None)
        code, rss = peak_rss(args.python, env, ["compare", str(tmp / "t.json"), str(tmp / "b.json"),
                                                "-o", str(tmp / "out"), "-q", "-j", "1"])
        layout = "compact" if args.compact else "indent 1"
        row = (f"| {args.label} | {layout} | {size / 1e6:,.0f} | {rss / 1e6:,.0f} | {rss / size:.2f} | "
               f"{'ok' if code in (0, 1) else f'exit {code}'} |")
        print(row)
        if args.append:
            with open(RESULTS, "a") as f:
                f.write(row + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

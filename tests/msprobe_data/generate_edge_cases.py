"""Writes the edge_cases fixtures: a hand-made pair of msprobe-format dumps,
one entry per corner of msprobe's statistics rules (docs/formats.md, "Result
rules"), and msprobe's own CSV for them. Run once by hand; the outputs are
committed:

    pip install mindstudio-probe      # 26.2.0 made the committed files
    python3 tests/msprobe_data/generate_edge_cases.py tests/msprobe_data/edge_cases

which writes target/dump.json and bench/dump.json (msprobe wants that file
name) and runs

    msprobe compare -tp target/dump.json -gp bench/dump.json -o OUT

keeping OUT's CSV, gzipped, as msprobe.csv.gz. The test of this pair also re-runs msprobe
where it is installed (tests/test_compare_msprobe.py).
"""

from __future__ import annotations

import glob
import gzip
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any

INF, NAN = math.inf, math.nan


def t(mx: Any, mn: Any = None, mean: Any = None, norm: Any = None, dtype: str = "torch.float32",
      shape: list[int] | None = None, rg: Any = False) -> dict[str, Any]:
    """A tensor record; Min/Mean/Norm default to Max."""
    rec = {"type": "torch.Tensor", "dtype": dtype, "shape": [4] if shape is None else shape,
           "Max": mx, "Min": mx if mn is None else mn, "Mean": mx if mean is None else mean,
           "Norm": mx if norm is None else norm}
    if rg is not None:
        rec["requires_grad"] = rg
    return rec


def v(type_: str, value: Any = None, **extra: Any) -> dict[str, Any]:
    rec = {"type": type_, **extra}
    if value is not None or not extra:
        rec["value"] = value
    return rec


def fwd(args: list[Any], out: list[Any], kwargs: dict[str, Any] | None = None, **parts: Any) -> dict[str, Any]:
    return {"input_args": args, "input_kwargs": kwargs or {}, "output": out, **parts}


def pair() -> tuple[dict[str, Any], dict[str, Any]]:
    """(target data, bench data), entry by entry."""
    T: dict[str, Any] = {}
    B: dict[str, Any] = {}

    def add(name: str, target: Any, bench: Any) -> None:
        T[name] = target
        B[name] = bench

    # Inputs equal, output 60 % off: error (inputs < 10 %, output > 50 %).
    add("Functional.linear.0.forward", fwd([t(1.0)], [t(1.6, norm=1.6)]), fwd([t(1.0)], [t(1.0)]))
    # Input 5 %, output 40 %: ratio 8 < 10, pass.
    add("Functional.linear.1.forward", fwd([t(1.05)], [t(1.4)]), fwd([t(1.0)], [t(1.0)]))
    # Input 1 %, output 20 %: ratio 20 > 10: warning on the first output only.
    add("Functional.linear.2.forward", fwd([t(1.01)], [t(1.0), t(1.2)]), fwd([t(1.0)], [t(1.0), t(1.0)]))
    # Input equal, output 11 %: warning (inputs 0, output > 10 %).
    add("Functional.linear.3.forward", fwd([t(1.0)], [t(1.11)]), fwd([t(1.0)], [t(1.0)]))
    # Input equal, output 1e-6 %: ratio against 0 needs > 10 %: pass.
    add("Functional.linear.4.forward", fwd([t(1.0)], [t(1.0 + 1e-8)]), fwd([t(1.0)], [t(1.0)]))
    # Input 1e-8 relative, output 1e-6: ratio 100: warning (graphprobe's noise floor would pass it).
    add("Functional.linear.5.forward", fwd([t(1.0 + 1e-10)], [t(1.0 + 1e-8)]), fwd([t(1.0)], [t(1.0)]))
    # In-place op: input bench 0 (relative error "inf", ignored), output 100 %: error.
    add("Tensor.add_.0.forward", fwd([t(1.0, norm=1.0), v("int", 1)], [t(2.0)]),
        fwd([t(0.0, norm=0.0), v("int", 1)], [t(1.0)]))
    # Output bench 0: relative error "inf" counts as > 50 %: error.
    add("Tensor.mul.0.forward", fwd([t(1.0)], [t(1.0, norm=3.0)]), fwd([t(1.0)], [t(1.0, norm=0.0)]))
    # NaN in the target only: error; NaN on both sides: pass ("0").
    add("Torch.log.0.forward", fwd([t(1.0)], [t(NAN), t(NAN)]), fwd([t(1.0)], [t(1.0), t(NAN)]))
    # inf in the target, finite bench: error; inf on both: pass.
    add("Torch.exp.0.forward", fwd([t(1.0)], [t(INF, -1.0), t(INF)]), fwd([t(1.0)], [t(5.0, -1.0), t(INF)]))
    # Bench inf, target finite: "-inf", no error from the inf rule.
    add("Torch.exp.1.forward", fwd([t(1.0)], [t(5.0)]), fwd([t(1.0)], [t(INF)]))
    # Non-tensor arguments: an int that differs (error), equal floats, a
    # bool, a str, None, a slice, a list of ints.
    add("Functional.conv2d.0.forward",
        fwd([t(1.0), v("int", 2), None, [v("int", 1), v("int", 1)], v("slice", [None, 3, None])], [t(1.0)],
            {"flag": v("bool", True), "mode": v("str", "mean"), "eps": v("float", 1e-5)}),
        fwd([t(1.0), v("int", 3), None, [v("int", 1), v("int", 1)], v("slice", [None, 3, None])], [t(1.0)],
            {"flag": v("bool", False), "mode": v("str", "sum"), "eps": v("float", 1e-5)}))
    # Values of the other types msprobe writes: torch.dtype, torch.device,
    # torch.Size, ellipsis, numpy scalars, memory_format, a process group.
    add("Torch.full.0.forward",
        fwd([v("torch.Size", [2, 3]), v("float", 1.5), v("ellipsis", "..."), v("float32", 0.5)], [t(1.5)],
            {"dtype": v("torch.dtype", "torch.float32"), "device": v("torch.device", "cpu"),
             "memory_format": {"type": "torch.memory_format", "format": "contiguous_format"},
             "group": {"type": "torch.ProcessGroup", "group_ranks": [0, 1]}}),
        fwd([v("torch.Size", [2, 4]), v("float", 1.5), v("ellipsis", "..."), v("float32", 0.25)], [t(1.5)],
            {"dtype": v("torch.dtype", "torch.float16"), "device": v("torch.device", "cuda:0"),
             "memory_format": {"type": "torch.memory_format", "format": "contiguous_format"},
             "group": {"type": "torch.ProcessGroup", "group_ranks": [0, 1]}}))
    # dtype: float16 vs float32 pairs (error); int64 vs float32 does not pair.
    add("Functional.softmax.0.forward", fwd([t(1.0, dtype="torch.float16")], [t(1.0, dtype="torch.int64")]),
        fwd([t(1.0)], [t(1.0)]))
    # Shape and requires_grad differences; requires_grad missing on one side.
    add("Functional.relu.0.forward", fwd([t(1.0, shape=[2, 2]), t(1.0, rg=True)], [t(1.0, rg=None)]),
        fwd([t(1.0, shape=[4]), t(1.0)], [t(1.0)]))
    # Integer statistics against float ones: 1 vs 1.0 is not "0"; 0 vs 0.0 is "inf".
    add("Tensor.sum.0.forward", fwd([t(1, 0, 1, 1, dtype="torch.int64")], [t(2.0)]),
        fwd([t(1.0, 0.0, 1.0, 1.0, dtype="torch.int64")], [t(2.0)]))
    # Bool tensors, empty tensors (null statistics).
    add("Tensor.__gt__.0.forward", fwd([t(1.0), t(None, shape=[0])], [t(True, False, None, None, dtype="torch.bool")]),
        fwd([t(1.0), t(None, shape=[0])], [t(False, False, None, None, dtype="torch.bool")]))
    # Ignored APIs: Tensor.to skips every rule; all_to_all_single its inputs.
    add("Tensor.to.0.forward", fwd([t(1.0)], [t(NAN)]), fwd([t(1.0)], [t(1.0)]))
    add("Distributed.all_to_all_single.0.forward", fwd([t(INF)], [t(2.0)]), fwd([t(1.0)], [t(1.0)]))
    # Module record with parameters: the weight's change explains the output's.
    add("Module.fc.Linear.forward.0",
        fwd([t(1.0)], [t(3.0)], parameters={"weight": t(3.0, rg=True), "bias": t(0.5, rg=True)}),
        fwd([t(1.0)], [t(1.0)], parameters={"weight": t(1.0, rg=True), "bias": t(0.5, rg=True)}))
    # Backward records: input = grad of the output, output = grad of the input.
    add("Functional.linear.0.backward", {"input": [t(1.0)], "output": [t(1.7), None]},
        {"input": [t(1.0)], "output": [t(1.0), None]})
    # A module's backward called twice in the target (recomputation) and once
    # in the bench: msprobe renumbers backward calls in dump order.
    T["Module.fc.Linear.backward.3"] = {"input": [t(1.0)], "output": [t(1.0)]}
    B["Module.fc.Linear.backward.0"] = {"input": [t(1.0)], "output": [t(1.0)]}
    T["Module.fc.Linear.backward.4"] = {"input": [t(1.0)], "output": [t(2.0)]}
    # Parameter gradients: indices differ between the two steps: unmatched.
    T["Module.fc.Linear.parameters_grad.1"] = {"weight": [t(0.1)], "bias": [t(INF)]}
    B["Module.fc.Linear.parameters_grad.0"] = {"weight": [t(0.1)], "bias": [t(0.2)]}
    # A module named "output": every row has ".output." in its name.
    add("Module.output.Linear.forward.0", fwd([t(1.0)], [t(1.6)]), fwd([t(1.0)], [t(1.0)]))
    # Target-only entry and target-only row.
    T["Functional.dropout.0.forward"] = fwd([t(1.0)], [t(INF)])
    add("Functional.gelu.0.forward", fwd([t(1.0)], [t(1.0), t(2.0)]), fwd([t(1.0)], [t(1.0)]))
    return T, B


def dump_file(data: dict[str, Any]) -> dict[str, Any]:
    return {"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": None, "data": data}


def write_pair(out: str) -> tuple[str, str]:
    """Writes target/dump.json and bench/dump.json into out; returns their paths."""
    target, bench = pair()
    paths = []
    for name, data in (("target", target), ("bench", bench)):
        os.makedirs(os.path.join(out, name), exist_ok=True)
        path = os.path.join(out, name, "dump.json")
        with open(path, "w") as f:
            json.dump(dump_file(data), f, indent=1)
        paths.append(path)
    return paths[0], paths[1]


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    target, bench = write_pair(out)
    with tempfile.TemporaryDirectory() as work:
        subprocess.run(["msprobe", "compare", "-tp", target, "-gp", bench, "-o", work], check=True,
                       stdout=subprocess.DEVNULL)
        (csv,) = glob.glob(os.path.join(work, "compare_result_*.csv"))
        with open(csv, "rb") as f, gzip.open(os.path.join(out, "msprobe.csv.gz"), "wb") as g:
            shutil.copyfileobj(f, g)


if __name__ == "__main__":
    main(sys.argv[1])

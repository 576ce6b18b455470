"""Writes the tensor_pair fixtures: a pair of msprobe-format tensor dumps
(``task: "tensor"``: dump.json plus one torch.save file per tensor under
dump_tensor_data/), one entry per corner of msprobe's real-data compare, and
msprobe's own CSV for them. Run once by hand; the outputs are committed:

    pip install mindstudio-probe      # 26.2.0 made the committed files
    python3 tests/msprobe_data/generate_tensor_pair.py tests/msprobe_data/tensor_pair

which writes target/ and bench/ in a temporary folder, runs

    msprobe compare -tp target/dump.json -gp bench/dump.json -o OUT

and keeps both dumps as dumps.tar.gz and OUT's CSV, gzipped, as
msprobe.csv.gz. The data is seeded: a rerun writes the same tensors.
tests/test_compare_tensors_msprobe.py compares graphprobe's default tensor
compare against that CSV, and re-runs msprobe where it is installed.
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
import tarfile
import tempfile
from typing import Any

import torch

def record(t: torch.Tensor, data_name: str) -> dict[str, Any]:
    """A tensor record as msprobe's tensor dump writes it (statistics in float64)."""
    stats: dict[str, Any] = {"Max": None, "Min": None, "Mean": None, "Norm": None}
    if t.numel():
        d = t.double()
        stats = {"Max": d.max().item(), "Min": d.min().item(), "Mean": d.mean().item(), "Norm": d.norm().item()}
    return {"type": "torch.Tensor", "dtype": str(t.dtype), "shape": list(t.shape), **stats, "requires_grad": False,
            "data_name": data_name}


def entries() -> tuple[dict[str, Any], dict[str, Any], dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """(target data, bench data, target files, bench files)."""
    g = torch.Generator().manual_seed(18)

    def rnd(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)

    T: dict[str, Any] = {}
    B: dict[str, Any] = {}
    TF: dict[str, torch.Tensor] = {}
    BF: dict[str, torch.Tensor] = {}

    def add(entry: str, parts: list[tuple[str, torch.Tensor | None, torch.Tensor | None]]) -> None:
        """parts: (role key, target tensor, bench tensor); role key is
        "input.0", "output.0", "parameters.weight" ...; a None tensor leaves
        that side without the record."""
        docs: list[dict[str, Any]] = [{}, {}]
        for key, tt, bt in parts:
            role, _, idx = key.partition(".")
            for t, files, doc in ((tt, TF, docs[0]), (bt, BF, docs[1])):
                if t is None:
                    continue
                name = f"{entry}.{key}.pt"
                rec = record(t, name)
                files[name] = t
                if role == "input":
                    doc.setdefault("input_args", []).append(rec)
                elif role == "output":
                    doc.setdefault("output", []).append(rec)
                else:
                    doc.setdefault("parameters", {})[idx] = rec
        for doc in docs:
            doc.setdefault("input_args", [])
            doc.setdefault("input_kwargs", {})
            doc.setdefault("output", [])
        T[entry], B[entry] = docs

    # A 2 % weight fault: the output drifts (no rule fires: cosine stays high).
    x, w = rnd(4, 8), rnd(6, 8)
    add("Module.fc.Linear.forward.0", [("input.0", x, x.clone()), ("parameters.weight", w * 1.02, w),
                                       ("output.0", x @ (w * 1.02).T, x @ w.T)])
    # Exact inputs, a rewritten output: One Thousandth Err Ratio of the output
    # drops to ~0 (error), and its Cosine falls (warning).
    a = rnd(32)
    add("Functional.relu.0.forward", [("input.0", a, a.clone()), ("output.0", rnd(32), a.relu())])
    # Cosine drop > 0.1 with inputs > 0.9, but most elements exact: warning only.
    b = rnd(64)
    bad = b.clone()
    bad[:8] = -bad[:8] * 3
    add("Functional.gelu.0.forward", [("input.0", b, b.clone()), ("output.0", bad, b.clone())])
    # Two outputs: the rules look at the first output row only.
    c = rnd(16)
    add("Functional.split.0.forward", [("input.0", c, c.clone()), ("output.0", c[:8].clone(), c[:8].clone()),
                                       ("output.1", rnd(8), c[8:].clone())])
    # NaN and inf at the same positions on both sides: counted as 0 vs 0.
    d = rnd(10)
    d[2], d[5], d[7] = math.nan, math.inf, -math.inf
    add("Torch.log.0.forward", [("input.0", d, d.clone()), ("output.0", d * 1.0001, d.clone())])
    # NaN at different positions: every metric "Nan"; NPU max is nan: error.
    e = rnd(10)
    e_nan = e.clone()
    e_nan[3] = math.nan
    add("Torch.sqrt.0.forward", [("input.0", e, e.clone()), ("output.0", e_nan, e.clone())])
    # Shapes differ: metrics "shape unmatched", error.
    f = rnd(12)
    add("Tensor.view.0.forward", [("input.0", f, f.clone()), ("output.0", f.reshape(3, 4), f.reshape(4, 3))])
    # dtypes differ (float16 vs float32 pair up): metrics computed, error.
    h = rnd(16)
    add("Tensor.half.0.forward", [("input.0", h, h.clone()), ("output.0", h.half(), h.clone())])
    # bfloat16 and float16 on both sides: a 1-ulp-ish drift.
    i16 = rnd(16)
    add("Functional.silu.0.forward", [("input.0", i16.bfloat16(), i16.bfloat16()),
                                      ("output.0", (i16 * 1.01).bfloat16(), i16.bfloat16())])
    add("Functional.tanh.0.forward", [("input.0", i16.half(), i16.half()),
                                      ("output.0", (i16 * 1.0004).half(), i16.half())])
    # Integer and bool tensors.
    k = torch.arange(-5, 7, dtype=torch.int64)
    add("Tensor.add.0.forward", [("input.0", k, k.clone()), ("output.0", k + 1, k.clone())])
    # A non-tensor argument (no data_name, no file) whose value differs: error.
    T["Tensor.add.0.forward"]["input_args"].append({"type": "int", "value": 1})
    B["Tensor.add.0.forward"]["input_args"].append({"type": "int", "value": 2})
    add("Tensor.__gt__.0.forward", [("input.0", k, k.clone()), ("output.0", k > 0, k > 1)])
    # Zeros in the bench (relative error against eps), all-zero bench output.
    z = rnd(8)
    zb = z.clone()
    zb[::2] = 0
    add("Functional.dropout.0.forward", [("input.0", z, z.clone()), ("output.0", z.clone(), zb),
                                         ("output.1", z.clone(), torch.zeros(8))])
    # Empty tensors, a 0-d tensor and a one-element tensor.
    add("Tensor.new_zeros.0.forward", [("input.0", rnd(4), None), ("output.0", torch.zeros(0, 3), torch.zeros(0, 3))])
    s = rnd(1)
    add("Tensor.sum.0.forward", [("input.0", s, s * 2), ("output.0", s.sum() * 1.5, s.sum())])
    # A tensor file missing on the bench side; a target-only row.
    m = rnd(6)
    add("Functional.softmax.0.forward", [("input.0", m, m.clone()), ("output.0", m.softmax(0), m.softmax(0)),
                                         ("output.1", m.clone(), None)])
    del BF["Functional.softmax.0.forward.output.0.pt"]
    return T, B, TF, BF


def write_dump(folder: str, data: dict[str, Any], files: dict[str, torch.Tensor]) -> str:
    tensors = os.path.join(folder, "dump_tensor_data")
    os.makedirs(tensors, exist_ok=True)
    for name, t in files.items():
        torch.save(t.contiguous().clone(), os.path.join(tensors, name))
    path = os.path.join(folder, "dump.json")
    with open(path, "w") as f:
        json.dump({"task": "tensor", "level": "mix", "framework": "pytorch",
                   "dump_data_dir": None, "data": data}, f, indent=1)
    return path


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    T, B, TF, BF = entries()
    with tempfile.TemporaryDirectory() as work:
        target = write_dump(os.path.join(work, "target"), T, TF)
        bench = write_dump(os.path.join(work, "bench"), B, BF)
        result = os.path.join(work, "out")
        subprocess.run(["msprobe", "compare", "-tp", target, "-gp", bench, "-o", result], check=True,
                       stdout=subprocess.DEVNULL)
        (csv,) = glob.glob(os.path.join(result, "compare_result_*.csv"))
        with open(csv, "rb") as f, gzip.open(os.path.join(out, "msprobe.csv.gz"), "wb") as g:
            shutil.copyfileobj(f, g)
        with tarfile.open(os.path.join(out, "dumps.tar.gz"), "w:gz") as tar:
            for side in ("target", "bench"):
                tar.add(os.path.join(work, side), arcname=side)


if __name__ == "__main__":
    main(sys.argv[1])

"""Every dtype through the CPU path, against float64 references: float8
(e4m3fn, e5m2, fnuz, e8m0fnu) and uint16/32/64 are reduced, complex records
carry no statistics, subnormals, NaN/Inf, empty and 0-d tensors are right.

The same cases run on CUDA in tests/gpu/test_stats_dtypes_cuda.py; the CPU
and CUDA paths share one list of reducible types (csrc/stats/reducible_types.h).
"""

from __future__ import annotations

from dtype_sweep import cases, record_eager, sweep_problems


def test_every_dtype_on_cpu_matches_float64(tmp_path):
    named = cases()
    data = record_eager(str(tmp_path), "cpu", [x for _, x in named])
    assert sweep_problems(data, named) == []


def test_no_stats_dtypes_report_their_kind(tmp_path):
    # The record of a dtype without a kernel still names dtype and shape.
    named = [(n, x) for n, x in cases() if n.startswith("complex")]
    data = record_eager(str(tmp_path), "cpu", [x for _, x in named])
    leaf = data["Module.emit.Emit.forward.0"]["output"][0]
    assert leaf["dtype"] == "torch.complex64" and leaf["shape"] == [1000] and leaf["Max"] is None

"""Tensor mode of ``graphprobe compare``: real-data metrics of tensor dumps.

A pair is compared in tensor mode when both dumps are tensor dumps, i.e. their
tensor records carry ``data_name``, the file under ``dump_tensor_data/`` (next
to ``dump.json``) that holds the tensor. For each matched row the two files
are read and compared in C++ by ``graphprobe._C`` (reading ``torch.save``
archives needs torch, so ``_C`` and torch are imported only here, only for
tensor dumps). Two layouts (``tensor_layout``, CLI ``--tensor-layout``):

* ``msprobe`` (default): msprobe's real-data compare, reproduced --
  ``_C.msprobe_real_data`` gives its six cells (numbers, or its words
  "unsupported", "shape unmatched", "N/A", "Nan"; definitions in
  csrc/compare_tensors/msprobe_real_data.h and docs/formats.md), and the
  engine writes msprobe's real-data CSV and judges by its real-data rules
  (One Thousandth Err Ratio and Cosine in place of NormRelativeErr). A
  missing or unreadable file gives "unsupported" cells, as in msprobe, with
  the reason in Err_message (an unreadable one Result error, below).
* ``graphprobe``: the statistics CSV and rules, with the six columns
  appended (``_C.tensor_metrics``, definitions below) and graphprobe's tensor
  rules (``Thresholds``) on top:

========================== ===================================================
column                     definition (t = target, b = bench, in float64)
========================== ===================================================
Cosine                     sum(t*b) / (|t| |b|), clamped to [-1, 1]; 1 when
                           both are all zero; nan (with a note) when one is,
                           or for a single element
EucDist                    sqrt(sum((t - b)^2))
MaxAbsErr                  max |t - b|
Tensor MaxRelativeErr      max |t - b| / |b| (a ratio); where b = 0 the
                           element's error is |t| / eps (eps of float32 for
                           float16/bfloat16/float32, of float64 otherwise)
One Thousandth Err Ratio   share of elements with relative error < 0.001
Five Thousandths Err Ratio share of elements with relative error < 0.005
========================== ===================================================

  Positions where both sides hold the same non-finite value count as 0 vs 0;
  any other non-finite position makes every metric nan. float8 and
  uint16/32/64 tensors are read as float64. Rows whose records or files
  differ in dtype or shape get no metrics and Result error, so do rows whose
  files are unreadable (a file whose sizes claim more than it holds is
  unreadable); rows whose files are missing, or of a dtype without these
  metrics (complex, float4_e2m1fn_x2, bits), get no metrics and Result
  warning; the reason goes to Err_message.

A row whose tensor file exists but cannot be read (not a torch.save archive,
or one whose pickle claims more elements than its storage holds) is Result
error in both layouts, the reader's reason in Err_message: a row that could
not be compared is never a pass (msprobe passes it).

Either way the rules run in the C++ engine
(``CompareResult.finish_tensor_compare``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["TENSOR_DATA_DIR", "TENSOR_LAYOUTS", "fill_tensor_metrics", "msprobe_row_metrics", "row_metrics"]

TENSOR_DATA_DIR = "dump_tensor_data"
# msprobe: its real-data CSV and rules (the default); graphprobe: the
# statistics CSV and rules with the tensor columns and rules added.
TENSOR_LAYOUTS = ("msprobe", "graphprobe")

# (status, six values in Row.tensor_metrics order, notes), as
# CompareResult.set_tensor_metrics takes them.
RowMetrics = tuple[str, tuple[float | str | None, ...], list[str]]
MetricsFn = Callable[[str, str], dict[str, Any]]

_KEYS = (
    "cosine",
    "euc_dist",
    "max_abs_err",
    "max_rel_err",
    "one_thousandth_err_ratio",
    "five_thousandths_err_ratio",
)
_NONE: tuple[float | None, ...] = (None,) * len(_KEYS)
# The engine's status for a row without metrics whose Result is error: a
# file that exists and cannot be read was not compared, so it must not pass.
_UNREADABLE = "mismatch"


def _load_native() -> tuple[Any | None, str | None]:
    """graphprobe._C, or None and why it could not be imported."""
    try:
        import torch  # noqa: F401  (_C links against libtorch: load it first)

        from graphprobe import _C
    except ImportError as e:
        return None, f"graphprobe._C (torch) could not be imported: {e}"
    return _C, None


def _file(folder: Path, data_name: str | None, side: str) -> tuple[Path | None, str | None]:
    """The tensor file of one side, or None and why it cannot be used."""
    if not data_name:
        return None, f"the {side} record has no data_name"
    # A separator of this system (on POSIX only "/"; a backslash is an
    # ordinary character there, and the tensor task writes one for a module
    # registered as "a\\b") or "." / "..": not a file of dump_tensor_data/.
    if any(sep in data_name for sep in (os.sep, os.altsep, "\0") if sep) or data_name in (".", ".."):
        return None, f"the {side} data_name {data_name!r} is not a plain file name"
    path = folder / TENSOR_DATA_DIR / data_name
    if not path.is_file():
        return None, f"{side} tensor file missing: {path}"
    return path, None


def _readable_files(row: Any, target_dir: Path, bench_dir: Path, native: Any | None,
                    why_not: str | None) -> tuple[str, str] | list[str]:
    """The two tensor files of a row, or why they cannot be compared."""
    t_file, t_err = _file(target_dir, row.target_data_name, "target")
    b_file, b_err = _file(bench_dir, row.bench_data_name, "bench")
    missing = [e for e in (t_err, b_err) if e]
    if missing:
        return missing
    if native is None or t_file is None or b_file is None:
        return [why_not or "graphprobe._C is not available"]
    return str(t_file), str(b_file)


def row_metrics(row: Any, target_dir: Path, bench_dir: Path, native: Any | None, why_not: str | None) -> RowMetrics:
    """The tensor metrics of one matched row (an engine ``Row``).

    ``target_dir``/``bench_dir`` are the folders holding the two dump.json;
    ``native`` is ``graphprobe._C`` or None (then ``why_not`` says why).
    """
    if row.target_dtype != row.bench_dtype:
        return "mismatch", _NONE, [f"dtype mismatch: {row.target_dtype} vs {row.bench_dtype}"]
    if list(row.target_shape) != list(row.bench_shape):
        return "mismatch", _NONE, [f"shape mismatch: {list(row.target_shape)} vs {list(row.bench_shape)}"]
    files = _readable_files(row, target_dir, bench_dir, native, why_not)
    if isinstance(files, list):
        return "unavailable", _NONE, files
    try:
        d = native.tensor_metrics(*files)
    except native.TensorNotComparableError as e:  # complex, fp4, bits: no metrics, not a mismatch
        return "unavailable", _NONE, [str(e)]
    except native.TensorMismatchError as e:
        return "mismatch", _NONE, [str(e)]
    except OSError as e:  # TensorFileError, or the file vanished
        return _UNREADABLE, _NONE, [str(e)]
    return "computed", tuple(d[k] for k in _KEYS), list(d["notes"])


_UNSUPPORTED: tuple[float | str | None, ...] = ("unsupported",) * len(_KEYS)


def msprobe_row_metrics(row: Any, target_dir: Path, bench_dir: Path, native: Any | None,
                        why_not: str | None) -> RowMetrics:
    """msprobe's real-data cells of one matched row (the default layout):
    floats, or msprobe's words ("unsupported" where a file is missing or
    unreadable, as msprobe writes it; the reason goes to Err_message)."""
    files = _readable_files(row, target_dir, bench_dir, native, why_not)
    if isinstance(files, list):
        return "computed", _UNSUPPORTED, files
    try:
        d = native.msprobe_real_data(*files)
    except native.TensorMismatchError as e:
        return "computed", _UNSUPPORTED, [str(e)]
    except OSError as e:  # TensorFileError, or the file vanished: msprobe's cells, never its pass
        return _UNREADABLE, _UNSUPPORTED, [str(e)]
    return "computed", tuple(d["cells"]), list(d["notes"])


def fill_tensor_metrics(result: Any, target_dir: Path, bench_dir: Path, options: Any) -> None:
    """Computes every matched row's tensor metrics into ``result`` (an engine
    ``CompareResult`` with ``has_tensor_data``), then applies the tensor rules
    with ``options`` (an engine ``CompareOptions``; its ``tensor_layout``
    picks msprobe's real-data cells and rules or graphprobe's)."""
    native, why_not = _load_native()
    metrics = msprobe_row_metrics if options.tensor_layout == "msprobe" else row_metrics
    for row in result.rows:
        if row.match != "matched":
            continue
        status, values, notes = metrics(row, target_dir, bench_dir, native, why_not)
        result.set_tensor_metrics(row.index, status, values, notes)
    result.finish_tensor_compare(options)

"""``graphprobe compare``: msprobe-compatible comparison of two dumps.

Example::

    from graphprobe.compare import compare

    run = compare("dump_compiled", "dump_eager", "compare_out")
    for o in run.outcomes:
        print(o.pair.label, o.counts, o.first_divergence, o.csv_path)
        if o.divergence:
            print(o.divergence.kinds, o.divergence.message)

Works with the dumps only: neither torch nor graphprobe's engine is imported
for statistics dumps. When both dumps of a pair are tensor dumps (records with
``data_name``, files under ``dump_tensor_data/``), the tensor files are
compared too (:mod:`graphprobe.compare.tensors`; this imports torch).
Each pair gives ``compare_result_{tag}_{timestamp}.csv`` (``{tag}``: ``R``
for ``rank{R}`` folders, ``pid{P}`` for single-process folders; msprobe's
statistics columns, or for tensor dumps its real-data columns -- or, with
``tensor_layout="graphprobe"``, the statistics columns with the real-data
ones appended -- then ``Match`` and ``First Divergence``) and, unless
``html=False``,
``compare_report_{tag}_{timestamp}.html``, and a compare of several pairs
an ``index.html`` linking every report. When two dump roots are compared
the files go to ``{output_dir}/step{N}/``, otherwise to ``output_dir``.
Several pid folders in one step are not paired by a guess: see
``pid_pairing`` and :mod:`graphprobe.compare.pairing`. The .xlsx workbook of
a CSV (``graphprobe compare --xlsx``): :func:`graphprobe.compare.workbook.write_workbook`.
Existing files are never replaced: when a name is taken (another compare in
the same second), ``_{k}`` is appended to the timestamp.
Pairs are compared in parallel worker processes.

The first divergence (``PairOutcome.first_divergence`` and ``.divergence``)
is graphprobe's, not msprobe's: the first entry, in execution order, whose
parameters differ beyond rounding noise, whose outputs differ beyond noise
and beyond what its inputs and parameters explain, or whose inputs differ
although everything recorded before agrees (the error came from code that is
not recorded). The noise floor is per dtype (``noise_floor_table()``, scaled
by ``floor_scale``); the rule is in docs/formats.md ("First divergence").
msprobe's Result column keeps msprobe's rules.
"""

from __future__ import annotations

from graphprobe.compare.native import noise_floor_table, threshold_defaults
from graphprobe.compare.outcome import CompareRun, PairOutcome, RowDigest
from graphprobe.compare.pairing import Pair, PairingError, Unpaired
from graphprobe.compare.runner import compare, compare_pair
from graphprobe.compare.thresholds import Thresholds

__all__ = [
    "CompareRun",
    "PairOutcome",
    "Pair",
    "PairingError",
    "RowDigest",
    "Thresholds",
    "Unpaired",
    "compare",
    "compare_pair",
    "noise_floor_table",
    "threshold_defaults",
]

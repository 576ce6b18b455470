"""``graphprobe compare``: msprobe-compatible comparison of two dumps.

Example::

    from graphprobe.compare import compare

    run = compare("dump_compiled", "dump_eager", "compare_out")
    for o in run.outcomes:
        print(o.pair.label, o.counts, o.first_divergence, o.csv_path)

Works with the dumps only: neither torch nor graphprobe's engine is imported
for statistics dumps. When both dumps of a pair are tensor dumps (records with
``data_name``, files under ``dump_tensor_data/``), the tensor files are
compared too (:mod:`graphprobe.compare.tensors`; this imports torch).
Each pair gives ``compare_result_{rank}_{timestamp}.csv`` (msprobe's columns,
its real-data columns for tensor dumps, then ``Match`` and ``First
Divergence``) and, unless ``html=False``,
``compare_report_{rank}_{timestamp}.html``. When two dump roots are compared
the files go to ``{output_dir}/step{N}/``, otherwise to ``output_dir``.
Pairs are compared in parallel worker processes.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path

from graphprobe.compare.outcome import CompareRun, PairOutcome, RowDigest
from graphprobe.compare.pairing import Pair, Pairing, PairingError, Unpaired, pair_paths
from graphprobe.compare.summary import ProgressBar
from graphprobe.output_files import make_dirs, write_text_atomic

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
]


@dataclass(frozen=True)
class Thresholds:
    """Verdict thresholds, in percent of NormRelativeErr (spec defaults).

    * error when every input is below ``input_error_pct`` and an output is
      above ``output_error_pct``;
    * warning when an output is above ``warning_ratio`` times the largest
      input, or above ``warning_pct`` when that is 0;
    * ``warning_pct`` is also what the first-divergence search calls bad;
    * outputs at or below ``noise_pct`` never get the ratio warning: that is
      rounding noise (graphprobe's addition, applied only with
      ``graphprobe_verdicts=True``; msprobe flags it).

    Tensor dumps only (msprobe's real-data rules; values, not percentages):

    * error when every input's One Thousandth Err Ratio is above
      ``thousandth_input_min`` and an output's is below
      ``thousandth_output_max``;
    * warning when every input's Cosine is above ``cosine_input_min`` and an
      output's is lower than the lowest input's by more than ``cosine_drop``.
    """

    input_error_pct: float = 10.0
    output_error_pct: float = 50.0
    warning_ratio: float = 10.0
    warning_pct: float = 10.0
    noise_pct: float = 0.001
    cosine_input_min: float = 0.9
    cosine_drop: float = 0.1
    thousandth_input_min: float = 0.9
    thousandth_output_max: float = 0.1


def _engine():  # type: ignore[no-untyped-def]
    # Imported on use so that `graphprobe --help` works on a broken install.
    from graphprobe import _compare

    return _compare


def _file_names(pair: Pair, output_dir: Path, by_step: bool, stamp: str) -> tuple[Path, Path]:
    folder = output_dir / f"step{pair.step}" if by_step and pair.step is not None else output_dir
    return folder / f"compare_result_{pair.rank}_{stamp}.csv", folder / f"compare_report_{pair.rank}_{stamp}.html"


def compare_pair(
    pair: Pair,
    csv_path: Path,
    report_path: Path | None,
    *,
    fuzzy: bool = False,
    thresholds: Thresholds = Thresholds(),
    top: int = 10,
    graphprobe_verdicts: bool = False,
) -> PairOutcome:
    """Compares one pair and writes its CSV (and HTML report). Read errors
    come back in ``PairOutcome.error`` rather than as exceptions, so that
    one bad rank does not hide the others."""
    from graphprobe.compare.outcome import digest_rows, report_rows
    from graphprobe.compare.report import ROW_LIMIT, render_html

    eng = _engine()
    options = eng.CompareOptions(fuzzy=fuzzy, graphprobe_verdicts=graphprobe_verdicts, **asdict(thresholds))
    try:
        result = eng.compare_files(str(pair.target), str(pair.bench), options)
    except (eng.DumpFormatError, OSError) as e:
        return PairOutcome(pair=pair, error=str(e))
    if result.has_tensor_data:
        from graphprobe.compare.tensors import fill_tensor_metrics

        fill_tensor_metrics(result, pair.target.parent, pair.bench.parent, options)
    make_dirs(csv_path.parent)
    result.write_csv(str(csv_path))
    worst, points = digest_rows(result, top)
    if report_path is not None:
        page = render_html(
            title=f"graphprobe compare {pair.label}",
            target=str(pair.target),
            bench=str(pair.bench),
            counts=result.counts,
            first_divergence=result.first_divergence,
            points=points,
            rows=report_rows(result, ROW_LIMIT),
            total_rows=len(result),
            thresholds={"warning": thresholds.warning_pct, "error (outputs)": thresholds.output_error_pct},
        )
        write_text_atomic(report_path, page)
    return PairOutcome(
        pair=pair,
        csv_path=csv_path,
        report_path=report_path,
        counts=dict(result.counts),
        rows=len(result),
        first_divergence=result.first_divergence,
        first_divergence_index=next((p.index for p in points if p.first_divergence), None),
        worst=tuple(worst),
    )


def compare(
    target: str | os.PathLike[str],
    bench: str | os.PathLike[str],
    output_dir: str | os.PathLike[str] = "compare_output",
    *,
    fuzzy: bool = False,
    thresholds: Thresholds = Thresholds(),
    top: int = 10,
    html: bool = True,
    jobs: int | None = None,
    progress: bool = True,
    graphprobe_verdicts: bool = False,
) -> CompareRun:
    """Compares TARGET (the run under test) against BENCH (the reference).

    Args:
        target, bench: a dump.json, a ``rank*``/``pid*``/``proc*`` folder, a
            ``step*`` folder or a dump root (see :mod:`graphprobe.compare.pairing`).
        output_dir: where the CSVs and reports go (created).
        fuzzy: match rows ignoring call indices, in order.
        thresholds: verdict thresholds.
        top: rows kept per pair for the worst-rows list.
        html: write the HTML report too.
        jobs: worker processes (default: one per pair, at most the CPU count).
        progress: show a progress bar on stderr when several pairs run.
        graphprobe_verdicts: let graphprobe's additions decide Result too
            (rows without a partner get "unmatched", the noise floor
            applies); by default Result is exactly msprobe's verdict.

    Raises:
        PairingError: TARGET/BENCH are not dumps or cannot be paired.
    A dump that cannot be read is reported in its ``PairOutcome.error``.
    """
    pairing: Pairing = pair_paths(target, bench)
    out = Path(output_dir)
    make_dirs(out)
    stamp = time.strftime("%Y%m%d%H%M%S")
    tasks = []
    for p in pairing.pairs:
        csv_path, html_path = _file_names(p, out, pairing.by_step, stamp)
        tasks.append((p, csv_path, html_path if html else None))
    kwargs = dict(fuzzy=fuzzy, thresholds=thresholds, top=top, graphprobe_verdicts=graphprobe_verdicts)
    bar = ProgressBar(len(tasks), enabled=progress)
    workers = min(len(tasks), jobs if jobs else (os.cpu_count() or 1))
    outcomes: list[PairOutcome] = []
    if workers <= 1:
        for task in tasks:
            outcomes.append(compare_pair(*task, **kwargs))  # type: ignore[arg-type]
            bar.advance(task[0].label)
    else:
        # fork: workers start in milliseconds and need nothing re-imported;
        # they run the torch-free engine (and import torch themselves only
        # for tensor dumps).
        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("fork" if "fork" in methods else None)
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            futures: dict[Future[PairOutcome], int] = {
                pool.submit(compare_pair, *t, **kwargs): i for i, t in enumerate(tasks)  # type: ignore[arg-type]
            }
            done: dict[int, PairOutcome] = {}
            for fut in as_completed(futures):
                i = futures[fut]
                done[i] = fut.result()
                bar.advance(tasks[i][0].label, i)
            outcomes = [done[i] for i in range(len(tasks))]
    return CompareRun(outcomes=outcomes, unpaired=pairing.unpaired, output_dir=out)

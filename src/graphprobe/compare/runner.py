"""Runs a compare: pairs the dumps, claims the output names, and compares
each pair in a worker process (:func:`compare`), or one pair here
(:func:`compare_pair`). The package face is :mod:`graphprobe.compare`."""

from __future__ import annotations

import os
import re
import time
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

from graphprobe._text import first_unsafe
from graphprobe.compare.checksums import checksum_csv_path, pair_checksum_line
from graphprobe.compare.native import native
from graphprobe.compare.outcome import CompareRun, PairOutcome
from graphprobe.compare.output_names import claim_names, release_names, write_failure
from graphprobe.compare.pairing import Pair, Pairing, PairingError, pair_paths
from graphprobe.compare.unmatched import same_name_unmatched
from graphprobe.compare.summary import ProgressBar
from graphprobe.compare.tensors import TENSOR_LAYOUTS
from graphprobe.compare.tensor_layout import prepare_sides
from graphprobe.compare.thresholds import Thresholds, check_divergence_options, default
from graphprobe.compare.verdicts import Verdict
from graphprobe.output_files import make_dirs, write_text_atomic

__all__ = ["check_path_text", "compare", "compare_pair", "out_of_memory"]


def _folder(pair: Pair, output_dir: Path, by_step: bool) -> Path:
    return output_dir / f"step{pair.step}" if by_step and pair.step is not None else output_dir


def check_path_text(what: str, path: str | os.PathLike[str]) -> None:
    """Refuses a path the C++ reader cannot open: one holding NUL, or one
    that is not valid UTF-8 (Python keeps such bytes as lone surrogates)."""
    text = os.fspath(path)
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise PairingError(f"{what} {text!r} is not valid UTF-8; rename it or pass a link with a UTF-8 name") from None
    if "\0" in text:
        raise PairingError(f"{what} {text!r} holds a NUL character")
    if first_unsafe(text, ("Cs",)) is not None:
        raise PairingError(f"{what} {text.encode('utf-8', 'surrogateescape')!r} is not valid UTF-8; rename it or "
                           "pass a symbolic link with a UTF-8 name")


def out_of_memory(pair: Pair, killed: bool = False) -> str:
    """The message for a pair that ran out of memory."""
    sizes = []
    for p in (pair.target, pair.bench):
        try:
            sizes.append(f"{p.stat().st_size / 1e6:.0f} MB")
        except OSError:
            sizes.append("? MB")
    how = "its worker process was killed (most likely out of memory)" if killed else "out of memory"
    return (f"{pair.label}: {how} while comparing {pair.target} ({sizes[0]}) with {pair.bench} ({sizes[1]}); "
            "compare needs about twice the size of both dumps: compare fewer pairs at once (-j 1) or free memory")


def compare_pair(
    pair: Pair,
    csv_path: Path,
    report_path: Path | None,
    *,
    fuzzy: bool = False,
    thresholds: Thresholds | None = None,
    top: int = 10,
    graphprobe_verdicts: bool = False,
    tensor_layout: str = "msprobe",
    floor_scale: float | None = None,
    divergence_ratio: float | None = None,
    reference: Path | None = None,
    parameters_as_causes: bool = False,
    carried_from: tuple[int, tuple[str, ...]] | None = None,
    update_basis: tuple[tuple[str, tuple[float, ...], float], ...] | None = None,
) -> PairOutcome:
    """Compares one pair and writes its CSV (and HTML report). Read errors
    come back in ``PairOutcome.error`` rather than as exceptions, so that
    one bad rank does not hide the others. Options left None take the
    engine's defaults. ``reference``: the float64 dump.json that referees
    this pair (:mod:`graphprobe.compare.referee`). ``carried_from``: (an
    earlier step, its differing parameters), which carry their difference
    on into this step (:func:`_parameters_carried`). ``update_basis``: step
    0's parameters for the first update's rule at step 1 (:func:`_first_update`)."""
    from graphprobe.compare.outcome import digest_divergence, digest_rows, report_rows
    from graphprobe.compare.report import ROW_LIMIT, render_html

    eng = native()
    thresholds = Thresholds() if thresholds is None else thresholds
    options = eng.CompareOptions(fuzzy=fuzzy, graphprobe_verdicts=graphprobe_verdicts, tensor_layout=tensor_layout,
                                 floor_scale=default("floor_scale") if floor_scale is None else floor_scale,
                                 divergence_ratio=default("divergence_ratio") if divergence_ratio is None
                                 else divergence_ratio, **asdict(thresholds))
    options.step = training_step(pair)
    options.parameters_as_causes = parameters_as_causes
    if carried_from is not None:
        options.carried_parameters = list(carried_from[1])
    if update_basis is not None:
        options.update_basis = list(update_basis)
    try:
        result = eng.compare_files(str(pair.target), str(pair.bench), options)
    except (eng.DumpFormatError, OSError) as e:
        return PairOutcome(pair=pair, error=str(e))
    if result.has_tensor_data:
        from graphprobe.compare.tensors import fill_tensor_metrics

        fill_tensor_metrics(result, pair.target.parent, pair.bench.parent, options)
    verdict = None
    if reference is not None:
        # Imported here: only a compare with --reference uses the referee.
        from graphprobe.compare.referee import (add_reference_columns, kept_by_exact_rule, referee_divergence,
                                                with_referee_note)

        try:
            verdict = _referee(eng, result, pair, reference, options)
        except (eng.DumpFormatError, OSError) as e:
            return PairOutcome(pair=pair, error=f"--reference {reference}: {e}")
    make_dirs(csv_path.parent)
    result.write_csv(str(csv_path))
    # Both dumps with "md5": bit-identical or not, from the records this read kept.
    checksum_line = pair_checksum_line(result, pair.label, checksum_csv_path(csv_path, csv_path.parent, pair.tag))
    if verdict is not None:
        add_reference_columns(csv_path, verdict)
    # What unmatched rows named alike on both sides are: a list of every
    # row's view while it runs, so before the plot points (an object per
    # entry) exist, not on top of them.
    same_names = same_name_unmatched(result)
    divergence, noise, coverage, floors_used = digest_divergence(result)
    # Where the referee blames nothing, a divergence the engine found by a
    # rule that needs no margin stands (referee.kept_by_exact_rule).
    kept = verdict is not None and kept_by_exact_rule(verdict, divergence)
    # The report's plot marks the referee's entry, not the engine's.
    marked = None if verdict is None or kept else -1 if verdict.blamed_index is None else verdict.blamed_index
    worst, plot = digest_rows(result, top, marked)
    first_divergence_index = plot.first_marked
    if kept:
        divergence = with_referee_note(divergence)
    elif verdict is not None:
        divergence = referee_divergence(verdict, divergence)
    counts, first_divergence, n_rows, notes = dict(result.counts), result.first_divergence, len(result), tuple(result.notes)
    # The referee decides divergence when there is one: the engine's
    # "within noise" then says nothing.
    within_noise = result.errors_within_noise if verdict is None else 0
    after_update = ((result.parameter_rows_differing, result.parameter_rows)
                    if result.parameters_after_update and result.parameter_rows_differing else None)
    carried = ((result.parameter_rows_carried, carried_from[0])
               if carried_from is not None and result.parameter_rows_carried else None)
    differing_parameters = tuple(result.differing_parameters)
    parameter_basis = tuple((k, tuple(sk), e) for k, sk, e in result.parameter_basis)
    update_rows = tuple(result.update_rows) if update_basis is not None else None
    arguments_without_effect = tuple(result.arguments_without_effect)
    if verdict is not None and not kept:
        first_divergence = verdict.blamed_entry
    # The page lists at most ROW_LIMIT rows: take them, then free the records
    # before the page is built.
    listed = report_rows(result, ROW_LIMIT) if report_path is not None else []
    del result
    if report_path is not None:
        page = render_html(
            title=f"graphprobe compare {pair.label}",
            target=str(pair.target),
            bench=str(pair.bench),
            counts=counts,
            first_divergence=first_divergence,
            points=plot.points,
            entries=plot.entries,
            rows=listed,
            total_rows=n_rows,
            thresholds={"warning": thresholds.warning_pct, "error (outputs)": thresholds.output_error_pct},
            divergence=divergence,
            noise=noise,
            floors_used=floors_used,
        )
        write_text_atomic(report_path, page)
    return PairOutcome(
        pair=pair,
        csv_path=csv_path,
        report_path=report_path,
        counts=counts,
        rows=n_rows,
        first_divergence=first_divergence,
        first_divergence_index=first_divergence_index,
        worst=tuple(worst),
        notes=notes,
        divergence=divergence,
        noise=noise,
        coverage=coverage,
        floors_used=floors_used,
        referee=verdict,
        checksums=() if checksum_line is None else (checksum_line,),
        same_name_unmatched=same_names,
        errors_within_noise=within_noise,
        parameters_after_update=after_update,
        differing_parameters=differing_parameters,
        parameters_carried=carried,
        parameter_basis=parameter_basis,
        update_rows=update_rows,  # type: ignore[arg-type]
        arguments_without_effect=arguments_without_effect,
    )


def _parameters_after_a_divergence(tasks: list[Any], outcomes: list[PairOutcome], kwargs: dict[str, Any]) -> None:
    """Compares again, with parameters as causes, the pairs whose parameters
    were taken as the first update's doing (step 1, some differ) while an
    earlier step of the same process diverged: there the update carried that
    divergence, and the parameter names it (the summary points back at the
    step). A clean run's drift keeps the first judgment."""
    diverged: dict[tuple[str, str], int] = {}
    for o in outcomes:
        if o.error is None and o.divergence is not None and o.pair.step is not None:
            key = (o.pair.kind, o.pair.rank)
            diverged[key] = min(diverged.get(key, o.pair.step), o.pair.step)
    for i, (task, o) in enumerate(zip(tasks, outcomes)):
        first = diverged.get((o.pair.kind, o.pair.rank))
        if o.error is None and o.parameters_after_update and first is not None and first < (o.pair.step or 0):
            try:
                outcomes[i] = compare_pair(*task[:3], reference=task[3], **{**kwargs, "parameters_as_causes": True})
            except (MemoryError, OSError):
                pass  # the first judgment stands; its files were written


def _first_update(tasks: list[Any], outcomes: list[PairOutcome], kwargs: dict[str, Any]) -> None:
    """Compares step 1 again with step 0's parameters where both steps of
    the same process were compared as training steps (parameter gradients
    recorded) and neither found a divergence: step 0's gradients
    say how far apart rounding can leave each parameter after the first
    update, so an update that itself differs (an optimizer step, code run
    between the steps) is named (docs/formats.md, "Parameters after an
    update"). Where step 0 was not compared, step 1's judgment stands."""
    by_step: dict[tuple[str, str, int], int] = {}
    for i, o in enumerate(outcomes):
        if o.error is None and o.pair.step is not None:
            by_step[(o.pair.kind, o.pair.rank, o.pair.step)] = i
    for (kind, rank, step), i in by_step.items():
        o = outcomes[i]
        before = by_step.get((kind, rank, 0))
        # Not only where step 1's parameters differ beyond the four
        # statistics' floor: an update x1.01 with a small lr moves them less
        # than that, and the rule reads their Sketch.
        if step != 1 or before is None or o.divergence is not None or not o.parameter_basis:
            continue
        basis = outcomes[before].parameter_basis
        if outcomes[before].divergence is not None or not basis:
            continue
        try:
            outcomes[i] = compare_pair(*tasks[i][:3], reference=tasks[i][3], **{**kwargs, "update_basis": basis})
        except (MemoryError, OSError):
            pass  # the first judgment stands; its files were written


def _parameters_carried(tasks: list[Any], outcomes: list[PairOutcome], kwargs: dict[str, Any]) -> None:
    """From step 2 on, compares again the pairs whose first divergence is a
    parameter, with the parameters that differed (or whose gradients did) at
    the latest earlier step of the same process as carried: the updates
    carry such a difference on (Adam moves every element by about lr,
    whatever its gradient's rounding), so only a parameter that agreed there,
    with its gradient, and differs now was changed by something other than
    the update -- a nudge, a flipped bit (docs/formats.md, "Parameters after
    an update"). Steps in order, each judged after the one before: where an
    earlier step diverged, its parameters carry that divergence and stay
    named (the summary points back at it); with no earlier step compared, the
    first judgment stands."""
    by_process: dict[tuple[str, str], list[int]] = {}
    for i, o in enumerate(outcomes):
        if o.error is None and o.pair.step is not None:
            by_process.setdefault((o.pair.kind, o.pair.rank), []).append(i)
    for indices in by_process.values():
        indices.sort(key=lambda i: outcomes[i].pair.step or 0)
        for k, i in enumerate(indices):
            o = outcomes[i]
            if (k == 0 or (o.pair.step or 0) < 2 or o.divergence is None or "parameter" not in o.divergence.kinds
                    or any(outcomes[j].divergence is not None for j in indices[:k])):
                continue
            before = outcomes[indices[k - 1]]
            if not before.differing_parameters:
                continue
            try:
                outcomes[i] = compare_pair(*tasks[i][:3], reference=tasks[i][3],
                                           **{**kwargs, "carried_from": (before.pair.step, before.differing_parameters)})
            except (MemoryError, OSError):
                pass  # the first judgment stands; its files were written


_STEP_FOLDER = re.compile(r"step(\d+)")


def training_step(pair: Pair) -> int:
    """The step a pair was recorded at: the pairing's, else the last
    ``step{N}`` folder in the target's path (a dump.json given by hand);
    -1 when neither says."""
    if pair.step is not None:
        return pair.step
    for part in reversed(pair.target.parts[:-1]):
        if m := _STEP_FOLDER.fullmatch(part):
            return int(m.group(1))
    return -1


def _referee(eng: Any, result: Any, pair: Pair, reference: Path, options: Any) -> Verdict:
    """The float64 referee's verdict on one pair: both sides compared with
    REF by the engine (rows matched by name), then the rule of
    :mod:`graphprobe.compare.referee`."""
    from graphprobe.compare.referee import referee  # only --reference uses it

    target_ref = eng.compare_files(str(pair.target), str(reference), options)
    bench_ref = eng.compare_files(str(pair.bench), str(reference), options)
    return referee(result, target_ref, bench_ref, eng.noise_floor_table(), ratio=options.divergence_ratio,
                   floor_scale=options.floor_scale, reference=str(reference))


def compare(
    target: str | os.PathLike[str],
    bench: str | os.PathLike[str],
    output_dir: str | os.PathLike[str] = "compare_output",
    *,
    fuzzy: bool = False,
    thresholds: Thresholds | None = None,
    top: int = 10,
    html: bool = True,
    jobs: int | None = None,
    progress: bool = True,
    graphprobe_verdicts: bool = False,
    tensor_layout: str = "msprobe",
    floor_scale: float | None = None,
    divergence_ratio: float | None = None,
    reference: str | os.PathLike[str] | None = None,
    pid_pairing: str = "single",
    parameters_as_causes: bool = False,
) -> CompareRun:
    """Compares TARGET (the run under test) against BENCH (the reference).

    Args:
        target, bench: a dump.json, a ``rank*``/``pid*``/``proc*`` folder, a
            ``step*`` folder or a dump root (see :mod:`graphprobe.compare.pairing`).
        output_dir: where the CSVs and reports go (created).
        fuzzy: match rows ignoring call indices, in order.
        thresholds: verdict thresholds (default: ``Thresholds()``, the
            engine's defaults).
        top: rows kept per pair for the worst-rows list.
        html: write the HTML report too.
        jobs: worker processes (default: one per pair, at most the CPU count).
        progress: show a progress bar on stderr when several pairs run.
        graphprobe_verdicts: let graphprobe's additions decide Result too
            (rows without a partner get "unmatched", the noise floor
            applies); by default Result is exactly msprobe's verdict.
        tensor_layout: tensor dumps only: "msprobe" (default) writes
            msprobe's real-data CSV and judges by its real-data rules;
            "graphprobe" writes the statistics CSV with the tensor columns
            appended and judges by the statistics rules plus graphprobe's
            tensor rules (:mod:`graphprobe.compare.tensors`).
        floor_scale: multiplies every noise floor of the first-divergence
            rule (default 1; e.g. 10 for hardware that computes float32
            matmuls in TF32/HF32).
        divergence_ratio: R of the first-divergence rule: an output's
            relative error must exceed R times its inputs' and parameters'
            plus its noise floor, an input's R times everything recorded
            before it plus its floor (default 4).
        parameters_as_causes: judge parameters as causes at every step. By
            default, at a training run's step 1 (a dump with a backward
            pass), parameters explain their calls' outputs but are no first
            divergence of their own: clean runs' first update leaves them apart
            (docs/formats.md, "Parameters after an update").
        pid_pairing: how a step holding several pid folders is paired:
            "single" (refuse, listing them), "newest" or "order" (see
            :mod:`graphprobe.compare.pairing`).

    Raises:
        PairingError: TARGET/BENCH are not dumps or cannot be paired.
        ValueError: an option out of range.
    A dump that cannot be read is reported in its ``PairOutcome.error``.
    """
    if tensor_layout not in TENSOR_LAYOUTS:
        raise ValueError(f"tensor_layout: got {tensor_layout!r}; allowed: {', '.join(TENSOR_LAYOUTS)}")
    thresholds = Thresholds() if thresholds is None else thresholds
    floor_scale = default("floor_scale") if floor_scale is None else floor_scale
    divergence_ratio = default("divergence_ratio") if divergence_ratio is None else divergence_ratio
    check_divergence_options(floor_scale, divergence_ratio)
    for what, path in (("TARGET", target), ("BENCH", bench), ("output_dir", output_dir)):
        check_path_text(what, path)
    target, bench = prepare_sides(target, bench)  # msprobe's aclgraph tensor layout (no dump.json): mirrored
    pairing: Pairing = pair_paths(target, bench, pid_pairing)
    references: dict[str, Path] = {}
    if reference is not None:
        check_path_text("REF", reference)
        references = {p.label: p.bench for p in pair_paths(target, reference, pid_pairing).pairs}
        missing = [p.label for p in pairing.pairs if p.label not in references]
        if missing:
            raise PairingError(f"--reference {reference}: no dump for {', '.join(missing)} (REF must hold the same "
                               "ranks and steps as TARGET)")
    out = Path(output_dir)
    make_dirs(out)
    stamp = time.strftime("%Y%m%d%H%M%S")
    tasks = []
    for p in pairing.pairs:
        tasks.append((p, *claim_names(_folder(p, out, pairing.by_step), p.tag, stamp, html), references.get(p.label)))
    kwargs = dict(fuzzy=fuzzy, thresholds=thresholds, top=top, graphprobe_verdicts=graphprobe_verdicts,
                  tensor_layout=tensor_layout, floor_scale=floor_scale, divergence_ratio=divergence_ratio,
                  parameters_as_causes=parameters_as_causes)
    bar = ProgressBar(len(tasks), enabled=progress)
    workers = min(len(tasks), jobs if jobs else (os.cpu_count() or 1))
    outcomes: list[PairOutcome] = []
    if workers <= 1:
        for task in tasks:
            try:
                outcomes.append(compare_pair(*task[:3], reference=task[3], **kwargs))  # type: ignore[arg-type]
            except MemoryError:  # past the engine: the CSV, the digest or the page
                outcomes.append(PairOutcome(pair=task[0], error=out_of_memory(task[0])))
            except OSError as e:  # writing the CSV or the page: this pair fails, the others go on
                outcomes.append(PairOutcome(pair=task[0], error=write_failure(task[0].label, task[1], task[2], e)))
            bar.advance(task[0].label)
    else:
        # Imported here: a compare with one worker (every benchmark of issue
        # 38, most single-pair runs) does without multiprocessing's imports.
        import multiprocessing
        from concurrent.futures import Future, ProcessPoolExecutor, as_completed
        from concurrent.futures.process import BrokenProcessPool

        # fork: workers start in milliseconds and need nothing re-imported;
        # they run the torch-free engine (and import torch themselves only
        # for tensor dumps).
        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("fork" if "fork" in methods else None)
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            futures: dict[Future[PairOutcome], int] = {
                pool.submit(compare_pair, *t[:3], reference=t[3],  # type: ignore[arg-type]
                            **kwargs): i for i, t in enumerate(tasks)
            }
            done: dict[int, PairOutcome] = {}
            for fut in as_completed(futures):
                i = futures[fut]
                try:
                    done[i] = fut.result()
                except BrokenProcessPool:  # the kernel killed a worker, most likely for memory
                    done[i] = PairOutcome(pair=tasks[i][0], error=out_of_memory(tasks[i][0], killed=True))
                except MemoryError:
                    done[i] = PairOutcome(pair=tasks[i][0], error=out_of_memory(tasks[i][0]))
                except Exception as e:  # noqa: BLE001  one pair's failure (a full disk ...) must not lose the others
                    done[i] = PairOutcome(pair=tasks[i][0], error=write_failure(tasks[i][0].label, tasks[i][1],
                                                                                tasks[i][2], e))
                bar.advance(tasks[i][0].label, i)
            outcomes = [done[i] for i in range(len(tasks))]
    if not parameters_as_causes:
        _first_update(tasks, outcomes, kwargs)
        _parameters_after_a_divergence(tasks, outcomes, kwargs)
        _parameters_carried(tasks, outcomes, kwargs)
    for task, o in zip(tasks, outcomes):
        if o.error is not None:
            release_names(task[1], task[2])
    run = CompareRun(outcomes=outcomes, unpaired=pairing.unpaired, output_dir=out)
    if sum(o.report_path is not None for o in outcomes) > 1:
        # index.html: every report of this compare, with its counts and first divergence
        # (imported here: a compare of one pair writes none)
        from graphprobe.compare.report_index import write_index

        try:
            run.index_path = write_index(run, stamp)
        except OSError as e:  # the results are written: the index alone is missing, and said so
            warnings.warn(f"compare: the index of the reports could not be written into {out}: {e}",
                          RuntimeWarning, stacklevel=2)
    return run

"""What `graphprobe compare` and the demo print: one table, short numbers,
each file named once, a progress report fit for a log file."""

from __future__ import annotations

import io
from pathlib import Path

from graphprobe.compare.numbers import short_pct, shorten_numbers
from graphprobe.compare.outcome import CompareRun, PairOutcome, RowDigest
from graphprobe.compare.pairing import Pair
from graphprobe.compare.summary import ProgressBar, format_summary


def _row(name: str, result: str, pct: float, reason: str = "") -> RowDigest:
    return RowDigest(name, name.rsplit(".", 2)[0], "output", result, pct, 1.0, 1.0, (reason,) if reason else ())


def _run(tmp_path: Path) -> CompareRun:
    worst = (
        _row("Module.mlp.MLP.forward.0.output.0", "error", 99.99999570148415,
             "output NormRelativeErr 99.99999570148415% > 50% while every input is below 10%"),
        _row("Module.ln.LayerNorm.forward.0.output.0", "warning", 0.011450000001),
        _row("Module.fc.Linear.forward.0.output.0", "pass", 5.0850001),
    )
    outcomes = []
    for step in range(3):
        folder = tmp_path / f"step{step}"
        outcomes.append(PairOutcome(
            pair=Pair(step, "0", Path("t"), Path("b")), csv_path=folder / "compare_result_0_1.csv",
            report_path=folder / "compare_report_0_1.html", counts={"pass": 4, "warning": 1, "error": 1}, rows=6,
            first_divergence="Module.mlp.MLP.forward.0", first_divergence_index=2, worst=worst))
    return CompareRun(outcomes=outcomes, unpaired=[], output_dir=tmp_path)


def test_summary_is_one_table_with_short_numbers_and_each_path_once(tmp_path: Path) -> None:
    text = format_summary(_run(tmp_path), 10)
    lines = text.splitlines()
    table = [line for line in lines if line.startswith("step")]
    assert [line.split()[0] for line in table] == ["step0/rank0", "step1/rank0", "step2/rank0"]
    assert all(line.endswith("Module.mlp.MLP.forward.0") for line in table)
    # The worst rows once (not once per step), with the order they are in.
    assert text.count("Module.ln.LayerNorm.forward.0.output.0") == 1
    assert "worst rows of step0/rank0 (by verdict (error, warning, pass), then by NormRelativeErr" in text
    assert "(the other 2 pairs: in their CSV and HTML report)" in text
    # 4 significant digits, also inside the reason.
    assert "100%  Module.mlp.MLP.forward.0.output.0  (output NormRelativeErr 100% > 50%" in text
    assert "0.01145%" in text and "5.085%" in text and "99.9999" not in text
    for step in range(3):
        assert text.count(f"step{step}/compare_result_0_1.csv") == 1
        assert text.count(f"step{step}/compare_report_0_1.html") == 1


def test_numbers_are_shortened_but_names_are_not() -> None:
    assert short_pct(99.99999570148415) == "100%" and short_pct(0.011449) == "0.01145%"
    assert short_pct(None) == "N/A" and short_pct(float("nan")) == "nan"
    reason = "Module.layers.1.0.forward input 1.0000001234 vs 2.5e-07, ratio 12.3456789"
    assert shorten_numbers(reason) == "Module.layers.1.0.forward input 1 vs 2.5e-07, ratio 12.35"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_in_a_log_is_plain_lines_in_item_order() -> None:
    log = io.StringIO()
    bar = ProgressBar(3, stream=log)
    for index, label in ((0, "step0"), (2, "step2"), (1, "step1")):  # completion order
        bar.advance(label, index)
    assert "\r" not in log.getvalue()
    assert log.getvalue().splitlines() == ["1/3 step0 done", "2/3 step1 done", "3/3 step2 done"]


def test_progress_on_a_terminal_redraws_one_line() -> None:
    tty = _Tty()
    bar = ProgressBar(2, stream=tty)
    bar.advance("step0", 0)
    bar.advance("step1", 1)
    assert tty.getvalue().count("\r") == 2 and tty.getvalue().endswith("\n")

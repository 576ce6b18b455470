"""Every verdict rule of the spec (msprobe's statistics rules), on
hand-written dump.json pairs. tests/test_compare_msprobe.py checks the same
rules against msprobe's own compare.

Expected verdicts, differences and relative errors are written out here,
worked out by hand from the numbers in each case.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

import pytest
from compare_fixtures import INF, NAN, entry, tensor, write_dump

from graphprobe import _compare

E = "Module.fc.Linear.forward.0"


def run(tmp_path: Path, target: dict[str, Any], bench: dict[str, Any], **options: Any):
    t = write_dump(tmp_path / "target.json", target)
    b = write_dump(tmp_path / "bench.json", bench)
    return _compare.compare_files(str(t), str(b), _compare.CompareOptions(**options))


def by_name(result) -> dict[str, Any]:
    return {r.name: r for r in result.rows}


def same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    if math.isnan(b):
        return math.isnan(a)
    return a == pytest.approx(b, rel=1e-12, abs=1e-12)


# (case id, target entry, bench entry, options, {row suffix: expected Result})
ENTRY_RULES = [
    ("identical", entry([tensor(4.0)], [tensor(8.0)]), entry([tensor(4.0)], [tensor(8.0)]), {},
     {"input.0": "pass", "output.0": "pass"}),
    # in 5 %, out 60 %: error (60 > 50 with inputs < 10) and warning (60 > 10 x 5).
    ("error rule", entry([tensor(10.5)], [tensor(16.0)]), entry([tensor(10.0)], [tensor(10.0)]), {},
     {"input.0": "pass", "output.0": "error"}),
    # in 5 %, out 40 %: below 50 and below 10 x 5 = 50: pass.
    ("below both", entry([tensor(10.5)], [tensor(14.0)]), entry([tensor(10.0)], [tensor(10.0)]), {},
     {"input.0": "pass", "output.0": "pass"}),
    # in 2 %, out 30 %: not an error (30 < 50), a warning (30 > 10 x 2).
    ("warning ratio", entry([tensor(10.2)], [tensor(13.0)]), entry([tensor(10.0)], [tensor(10.0)]), {},
     {"input.0": "pass", "output.0": "warning"}),
    # in 20 %, out 300 %: inputs not all < 10 so no error; 300 > 10 x 20: warning.
    ("inputs already off", entry([tensor(12.0)], [tensor(40.0)]), entry([tensor(10.0)], [tensor(10.0)]), {},
     {"input.0": "pass", "output.0": "warning"}),
    # in 20 %, out 150 %: 150 < 200: pass.
    ("proportional", entry([tensor(12.0)], [tensor(25.0)]), entry([tensor(10.0)], [tensor(10.0)]), {},
     {"input.0": "pass", "output.0": "pass"}),
    # inputs exact: out 11 % > 10 %: warning; out 9 %: pass.
    ("zero input warns", entry([tensor(10.0)], [tensor(11.1)]), entry([tensor(10.0)], [tensor(10.0)]), {},
     {"output.0": "warning"}),
    ("zero input passes", entry([tensor(10.0)], [tensor(10.9)]), entry([tensor(10.0)], [tensor(10.0)]), {},
     {"output.0": "pass"}),
    # no tensor input: out 60 % -> error (every input, vacuously, < 10 %).
    ("no inputs", entry([], [tensor(16.0)]), entry([], [tensor(10.0)]), {}, {"output.0": "error"}),
    # the largest input counts: 1 % and 8 %; out 70 % < 10 x 8 = 80 but > 50: error only.
    ("largest input", entry([tensor(10.1), tensor(10.8)], [tensor(17.0)]),
     entry([tensor(10.0), tensor(10.0)], [tensor(10.0)]), {},
     {"input.0": "pass", "input.1": "pass", "output.0": "error"}),
    # kwargs are inputs too: kwarg at 30 % blocks the error rule.
    ("kwarg input", entry([tensor(10.0)], [tensor(16.0)], {"mask": tensor(13.0)}),
     entry([tensor(10.0)], [tensor(10.0)], {"mask": tensor(10.0)}), {},
     {"input.0": "pass", "input.mask": "pass", "output.0": "pass"}),
    # thresholds from options: out 35 % with output_error_pct=30 -> error.
    ("custom output threshold", entry([tensor(10.5)], [tensor(13.5)]), entry([tensor(10.0)], [tensor(10.0)]),
     {"output_error_pct": 30.0, "warning_ratio": 100.0}, {"output.0": "error"}),
    # warning_ratio 2: in 5 %, out 12 % > 10 %: warning.
    ("custom ratio", entry([tensor(10.5)], [tensor(11.2)]), entry([tensor(10.0)], [tensor(10.0)]),
     {"warning_ratio": 2.0}, {"output.0": "warning"}),
    # The noise floor (graphprobe's addition, only with graphprobe_verdicts):
    # in 1e-8 %, out 5e-4 % is 50000x the input's, but below noise_pct
    # (1e-3 %): rounding noise, pass. msprobe (the default) warns. Out 2e-3 %
    # is above the floor: warning. A raised floor silences it again.
    ("noise floor", entry([tensor(10.0 * (1 + 1e-10))], [tensor(10.0 * (1 + 5e-6))]),
     entry([tensor(10.0)], [tensor(10.0)]), {"graphprobe_verdicts": True}, {"output.0": "pass"}),
    ("no noise floor by default", entry([tensor(10.0 * (1 + 1e-10))], [tensor(10.0 * (1 + 5e-6))]),
     entry([tensor(10.0)], [tensor(10.0)]), {}, {"output.0": "warning"}),
    ("above noise floor", entry([tensor(10.0 * (1 + 1e-10))], [tensor(10.0 * (1 + 2e-5))]),
     entry([tensor(10.0)], [tensor(10.0)]), {"graphprobe_verdicts": True}, {"output.0": "warning"}),
    ("raised noise floor", entry([tensor(10.0 * (1 + 1e-10))], [tensor(10.0 * (1 + 2e-5))]),
     entry([tensor(10.0)], [tensor(10.0)]), {"noise_pct": 0.01, "graphprobe_verdicts": True}, {"output.0": "pass"}),
    # msprobe warns on the entry's first output, whichever output is off.
    ("warning on first output", entry([tensor(10.0)], [tensor(10.0), tensor(11.1)]),
     entry([tensor(10.0)], [tensor(10.0), tensor(10.0)]), {}, {"output.0": "warning", "output.1": "pass"}),
    # An input whose bench is 0 has NormRelativeErr "inf", which msprobe
    # leaves out of the largest input: the in-place case of issue #19.
    ("inf input ignored", entry([tensor(1.0), {"type": "int", "value": 1}], [tensor(20.0)]),
     entry([tensor(0.0), {"type": "int", "value": 1}], [tensor(10.0)]), {},
     {"input.0": "pass", "input.1": "pass", "output.0": "error"}),
    # An output whose bench is 0 ("inf") counts as above 50 %.
    ("inf output counts", entry([tensor(1.0)], [tensor(1.0)]), entry([tensor(1.0)], [tensor(0.0)]), {},
     {"output.0": "error"}),
    # Module parameters count among the inputs: the weight explains the output.
    ("parameters are inputs", {**entry([tensor(1.0)], [tensor(30.0)]), "parameters": {"weight": tensor(3.0)}},
     {**entry([tensor(1.0)], [tensor(10.0)]), "parameters": {"weight": tensor(1.0)}}, {},
     {"input.0": "pass", "parameters.weight": "pass", "output.0": "pass"}),
    # A non-tensor argument whose value differs is an error.
    ("scalar argument", entry([tensor(1.0), {"type": "int", "value": 2}], [tensor(1.0)]),
     entry([tensor(1.0), {"type": "int", "value": 3}], [tensor(1.0)]), {}, {"input.1": "error", "output.0": "pass"}),
    # NaN target Max with finite bench Max: error on that row, whatever the norms.
    ("nan max", entry([tensor(10.0, mx=NAN)], [tensor(10.0)]), entry([tensor(10.0)], [tensor(10.0)]), {},
     {"input.0": "error", "output.0": "pass"}),
    ("-inf min", entry([tensor(10.0)], [tensor(10.0, mn=-INF)]), entry([tensor(10.0)], [tensor(10.0)]), {},
     {"output.0": "error"}),
    ("inf max", entry([tensor(10.0)], [tensor(10.0, mx=INF)]), entry([tensor(10.0)], [tensor(10.0)]), {},
     {"output.0": "error"}),
    # NaN on both sides is not the target's fault.
    ("nan both", entry([tensor(10.0)], [tensor(10.0, mx=NAN)]), entry([tensor(10.0)], [tensor(10.0, mx=NAN)]), {},
     {"output.0": "pass"}),
    ("dtype", entry([tensor(10.0)], [tensor(10.0, dtype="torch.float16")]), entry([tensor(10.0)], [tensor(10.0)]),
     {}, {"input.0": "pass", "output.0": "error"}),
    ("shape", entry([tensor(10.0, shape=[3, 2])], [tensor(10.0)]), entry([tensor(10.0)], [tensor(10.0)]), {},
     {"input.0": "error", "output.0": "pass"}),
    ("requires_grad", entry([tensor(10.0, requires_grad=True)], [tensor(10.0)]),
     entry([tensor(10.0)], [tensor(10.0)]), {}, {"input.0": "error"}),
    # requires_grad recorded on one side only: msprobe compares "N/A" with
    # "False" and calls it an error.
    ("requires_grad absent", entry([tensor(10.0, requires_grad=None)], [tensor(10.0)]),
     entry([tensor(10.0)], [tensor(10.0)]), {}, {"input.0": "error"}),
    # error outranks warning on the same row (60 % is both).
    ("error outranks", entry([tensor(10.1)], [tensor(16.0)]), entry([tensor(10.0)], [tensor(10.0)]), {},
     {"output.0": "error"}),
]


@pytest.mark.parametrize("case", ENTRY_RULES, ids=[c[0] for c in ENTRY_RULES])
def test_entry_rules(tmp_path: Path, case) -> None:
    _, t, b, options, expected = case
    rows = by_name(run(tmp_path, {E: t}, {E: b}, **options))
    for suffix, verdict in expected.items():
        row = rows[f"{E}.{suffix}"]
        assert row.result == verdict, (suffix, row.reasons)
        assert row.match == "matched"
        assert (row.reasons == []) == (verdict == "pass")


def test_error_outranks_keeps_both_reasons(tmp_path: Path) -> None:
    rows = by_name(run(tmp_path, {E: entry([tensor(10.1)], [tensor(16.0)])}, {E: entry([tensor(10.0)], [tensor(10.0)])}))
    reasons = rows[f"{E}.output.0"].reasons
    assert len(reasons) == 2
    assert any("> 50%" in r for r in reasons) and any("10x" in r for r in reasons)


# (id, target stats, bench stats, expected diffs, expected relative errors in %)
METRICS = [
    ("plain", dict(mx=3.0, mn=-2.0, mean=0.5, norm=6.0), dict(mx=2.0, mn=-4.0, mean=0.25, norm=8.0),
     (1.0, 2.0, 0.25, -2.0), (50.0, 50.0, 100.0, 25.0)),
    ("bench zero", dict(mx=1.0, mn=0.0, mean=0.5, norm=2.0), dict(mx=0.0, mn=0.0, mean=0.0, norm=2.0),
     (1.0, 0.0, 0.5, 0.0), (INF, 0.0, INF, 0.0)),
    ("nan stays nan", dict(mx=NAN, mn=-1.0, mean=NAN, norm=NAN), dict(mx=1.0, mn=-1.0, mean=0.0, norm=5.0),
     (NAN, 0.0, NAN, NAN), (NAN, 0.0, NAN, NAN)),
    ("inf equal", dict(mx=INF, mn=-1.0, mean=0.0, norm=1.0), dict(mx=INF, mn=-1.0, mean=0.0, norm=1.0),
     (0.0, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0)),
    # msprobe compares the printed values: None and None, NaN and NaN are "0".
    ("missing stats", dict(mx=1.0, mn=0.0, mean=None, norm=None), dict(mx=1.0, mn=0.0, mean=None, norm=None),
     (0.0, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0)),
    ("nan both", dict(mx=NAN, mn=-1.0, mean=NAN, norm=NAN), dict(mx=NAN, mn=-1.0, mean=NAN, norm=NAN),
     (0.0, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0)),
    # One side None: "Diff" in both cells, no number.
    ("none vs number", dict(mx=1.0, mn=0.0, mean=None, norm=1.0), dict(mx=1.0, mn=0.0, mean=0.5, norm=1.0),
     (0.0, 0.0, None, 0.0), (0.0, 0.0, None, 0.0)),
    # Integers against floats: 1 and 1.0 print differently, so they are
    # subtracted (0 %), and 0 against 0.0 is a bench of 0: "inf".
    ("int vs float", dict(mx=1, mn=0, mean=1.0, norm=2.0), dict(mx=1.0, mn=0.0, mean=1.0, norm=2.0),
     (0.0, 0.0, 0.0, 0.0), (0.0, INF, 0.0, 0.0)),
    # An infinite bench against a number: "-inf"; an infinite target: "inf".
    ("infinities", dict(mx=5.0, mn=-INF, mean=0.0, norm=1.0), dict(mx=INF, mn=-1.0, mean=0.0, norm=1.0),
     (-INF, -INF, 0.0, 0.0), (-INF, -INF, 0.0, 0.0)),
]


@pytest.mark.parametrize("case", METRICS, ids=[c[0] for c in METRICS])
def test_metrics(tmp_path: Path, case) -> None:
    _, t, b, diffs, rels = case
    rows = by_name(run(tmp_path, {E: entry([], [tensor(**t)])}, {E: entry([], [tensor(**b)])}))
    row = rows[f"{E}.output.0"]
    assert all(same(a, e) for a, e in zip(row.diff, diffs)), row.diff
    assert all(same(a, e) for a, e in zip(row.rel_err_pct, rels)), row.rel_err_pct


def test_unmatched_rows(tmp_path: Path) -> None:
    target = {E: entry([tensor(1.0)], [tensor(1.0)]), "Module.extra.ReLU.forward.0": entry([tensor(1.0)], [])}
    bench = {E: entry([tensor(1.0)], [tensor(1.0), tensor(2.0)])}
    # msprobe's Result for a row without a bench is pass; Match tells them
    # apart, and the "unmatched" count counts them (also under their Result).
    result = run(tmp_path, target, bench)
    got = [(r.name, r.match, r.result) for r in result.rows]
    assert got == [
        (f"{E}.input.0", "matched", "pass"),
        (f"{E}.output.0", "matched", "pass"),
        ("Module.extra.ReLU.forward.0.input.0", "unmatched-target", "pass"),
        (f"{E}.output.1", "unmatched-bench", "pass"),
    ]
    assert result.counts == {"pass": 4, "warning": 0, "error": 0, "unmatched": 2}
    # graphprobe's verdicts: their own Result.
    result = run(tmp_path, target, bench, graphprobe_verdicts=True)
    assert [r.result for r in result.rows] == ["pass", "pass", "unmatched", "unmatched"]
    assert result.counts == {"pass": 2, "warning": 0, "error": 0, "unmatched": 2}


def test_unmatched_row_with_inf_is_an_error(tmp_path: Path) -> None:
    # msprobe's inf/NaN rule looks at rows without a bench too.
    target = {"Module.extra.ReLU.forward.0": entry([tensor(1.0)], [tensor(1.0, mx=INF)])}
    result = run(tmp_path, target, {E: entry([tensor(1.0)], [tensor(1.0)])})
    assert [r.result for r in result.rows[:2]] == ["pass", "error"]


def test_row_names_nested_and_kwargs(tmp_path: Path) -> None:
    # Every leaf is a row, non-tensor values and nulls included; nested lists
    # and dicts add levels; parameters come before outputs (msprobe's order).
    t = entry(
        [{"type": "int", "value": 3}, [tensor(1.0), None, tensor(2.0)], []],
        [{"a": tensor(1.0), "b": [tensor(1.0)]}],
        {"mask": tensor(1.0), "flag": {"type": "bool", "value": True}},
    )
    t["parameters"] = {"weight": tensor(1.0)}
    result = run(tmp_path, {E: t}, {E: t})
    assert [(r.name, r.target_dtype) for r in result.rows] == [
        (f"{E}.input.0", "<class 'int'>"),
        (f"{E}.input.1.0", "torch.float32"),
        (f"{E}.input.1.1", "N/A"),
        (f"{E}.input.1.2", "torch.float32"),
        (f"{E}.input.mask", "torch.float32"),
        (f"{E}.input.flag", "<class 'bool'>"),
        (f"{E}.parameters.weight", "torch.float32"),
        (f"{E}.output.0.a", "torch.float32"),
        (f"{E}.output.0.b.0", "torch.float32"),
    ]
    assert {r.result for r in result.rows} == {"pass"}


def test_backward_calls_are_renumbered(tmp_path: Path) -> None:
    # msprobe matches the n-th backward call of a module, in dump order, with
    # the bench's n-th, whatever indices they were written with.
    target = {"Module.fc.Linear.backward.3": {"input": [tensor(1.0)], "output": [tensor(1.0)]},
              "Module.fc.Linear.backward.5": {"input": [tensor(1.0)], "output": [tensor(1.0)]}}
    bench = {"Module.fc.Linear.backward.0": {"input": [tensor(1.0)], "output": [tensor(1.0)]},
             "Module.fc.Linear.backward.1": {"input": [tensor(1.0)], "output": [tensor(1.0)]}}
    result = run(tmp_path, target, bench)
    assert [(r.target_name, r.bench_name) for r in result.rows] == [
        ("Module.fc.Linear.backward.3.input.0", "Module.fc.Linear.backward.0.input.0"),
        ("Module.fc.Linear.backward.3.output.0", "Module.fc.Linear.backward.0.output.0"),
        ("Module.fc.Linear.backward.5.input.0", "Module.fc.Linear.backward.1.input.0"),
        ("Module.fc.Linear.backward.5.output.0", "Module.fc.Linear.backward.1.output.0"),
    ]


def test_dtypes_that_msprobe_does_not_pair(tmp_path: Path) -> None:
    # float16 against float32 pairs (and is a dtype error); int64 against
    # float32 does not pair at all.
    t = {E: entry([tensor(1.0, dtype="torch.float16")], [tensor(1.0, dtype="torch.int64")])}
    result = run(tmp_path, t, {E: entry([tensor(1.0)], [tensor(1.0)])})
    got = [(r.name, r.match, r.result) for r in result.rows]
    assert got == [(f"{E}.input.0", "matched", "error"), (f"{E}.output.0", "unmatched-target", "pass"),
                   (f"{E}.output.0", "unmatched-bench", "pass")]


def test_first_divergence_in_execution_order(tmp_path: Path) -> None:
    # a: exact; b: inputs exact, outputs 20 % off -> the first divergence;
    # c: inputs already 20 % off -> downstream, not the origin.
    def dump(k: float) -> dict[str, Any]:
        return {
            "Module.a.Linear.forward.0": entry([tensor(10.0)], [tensor(10.0)]),
            "Module.b.Linear.forward.0": entry([tensor(10.0)], [tensor(10.0 * k)]),
            "Module.c.Linear.forward.0": entry([tensor(10.0 * k)], [tensor(20.0 * k)]),
        }

    result = run(tmp_path, dump(1.2), dump(1.0))
    assert result.first_divergence == "Module.b.Linear.forward.0"
    assert result.first_divergence_index == 1
    marked = [r.name for r in result.rows if r.first_divergence]
    assert marked == ["Module.b.Linear.forward.0.input.0", "Module.b.Linear.forward.0.output.0"]
    # The first divergence is graphprobe's rule, not msprobe's warning_pct:
    # moving that changes nothing; a noise floor scaled to 1e-4 x 1e4 = 100 %
    # puts the 20 % below noise, and nothing diverges.
    assert run(tmp_path, dump(1.2), dump(1.0), warning_pct=25.0).first_divergence == "Module.b.Linear.forward.0"
    clean = run(tmp_path, dump(1.2), dump(1.0), floor_scale=1e4)
    assert clean.first_divergence is None


def test_first_divergence_error_row_counts_as_bad(tmp_path: Path) -> None:
    # Norms exact, but a dtype change on the output: an error, so bad.
    t = {"Module.a.Cast.forward.0": entry([tensor(1.0)], [tensor(1.0, dtype="torch.float16")])}
    b = {"Module.a.Cast.forward.0": entry([tensor(1.0)], [tensor(1.0)])}
    assert run(tmp_path, t, b).first_divergence == "Module.a.Cast.forward.0"


def test_fuzzy_matching_ignores_call_indices(tmp_path: Path) -> None:
    t = {
        "Module.fc.Linear.forward.1": entry([tensor(1.0)], [tensor(2.0)]),
        "Torch.matmul.4.forward": entry([tensor(3.0)], [tensor(4.0)]),
        "Module.fc.Linear.forward.2": entry([tensor(5.0)], [tensor(6.0)]),
    }
    b = {
        "Module.fc.Linear.forward.0": entry([tensor(1.0)], [tensor(2.0)]),
        "Torch.matmul.0.forward": entry([tensor(3.0)], [tensor(4.0)]),
        "Module.fc.Linear.forward.1": entry([tensor(5.0)], [tensor(6.0)]),
    }
    exact = run(tmp_path, t, b)
    assert exact.counts["unmatched"] == 8  # only Linear.forward.1 shares a name, and its values differ
    fuzzy = run(tmp_path, t, b, fuzzy=True)
    assert fuzzy.counts == {"pass": 6, "warning": 0, "error": 0, "unmatched": 0}
    pairs = [(r.target_name, r.bench_name) for r in fuzzy.rows]
    assert pairs[0] == ("Module.fc.Linear.forward.1.input.0", "Module.fc.Linear.forward.0.input.0")
    assert pairs[2] == ("Torch.matmul.4.forward.input.0", "Torch.matmul.0.forward.input.0")
    assert pairs[4] == ("Module.fc.Linear.forward.2.input.0", "Module.fc.Linear.forward.1.input.0")


def test_csv_columns_and_cells(tmp_path: Path) -> None:
    t = {E: entry([tensor(4.0, mx=3.0, mn=-2.0, mean=0.5)], [tensor(6.0, mx=NAN, mean=1.0)]),
         "Module.only.ReLU.forward.0": entry([], [tensor(1.0)])}
    b = {E: entry([tensor(4.0, mx=2.0, mn=-2.0, mean=0.5)], [tensor(4.0, mx=1.0, mean=0.0)])}
    result = run(tmp_path, t, b)
    out = tmp_path / "out.csv"
    result.write_csv(str(out))
    rows = list(csv.reader(io.StringIO(out.read_text())))
    spec_columns = (
        "NPU Name, Bench Name, NPU Dtype, Bench Dtype, NPU Tensor Shape, Bench Tensor Shape, NPU Requires_grad, "
        "Bench Requires_grad, Max diff, Min diff, Mean diff, L2norm diff, MaxRelativeErr, MinRelativeErr, "
        "MeanRelativeErr, NormRelativeErr, NPU max, NPU min, NPU mean, NPU l2norm, Bench max, Bench min, "
        "Bench mean, Bench l2norm, Requires_grad Consistent, Result, Err_message"
    ).split(", ")
    assert rows[0][: len(spec_columns)] == spec_columns
    assert rows[0][len(spec_columns):] == ["Match", "First Divergence"]
    head = rows[0]
    inp = dict(zip(head, rows[1]))
    assert inp["NPU Name"] == f"{E}.input.0" and inp["NPU Tensor Shape"] == "[2, 3]"
    assert inp["Max diff"] == "1" and inp["MaxRelativeErr"] == "50%" and inp["NormRelativeErr"] == "0"
    assert inp["Result"] == "pass" and inp["Err_message"] == "[]" and inp["Match"] == "matched"
    out0 = dict(zip(head, rows[2]))
    assert out0["Max diff"] == "Nan" and out0["MaxRelativeErr"] == "Nan"
    assert out0["MeanRelativeErr"] == "inf"  # bench mean 0
    assert out0["NormRelativeErr"] == "50%" and out0["Result"] == "error"
    assert out0["First Divergence"] == "yes"
    assert out0["Err_message"].startswith('["target Max is Nan')
    only = dict(zip(head, rows[3]))
    assert only["Bench Name"] == "N/A" and only["Result"] == "pass" and only["Match"] == "unmatched-target"
    assert len(rows) == 4


def test_thresholds_are_checked() -> None:
    with pytest.raises(ValueError):
        _compare.compare_files("/nonexistent", "/nonexistent", _compare.CompareOptions(warning_pct=-1.0))

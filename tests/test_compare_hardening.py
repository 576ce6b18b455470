"""Compare against careless users and hostile dumps (issue 17): unique output
names, CSV formula injection, non-UTF-8 paths, terminal escapes, duplicate
keys, nesting limits, out-of-memory, and the --fail-on gate. No torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import unicodedata
from pathlib import Path

import pytest
from compare_fixtures import cli, entry, read_csv, simple_model_dump, tensor, write_dump
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import graphprobe.compare.runner as gpc
from graphprobe import _compare

SRC = Path(__file__).resolve().parents[1] / "src"
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
E = "Module.fc.Linear.forward.0"


# -- item 4: two compares in the same second ---------------------------------

def test_compares_in_the_same_second_never_overwrite(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(gpc.time, "strftime", lambda fmt: "20260101000000")
    t = write_dump(tmp_path / "t.json", simple_model_dump(2.0, 0))
    b = write_dump(tmp_path / "b.json", simple_model_dump())
    out = tmp_path / "out"
    runs = [gpc.compare(t, b, out, progress=False) for _ in range(3)]
    csvs = [r.outcomes[0].csv_path for r in runs]
    reports = [r.outcomes[0].report_path for r in runs]
    assert len(set(csvs)) == 3 and len(set(reports)) == 3
    assert csvs[0].name == "compare_result_0_20260101000000.csv"
    assert [p.name for p in csvs[1:]] == ["compare_result_0_20260101000000_1.csv", "compare_result_0_20260101000000_2.csv"]
    for p in csvs:
        assert len(read_csv(p)) == 6  # each holds its own full result
    # A failed pair gives its claimed names back.
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    run = gpc.compare(bad, b, out, progress=False)
    assert run.outcomes[0].error and not run.outcomes[0].csv_path
    assert sorted(p.name for p in out.iterdir()) == sorted([p.name for p in csvs] + [p.name for p in reports])


# -- item 5: CSV formula injection --------------------------------------------

FORMULA_START = "=+-@\t\r"


@SETTINGS
@given(lead=st.sampled_from(list(FORMULA_START) + ["a", "M", " ", "'"]),
       rest=st.text(st.characters(blacklist_categories=("Cs",)), max_size=12),
       dtype=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=10))
def test_csv_text_cells_cannot_be_formulas(tmp_path: Path, lead: str, rest: str, dtype: str) -> None:
    name = lead + rest.replace(".", "_")
    t = write_dump(tmp_path / "t.json", {name: entry([tensor(-2.5, dtype=dtype)], [tensor(-1.0, mx=-3.0, dtype=dtype)])})
    csv_path = tmp_path / "out.csv"
    _compare.compare_files(str(t), str(t)).write_csv(str(csv_path))
    rows = read_csv(csv_path)
    assert len(rows) == 2
    for row, part in zip(rows, ("input.0", "output.0")):
        for col, original in (("NPU Name", f"{name}.{part}"), ("Bench Name", f"{name}.{part}"),
                              ("NPU Dtype", dtype), ("Bench Dtype", dtype)):
            expected = "'" + original if original[0] in FORMULA_START else original
            expected = expected.replace("\0", "\\u0000")  # a NUL is written as its escape (issue 28 D20)
            assert row[col] == expected, (col, row[col])
        # Numbers stay numbers, also negative ones.
        assert float(row["NPU l2norm"]) < 0 and row["NPU l2norm"][0] == "-"


# -- item 7: non-UTF-8 paths ---------------------------------------------------

@pytest.mark.skipif(sys.platform != "linux", reason="file names are bytes on Linux")
def test_non_utf8_paths_exit_2_with_a_clear_error(tmp_path: Path, capsys) -> None:
    good = write_dump(tmp_path / "good.json", simple_model_dump())
    raw = os.fsencode(tmp_path) + b"/t\xff"
    os.mkdir(raw)
    with open(raw + b"/dump.json", "w") as f:
        json.dump({"task": "statistics", "data": {}}, f)
    odd = os.fsdecode(raw)  # what argv holds: a lone surrogate for the byte
    code, _, err = cli(capsys, "compare", odd, str(good), "-o", str(tmp_path / "o"))
    assert code == 2 and "TARGET" in err and "not valid UTF-8" in err and "\\xff" in err
    code, _, err = cli(capsys, "compare", str(good), str(good), "-o", odd + "/out")
    assert code == 2 and "output_dir" in err and "not valid UTF-8" in err
    code, _, err = cli(capsys, "compare", str(good) + "\0x", str(good))
    assert code == 2 and "NUL" in err


# -- item 8: out of memory is a clear error, exit 2 ---------------------------

def test_out_of_memory_is_exit_2_with_a_message(tmp_path: Path) -> None:
    data = {f"Module.l{i}.Linear.forward.0": entry([tensor(1.0 + i)], [tensor(2.0 + i)]) for i in range(60_000)}
    t = write_dump(tmp_path / "t.json", data)
    script = textwrap.dedent(
        f"""
        import resource, sys
        from graphprobe.cli import main
        import graphprobe._compare, graphprobe.compare.command, graphprobe.compare.report  # loaded before the limit
        with open("/proc/self/status") as f:
            vm = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize"))
        # Enough to start, far too little for two 30 MB dumps' records.
        resource.setrlimit(resource.RLIMIT_AS, (vm + (24 << 20), resource.RLIM_INFINITY))
        sys.exit(main(["compare", {str(t)!r}, {str(t)!r}, "-o", {str(tmp_path / "o")!r}, "-q"]))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(SRC)})
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "out of memory" in proc.stderr and "Traceback" not in proc.stderr
    assert not list((tmp_path / "o").glob("*.csv"))  # no empty claimed file left


# -- item 9: terminal escapes --------------------------------------------------

UNSAFE = ("Cc", "Cf", "Cs", "Zl", "Zp")


@SETTINGS
@given(name=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=16).filter(lambda s: "." not in s))
def test_nothing_printed_holds_a_control_character(tmp_path: Path, capsys, name: str) -> None:
    t = write_dump(tmp_path / "t.json", {name + "\x1b[2J\r": entry([tensor(1.0)], [tensor(9.0)])})
    b = write_dump(tmp_path / "b.json", {name + "\x1b[2J\r": entry([tensor(1.0)], [tensor(1.0)])})
    code, out, err = cli(capsys, "compare", str(t), str(b), "-o", str(tmp_path / "o"), "--no-report",
                         "--fail-on", "warning")
    assert code == 1
    assert "\\x1b[2J\\r" in out  # shown, escaped
    for text in (out, err):
        bad = [c for line in text.split("\n") for c in line if unicodedata.category(c) in UNSAFE]
        assert not bad, bad


# -- item 10 (reader side): the nesting the dumper writes is read -------------

def nested(depth: int) -> object:
    value: object = tensor(1.0)
    for _ in range(depth):
        value = [value]
    return value


def test_reader_accepts_what_the_dumper_may_write_and_names_the_limit(tmp_path: Path, capsys) -> None:
    ok = write_dump(tmp_path / "ok.json", {E: entry([tensor(1.0)], [nested(128)])})
    rows = _compare.compare_files(str(ok), str(ok)).rows
    assert rows[1].name == E + ".output" + ".0" * 129
    deep = tmp_path / "deep.json"
    deep.write_text(json.dumps({"task": "statistics", "data": {E: entry([tensor(1.0)], [nested(300)])}}))
    code, _, err = cli(capsys, "compare", str(deep), str(ok), "-o", str(tmp_path / "o"))
    assert code == 2
    assert "deep.json" in err and "nesting deeper than 256 levels" in err and "at most 32" in err


# -- item 12: duplicate keys ---------------------------------------------------

def reference_rows(doc: dict) -> list[tuple[str, float]]:
    """Row names and norms the way Python's json sees the document."""
    out = []
    for name, e in doc["data"].items():
        for part, suffix in (("input_args", "input"), ("output", "output")):
            for i, rec in enumerate(e.get(part, [])):
                out.append((f"{name}.{suffix}.{i}", rec["Norm"]))
    return out


def members(pairs: list[tuple[str, str]]) -> str:
    return "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in pairs) + "}"


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.integers(1, 3), st.floats(1, 100)),
                min_size=1, max_size=8),
       st.booleans())
def test_duplicate_keys_follow_python_json(tmp_path: Path, entries, dup_in_record: bool) -> None:
    items = []
    for name, n_out, norm in entries:
        outs = []
        for k in range(n_out):
            rec = [("type", '"torch.Tensor"'), ("dtype", '"torch.float32"'), ("shape", "[2]"), ("Norm", repr(norm + k))]
            if dup_in_record:
                rec.insert(0, ("Norm", "-1.0"))  # the later one must win
            outs.append(members(rec))
        items.append((f"Module.{name}.M.forward.0", members([("input_args", "[]"), ("output", "[" + ", ".join(outs) + "]")])))
    text = members([("task", '"statistics"'), ("data", members(items))])
    path = tmp_path / "dup.json"
    path.write_text(text)
    result = _compare.compare_files(str(path), str(path))
    got = [(r.name, r.target_stats[3]) for r in result.rows]
    assert got == reference_rows(json.loads(text))
    names = [name for name, _, _ in entries]
    repeated = len(names) != len(set(names))
    assert bool(result.notes) == (repeated or dup_in_record)
    if repeated:
        assert any("appears" in n and "the last one is used" in n and "dup.json" in n for n in result.notes)


def test_duplicate_keys_are_warned_by_the_cli(tmp_path: Path, capsys) -> None:
    rec = json.dumps(tensor(1.0))
    text = ('{"task": "statistics", "data": {"%s": {"output": [%s]},\n"%s": {"output": [%s]}}}' % (E, rec, E, rec))
    (tmp_path / "d.json").write_text(text)
    code, _, err = cli(capsys, "compare", str(tmp_path / "d.json"), str(tmp_path / "d.json"), "-o", str(tmp_path / "o"))
    assert code == 0
    assert f'warning: {tmp_path / "d.json"}: entry "{E}" appears 2 times' in err and "line 2" in err


# -- --fail-on: nothing compared, unmatched, missing partners -----------------

def test_fail_on_error_fails_when_nothing_was_compared(tmp_path: Path, capsys) -> None:
    t = write_dump(tmp_path / "t.json", {"Module.a.A.forward.0": entry([tensor(1.0)], [tensor(1.0)])})
    b = write_dump(tmp_path / "b.json", {"Module.b.B.forward.0": entry([tensor(1.0)], [tensor(1.0)])})
    args = ["compare", str(t), str(b), "-o", str(tmp_path / "o"), "--no-report"]
    code, _, err = cli(capsys, *args, "--fail-on", "error")
    assert code == 1
    assert "nothing was compared: all 4 rows are unmatched" in err
    assert cli(capsys, *args)[0] == 0  # no gate, no failure


@pytest.mark.parametrize("gate, code", [("error", 0), ("unmatched", 1), ("warning", 1)])
def test_fail_on_levels_with_an_extra_row(tmp_path: Path, capsys, gate: str, code: int) -> None:
    t = write_dump(tmp_path / "t.json", {E: entry([tensor(10.0)], [tensor(10.0)])})
    b = write_dump(tmp_path / "b.json", {E: entry([tensor(10.0)], [tensor(10.0), tensor(1.0)])})
    got, _, err = cli(capsys, "compare", str(t), str(b), "-o", str(tmp_path / "o"), "--no-report", "--fail-on", gate)
    assert got == code
    assert ("1 row(s) with Result unmatched" in err) == (code == 1)


@pytest.mark.parametrize("missing", ["rank", "step"])
def test_fail_on_warning_fails_on_a_missing_partner_while_every_row_passes(tmp_path: Path, capsys, missing) -> None:
    for side, ranks in (("t", [0, 1]), ("b", [0] if missing == "rank" else [0, 1])):
        for r in ranks:
            write_dump(tmp_path / side / "step0" / f"rank{r}" / "dump.json", simple_model_dump())
    if missing == "step":
        write_dump(tmp_path / "t" / "step1" / "rank0" / "dump.json", simple_model_dump())
    args = ["compare", str(tmp_path / "t"), str(tmp_path / "b"), "-o", str(tmp_path / "o"), "--no-report"]
    run = gpc.compare(tmp_path / "t", tmp_path / "b", tmp_path / "o0", progress=False, html=False)
    assert run.unpaired and all(run.total(v) == 0 for v in ("warning", "error", "unmatched"))  # every row passes
    code, _, err = cli(capsys, *args, "--fail-on", "warning")
    assert code == 1, err
    assert "without a partner" in err and ("step0/rank1" if missing == "rank" else "step1") in err
    assert cli(capsys, *args, "--fail-on", "error")[0] == 1


# -- tests that let planted bugs through ----------------------------------------

def test_ratio_rule_exactly_on_the_threshold_passes(tmp_path: Path, capsys) -> None:
    # Input 12.5 vs 10: NormRelativeErr exactly 25 %; output 35 vs 10: exactly
    # 250 % = warning_ratio (10) x 25 %. Not above it: pass. Inputs are not
    # all < 10 %, so the error rule does not apply either.
    assert (12.5 - 10) / 10 * 100 == 25.0 and (35.0 - 10) / 10 * 100 == 250.0  # exact in binary floating point
    for out_norm, verdict, code in ((35.0, "pass", 0), (35.0 + 1e-9, "warning", 1)):
        t = write_dump(tmp_path / "t.json", {E: entry([tensor(12.5)], [tensor(out_norm)])})
        b = write_dump(tmp_path / "b.json", {E: entry([tensor(10.0)], [tensor(10.0)])})
        out = tmp_path / f"o{verdict}"
        # --floor-scale 1e5 (floor 1000 %): nothing here is a first divergence
        # of graphprobe's, so that only msprobe's rule decides the exit.
        got, _, err = cli(capsys, "compare", str(t), str(b), "-o", str(out), "--no-report", "--fail-on", "warning",
                          "--floor-scale", "1e5")
        assert got == code, err
        (csv_path,) = out.glob("compare_result_*.csv")
        rows = {r["NPU Name"]: r for r in read_csv(csv_path)}
        assert rows[E + ".output.0"]["Result"] == verdict
        assert rows[E + ".input.0"]["NormRelativeErr"] == "25%"


def test_first_divergence_is_the_earlier_of_child_and_parent(tmp_path: Path) -> None:
    # Forward hooks complete children first: the Linear child is listed (and
    # ran) before its Block parent. Both have exact inputs and a 20 % output;
    # the origin is the child.
    child, parent = "Module.block.fc.Linear.forward.0", "Module.block.Block.forward.0"

    def dump(k: float) -> dict:
        return {child: entry([tensor(10.0)], [tensor(10.0 * k)]), parent: entry([tensor(10.0)], [tensor(20.0 * k)])}

    t = write_dump(tmp_path / "t.json", dump(1.2))
    b = write_dump(tmp_path / "b.json", dump(1.0))
    result = _compare.compare_files(str(t), str(b))
    assert result.first_divergence == child and result.first_divergence_index == 0
    assert [r.name for r in result.rows if r.first_divergence] == [child + ".input.0", child + ".output.0"]
    run = gpc.compare(t, b, tmp_path / "o", progress=False, html=False)
    assert run.outcomes[0].first_divergence == child

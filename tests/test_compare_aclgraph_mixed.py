"""msprobe's aclgraph tensor layout against what is not a tensor dump of the
dump.json layout (issue 36): a statistics dump pairs with it (item 21; it
was "the bench recorded nothing" though it held every entry), and a file
name that is not UTF-8 is skipped with a warning naming it (item 22; it
failed the whole compare with an error about graphprobe's own temporary
dump.json). Both dumps are written here by hand: the files with torch.save,
the statistics computed here in float64."""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from graphprobe.cli import main  # noqa: E402
from graphprobe.compare import compare  # noqa: E402

X = [0.5, -1.25, 2.0, 0.75, -0.5, 1.5]
W = [0.1, -0.2, 0.3, 0.4]


def _stats(values: list[float], shape: list[int]) -> dict[str, object]:
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": shape, "Max": max(values), "Min": min(values),
            "Mean": math.fsum(values) / len(values), "Norm": math.sqrt(math.fsum(v * v for v in values)),
            "requires_grad": False}


def _aclgraph(root: Path) -> Path:
    d = root / "step0" / "rank0" / "dump_tensor_data"
    d.mkdir(parents=True)
    torch.save(torch.tensor(X).reshape(2, 3), d / "Module.lin.Linear.0.input.0.pt")
    torch.save(torch.tensor(W).reshape(2, 2), d / "Module.lin.Linear.0.parameters.weight.pt")
    torch.save(torch.tensor(X[:2]), d / "Module.lin.Linear.0.output.pt")
    return root


def _statistics(root: Path, output: list[float]) -> Path:
    entry = {"input_args": [_stats(X, [2, 3]), {"type": "int", "value": 3}], "input_kwargs": {},
             "output": [_stats(output, [2])], "parameters": {"weight": _stats(W, [2, 2])}}
    doc = {"task": "statistics", "level": "L0", "framework": "pytorch", "dump_data_dir": None,
           "data": {"Module.lin.Linear.forward.0": entry}}
    (root / "step0" / "rank0").mkdir(parents=True)
    (root / "step0" / "rank0" / "dump.json").write_text(json.dumps(doc))
    return root


def _rows(run) -> dict[str, dict[str, str]]:
    (o,) = run.outcomes
    assert o.error is None, o.error
    with open(o.csv_path, newline="") as f:
        return {r["NPU Name"]: r for r in csv.DictReader(f)}


@pytest.mark.parametrize("acl_side", ["target", "bench"])
def test_an_aclgraph_dump_pairs_with_a_statistics_dump(tmp_path: Path, acl_side: str) -> None:
    acl = _aclgraph(tmp_path / "acl")
    stats = _statistics(tmp_path / "stats", X[:2])
    t, b = (acl, stats) if acl_side == "target" else (stats, acl)
    run = compare(t, b, tmp_path / "o", html=False, progress=False)
    (o,) = run.outcomes
    assert o.coverage is not None and not o.coverage.problem, o.coverage  # not "the bench recorded nothing"
    assert o.counts == {"pass": 3, "warning": 0, "error": 0, "unmatched": 0}, o.counts
    rows = _rows(run)
    assert sorted(rows) == ["Module.lin.Linear.forward.0.input.0", "Module.lin.Linear.forward.0.output.0",
                            "Module.lin.Linear.forward.0.parameters.weight"]
    assert all(r["Match"] == "matched" for r in rows.values())
    assert not run.unpaired


def test_the_statistics_are_compared_not_only_paired(tmp_path: Path, capsys) -> None:
    acl = _aclgraph(tmp_path / "acl")
    stats = _statistics(tmp_path / "stats", [v * 3 for v in X[:2]])  # the statistics side's output differs
    args = ["compare", str(acl), str(stats), "-o", str(tmp_path / "o"), "--no-report", "-q"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "recorded nothing" not in out
    assert main([*args, "--fail-on", "error"]) == 1
    assert "Module.lin.Linear.forward.0" in capsys.readouterr().err


def test_a_file_name_that_is_not_utf8_is_skipped_with_a_warning(tmp_path: Path, capsys) -> None:
    acl = _aclgraph(tmp_path / "acl")
    folder = acl / "step0" / "rank0" / "dump_tensor_data"
    with open(os.path.join(os.fsencode(folder), b"Module.lin.Linear.0.input.\xff\x1b.pt"), "wb") as f:
        torch.save(torch.ones(2), f)
    with pytest.warns(RuntimeWarning, match=r"not valid UTF-8 \(Module\.lin\.Linear\.0\.input\.\\xff\\x1b\.pt\)"):
        run = compare(acl, acl, tmp_path / "o", html=False, progress=False)
    assert len(_rows(run)) == 3  # the other files are compared
    code = main(["compare", str(acl), str(acl), "-o", str(tmp_path / "o2"), "--no-report", "-q"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "graphprobe-aclgraph" not in captured.err and "\x1b" not in captured.err

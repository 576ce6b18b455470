"""graphprobe compare reads msprobe's aclgraph tensor layout (issue 29 item 2):
two dumps in that layout, and one in each layout, pair by file names and get
the real-data metrics of compare/tensors.py.

References: the metrics of the faulty row are recomputed here in float64
from the eager tensors; the msprobe-style dump is written by hand with
torch.save, named as msprobe's aclgraph_dumper names files.
"""

from __future__ import annotations

import copy
import csv
import json
import os
from pathlib import Path

import custom_api_target as target
from custom_api_target import Net
import pytest
import torch

import graphprobe
from graphprobe.cli import main
from graphprobe.compare import compare

APIS = ["custom_api_target.scale_add", "custom_api_target.split_pair"]




X = [torch.randn(3, 8, generator=torch.Generator().manual_seed(s)) for s in range(2)]


def _dump(tmp_path: Path, name: str, layout: str, model: Net) -> Path:
    cfg = tmp_path / f"{name}.json"
    cfg.write_text(json.dumps({"dump_path": str(tmp_path / name), "task": "tensor", "level": "L0",
                               "tensor": {"custom_api": APIS, "layout": layout}}))
    dumper = graphprobe.AclGraphDumper(str(cfg))
    dumper.start(model)
    with torch.no_grad():
        for x in X:
            model(x)
            dumper.step()
    dumper.stop()
    return tmp_path / name


def _rows(run) -> dict[str, dict[str, str]]:
    (outcome,) = [o for o in run.outcomes if o.pair.step == 1] or run.outcomes[-1:]
    with open(outcome.csv_path, newline="") as f:
        return {r["NPU Name"]: r for r in csv.DictReader(f)}


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("layouts")
    clean = Net()
    faulty = copy.deepcopy(clean)
    with torch.no_grad():
        faulty.lin.weight[0, 0] += 0.5
    return {
        "acl": _dump(tmp, "acl", "aclgraph", clean),
        "json": _dump(tmp, "json", "dump_json", copy.deepcopy(clean)),
        "acl_faulty": _dump(tmp, "acl_faulty", "aclgraph", faulty),
        "models": (clean, faulty),
        "tmp": tmp,
    }


@pytest.mark.parametrize("t,b", [("acl", "acl"), ("acl", "json"), ("json", "acl")])
def test_clean_dumps_in_either_layout_pair_every_tensor(dumps, t, b):
    run = compare(dumps[t], dumps[b], dumps["tmp"] / f"out_{t}_{b}", html=False, progress=False)
    assert not run.unpaired and len(run.outcomes) == 2
    for o in run.outcomes:
        assert o.error is None
        assert o.counts == {"pass": 11, "warning": 0, "error": 0, "unmatched": 0}, (o.pair.label, o.counts)
    rows = _rows(run)
    # dump.json names of msprobe's file names; step 1 holds call index 1 in the aclgraph layout
    assert sorted(rows) == sorted([
        "Module.lin.Linear.forward.0.input.0", "Module.lin.Linear.forward.0.output.0",
        "Module.lin.Linear.forward.0.parameters.weight", "Module.lin.Linear.forward.0.parameters.bias",
        "split_pair.0.forward.input.0", "split_pair.0.forward.output.0", "split_pair.0.forward.output.1",
        "scale_add.0.forward.input.0", "scale_add.0.forward.input.1", "scale_add.0.forward.input.bias",
        "scale_add.0.forward.output.0",
    ])
    assert all(float(r["Cosine"]) == 1 and float(r["MaxAbsErr"]) == 0 for r in rows.values()), rows


@pytest.mark.parametrize("b", ["acl", "json"])
def test_a_fault_gets_the_real_data_metrics_computed_from_the_files(dumps, b):
    run = compare(dumps["acl_faulty"], dumps[b], dumps["tmp"] / f"out_faulty_{b}", html=False, progress=False)
    rows = _rows(run)
    clean, faulty = dumps["models"]
    with torch.no_grad():
        t, r = faulty.lin(X[1]).double(), clean.lin(X[1]).double()
    row = rows["Module.lin.Linear.forward.0.output.0"]
    assert float(row["MaxAbsErr"]) == pytest.approx((t - r).abs().max().item(), rel=1e-9)
    cosine = (t * r).sum() / (t.norm() * r.norm())
    assert float(row["Cosine"]) == pytest.approx(cosine.item(), abs=1e-6)
    assert rows["Module.lin.Linear.forward.0.input.0"]["MaxAbsErr"] == "0"
    assert float(rows["Module.lin.Linear.forward.0.parameters.weight"]["MaxAbsErr"]) == pytest.approx(0.5, rel=1e-6)
    assert "[" in row["Data_name"] and "Module.lin.Linear.1.output.pt" in row["Data_name"]


def test_an_msprobe_written_dump_pairs_with_a_graphprobe_dump(dumps, tmp_path):
    """msprobe's own files: its guide's folder name tensor_data, call indices
    counted from start() (step 1 of a run whose step 0 had five calls), a
    single output without an index; no parameters."""
    clean, _ = dumps["models"]
    folder = tmp_path / "msprobe" / "step1" / "rank0" / "tensor_data"
    folder.mkdir(parents=True)
    with torch.no_grad():
        h = clean.lin(X[1])
    torch.save(X[1].clone(), folder / "Module.lin.Linear.5.input.0.pt")
    torch.save(h.clone(), folder / "Module.lin.Linear.5.output.pt")
    run = compare(tmp_path / "msprobe" / "step1", dumps["json"] / "step1", tmp_path / "out", html=False,
                  progress=False)
    (o,) = run.outcomes
    rows = _rows(run)
    matched = {n: r for n, r in rows.items() if r["Bench Name"] != "N/A" and n != "N/A"}
    assert sorted(matched) == ["Module.lin.Linear.forward.0.input.0", "Module.lin.Linear.forward.0.output.0"]
    assert all(float(r["Cosine"]) == 1 for r in matched.values())


def test_the_cli_compares_aclgraph_dumps(dumps, tmp_path, capsys):
    assert main(["compare", str(dumps["acl"]), str(dumps["json"]), "-o", str(tmp_path / "o"), "--no-report", "-q",
                 "--fail-on", "unmatched"]) == 0
    assert main(["compare", str(dumps["acl_faulty"]), str(dumps["acl"]), "-o", str(tmp_path / "o2"), "--no-report",
                 "-q", "--fail-on", "error"]) == 1
    assert os.path.isdir(dumps["acl"] / "step0")  # the dumps are read, never changed


@pytest.mark.parametrize("name,parsed", [
    ("Module.encoder.layer.0.output.dense.Linear.3.input.0.pt",
     ("Module.encoder.layer.0.output.dense.Linear", 3, "input", ("0",))),
    ("scale_add.12.input_kwargs.bias.pt", ("scale_add", 12, "input_kwargs", ("bias",))),
    ("Aten.addmm.0.output.pt", ("Aten.addmm", 0, "output", ())),
    ("f.1.input.0.2.pt", ("f", 1, "input", ("0", "2"))),
    ("dump.json", None),
    ("noindex.input.0.pt", None),
])
def test_file_names_are_read_from_the_rightmost_call_index(name, parsed):
    from graphprobe.aclgraph_layout import parse_file_name

    got = parse_file_name(name)
    assert (None if got is None else (got.api, got.call, got.io, got.suffix)) == parsed


def test_a_call_without_tensors_takes_no_index_in_either_layout(tmp_path):
    """msprobe numbers a call when its first tensor is saved: ident(3) takes
    no index, so ident(x) is ident.0 in the aclgraph layout while dump.json
    calls it ident.1.forward; compare pairs the two."""

    class Ident(torch.nn.Module):
        def forward(self, x):
            target.ident(3)
            return target.ident(x) + 1

    roots = {}
    for layout in ("aclgraph", "dump_json"):
        cfg = tmp_path / f"{layout}.json"
        cfg.write_text(json.dumps({"dump_path": str(tmp_path / layout), "task": "tensor",
                                   "tensor": {"custom_api": ["custom_api_target.ident"], "layout": layout}}))
        dumper = graphprobe.AclGraphDumper(str(cfg))
        dumper.start(Ident())
        with torch.no_grad():
            Ident()(torch.ones(2))
        dumper.step()
        dumper.stop()
        roots[layout] = tmp_path / layout
    (proc,) = os.listdir(roots["aclgraph"] / "step0")
    assert sorted(os.listdir(roots["aclgraph"] / "step0" / proc / "dump_tensor_data")) == [
        "ident.0.input.0.pt", "ident.0.output.pt"]
    run = compare(roots["aclgraph"], roots["dump_json"], tmp_path / "out", html=False, progress=False)
    (o,) = run.outcomes
    assert o.counts == {"pass": 2, "warning": 0, "error": 0, "unmatched": 0}
    assert sorted(_rows(run)) == ["ident.0.forward.input.0", "ident.0.forward.output.0"]


def _hostile_folder(tmp_path: Path, *names: str) -> Path:
    data = tmp_path / "h" / "step0" / "pid1" / "dump_tensor_data"
    data.mkdir(parents=True)
    torch.save(torch.ones(2), data / "linear.0.output.pt")
    for name in names:
        torch.save(torch.ones(2), data / name)
    return tmp_path / "h"


@pytest.mark.parametrize("name", ["linear.0.input.999999999.pt", "linear.0.input.0.99999999999999999999999.pt"])
def test_a_file_name_with_a_huge_list_position_is_refused_naming_it(tmp_path, capsys, name):
    # Before: the mirror's dump.json got a list of a billion nulls (memory, then minutes of JSON).
    root = _hostile_folder(tmp_path, name)
    assert main(["compare", str(root), str(root), "-o", str(tmp_path / "out"), "-q"]) == 2
    err = capsys.readouterr().err
    assert name in err and "list position" in err and "allowed" in err, err


def test_a_name_with_a_non_ascii_digit_is_a_key_not_a_position(tmp_path):
    # "²" is a digit to str.isdigit() but int("²") raises: it must not crash the compare.
    root = _hostile_folder(tmp_path, "linear.0.input.².pt")
    run = compare(root, root, tmp_path / "out", html=False, progress=False)
    (o,) = run.outcomes
    assert o.error is None and o.counts["unmatched"] == 0


def test_a_fifo_named_like_a_tensor_file_is_not_opened(tmp_path):
    # torch.load on a FIFO blocks until a writer comes: the compare would never end.
    root = _hostile_folder(tmp_path)
    os.mkfifo(root / "step0" / "pid1" / "dump_tensor_data" / "linear.0.input.0.pt")
    run = compare(root, root, tmp_path / "out", html=False, progress=False)
    (o,) = run.outcomes
    assert o.error is None and o.counts["pass"] >= 1

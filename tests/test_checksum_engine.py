"""The checksum compare runs inside the engine's one read of each dump.json
(csrc/compare/checksums.h): its rows, counts, first bit-different entry,
summary line and checksum_result_*.csv must be exactly those of the Python
pass it replaced, kept in tests/checksum_compare_reference.py as the
reference (json.load + a walk of every record). Checked on hand-written
dumps that reach every corner of that walk, on seeded random ones, and on
real md5 dumps of a training step (forward, backward and parameters_grad
records)."""

from __future__ import annotations

import copy
import glob
import json
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import checksum_compare_reference as ref
import pytest
import torch
from torch import nn

import graphprobe
from graphprobe.compare import compare
from graphprobe.compare.checksums import checksum_lines, compare_checksums, has_checksums


def _rec(md5: Any = "00112233445566ff", dtype: Any = "torch.float32", shape: Any = (2, 3), **extra: Any) -> dict:
    r = {"type": "torch.Tensor", "dtype": dtype, "shape": list(shape) if isinstance(shape, tuple) else shape,
         "Max": 1.0, "Min": 0.0, "Mean": 0.5, "Norm": 1.0, "requires_grad": False}
    if md5 is not ...:
        r["md5"] = md5
    r.update(extra)
    return r


def _write(path: Path, data: dict | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data)
    else:
        path.write_text(json.dumps({"task": "statistics", "level": "L0", "framework": "pytorch",
                                    "dump_data_dir": None, "data": data}, indent=1))
    return path


def _outcome(tmp: Path, target: Path, bench: Path, tag: str) -> SimpleNamespace:
    pair = SimpleNamespace(target=str(target), bench=str(bench), label=tag, tag=tag)
    return SimpleNamespace(pair=pair, error=None, csv_path=tmp / f"compare_result_{tag}.csv")


def _check_same(tmp: Path, target: Path, bench: Path) -> None:
    """Engine and reference agree: rows, first bit-different, line, CSV bytes."""
    try:
        want = ref.compare_checksums(target, bench)
    except ValueError as e:
        with pytest.raises(ValueError) as got_error:
            compare_checksums(target, bench)
        assert str(got_error.value) == str(e)
        want = got = None
    else:
        got = compare_checksums(target, bench)
    if want is None:
        assert got is None
    else:
        assert got is not None
        assert [_row(r) for r in got.rows] == [_row(r) for r in want.rows]
        assert (got.first_different, got.first_different_entry) == (want.first_different, want.first_different_entry)
    assert has_checksums(target) == ref.has_checksums(target)
    ref_dir, new_dir = tmp / "ref_out", tmp / "new_out"
    (want_line,) = ref.checksum_lines(SimpleNamespace(outcomes=[_outcome(ref_dir, target, bench, "p")],
                                                      output_dir=ref_dir)) or [None]
    (got_line,) = checksum_lines(SimpleNamespace(outcomes=[_outcome(new_dir, target, bench, "p")],
                                                 output_dir=new_dir)) or [None]
    if want_line is None:
        assert got_line is None
        return
    assert got_line.replace(str(new_dir), str(ref_dir)) == want_line
    if "not comparable" not in want_line:
        assert (new_dir / "checksum_result_p.csv").read_bytes() == (ref_dir / "checksum_result_p.csv").read_bytes()


def _row(r: Any) -> tuple:
    return (r.name, r.entry, r.target, r.bench, r.target_dtype, r.bench_dtype, r.target_shape, r.bench_shape,
            r.result)


def _corner_data(md5_b: str = "00112233445566ff") -> tuple[dict, dict]:
    t = {
        # parts out of order: the walk takes input_args, input_kwargs, parameters, output, then the rest
        "Module.fc.Linear.forward.0": {
            "output": [_rec(), None, [_rec(md5="0000000000000001"), {"k": _rec()}]],
            "extra": {"deep": [_rec(md5=None)]},
            "parameters": {"weight": _rec(shape=(3, 3)), "bias": _rec(shape=[3])},
            "input_kwargs": {"scale": {"type": "float", "value": 2.0}, "mask": _rec(dtype="torch.bool")},
            "input_args": [_rec(), {"type": "int", "value": 3}, [_rec(md5="deadbeefdeadbeef")]],
        },
        # a parameters_grad entry: list positions are part of these names
        "Module.fc.Linear.parameters_grad.0": {"weight": [_rec(shape=(3, 3))], "bias": [_rec(shape=[3])]},
        # names that need quoting in the CSV; a tensor as a part itself
        'Torch.add,"odd".0.forward': {"input_args": [_rec(md5="aa"), _rec(md5="AABBCCDDEEFF0011")], "output": _rec()},
        "Torch.mul.0.forward": {"input_args": [_rec(dtype=None, shape=["a", 1.5, None]), _rec(dtype=None), _rec(dtype="")],
                                "output": [_rec(md5=5), _rec(md5="")]},
        "Torch.only_target.0.forward": {"output": [_rec()]},
        "Torch.dup.0.forward": {"output": [_rec(md5="0000000000000002"), _rec(md5="0000000000000002")]},
        "Torch.p2p.0.forward": {"input_args": [{"class_type": "torch.distributed.P2POp", "tensor": _rec()}]},
    }
    b = copy.deepcopy(t)
    del b["Torch.only_target.0.forward"]
    b["Torch.only_bench.0.forward"] = {"output": [_rec(), _rec(md5=None)]}
    b["Module.fc.Linear.forward.0"]["output"][0]["md5"] = md5_b            # same unless md5_b differs
    b["Module.fc.Linear.forward.0"]["parameters"]["bias"]["shape"] = [4]   # shape differs
    b["Module.fc.Linear.forward.0"]["input_kwargs"]["mask"]["dtype"] = "torch.uint8"  # dtype differs
    b["Torch.mul.0.forward"]["input_args"][0]["shape"] = ["a", 1.5, None]
    return t, b


def test_corners_of_the_walk_match_the_reference(tmp_path: Path) -> None:
    t, b = _corner_data()
    _check_same(tmp_path / "a", _write(tmp_path / "t" / "dump.json", t), _write(tmp_path / "b" / "dump.json", b))
    t2, b2 = _corner_data("ffffffffffffffff")  # the first output differs too
    _check_same(tmp_path / "c", _write(tmp_path / "t2" / "dump.json", t2), _write(tmp_path / "b2" / "dump.json", b2))


def test_duplicate_entries_and_data_keys_match_the_reference(tmp_path: Path) -> None:
    """json.load keeps an entry's last value at its first place, and the
    last "data"; the engine's read must give the same records."""
    e1 = '"E.a.0.forward": {"output": [%s]}' % json.dumps(_rec(md5="0000000000000001"))
    e2 = '"E.b.0.forward": {"output": [%s]}' % json.dumps(_rec(md5="0000000000000002"))
    e1_again = '"E.a.0.forward": {"output": [%s, %s]}' % (json.dumps(_rec(md5="0000000000000003")),
                                                          json.dumps(_rec(md5=None)))
    t = _write(tmp_path / "t" / "dump.json", '{"task": "statistics", "data": {%s, %s, %s}}' % (e1, e2, e1_again))
    b = _write(tmp_path / "b" / "dump.json", '{"data": {"x.0": {}}, "task": "statistics", "data": {%s, %s}}'
               % (e2, e1_again))
    _check_same(tmp_path / "o1", t, b)
    _check_same(tmp_path / "o2", b, t)


def test_md5_appearing_late_and_absent_match_the_reference(tmp_path: Path) -> None:
    """The first record with "md5" after records without it (the engine
    reads such a dump twice), and dumps without any checksum."""
    late = {"A.0.forward": {"output": [_rec(md5=...)]}, "B.0.forward": {"output": [_rec(md5=...), _rec()]}}
    plain = {"A.0.forward": {"output": [_rec(md5=...)]}, "B.0.forward": {"output": [_rec(md5=...), _rec(md5=...)]}}
    lt = _write(tmp_path / "late" / "dump.json", late)
    pl = _write(tmp_path / "plain" / "dump.json", plain)
    _check_same(tmp_path / "o1", lt, lt)
    _check_same(tmp_path / "o2", lt, pl)
    _check_same(tmp_path / "o3", pl, pl)
    assert has_checksums(lt) and not has_checksums(pl)


def test_crc32_against_graphprobe_checksums_says_so_as_before(tmp_path: Path) -> None:
    t = _write(tmp_path / "t" / "dump.json", {"A.0.forward": {"output": [_rec(md5="0badf00d")]}})
    b = _write(tmp_path / "b" / "dump.json", {"A.0.forward": {"output": [_rec()]}})
    _check_same(tmp_path / "o", t, b)
    with pytest.raises(ValueError, match="msprobe's CRC-32.*graphprobe's 64-bit checksum"):
        compare_checksums(t, b)


def _random_data(rng: random.Random, names: list[str]) -> dict:
    def md5() -> Any:
        return rng.choice([None, ..., f"{rng.getrandbits(64):016x}", f"{rng.getrandbits(4):016x}"])

    def value(depth: int) -> Any:
        k = rng.random()
        if depth > 2 or k < 0.55:
            return _rec(md5=md5(), dtype=rng.choice(["torch.float32", "torch.bfloat16"]),
                        shape=rng.choice([(2, 3), (2, 4), (), [1]]))
        if k < 0.7:
            return None
        if k < 0.85:
            return [value(depth + 1) for _ in range(rng.randint(0, 3))]
        return {rng.choice(["a", "b", "c"]): value(depth + 1) for _ in range(rng.randint(0, 3))}

    data = {}
    for name in names:
        parts = rng.sample(["input_args", "input_kwargs", "parameters", "output", "input"], rng.randint(1, 4))
        data[name] = {p: [value(0) for _ in range(rng.randint(0, 3))] for p in parts}
    return data


@pytest.mark.parametrize("seed", range(12))
def test_random_dumps_match_the_reference(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    names = [f"Module.m{i % 5}.Linear.forward.{i // 5}" for i in range(30)]
    t = _random_data(rng, names)
    b = _random_data(rng, rng.sample(names, 25)) if seed % 3 else copy.deepcopy(t)
    if seed % 3 == 0:  # mostly equal: a few checksums changed
        for parts in list(b.values())[::4]:
            for records in parts.values():
                for r in records:
                    if isinstance(r, dict) and isinstance(r.get("md5"), str):
                        r["md5"] = "f" * 16
    _check_same(tmp_path, _write(tmp_path / "t" / "dump.json", t), _write(tmp_path / "b" / "dump.json", b))


def _train(config: str, lr: float) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(1))
    dumper = graphprobe.AclGraphDumper(config)
    dumper.start(model)
    try:
        for _ in range(2):
            opt.zero_grad()
            model(x).square().sum().backward()
            opt.step()
            dumper.step()
    finally:
        dumper.stop()
    graphprobe.flush()


def test_real_training_dumps_match_the_reference(write_config: Any, tmp_path: Path) -> None:
    """Forward, backward and parameters_grad records with md5, two steps:
    step 0 equal, step 1 bit-different after an update with another lr."""
    for name, lr in (("t", 0.1), ("b", 0.1000001)):
        _train(write_config(dump_path=str(tmp_path / name), level="L0", statistics={"summary_mode": "md5"}), lr)
    for step in (0, 1):
        (t,) = glob.glob(str(tmp_path / "t" / f"step{step}" / "*" / "dump.json"))
        (b,) = glob.glob(str(tmp_path / "b" / f"step{step}" / "*" / "dump.json"))
        assert any(".parameters_grad." in line for line in Path(t).read_text().splitlines())
        _check_same(tmp_path / f"o{step}", Path(t), Path(b))
        want = ref.compare_checksums(t, b)
        assert want is not None and (want.first_different is None) == (step == 0)
    # compare() carries the same line in its outcomes, made in the worker processes (-j 2).
    run = compare(tmp_path / "t", tmp_path / "b", tmp_path / "out", html=False, progress=False, jobs=2)
    lines = checksum_lines(run)
    assert len(lines) == 2 and all(o.checksums for o in run.outcomes)
    assert "every paired tensor bit-identical" in lines[0] and "first bit-different" in lines[1]
    written = {p: p.read_bytes() for p in (tmp_path / "out").rglob("checksum_result_*.csv")}
    assert len(written) == 2
    assert ref.checksum_lines(run) == lines  # the reference rewrites the same files ...
    assert {p: p.read_bytes() for p in written} == written  # ... with the same bytes

"""statistics.summary_mode "md5": a checksum of every recorded tensor's bits,
computed inside the graph, and the checksum compare.

Every expected checksum is computed here with numpy from the tensor's bytes
(the definition in docs/formats.md), never taken from an earlier dump.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from checksum_reference import Wrap, reference_checksum
from models import make_transformer
from torch import nn

import graphprobe
from graphprobe.cli import main
from graphprobe.compare.checksums import DIFFERENT, IDENTICAL, compare_checksums, has_checksums
from graphprobe.config import ConfigTypeError, ConfigValueError, parse_config


def _dump(config: str, model: nn.Module, inputs: list[torch.Tensor], runner: Any = None) -> None:
    """One dumped step per input, run by ``runner`` (default: the model)."""
    dumper = graphprobe.AclGraphDumper(config)
    dumper.start(model)
    try:
        with torch.no_grad():
            for x in inputs:
                (model if runner is None else runner)(x)
                dumper.step()
    finally:
        dumper.stop()
    graphprobe.flush()


def _md5_config(write_config: Any, path: Path, **extra: Any) -> str:
    return write_config(dump_path=str(path), level="L0", statistics={"summary_mode": "md5"}, **extra)


def _dump_json(path: Path, step: int = 0) -> Path:
    (found,) = glob.glob(str(path / f"step{step}" / "*" / "dump.json"))
    return Path(found)


def _records(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for entry, parts in doc["data"].items():
        for part in ("input_args", "output"):
            for i, rec in enumerate(parts.get(part) or []):
                if isinstance(rec, dict) and "dtype" in rec:
                    out[f"{entry}.{part}.{i}"] = rec
    return out


def _nan_with_payload(payload: int) -> torch.Tensor:
    return torch.tensor([0x7FC00000 | payload], dtype=torch.int32).view(torch.float32)


TENSORS = {
    "float32": torch.randn(5, 7, generator=torch.Generator().manual_seed(0)),
    "float16": torch.randn(33, generator=torch.Generator().manual_seed(1)).half(),
    "bfloat16": torch.randn(3, 11, generator=torch.Generator().manual_seed(2)).bfloat16(),
    "float64": torch.randn(4, 3, generator=torch.Generator().manual_seed(3)).double(),
    "int64": torch.arange(-20, 20, 3),
    "int8": torch.arange(-100, 100, 7, dtype=torch.int8),
    "bool": torch.tensor([True, False, True, True]),
    "complex64": torch.randn(6, dtype=torch.complex64, generator=torch.Generator().manual_seed(4)),
    "complex128": torch.randn(3, dtype=torch.complex128, generator=torch.Generator().manual_seed(5)),
    "transposed": torch.randn(6, 4, generator=torch.Generator().manual_seed(6)).t(),
    "large": torch.randn(300_000, generator=torch.Generator().manual_seed(7)),  # split over threads
}


@pytest.mark.parametrize("name", list(TENSORS))
def test_checksum_is_the_documented_hash_of_the_bits(write_config, tmp_path, name):
    x = TENSORS[name]
    _dump(_md5_config(write_config, tmp_path / "d"), Wrap(), [x])
    rec = json.loads(_dump_json(tmp_path / "d").read_text())["data"]["Module.p.Pass.forward.0"]
    want = reference_checksum(x)
    assert rec["input_args"][0]["md5"] == want and rec["output"][0]["md5"] == want
    assert len(want) == 16
    # The statistics are still there, as in msprobe's md5 mode.
    assert "Max" in rec["input_args"][0] and "Norm" in rec["input_args"][0]


def test_one_ulp_signed_zero_and_nan_payload_change_the_checksum(write_config, tmp_path):
    x = torch.randn(64, generator=torch.Generator().manual_seed(0))
    ulp = x.clone()
    ulp[37] = torch.nextafter(x[37], torch.tensor(float("inf")))
    zeros, negzero = torch.zeros(8), torch.zeros(8)
    negzero[3] = -0.0
    nan1, nan2 = _nan_with_payload(1), _nan_with_payload(2)
    cases = [x, ulp, zeros, negzero, nan1, nan2]
    _dump(_md5_config(write_config, tmp_path / "d"), Wrap(), cases)
    got = [json.loads(_dump_json(tmp_path / "d", s).read_text())["data"]["Module.p.Pass.forward.0"]["input_args"][0]["md5"]
           for s in range(len(cases))]
    assert got == [reference_checksum(t) for t in cases]
    assert got[0] != got[1], "a one-ulp change in one element"
    assert got[2] != got[3], "-0.0 and 0.0 are different bits"
    assert got[4] != got[5], "two NaN payloads are different bits"


def test_empty_tensor_has_md5_null_and_statistics_mode_has_no_key(write_config, tmp_path):
    _dump(_md5_config(write_config, tmp_path / "md5"), Wrap(), [torch.zeros(0, 3)])
    rec = json.loads(_dump_json(tmp_path / "md5").read_text())["data"]["Module.p.Pass.forward.0"]["input_args"][0]
    assert "md5" in rec and rec["md5"] is None
    _dump(write_config(dump_path=str(tmp_path / "plain"), level="L0"), Wrap(), [torch.ones(3)])
    rec = json.loads(_dump_json(tmp_path / "plain").read_text())["data"]["Module.p.Pass.forward.0"]["input_args"][0]
    assert "md5" not in rec
    assert not has_checksums(_dump_json(tmp_path / "plain"))


def _transformer_dump(write_config: Any, path: Path, backend: str | None, tokens: torch.Tensor) -> Path:
    model = make_transformer(0, vocab=32, dim=16, heads=2, blocks=2)
    runner = None if backend is None else torch.compile(model, backend=backend, fullgraph=True)
    _dump(_md5_config(write_config, path), model, [tokens], runner)
    return _dump_json(path)


TOKENS = torch.randint(0, 32, (2, 6), generator=torch.Generator().manual_seed(3))

_CHILD = """
import sys, torch
sys.path.insert(0, {tests!r})
import graphprobe
from models import make_transformer
model = make_transformer(0, vocab=32, dim=16, heads=2, blocks=2)
dumper = graphprobe.AclGraphDumper({config!r})
dumper.start(model)
with torch.no_grad():
    model(torch.tensor({tokens!r}))
dumper.step()
dumper.stop()
graphprobe.flush()
"""


def test_equal_across_eager_aot_eager_and_a_second_process(write_config, tmp_path):
    eager = _transformer_dump(write_config, tmp_path / "eager", None, TOKENS)
    compiled = _transformer_dump(write_config, tmp_path / "aot", "aot_eager", TOKENS)
    config = _md5_config(write_config, tmp_path / "child")
    code = _CHILD.format(tests=str(Path(__file__).parent), config=config, tokens=TOKENS.tolist())
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
    child = _dump_json(tmp_path / "child")
    docs = [json.loads(p.read_text()) for p in (eager, compiled, child)]
    records = [_records(d) for d in docs]
    assert records[0].keys() == records[1].keys() == records[2].keys() and len(records[0]) > 20
    for name, rec in records[0].items():
        assert rec["md5"] is not None, name
        assert records[1][name]["md5"] == rec["md5"] == records[2][name]["md5"], name
    # An independent check of one record: the model's input, hashed here.
    assert records[0]["Module.embed.Embedding.forward.0.input_args.0"]["md5"] == reference_checksum(TOKENS)
    for other in (compiled, child):
        result = compare_checksums(eager, other)
        assert result is not None and result.count(DIFFERENT) == 0 and result.first_different is None
        assert result.count(IDENTICAL) == len(result.rows)


def test_compare_names_the_first_bit_different_entry(write_config, tmp_path, capsys):
    """A one-ulp change of one weight: every tensor before the module that
    reads it stays bit-identical, and the compare names that module."""
    bench = _transformer_dump(write_config, tmp_path / "bench", None, TOKENS)
    model = make_transformer(0, vocab=32, dim=16, heads=2, blocks=2)
    with torch.no_grad():
        w = model.layers[1].mlp.up.weight
        w[0, 0] = torch.nextafter(w[0, 0], torch.tensor(float("inf")))
    _dump(_md5_config(write_config, tmp_path / "target"), model, [TOKENS])
    target = _dump_json(tmp_path / "target")

    result = compare_checksums(target, bench)
    assert result is not None
    assert result.first_different_entry == "Module.layers.1.mlp.up.Linear.forward.0"
    # The changed weight itself (recorded with the call's inputs), as msprobe's compare lists it.
    assert result.first_different == "Module.layers.1.mlp.up.Linear.forward.0.parameters.weight"
    names = [r.name for r in result.rows]
    first = names.index(result.first_different)
    assert all(r.result == IDENTICAL for r in result.rows[:first])
    assert result.count(DIFFERENT) > 1  # everything downstream differs too

    code = main(["compare", str(target), str(bench), "-o", str(tmp_path / "out"), "--no-report", "-q"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "first bit-different: Module.layers.1.mlp.up.Linear.forward.0.parameters.weight" in out
    (csv_path,) = glob.glob(str(tmp_path / "out" / "checksum_result_*.csv"))
    text = Path(csv_path).read_text()
    assert "Module.layers.1.mlp.up.Linear.forward.0.output.0," in text and "bit-different" in text


def test_msprobe_crc32_and_graphprobe_checksums_are_not_compared(write_config, tmp_path):
    ours = _transformer_dump(write_config, tmp_path / "ours", None, TOKENS)
    doc = json.loads(ours.read_text())
    for parts in doc["data"].values():
        for part in ("input_args", "output"):
            for rec in parts.get(part) or []:
                if isinstance(rec, dict) and rec.get("md5"):
                    rec["md5"] = rec["md5"][:8]  # the length of msprobe's CRC-32
    crc = tmp_path / "crc" / "dump.json"
    crc.parent.mkdir()
    crc.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="msprobe's CRC-32.*graphprobe's 64-bit checksum"):
        compare_checksums(crc, ours)


def test_dump_enable_false_and_step_dump_false_still_work(write_config, tmp_path):
    _dump(_md5_config(write_config, tmp_path / "off", dump_enable=False), Wrap(), [torch.ones(3)])
    assert not glob.glob(str(tmp_path / "off" / "step*" / "*" / "dump.json"))

    x0, x1 = torch.ones(3), torch.arange(3.0)
    dumper = graphprobe.AclGraphDumper(_md5_config(write_config, tmp_path / "skip"))
    model = Wrap()
    dumper.start(model)
    model(x0)
    dumper.step(dump=False)
    model(x1)
    dumper.step()
    dumper.stop()
    graphprobe.flush()
    docs = sorted(glob.glob(str(tmp_path / "skip" / "step*" / "*" / "dump.json")))
    assert len(docs) == 1
    rec = json.loads(Path(docs[0]).read_text())["data"]["Module.p.Pass.forward.0"]["input_args"][0]
    assert rec["md5"] == reference_checksum(x1)


@pytest.mark.parametrize("value, error, text", [
    ("xor", ConfigValueError, "statistics.summary_mode"),
    ("MD5", ConfigValueError, "['statistics', 'md5']"),
    (5, ConfigTypeError, "statistics.summary_mode"),
])
def test_summary_mode_errors_name_the_field(value, error, text):
    with pytest.raises(error) as e:
        parse_config({"dump_path": "/tmp/x", "statistics": {"summary_mode": value}})
    assert text in str(e.value)


def test_summary_mode_values():
    assert parse_config({"dump_path": "/tmp/x"}).summary_mode == "statistics"
    assert parse_config({"dump_path": "/tmp/x", "statistics": {"summary_mode": "md5"}}).summary_mode == "md5"


def test_tensor_task_checksums_are_those_of_the_saved_files(write_config, tmp_path):
    """Task "tensor" with summary_mode "md5": each record's md5 is the
    checksum of the tensor in its own .pt file, loaded back."""
    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(9))
    config = write_config(dump_path=str(tmp_path / "t"), task="tensor", level="L0",
                          statistics={"summary_mode": "md5"})
    _dump(config, Wrap(), [x])
    path = _dump_json(tmp_path / "t")
    rec = json.loads(path.read_text())["data"]["Module.p.Pass.forward.0"]
    for part in ("input_args", "output"):
        saved = torch.load(path.parent / "dump_tensor_data" / rec[part][0]["data_name"])
        assert rec[part][0]["md5"] == reference_checksum(saved) == reference_checksum(x)

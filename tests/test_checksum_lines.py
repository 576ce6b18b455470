"""``graphprobe compare``'s checksum line says what it compared: two dumps
whose records all have ``md5`` null (an NPU run: the aten table computes no
checksum) compare no tensor, and the line must not call them bit-identical.
The dump.json files are written by hand here (the reference)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from graphprobe.compare.checksums import checksum_lines


def _dump(path: Path, md5: str | None) -> Path:
    record = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0,
              "Mean": 0.5, "Norm": 1.0, "requires_grad": False, "md5": md5}
    doc = {"task": "statistics", "level": "L0", "framework": "pytorch", "dump_data_dir": None,
           "data": {"Module.fc.Linear.forward.0": {"input_args": [record], "output": [dict(record)]}}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def _run(tmp_path: Path, target: Path, bench: Path) -> SimpleNamespace:
    pair = SimpleNamespace(target=str(target), bench=str(bench), label="rank0", tag="rank0")
    outcome = SimpleNamespace(pair=pair, error=None, csv_path=tmp_path / "out" / "compare_result_rank0.csv")
    return SimpleNamespace(outcomes=[outcome], output_dir=str(tmp_path / "out"))


def test_no_tensor_with_checksums_on_both_sides_is_not_called_bit_identical(tmp_path: Path) -> None:
    target = _dump(tmp_path / "t" / "dump.json", None)
    bench = _dump(tmp_path / "b" / "dump.json", None)
    (line,) = checksum_lines(_run(tmp_path, target, bench))
    assert "0 bit-identical, 0 bit-different, 2 without a checksum or partner" in line, line
    assert "every paired tensor bit-identical" not in line, line
    assert "no tensor has a checksum on both sides" in line, line


def test_checksums_on_both_sides_still_read_bit_identical(tmp_path: Path) -> None:
    target = _dump(tmp_path / "t" / "dump.json", "00112233445566ff")
    bench = _dump(tmp_path / "b" / "dump.json", "00112233445566ff")
    (line,) = checksum_lines(_run(tmp_path, target, bench))
    assert "2 bit-identical, 0 bit-different" in line and "every paired tensor bit-identical" in line, line

"""A tensor file that cannot be read is never a pass (issue 36 item 17): a
crafted .pt whose pickle claims more elements than its storage holds used to
give a row with Result=pass and the reader's refusal in Err_message (msprobe
layout). The files are tests/reliability/crafted_pt.py's, whose claims are
set byte by byte there."""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).parent / "reliability"))
import crafted_pt  # noqa: E402

from graphprobe.compare import Pair, compare_pair  # noqa: E402

ENTRY = "Functional.relu.0.forward"
NAME = f"{ENTRY}.output.0.pt"


def _tensor_dump(folder: Path, blob: bytes) -> Path:
    (folder / "dump_tensor_data").mkdir(parents=True)
    (folder / "dump_tensor_data" / NAME).write_bytes(blob)
    record = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [4], "Max": 4.0, "Min": 1.0, "Mean": 2.5,
              "Norm": 5.477225575051661, "requires_grad": False, "data_name": NAME}
    doc = {"task": "tensor", "level": "L1", "data": {ENTRY: {"input_args": [], "input_kwargs": {}, "output": [record]}}}
    (folder / "dump.json").write_text(json.dumps(doc))
    return folder / "dump.json"


def _good() -> bytes:
    buf = io.BytesIO()
    torch.save(torch.tensor([1.0, 2.0, 3.0, 4.0]), buf)  # the values the record states
    return buf.getvalue()


@pytest.mark.parametrize("layout", ["msprobe", "graphprobe"])
@pytest.mark.parametrize("attack", ["small_claim", "large_claim", "not_a_zip"])
def test_unreadable_tensor_file_is_an_error_with_the_reason(tmp_path: Path, layout: str, attack: str) -> None:
    blob, why = crafted_pt.ATTACKS[attack]
    t = _tensor_dump(tmp_path / "t", blob)
    b = _tensor_dump(tmp_path / "b", _good())
    out = tmp_path / "o" / "r.csv"
    outcome = compare_pair(Pair(None, "0", t, b), out, None, tensor_layout=layout)
    assert outcome.error is None, outcome.error
    with open(out, newline="") as f:
        (row,) = csv.DictReader(f)
    assert row["Result"] == "error", row
    assert outcome.counts["pass"] == 0 and outcome.counts["error"] == 1
    messages = json.loads(row["Err_message"])
    path = tmp_path / "t" / "dump_tensor_data" / NAME
    assert any(str(path) in m and why in m for m in messages), messages
    assert row["Cosine"] in ("unsupported", "N/A")  # no metric from what the file does not hold
    # The same files, readable: a pass (the error above is the file's, not the row's).
    good = _tensor_dump(tmp_path / "g", _good())
    with open(compare_pair(Pair(None, "0", good, b), tmp_path / "o2" / "r.csv", None,
                           tensor_layout=layout).csv_path, newline="") as f:
        assert next(csv.DictReader(f))["Result"] == "pass"

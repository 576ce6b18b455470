"""ReplicaChecker: graphprobe's checksum in torch ops against a numpy
reference, and the rank that disagrees among 4 gloo DDP processes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from checksum_reference import reference_checksum
from graphprobe.history.replicas import tensor_checksum

HERE = Path(__file__).parent


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int8,
                                   torch.bool, torch.int64, torch.complex64, torch.complex128])
def test_checksum_equals_numpy_reference(dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(1)
    for n in (1, 7, 5000):
        x = (torch.randn(n, generator=g) * 100).to(dtype)
        assert format(int(tensor_checksum(x)) & (2**64 - 1), "016x") == reference_checksum(x)
    strided = torch.randn(40, 30, generator=g).to(dtype)[:, ::3]
    assert format(int(tensor_checksum(strided)) & (2**64 - 1), "016x") == reference_checksum(strided)


def test_checksum_sees_one_bit() -> None:
    x = torch.randn(1000)
    y = x.clone()
    y.view(torch.int32)[999] ^= 1
    assert int(tensor_checksum(x)) != int(tensor_checksum(y))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ddp_rank_that_disagrees(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    subprocess.run([sys.executable, str(HERE / "replica_runs.py"), "--port", str(_free_port()), "--out", str(out),
                    "--clean", "100", "--flip-step", "103", "--flip-rank", "2", "--flip-param", "2.weight"],
                   check=True, timeout=240, capture_output=True)
    result = json.loads(out.read_text())
    assert result["clean_alarms"] == []  # 100 clean steps: no alarm
    assert [(d["step"], d["rank"], d["tensor"]) for d in result["found"]] == [(103, 2, "2.weight")]
    assert result["found"][0]["majority"] is not None
    assert result["per_group"] == []  # replicas within {0, 2} and {1, 3} agree
    # Over the world the two groups differ 2 against 2: no majority, every rank of every tensor named.
    assert {(d["rank"], d["tensor"]) for d in result["world"]} == {(r, t) for r in range(4) for t in ("weight", "bias")}
    assert all(d["majority"] is None for d in result["world"])

"""Checksums of the element types and layouts tests/test_checksums.py leaves
out, against the numpy reference computed from the tensor's bytes
(tests/checksum_reference.py): 0-d tensors, float8 (1-byte words), the
unsigned 16/32/64-bit types, a lazily negated view, a 3-d strided slice,
complex128 over several intra-op tasks (two 8-byte words per element), and
the same value with 1 and 2 intra-op threads."""

from __future__ import annotations

import glob
import json
import os
from typing import Any

import pytest
import torch

import graphprobe
from checksum_reference import Wrap, reference_checksum

_G = torch.Generator().manual_seed(11)

TENSORS = {
    "0-d float32": torch.tensor(3.25),
    "0-d int64": torch.tensor(-7),
    "float8_e4m3fn": torch.randn(10, generator=_G).to(torch.float8_e4m3fn),
    "float8_e5m2": torch.randn(10, generator=_G).to(torch.float8_e5m2),
    "float8_e8m0fnu": torch.rand(10, generator=_G).add(0.5).to(torch.float8_e8m0fnu),
    "uint16": torch.arange(0, 60000, 997).to(torch.uint16),
    "uint32": torch.arange(0, 40, 3).to(torch.uint32),
    "uint64": torch.arange(0, 40, 3).to(torch.uint64),
    "negative view": torch._neg_view(torch.randn(5, generator=_G)),
    "3-d slice": torch.randn(4, 6, 8, generator=_G)[1:, ::2, 3:7],
    "complex128, several tasks": torch.randn(70_000, dtype=torch.complex128, generator=_G),
}


def _reference(x: torch.Tensor) -> str | None:
    # The values as seen, row-major: resolve the lazy negation, give a 0-d tensor one dimension
    # (the bytes are the same).
    return reference_checksum(x.resolve_neg().reshape(-1))


def _md5(tmp_path: Any, x: torch.Tensor) -> tuple[str, str]:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"dump_path": str(tmp_path / "dump"), "level": "L0",
                                  "statistics": {"summary_mode": "md5"}}))
    model = Wrap()
    dumper = graphprobe.AclGraphDumper(str(config))
    dumper.start(model)
    try:
        with torch.no_grad():
            model(x)
        dumper.step()
    finally:
        dumper.stop()
    graphprobe.flush()
    (found,) = glob.glob(os.path.join(str(tmp_path / "dump"), "step0", "*", "dump.json"))
    with open(found) as f:
        rec = json.load(f)["data"]["Module.p.Pass.forward.0"]
    return rec["input_args"][0]["md5"], rec["output"][0]["md5"]


@pytest.mark.parametrize("name", list(TENSORS))
def test_checksum_matches_numpy(tmp_path, name: str) -> None:
    x = TENSORS[name]
    assert _md5(tmp_path, x) == (_reference(x), _reference(x))


@pytest.mark.parametrize("threads", [1, 2])
def test_checksum_does_not_depend_on_the_thread_count(tmp_path, threads: int) -> None:
    x = torch.randint(0, 255, (300_001,), dtype=torch.uint8, generator=torch.Generator().manual_seed(3))
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        got = _md5(tmp_path, x)
    finally:
        torch.set_num_threads(before)
    assert got == (_reference(x), _reference(x))

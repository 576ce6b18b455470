"""Every graphprobe op passes torch.library.opcheck (schema, fake/Meta kernel,
autograd registration, AOT dispatch), and registers kernels for exactly the
dispatch keys that the table in csrc/ops/schemas.cpp lists.

The probes run while no dumper is started, so they record nothing; save
writes files (into tmp_path): that is its contract.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import graphprobe
import graphprobe._ops  # noqa: F401  (registers the ops)

SCHEMAS = Path(__file__).resolve().parent.parent / "csrc" / "ops" / "schemas.cpp"
# Every dispatch key graphprobe registers a kernel for somewhere.
KEYS = ["CPU", "CUDA", "PrivateUse1", "SparseCPU", "SparseCsrCPU", "CompositeExplicitAutograd", "Meta",
        "FuncTorchBatched"]


def _table() -> dict[str, set[str]]:
    """op -> the dispatch keys schemas.cpp lists for it (CUDA* counted as CUDA)."""
    rows: dict[str, set[str]] = {}
    last = None
    for line in SCHEMAS.read_text().splitlines():
        m = re.match(r"^//   (\w+)?\s+(ops/\S+\.cpp)?\s+(.*)$", line)
        if not m or "dispatch keys" in line:
            continue
        op, keys = m.group(1), m.group(3)
        if op is None:  # a continuation line of the previous op
            rows[last] |= set(keys.replace("*", "").split())
            continue
        same = re.match(r"\(as (\w+)\)", keys)
        rows[op] = set(rows[same.group(1)]) if same else set(keys.replace("*", "").split())
        last = op
    return rows


def test_the_table_lists_every_op_with_its_dispatch_keys():
    table = _table()
    defined = {name for name in dir(torch.ops.graphprobe) if isinstance(getattr(torch.ops.graphprobe, name),
                                                                         torch._ops.OpOverloadPacket)}
    assert set(table) == defined
    cuda_build = torch._C._dispatch_has_kernel_for_dispatch_key("graphprobe::save", "CUDA")
    for op, keys in table.items():
        registered = {k for k in KEYS if torch._C._dispatch_has_kernel_for_dispatch_key(f"graphprobe::{op}", k)}
        if op == "save" and not cuda_build:  # CUDA*: only against a CUDA torch
            keys = keys - {"CUDA"}
        assert registered == keys, op


@pytest.mark.parametrize(
    "op, args",
    [
        ("record_stats", lambda tmp: (torch.randn(3, 4, requires_grad=True), 7, 0)),
        ("record_stats_fusable", lambda tmp: (torch.randn(3, 4), 7, 0, 1)),
        ("record_mirror", lambda tmp: (torch.randn(3, 4), 7, 1, 7, 0)),
        ("record_values", lambda tmp: (torch.tensor([1.0, -1.0, 0.5, 2.0, 0.0], dtype=torch.float64), 7, 0,
                                       torch.float32, [3, 4])),
        ("save", lambda tmp: (torch.randn(3, 4), str(tmp / "o.pt"))),
    ],
)
def test_opcheck(op, args, tmp_path):
    result = torch.library.opcheck(getattr(torch.ops.graphprobe, op).default, args(tmp_path))
    assert set(result.values()) == {"SUCCESS"}, result
    graphprobe.flush()

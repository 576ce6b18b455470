"""acl_save on CUDA: eager asynchronous copies, CUDA graph replay (host
callback, no Python per replay) and torch.compile(mode="reduce-overhead").

Skipped without CUDA (tests/gpu/conftest.py), unless GRAPHPROBE_FAIL_ON_SKIP=1 (a device run), where a
missing GPU must fail rather than look like a pass.
"""

from __future__ import annotations

import os

import pytest
import torch

import graphprobe
from graphs import replay_save_under_budget


def _load(path) -> torch.Tensor:
    t = torch.load(path, weights_only=True)
    assert t.device.type == "cpu"
    return t


def _files(folder, stem: str) -> list[str]:
    names = [n for n in os.listdir(folder) if n.startswith(stem + "_") and n.endswith(".pt")]
    return sorted(names, key=lambda n: int(n[len(stem) + 1 : -3]))


def _assert_bitwise(saved: torch.Tensor, expected: torch.Tensor) -> None:
    expected = expected.cpu()
    assert saved.dtype == expected.dtype and saved.shape == expected.shape
    assert torch.equal(saved, expected)


# ----------------------------------------------------------------- eager


def test_eager_copies_are_asynchronous_and_take_the_value_at_call_time(tmp_path):
    x = torch.zeros(1 << 20, device="cuda")
    for _ in range(5):
        graphprobe.acl_save(x, tmp_path / "e.pt")
        x.add_(1)  # queued after the copy on the same stream; no host sync in between
    graphprobe.flush()
    assert _files(tmp_path, "e") == [f"e_{i}.pt" for i in range(5)]
    for i in range(5):
        _assert_bitwise(_load(tmp_path / f"e_{i}.pt"), torch.full((1 << 20,), float(i)))


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.randn(64, 32, device="cuda").t(),
        lambda: torch.randn(64, 32, device="cuda", dtype=torch.bfloat16)[::3, 1::2],
        lambda: torch.randint(-(2**40), 2**40, (17,), device="cuda"),
        lambda: torch.rand(5, 5, device="cuda") > 0.5,
        lambda: torch.tensor(2.5, device="cuda"),
        lambda: torch.empty(0, 4, device="cuda"),
    ],
    ids=["transposed", "bf16_strided", "int64", "bool", "zero_dim", "empty"],
)
def test_eager_layouts_and_dtypes(tmp_path, make):
    x = make()
    graphprobe.acl_save(x, tmp_path / "v.pt")
    graphprobe.flush()
    _assert_bitwise(_load(tmp_path / "v_0.pt"), x)


# ----------------------------------------------------------------- CUDA graph


def _capture(fn):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g


def test_every_replay_writes_a_file_without_python_per_replay(tmp_path):
    x = torch.zeros(4096, device="cuda")
    m = torch.zeros(48, 64, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()

    def body():
        graphprobe.acl_save(x * 2, tmp_path / "y.pt")
        graphprobe.acl_save((m + x[:1].to(torch.bfloat16)).t(), tmp_path / "t.pt")  # non-contiguous

    g = _capture(body)
    graphprobe.flush()
    assert os.listdir(tmp_path) == []  # capture writes nothing; replays do

    for i in range(10):  # no synchronisation between replays
        x.fill_(float(i))
        g.replay()
    graphprobe.flush()
    assert _files(tmp_path, "y") == [f"y_{i}.pt" for i in range(10)]
    assert _files(tmp_path, "t") == [f"t_{i}.pt" for i in range(10)]
    for i in range(10):
        _assert_bitwise(_load(tmp_path / f"y_{i}.pt"), torch.full((4096,), 2.0 * i))
        _assert_bitwise(
            _load(tmp_path / f"t_{i}.pt"), torch.full((64, 48), float(i), dtype=torch.bfloat16)
        )


def test_replays_wait_for_the_budget_and_drop_nothing(tmp_path):
    n = (4 << 20) // 4  # 4 MiB per replay
    peak = replay_save_under_budget(str(tmp_path), n, budget=8 << 20, replays=12)
    assert peak <= 8 << 20
    assert _files(tmp_path, "b") == [f"b_{i}.pt" for i in range(12)]
    for i in range(12):
        _assert_bitwise(_load(tmp_path / f"b_{i}.pt"), torch.full((n,), float(i)))


def test_capture_checks_the_path_at_capture_time(tmp_path):
    x = torch.zeros(4, device="cuda")
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with pytest.raises(FileNotFoundError):
        with torch.cuda.graph(g):
            graphprobe.acl_save(x, tmp_path / "missing" / "a.pt")


# ----------------------------------------------------------------- torch.compile


def test_compiled_cuda_default_mode(tmp_path):
    path = str(tmp_path / "c.pt")

    def f(x):
        graphprobe.acl_save(x.sin(), path)  # result unused
        return x + 1

    torch._dynamo.reset()
    cf = torch.compile(f, fullgraph=True)
    xs = [torch.randn(256, device="cuda") + i for i in range(5)]
    for x in xs:
        cf(x)
    graphprobe.flush()
    assert _files(tmp_path, "c") == [f"c_{i}.pt" for i in range(5)]
    for i, x in enumerate(xs):
        # inductor's sin may differ from eager's in the last bit
        saved = _load(tmp_path / f"c_{i}.pt")
        torch.testing.assert_close(saved, x.sin().cpu(), rtol=1e-6, atol=1e-6)


def test_reduce_overhead_replays_write_one_file_each(tmp_path):
    from torch._dynamo.utils import counters

    path = str(tmp_path / "r.pt")

    def f(x):
        graphprobe.acl_save(x * 3, path)  # result unused; x*3 is exact in fp32 here
        return x - 1

    torch._dynamo.reset()
    counters.clear()
    cf = torch.compile(f, mode="reduce-overhead", fullgraph=True)
    calls = [torch.full((1024,), float(i), device="cuda") for i in range(13)]
    for x in calls:  # no synchronisation between calls
        cf(x)
    graphprobe.flush()
    assert not counters["inductor"].get("cudagraph_skips"), dict(counters["inductor"])

    names = _files(tmp_path, "r")
    values = [_load(tmp_path / n) for n in names]
    # The first calls are cudagraph-tree warm-up / recording; each execution of
    # the op writes exactly one file, so the files are the calls in order,
    # possibly without the recording call. The last 10 are replays.
    assert len(names) >= 12, names
    expected = [x.cpu() * 3 for x in calls]
    for got, want in zip(values[-10:], expected[-10:]):
        _assert_bitwise(got, want)
    seen = [int(v[0].item()) // 3 for v in values]
    assert seen == sorted(seen) and len(set(seen)) == len(seen), seen

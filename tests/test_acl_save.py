"""acl_save on CPU: eager, torch.compile, dtypes and layouts, path checks,
the writer's byte budget and its error path, and exit behaviour.

The CUDA paths (eager asynchronous copy, CUDA graph replay) are in
tests/gpu/test_acl_save_cuda.py.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import torch

import graphprobe
from graphprobe.saving import DEFAULT_WRITE_BUDGET, WriteError, set_write_budget, writer_stats

SRC = str(Path(graphprobe.__file__).resolve().parents[1])


def _load(path: Path) -> torch.Tensor:
    # torch.load's default is weights_only=True in this torch; say so anyway:
    # the files must load without allowing arbitrary pickles.
    t = torch.load(path, weights_only=True)
    assert isinstance(t, torch.Tensor)
    assert t.device.type == "cpu"
    return t


def _assert_bitwise(saved: torch.Tensor, expected: torch.Tensor) -> None:
    assert saved.dtype == expected.dtype
    assert saved.shape == expected.shape
    assert torch.equal(saved, expected)
    if expected.is_floating_point() and expected.numel():
        # torch.equal treats -0.0 == 0.0 and fails on NaN: compare the bits too.
        assert saved.reshape(-1).view(torch.uint8).tolist() == expected.reshape(-1).view(torch.uint8).tolist()


def _run_py(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=timeout
    )


def test_import_points_at_this_tree():
    assert Path(graphprobe.__file__).resolve().parent == Path(__file__).resolve().parents[1] / "src" / "graphprobe"
    assert graphprobe.save is graphprobe.acl_save


# ----------------------------------------------------------------- eager


def test_eager_each_call_writes_its_values(tmp_path):
    values = [torch.randn(4, 5) * i for i in range(5)]
    for v in values:
        out = graphprobe.acl_save(v, tmp_path / "act.pt")
        assert out is v
    graphprobe.flush()
    assert sorted(os.listdir(tmp_path)) == [f"act_{i}.pt" for i in range(5)]
    for i, v in enumerate(values):
        _assert_bitwise(_load(tmp_path / f"act_{i}.pt"), v)


def test_value_is_taken_at_call_time(tmp_path):
    x = torch.zeros(1000)
    for i in range(5):
        graphprobe.acl_save(x, tmp_path / "x.pt")
        x.add_(1)  # changed in place before the writer gets to it
    graphprobe.flush()
    for i in range(5):
        _assert_bitwise(_load(tmp_path / f"x_{i}.pt"), torch.full((1000,), float(i)))


def test_two_paths_number_independently(tmp_path):
    for i in range(3):
        graphprobe.acl_save(torch.tensor([i]), str(tmp_path / "a.pt"))
        graphprobe.acl_save(torch.tensor([10 + i]), str(tmp_path / "b.pt"))
    graphprobe.acl_save(torch.tensor([99]), str(tmp_path / "b.pt"))
    graphprobe.flush()
    assert sorted(os.listdir(tmp_path)) == ["a_0.pt", "a_1.pt", "a_2.pt", "b_0.pt", "b_1.pt", "b_2.pt", "b_3.pt"]
    assert [_load(tmp_path / f"a_{i}.pt").item() for i in range(3)] == [0, 1, 2]
    assert [_load(tmp_path / f"b_{i}.pt").item() for i in range(4)] == [10, 11, 12, 99]


def test_relative_path_and_names_without_suffix(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dump").mkdir()
    graphprobe.acl_save(torch.ones(2), "./dump/act.pt")
    graphprobe.acl_save(torch.ones(2), "dump/plain")
    graphprobe.acl_save(torch.ones(2), "dump/.hidden")
    graphprobe.acl_save(torch.ones(2), "dump/a.b.pt")
    graphprobe.flush()
    assert sorted(os.listdir(tmp_path / "dump")) == [".hidden_0", "a.b_0.pt", "act_0.pt", "plain_0"]


def test_threads_share_one_numbering(tmp_path):
    def work(base):
        for i in range(20):
            graphprobe.acl_save(torch.tensor([base + i]), tmp_path / "t.pt")

    threads = [threading.Thread(target=work, args=(k * 100,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    graphprobe.flush()
    assert sorted(os.listdir(tmp_path)) == sorted(f"t_{i}.pt" for i in range(60))
    values = sorted(_load(tmp_path / f"t_{i}.pt").item() for i in range(60))
    assert values == sorted(k * 100 + i for k in range(3) for i in range(20))


# ----------------------------------------------------------------- dtypes, layouts


CASES = {
    "transposed": lambda: torch.randn(6, 4).t(),
    "strided_slice": lambda: torch.randn(8, 10)[::2, 1::3],
    "expanded": lambda: torch.randn(3, 1).expand(3, 5),
    "offset_view": lambda: torch.arange(100, dtype=torch.float64)[37:50],
    "bf16": lambda: torch.randn(7, 3).to(torch.bfloat16),
    "fp16_specials": lambda: torch.tensor([0.0, -0.0, float("inf"), -float("inf"), 65504.0], dtype=torch.float16),
    "int64": lambda: torch.randint(-(2**62), 2**62, (5, 5), dtype=torch.int64),
    "bool": lambda: torch.rand(4, 4) > 0.5,
    "uint8": lambda: torch.randint(0, 256, (9,), dtype=torch.uint8),
    "zero_dim": lambda: torch.tensor(3.25),
    "zero_dim_int": lambda: torch.tensor(-7, dtype=torch.int32),
    "empty": lambda: torch.empty(0, 3),
    "empty_bool": lambda: torch.empty(2, 0, dtype=torch.bool),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_saved_bit_for_bit(tmp_path, name):
    x = CASES[name]()
    graphprobe.acl_save(x, tmp_path / "v.pt")
    graphprobe.flush()
    _assert_bitwise(_load(tmp_path / "v_0.pt"), x)


def test_nan_payload_survives(tmp_path):
    x = torch.tensor([1.0, float("nan"), -float("nan")])
    graphprobe.acl_save(x, tmp_path / "n.pt")
    graphprobe.flush()
    saved = _load(tmp_path / "n_0.pt")
    assert saved.view(torch.int32).tolist() == x.view(torch.int32).tolist()


# ----------------------------------------------------------------- torch.compile


def test_compiled_save_survives_with_result_unused(tmp_path):
    path = str(tmp_path / "c.pt")

    def f(x):
        y = x * 2 + 1
        graphprobe.acl_save(y, path)  # result deliberately unused
        return x - 1

    torch._dynamo.reset()
    cf = torch.compile(f, fullgraph=True, backend="inductor")
    inputs = [torch.randn(16) + i for i in range(5)]
    for x in inputs:
        torch.testing.assert_close(cf(x), x - 1)
    graphprobe.flush()
    assert sorted(os.listdir(tmp_path)) == [f"c_{i}.pt" for i in range(5)]
    for i, x in enumerate(inputs):
        _assert_bitwise(_load(tmp_path / f"c_{i}.pt"), x * 2 + 1)


def test_compiled_bad_folder_fails_at_trace_time(tmp_path):
    (tmp_path / "nope").write_text("a file where the folder should be")
    missing = str(tmp_path / "nope" / "c.pt")

    def f(x):
        graphprobe.acl_save(x, missing)
        return x + 1

    torch._dynamo.reset()
    cf = torch.compile(f, fullgraph=True, backend="eager")
    with pytest.raises(Exception) as info:
        cf(torch.ones(3))
    # dynamo wraps errors raised while tracing; the original is the context.
    chain, e = [], info.value
    while e is not None:
        chain.append(e)
        e = e.__cause__ or e.__context__
    assert any(isinstance(c, NotADirectoryError) for c in chain), chain
    assert "nope" in str(info.value)


def test_compiled_save_creates_its_folder_at_trace_time(tmp_path):
    target = tmp_path / "made" / "by" / "trace" / "c.pt"

    def f(x):
        graphprobe.acl_save(x, str(target))
        return x + 1

    torch._dynamo.reset()
    cf = torch.compile(f, fullgraph=True, backend="eager")
    inputs = [torch.arange(3.0) + i for i in range(2)]
    for x in inputs:
        cf(x)
    graphprobe.flush()
    assert sorted(os.listdir(target.parent)) == ["c_0.pt", "c_1.pt"]
    for i, x in enumerate(inputs):
        _assert_bitwise(_load(target.parent / f"c_{i}.pt"), x)


# ----------------------------------------------------------------- path checks at call time


def test_missing_folder_is_created_0750_at_call_time(tmp_path):
    # Before: FileNotFoundError, so the README's snippet failed in a fresh folder.
    target = tmp_path / "missing" / "deeper" / "act.pt"
    x = torch.linspace(-1.0, 1.0, 7, dtype=torch.float64)
    old = os.umask(0o022)
    try:
        graphprobe.acl_save(x, target)
    finally:
        os.umask(old)
    for folder in (tmp_path / "missing", tmp_path / "missing" / "deeper"):
        assert folder.is_dir() and stat.S_IMODE(folder.stat().st_mode) == 0o750, folder
    graphprobe.flush()
    _assert_bitwise(_load(target.parent / "act_0.pt"), x)


def test_a_file_among_the_missing_folders_is_reported(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="file"):
        graphprobe.acl_save(torch.ones(1), tmp_path / "file" / "sub" / "act.pt")


def test_parent_that_is_a_file_is_reported(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="file"):
        graphprobe.acl_save(torch.ones(1), tmp_path / "file" / "act.pt")


def test_folder_as_path_is_reported(tmp_path):
    with pytest.raises(IsADirectoryError):
        graphprobe.acl_save(torch.ones(1), tmp_path)


def test_unwritable_folder_is_reported_at_call_time():
    """A real permission check, not a simulated one: as root every folder is
    writable, so a child process imports graphprobe, then drops to an
    unprivileged uid and saves into a folder (mode 0555) it may enter but not
    write. The folder is made under /tmp because pytest's tmp_path is 0700."""
    import shutil
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="graphprobe-ro-", dir="/tmp"))
    top.chmod(0o755)
    ro = top / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        _check_unwritable(ro)
    finally:
        shutil.rmtree(top)


def _check_unwritable(ro: Path) -> None:
    drop = "os.setgid(65534); os.setuid(65534)" if os.geteuid() == 0 else "pass"
    r = _run_py(
        f"""
        import os, torch, graphprobe, graphprobe.saving, torch._dynamo  # everything loaded before dropping root
        {drop}
        try:
            graphprobe.acl_save(torch.ones(1), {str(ro / "act.pt")!r})
        except PermissionError as e:
            print("PermissionError:", e)
        else:
            print("no error")
        """
    )
    assert r.returncode == 0, r.stderr
    assert "PermissionError:" in r.stdout and "is not writable" in r.stdout and str(ro) in r.stdout, r.stdout
    assert os.listdir(ro) == []


# ----------------------------------------------------------------- budget


def test_budget_bounds_bytes_in_flight(tmp_path):
    """200 saves of 8 MB with a 32 MB budget: every file right, peak <= budget.

    Checked and deleted in batches of 50 to keep disk use low; each batch is
    well above the budget, so the producer waits for the writer in each."""
    budget = 32 << 20
    n_elems = (8 << 20) // 4
    base = torch.randn(n_elems)
    set_write_budget(budget)
    try:
        flushed = writer_stats(reset_peak=True)
        for batch in range(4):
            for i in range(batch * 50, (batch + 1) * 50):
                x = base.clone()
                x[0] = i  # each file distinct
                graphprobe.acl_save(x, tmp_path / "big.pt")
            graphprobe.flush()
            for i in range(batch * 50, (batch + 1) * 50):
                f = tmp_path / f"big_{i}.pt"
                saved = _load(f)
                assert saved.shape == base.shape and saved[0].item() == i
                assert torch.equal(saved[1:], base[1:])
                f.unlink()
        stats = writer_stats()
    finally:
        set_write_budget(DEFAULT_WRITE_BUDGET)
    assert stats["files_written"] - flushed["files_written"] == 200
    assert 24 << 20 <= stats["peak_bytes_in_flight"] <= budget, stats
    assert stats["bytes_in_flight"] == 0 and stats["pending"] == 0


def test_tensor_larger_than_budget_is_admitted_alone(tmp_path):
    set_write_budget(1024)
    try:
        x = torch.arange(10_000, dtype=torch.int64)
        graphprobe.acl_save(x, tmp_path / "huge.pt")
        graphprobe.acl_save(x + 1, tmp_path / "huge.pt")
        graphprobe.flush()
    finally:
        set_write_budget(DEFAULT_WRITE_BUDGET)
    _assert_bitwise(_load(tmp_path / "huge_0.pt"), x)
    _assert_bitwise(_load(tmp_path / "huge_1.pt"), x + 1)


def test_budget_must_be_positive():
    with pytest.raises(ValueError):
        set_write_budget(0)


# ----------------------------------------------------------------- writer errors


def test_write_failure_is_raised_at_next_flush_and_writer_recovers(tmp_path):
    """The folder disappears between the call-time check and the write: the
    op is called directly (the check is in the Python wrapper), which is
    exactly the state the writer meets when the folder was removed later."""
    gone = tmp_path / "gone"
    before = writer_stats()["failed_writes"]
    torch.ops.graphprobe.save(torch.ones(3), str(gone / "act.pt"))
    torch.ops.graphprobe.save(torch.ones(3), str(gone / "act.pt"))
    with pytest.raises(WriteError) as info:
        graphprobe.flush()
    msg = str(info.value)
    assert isinstance(info.value, OSError)
    assert "2 write(s) failed" in msg
    assert str(gone / "act_0.pt") in msg and str(gone / "act_1.pt") in msg
    assert "No such file or directory" in msg
    assert writer_stats()["failed_writes"] == before + 2
    graphprobe.flush()  # reported once, not again

    gone.mkdir()  # the cause is gone: later saves work, numbering continues
    graphprobe.acl_save(torch.full((3,), 5.0), gone / "act.pt")
    graphprobe.flush()
    assert os.listdir(gone) == ["act_2.pt"]
    _assert_bitwise(_load(gone / "act_2.pt"), torch.full((3,), 5.0))


def test_file_size_limit_failure_then_recovery(tmp_path):
    """RLIMIT_FSIZE makes write() fail with EFBIG inside the writer thread."""
    r = _run_py(
        f"""
        import resource, signal, os, torch, graphprobe
        from graphprobe.saving import WriteError, writer_stats
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a fatal signal
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, hard))
        big = torch.arange(1 << 20, dtype=torch.int32)  # 4 MiB
        graphprobe.acl_save(big, {str(tmp_path / "big.pt")!r})
        try:
            graphprobe.flush()
        except WriteError as e:
            print("ERROR:", e)
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        graphprobe.acl_save(big, {str(tmp_path / "big.pt")!r})
        graphprobe.flush()
        print("stats:", writer_stats()["failed_writes"], writer_stats()["files_written"])
        """
    )
    assert r.returncode == 0, r.stderr
    assert "ERROR:" in r.stdout and str(tmp_path / "big_0.pt") in r.stdout, r.stdout
    assert "File too large" in r.stdout
    assert "stats: 1 1" in r.stdout
    # No half-written file under the final name, nor a leftover temporary.
    assert sorted(os.listdir(tmp_path)) == ["big_1.pt"]
    _assert_bitwise(_load(tmp_path / "big_1.pt"), torch.arange(1 << 20, dtype=torch.int32))


# ----------------------------------------------------------------- exit


def test_pending_writes_are_flushed_at_exit(tmp_path):
    r = _run_py(
        f"""
        import torch, graphprobe
        for i in range(30):
            graphprobe.acl_save(torch.full((1 << 16,), float(i)), {str(tmp_path / "e.pt")!r})
        # no flush(): the atexit hook writes them and joins the writer thread
        """,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path)) == sorted(f"e_{i}.pt" for i in range(30))
    for i in range(30):
        _assert_bitwise(_load(tmp_path / f"e_{i}.pt"), torch.full((1 << 16,), float(i)))


def test_unreported_errors_are_printed_at_exit(tmp_path):
    r = _run_py(
        f"""
        import torch
        import graphprobe.saving  # loads the ops and registers the exit flush
        torch.ops.graphprobe.save(torch.ones(1), {str(tmp_path / "none" / "x.pt")!r})
        """,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "1 write(s) failed" in r.stderr and "x_0.pt" in r.stderr


# ----------------------------------------------------------------- inputs with extra state


def test_requires_grad_and_inference_mode_inputs(tmp_path):
    w = torch.randn(3, 3, requires_grad=True)
    y = w * 2
    assert graphprobe.acl_save(y, tmp_path / "g.pt") is y
    y.sum().backward()  # the save does not disturb autograd
    with torch.inference_mode():
        z = torch.arange(4.0)
        graphprobe.acl_save(z, tmp_path / "g.pt")
    graphprobe.flush()
    saved = _load(tmp_path / "g_0.pt")
    assert not saved.requires_grad
    _assert_bitwise(saved, y.detach())
    _assert_bitwise(_load(tmp_path / "g_1.pt"), torch.arange(4.0))


def test_conjugate_and_negative_views_are_saved_as_their_values(tmp_path):
    c = torch.randn(4, dtype=torch.complex64)
    graphprobe.acl_save(c.conj(), tmp_path / "c.pt")
    graphprobe.acl_save(torch.ops.aten._neg_view(torch.randn(3)).clone(), tmp_path / "n.pt")
    graphprobe.flush()
    saved = _load(tmp_path / "c_0.pt")
    assert not saved.is_conj()
    _assert_bitwise(saved, c.conj().resolve_conj())


def test_sparse_input_is_refused_with_a_clear_message(tmp_path):
    with pytest.raises(TypeError, match="only dense"):
        graphprobe.acl_save(torch.eye(3).to_sparse(), tmp_path / "s.pt")


def test_opcheck(tmp_path):
    """Schema, fake kernel, autograd registration and AOT dispatch of the op.
    Each check executes the op, so it writes files: that is the contract."""
    results = torch.library.opcheck(torch.ops.graphprobe.save.default, (torch.randn(3, 4), str(tmp_path / "o.pt")))
    assert set(results.values()) == {"SUCCESS"}, results
    graphprobe.flush()
    assert len(os.listdir(tmp_path)) >= 1


def test_fork_child_saves_and_exits_without_hanging(tmp_path):
    """A child forked while the parent has writes pending gets a fresh writer:
    its saves are written, and its exit (atexit: flush + join) cannot wait for
    the parent's jobs or join the parent's thread."""
    r = _run_py(
        f"""
        import os, torch, graphprobe
        for i in range(40):
            graphprobe.acl_save(torch.full((1 << 16,), float(i)), {str(tmp_path / "p.pt")!r})
        pid = os.fork()
        if pid == 0:
            graphprobe.acl_save(torch.ones(5), {str(tmp_path / "child.pt")!r})
            graphprobe.flush()
            raise SystemExit(0)  # runs atexit in the child
        _, status = os.waitpid(pid, 0)
        graphprobe.flush()
        print("child status", status)
        """,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "child status 0" in r.stdout, (r.stdout, r.stderr)
    names = set(os.listdir(tmp_path))
    assert {f"p_{i}.pt" for i in range(40)} <= names
    assert "child_0.pt" in names
    _assert_bitwise(_load(tmp_path / "child_0.pt"), torch.ones(5))


# ----------------------------------------------------------------- every dtype torch has (issue 28: D3, D9, D24)


def _every_dtype() -> list[torch.dtype]:
    """Every torch.dtype object the torch module exports."""
    return sorted({v for v in vars(torch).values() if isinstance(v, torch.dtype)}, key=str)


def _example(dtype: torch.dtype) -> torch.Tensor:
    """A 2x3 tensor of ``dtype`` with varied bit patterns, made from bytes
    (no arithmetic exists for most of these dtypes)."""
    if dtype == torch.bool:
        return torch.tensor([[True, False, True], [False, False, True]])
    raw = (torch.arange(6 * dtype.itemsize, dtype=torch.int64) * 37 + 11) % 251
    return raw.to(torch.uint8).view(dtype).reshape(2, 3)


SUB_BYTE = {f"{p}int{k}" for p in ("", "u") for k in range(1, 8)}
QUANTIZED = {"qint8", "quint8", "qint32", "quint4x2", "quint2x4"}


@pytest.mark.parametrize("dtype", _every_dtype(), ids=str)
def test_every_dtype_loads_bit_exact_or_is_refused_at_the_call(tmp_path, dtype):
    """Each dtype torch has: the file loads with torch.load (weights_only=True)
    bit for bit, or acl_save refuses it with TypeError when called -- never a
    file no one can read (float8, uint16-64, fp4 and bits used to be written
    with storage classes torch.load does not know)."""
    name = str(dtype).removeprefix("torch.")
    if name in SUB_BYTE or name in QUANTIZED:
        if name in ("qint8", "quint8", "qint32"):
            x = torch.quantize_per_tensor(torch.ones(3), 0.5, 0, dtype)  # a real quantized tensor
        else:
            x = torch.zeros(2, 3, dtype=torch.uint8).view(dtype)
        with pytest.raises(TypeError, match=f"dtype {dtype}"):
            graphprobe.acl_save(x, tmp_path / "v.pt")
        graphprobe.flush()
        assert not list(tmp_path.iterdir())
        return
    x = _example(dtype)
    graphprobe.acl_save(x, tmp_path / "v.pt")
    graphprobe.flush()
    saved = torch.load(tmp_path / "v_0.pt", weights_only=True)
    assert saved.dtype == dtype and saved.shape == x.shape
    assert saved.reshape(-1).view(torch.uint8).tolist() == x.reshape(-1).view(torch.uint8).tolist()


def test_quantized_tensor_is_refused_with_type_error(tmp_path):
    q = torch.quantize_per_tensor(torch.tensor([0.5, 1.0]), 0.5, 0, torch.qint8)
    with pytest.raises(TypeError, match=r"quantized tensor \(dtype torch.qint8\).*x.dequantize\(\)"):
        graphprobe.acl_save(q, tmp_path / "q.pt")
    graphprobe.flush()
    assert not list(tmp_path.iterdir())


def test_meta_tensor_is_refused_at_the_call(tmp_path):
    before = writer_stats()
    with pytest.raises(ValueError, match="x is on the meta device.*save a tensor on cpu, cuda"):
        graphprobe.acl_save(torch.ones(3, device="meta"), tmp_path / "m.pt")
    graphprobe.flush()
    assert not list(tmp_path.iterdir())
    assert writer_stats()["pending"] == 0 and writer_stats()["files_written"] == before["files_written"]


def test_compiled_save_is_traced_with_fake_tensors_and_writes(tmp_path):
    """Tracing runs acl_save on stand-in tensors; only a real meta tensor is
    refused, so the compiled function still writes its file."""
    path = str(tmp_path / "c.pt")

    def f(x):
        graphprobe.acl_save(x * 2, path)
        return x + 1

    torch.compile(f, backend="aot_eager", fullgraph=True)(torch.ones(3))
    graphprobe.flush()
    _assert_bitwise(_load(tmp_path / "c_0.pt"), torch.full((3,), 2.0))

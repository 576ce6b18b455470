"""Property-based tests: config files and dump.json documents of any content
give a valid result or a documented error, never anything else."""

from __future__ import annotations

import json
import warnings

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphprobe import _compare
from graphprobe.config import ConfigError, DumpConfig, load_config, parse_config

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
json_values = st.recursive(scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                           max_leaves=20)
config_keys = st.sampled_from(["task", "dump_path", "rank", "level", "statistics", "dump_enable", "list", "x"])
config_like = st.dictionaries(config_keys, st.one_of(json_values, st.just("L1"), st.just(["0-3", 2])), max_size=6)


@SETTINGS
@given(st.one_of(json_values, config_like))
def test_config_documents(doc):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            cfg = parse_config(doc)
        except ConfigError as exc:
            # The documented errors: a field's value, a required field, an unknown key.
            assert str(exc).startswith(("config field", "config: unknown key")) or "required" in str(exc)
            return
    assert isinstance(cfg, DumpConfig)


@SETTINGS
@given(st.binary(max_size=200))
def test_config_files_of_any_bytes(tmp_path, data):
    path = tmp_path / "config.json"
    path.write_bytes(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            load_config(path)
        except ConfigError as exc:
            assert str(path) in str(exc)


tensor_like = st.fixed_dictionaries(
    {"type": st.sampled_from(["torch.Tensor", "int", 3]), "dtype": st.sampled_from(["torch.float32", 1, None])},
    optional={"shape": st.one_of(st.lists(st.integers(-2, 5), max_size=3), scalars),
              "Max": scalars, "Min": scalars, "Mean": scalars, "Norm": scalars, "requires_grad": scalars},
)
part = st.one_of(st.lists(st.one_of(tensor_like, json_values), max_size=3), json_values)
entry_like = st.fixed_dictionaries({}, optional={"input_args": part, "input_kwargs": part, "output": part})
dump_like = st.one_of(
    json_values,
    st.fixed_dictionaries({"data": st.dictionaries(st.text(max_size=30), st.one_of(entry_like, json_values), max_size=4)},
                          optional={"task": scalars, "level": scalars}),
)


@SETTINGS
@given(dump_like, st.binary(max_size=64))
def test_dump_documents(tmp_path, doc, junk):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"task": "statistics", "level": "L0", "data": {}}))
    for i, text in enumerate((json.dumps(doc), junk)):
        bad = tmp_path / f"doc{i}.json"
        bad.write_bytes(text.encode() if isinstance(text, str) else text)
        for t, b in ((bad, good), (good, bad), (bad, bad)):
            try:
                result = _compare.compare_files(str(t), str(b), _compare.CompareOptions())
            except _compare.DumpFormatError as exc:
                assert "doc" in str(exc), str(exc)  # names the file
            else:
                assert len(result.rows) >= 0


# ---------------------------------------------------------------- attack list (issue 28)
#
# Each entry: a hostile file, what graphprobe must do with it. The crafted
# .pt files are in crafted_pt.py (shared with scripts/asan_parsers.sh).
#
# D1  a .pt whose pickle claims more elements than its storage holds (and the
#     other claims in crafted_pt.ATTACKS: offsets, strides, overflow, a lying
#     zip directory, hostile pickle opcodes) -> the row names the file and the
#     claim; no signal, no metrics from memory outside the file.
# D5  a torn/sparse dump.json (NUL bytes) -> DumpFormatError naming the file
#     and the byte offset, quickly, with memory far below the file's size.

import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import crafted_pt  # noqa: E402

_ENTRY = "Functional.{}.0.forward"


def _tensor_dump(folder: Path, files: dict[str, bytes]) -> None:
    """A tensor dump with one entry per file, each output record pointing at it."""
    data_dir = folder / "dump_tensor_data"
    data_dir.mkdir(parents=True)
    data = {}
    for name, blob in files.items():
        entry = _ENTRY.format(name)
        (data_dir / f"{entry}.output.0.pt").write_bytes(blob)
        data[entry] = {"input_args": [], "input_kwargs": {}, "output": [{
            "type": "torch.Tensor", "dtype": "torch.float32", "shape": [4], "Max": 4.0, "Min": 1.0, "Mean": 2.5,
            "Norm": 5.477225575051661, "requires_grad": False, "data_name": f"{entry}.output.0.pt"}]}
    (folder / "dump.json").write_text(json.dumps({"task": "tensor", "level": "L1", "data": data}))


def _good_pt() -> bytes:
    import io

    import torch

    buf = io.BytesIO()
    torch.save(torch.tensor([1.0, 2.0, 3.0, 4.0]), buf)
    return buf.getvalue()


@pytest.mark.parametrize("layout", ["msprobe", "graphprobe"])
def test_d1_crafted_tensor_files_are_refused_naming_the_file(tmp_path, layout):
    import csv

    from graphprobe.compare import Pair, compare_pair

    good = _good_pt()
    _tensor_dump(tmp_path / "t", {name: blob for name, (blob, _) in crafted_pt.ATTACKS.items()})
    _tensor_dump(tmp_path / "b", {name: good for name in crafted_pt.ATTACKS})
    out = tmp_path / "out"
    outcome = compare_pair(Pair(None, "0", tmp_path / "t" / "dump.json", tmp_path / "b" / "dump.json"),
                           out / "r.csv", out / "r.html", tensor_layout=layout)
    assert outcome.error is None, outcome.error
    with open(out / "r.csv", newline="") as f:
        rows = {r["NPU Name"].split(".")[1]: r for r in csv.DictReader(f)}
    assert set(rows) == set(crafted_pt.ATTACKS)
    for name, (_, why) in crafted_pt.ATTACKS.items():
        row = rows[name]
        path = tmp_path / "t" / "dump_tensor_data" / f"{_ENTRY.format(name)}.output.0.pt"
        messages = json.loads(row["Err_message"])
        assert any(str(path) in m and why in m for m in messages), (name, messages)
        assert row["Cosine"] in ("unsupported", "N/A"), (name, row["Cosine"])


def test_d1_large_claim_in_parallel_compare_is_not_a_crash(tmp_path):
    """Two rank pairs compared by worker processes: the file claiming 2^28
    floats used to kill its worker (SIGSEGV, reported "out of memory (0 MB)")."""
    good = _good_pt()
    blob = crafted_pt.ATTACKS["large_claim"][0]
    for rank in (0, 1):
        _tensor_dump(tmp_path / "t" / "step0" / f"rank{rank}", {"large_claim": blob})
        _tensor_dump(tmp_path / "b" / "step0" / f"rank{rank}", {"large_claim": good})
    proc = subprocess.run([sys.executable, "-m", "graphprobe.cli", "compare", str(tmp_path / "t"),
                           str(tmp_path / "b"), "-o", str(tmp_path / "out"), "-q", "-j", "2"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "out of memory" not in proc.stderr and "Traceback" not in proc.stderr
    texts = [p.read_text() for p in (tmp_path / "out").rglob("compare_result_*.csv")]
    assert len(texts) == 2
    assert all("claims 268435456 elements of 4 bytes (1073741824 bytes), but holds 16 bytes" in t for t in texts)


_SPARSE_CHILD = """
import resource, sys, time
from graphprobe import _compare
path = sys.argv[1]
print("BEFORE_KB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)  # after the imports (torch among them)
start = time.monotonic()
try:
    _compare.compare_files(path, path, _compare.CompareOptions())
except _compare.DumpFormatError as e:
    print("ERROR", e)
print("SECONDS", time.monotonic() - start)
print("MAXRSS_KB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


@pytest.mark.parametrize("head", [b"", b'{"task": "statistics", "data": {"Functional.a.0.forward": {}, '])
def test_d5_sparse_dump_json_fails_fast_with_bounded_memory(tmp_path, head):
    """A 2 GiB dump.json that is a hole (NUL bytes, no disk), alone or after a
    valid beginning -- a torn file. It used to be read whole (2 GiB resident,
    ~9 s) before the error at 1:1."""
    path = tmp_path / "dump.json"
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(2 << 30)
    proc = subprocess.run([sys.executable, "-c", _SPARSE_CHILD, str(path)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    assert lines["ERROR"].startswith(f"{path}: byte {len(head)} is a NUL byte, which JSON never holds"), lines
    assert "torn or sparse" in lines["ERROR"]
    assert float(lines["SECONDS"]) < 5.0
    # The read adds at most one 16 MiB piece to what the imports hold.
    assert int(lines["MAXRSS_KB"]) - int(lines["BEFORE_KB"]) < 64 * 1024, lines


_AMPLIFY_CHILD = """
import resource, sys, time
import torch  # noqa: F401  (the extension links against its libraries)
from graphprobe import _C
path, good = sys.argv[1], sys.argv[2]
print("BEFORE_KB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)  # after the imports (torch among them)
start = time.monotonic()
try:
    _C.tensor_metrics(path, good)
except _C.TensorFileError as e:
    print("ERROR", str(e).replace(chr(10), " "))
print("SECONDS", time.monotonic() - start)
print("MAXRSS_KB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


@pytest.mark.parametrize("name", ["memo_long_key_reused", "memo_storage_reused", "memo_sizes_reused",
                                  "memo_tensor_reused", "long_stack_global"])
def test_memoised_values_reused_do_not_amplify_memory(tmp_path, name):
    """A 64 KiB pickle that reuses a memoised value (a 32 KB string as a
    storage key, a 10,000-entry sizes tuple) in every 3-5 bytes: the reader
    copied it at each use (925 MB and 1.72 GB resident, 3.5 s). It is refused
    at the second use, or at the first for a value longer than torch.save
    ever writes, within a few MiB."""
    blob, why = crafted_pt.ATTACKS[name]
    path, good = tmp_path / f"{name}.pt", tmp_path / "good.pt"
    path.write_bytes(blob)
    good.write_bytes(_good_pt())
    proc = subprocess.run([sys.executable, "-c", _AMPLIFY_CHILD, str(path), str(good)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    assert str(path) in lines["ERROR"] and why in lines["ERROR"], lines
    assert float(lines["SECONDS"]) < 2.0, lines
    assert int(lines["MAXRSS_KB"]) - int(lines["BEFORE_KB"]) < 32 * 1024, lines


def test_fifo_tensor_file_is_refused_without_blocking(tmp_path):
    """A FIFO named as a tensor file: open() without O_NONBLOCK waited for a
    writer forever, before the regular-file check could refuse it."""
    fifo = tmp_path / "fifo.pt"
    os.mkfifo(fifo)
    good = tmp_path / "good.pt"
    good.write_bytes(_good_pt())
    proc = subprocess.run([sys.executable, "-c", _AMPLIFY_CHILD, str(fifo), str(good)], capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    assert f"tensor file '{fifo}' is not a regular file" in lines["ERROR"], lines

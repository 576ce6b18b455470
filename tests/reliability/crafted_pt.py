"""Crafted torch.save files: a pickle that claims more than the file holds.

Used by tests/reliability/test_hostile_input.py (compare must refuse each one
with a message naming the file, never read out of bounds) and by the C++
unit test csrc/tests/test_pt_archive.cpp, which reads every one and checks
the refusal's reason: its ctest run (scripts/run_cpp_tests.sh, in CI) and
scripts/asan_parsers.sh (the same under ASan/UBSan) write them first with
``python crafted_pt.py DIR``.

Each file is a zip archive as torch.save writes it (stored records
``archive/data.pkl``, ``archive/version``, ``archive/byteorder``,
``archive/data/0``) around a
protocol-2 pickle assembled here opcode by opcode, so that every claim can be
set independently of the bytes really stored.
"""

from __future__ import annotations

import io
import struct
import sys
import zipfile
from pathlib import Path


def _int(v: int) -> bytes:
    if 0 <= v < 256:
        return b"K" + bytes([v])
    if 0 <= v < 65536:
        return b"M" + struct.pack("<H", v)
    if -(2**31) <= v < 2**31:
        return b"J" + struct.pack("<i", v)
    return b"\x8a\x08" + struct.pack("<q", v)


def _str(s: str) -> bytes:
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def _ints(v: list[int]) -> bytes:
    return b"(" + b"".join(_int(x) for x in v) + b"t"


def tensor_pickle(storage_numel: int, size: list[int], stride: list[int], offset: int = 0,
                  storage: str = "FloatStorage", key: str = "0") -> bytes:
    """The pickle torch.save writes for a tensor (``_rebuild_tensor_v2``),
    with every number chosen by the caller."""
    return (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n(("
            + _str("storage") + b"ctorch\n" + storage.encode() + b"\n" + _str(key) + _str("cpu")
            + _int(storage_numel) + b"tQ" + _int(offset) + _ints(size) + _ints(stride)
            + b"\x89ccollections\nOrderedDict\n)RtR.")


def archive(pickle: bytes, storage: bytes, *, extra: dict[str, bytes] | None = None) -> bytes:
    """A zip archive as torch.save writes it around ``pickle`` and the storage bytes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pickle)
        z.writestr("archive/version", b"3\n")  # torch's own C++ reader requires it
        z.writestr("archive/byteorder", b"little")
        z.writestr("archive/data/0", storage)
        for name, data in (extra or {}).items():
            z.writestr(name, data)
    return buf.getvalue()


FLOATS16 = struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)

# name -> (file bytes, what the error must say). Every one of these is a file
# torch.load refuses too.
ATTACKS: dict[str, tuple[bytes, str]] = {
    # D1 as reported: the storage claims 2^28 floats, the file holds 4.
    "large_claim": (archive(tensor_pickle(1 << 28, [1 << 28], [1]), FLOATS16), "holds 16 bytes"),
    # The small claim that used to give metrics from heap memory.
    "small_claim": (archive(tensor_pickle(8, [8], [1]), FLOATS16), "holds 16 bytes"),
    # Storage honest, the tensor's size reaches past it.
    "size_past_storage": (archive(tensor_pickle(4, [5], [1]), FLOATS16), "reads past the end of the storage"),
    "offset_past_storage": (archive(tensor_pickle(4, [2], [1], offset=3), FLOATS16), "reads past the end"),
    "stride_past_storage": (archive(tensor_pickle(4, [2, 2], [3, 1]), FLOATS16), "reads past the end"),
    "negative_stride": (archive(tensor_pickle(4, [2], [-1], offset=1), FLOATS16), "negative value -1"),
    "negative_size": (archive(tensor_pickle(4, [-2], [1]), FLOATS16), "negative value -2"),
    "negative_offset": (archive(tensor_pickle(4, [1], [1], offset=-1), FLOATS16), "offset is negative"),
    "numel_overflow": (archive(tensor_pickle(4, [2**62, 8], [1, 1]), FLOATS16), "more elements than any file"),
    "stride_overflow": (archive(tensor_pickle(4, [3], [2**62]), FLOATS16), "strides reach past"),
    "storage_bytes_overflow": (archive(tensor_pickle(2**62, [1], [1]), FLOATS16), "more than any file holds"),
    # Zero strides: 2^40 elements from 4 stored (no memory outside the file,
    # but an element count the file does not bound).
    "repeated_elements": (archive(tensor_pickle(4, [2**20, 2**20], [0, 0]), FLOATS16), "zero or overlapping strides"),
    "size_stride_rank_differ": (archive(tensor_pickle(4, [2, 2], [1]), FLOATS16), "2 sizes but 1 strides"),
    "missing_storage_record": (archive(tensor_pickle(4, [4], [1], key="7"), FLOATS16), "data/7') is missing"),
    # The pickle machine itself.
    "huge_memo_id": (archive(b"\x80\x02N" + b"r\xff\xff\xff\xff" + b"j\xfe\xff\xff\xff.", FLOATS16),
                     "reads memo 4294967294, never stored"),
    "odd_setitems": (archive(b"\x80\x02}(K\x01u.", FLOATS16), "odd number of values"),
    "stack_underflow": (archive(b"\x80\x02R.", FLOATS16), "empty stack"),
    "mark_underflow": (archive(b"\x80\x02Nt.", FLOATS16), "never opened"),
    "truncated_pickle": (archive(tensor_pickle(4, [4], [1])[:-9], FLOATS16), "ends"),
    "unknown_call": (archive(b"\x80\x02cos\nsystem\n" + _str("true") + b"\x85R.", FLOATS16),
                     "calls 'os system'"),
    "long_string_claim": (archive(b"\x80\x02X\xff\xff\xff\x7f", FLOATS16), "ends in the middle of a value"),
}


def _memo_reuse_pickle(key: bytes, reuse: bytes, sizes: int = 0) -> bytes:
    """A 64 KiB pickle that reuses memoised values until it is full: each use
    of ``reuse`` (3-5 bytes) made the reader copy what the memo holds."""
    if sizes:  # _rebuild_tensor_v2 (memo 0), a sizes tuple (memo 1), its call's arguments (memo 2)
        p = bytearray(b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\nq\x00")
        p += b"(" + b"K\x01" * sizes + b"tq\x01"
        p += (b"((" + _str("storage") + b"ctorch\nFloatStorage\n" + _str("0") + _str("cpu") + b"K\x01tQ"
              + b"K\x00h\x01h\x01\x89}tq\x02")
    else:  # a string (memo 0) as the key and location of a persistent id (memo 1)
        p = bytearray(b"\x80\x02" + b"X" + struct.pack("<I", len(key)) + key + b"q\x00")
        p += b"(" + _str("storage") + b"ctorch\nFloatStorage\n" + b"h\x00h\x00K\x01tq\x01"
    while len(p) < (64 << 10) - 8:
        p += reuse
    return bytes(p + b".")


# Memory amplification: a pickle of 64 KiB whose memoised values were copied
# at every use. Reading one must stay within a few MiB
# (test_hostile_input.py measures it); each used to take 0.9-1.7 GB.
ATTACKS["memo_long_key_reused"] = (archive(_memo_reuse_pickle(b"a" * 32000, b"h\x01Q"), FLOATS16),
                                   "the storage key of 32000 bytes")
ATTACKS["memo_storage_reused"] = (archive(_memo_reuse_pickle(b"0", b"h\x01Q"), FLOATS16),
                                  "loads a second storage")
ATTACKS["memo_sizes_reused"] = (archive(_memo_reuse_pickle(b"", b"h\x00h\x02R", sizes=10000), FLOATS16),
                                "the size has 10000 dimensions")
ATTACKS["memo_tensor_reused"] = (archive(_memo_reuse_pickle(b"", b"h\x00h\x02R", sizes=4), FLOATS16),
                                 "rebuilds a second tensor")
ATTACKS["long_stack_global"] = (archive(b"\x80\x02" + _str("m" * 1000) + b"q\x00" + _str("n") + b"q\x01"
                                        + b"h\x00h\x01\x93" * 4 + b".", FLOATS16),
                                "a STACK_GLOBAL module name of 1000 bytes")


def _truncated_zip() -> bytes:
    good = archive(tensor_pickle(4, [4], [1]), FLOATS16)
    return good[: len(good) // 2]


def _lying_directory() -> bytes:
    """The zip directory says the storage record is 1 GiB long."""
    good = bytearray(archive(tensor_pickle(4, [4], [1]), FLOATS16))
    cd = good.rfind(b"PK\x01\x02")  # the last directory entry, then backwards
    while cd >= 0:
        name_len = struct.unpack_from("<H", good, cd + 28)[0]
        if bytes(good[cd + 46: cd + 46 + name_len]) == b"archive/data/0":
            struct.pack_into("<II", good, cd + 20, 1 << 30, 1 << 30)
            break
        cd = good.rfind(b"PK\x01\x02", 0, cd)
    return bytes(good)


ATTACKS["truncated_zip"] = (_truncated_zip(), "not a readable torch.save archive")
ATTACKS["lying_zip_directory"] = (_lying_directory(), "claims 1073741824 bytes")
ATTACKS["not_a_zip"] = (b"not a zip archive at all, just text", "no zip end-of-directory record")


def write_all(folder: Path) -> list[Path]:
    """Writes every attack file into ``folder`` as ``<name>.pt``, and beside
    it ``<name>.why``: what the refusal must say (UTF-8, no newline), which
    csrc/tests/test_pt_archive.cpp checks."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, (data, why) in ATTACKS.items():
        path = folder / f"{name}.pt"
        path.write_bytes(data)
        path.with_suffix(".why").write_text(why, encoding="utf-8")
        out.append(path)
    return out


if __name__ == "__main__":
    for p in write_all(Path(sys.argv[1])):
        print(p)

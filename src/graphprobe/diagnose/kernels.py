"""The generated kernels that compute the origin module's output, read from
inductor's output code (``TORCH_LOGS=output_code``) of a run that records
only the origin: graphprobe's probe ops on the origin's outputs are calls
in that code (``torch.ops.graphprobe.record_stats.default(buf6, 1, 0)``),
so the kernel that last wrote a probed buffer before the probe computed
that output.

A kernel writes a buffer when the buffer is a non-``const`` argument of a
C++ kernel (its ``cpp_pybinding`` signature), the ``out=`` of an extern
kernel, or any argument of another (Triton) kernel; ``bufA = bufB; del bufB
# reuse`` and ``reinterpret_tensor`` views alias buffers, also where the probe
or the kernel takes the view itself (``record_stats(reinterpret_tensor(buf16,
...))`` after ``extern_kernels.addmm(..., out=buf16)``). Inductor's
provenance tracking (``trace.provenance_tracking_level``) maps kernels to
FX node names, which carry no module path; the probes carry it."""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["kernels_from_log"]

_PREFIX = re.compile(r"^.*?\[__output_code\] ?")
_CPP_SIG = re.compile(r"^(\w+) = async_compile\.cpp_pybinding\(\[([^\]]*)\]")
# The probe's first argument: a buffer, or a view of one (``reinterpret_tensor(buf16, (2, 8), (8, 1), 0)``).
_PROBE = re.compile(r"torch\.ops\.graphprobe\.\w+\.\w+\((?:reinterpret_tensor\(\s*)?(\w+)")
_VIEW = re.compile(r"^(?:out\s*=\s*)?(?:reinterpret_tensor\(\s*)?(\w+)")
_CALL = re.compile(r"^\s*((?:extern_kernels\.)?\w+)(?:\.run)?\((.*)\)\s*$")
_ALIAS = re.compile(r"^\s*(\w+) = (?:reinterpret_tensor\()?(\w+)\b")


def _split_args(text: str) -> list[str]:
    """Top-level comma-separated arguments of a call."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _blocks(log: str) -> list[list[str]]:
    """The output-code listings in a log, each as its lines."""
    blocks: list[list[str]] = []
    for raw in log.splitlines():
        if "[__output_code]" not in raw:
            if blocks and not raw.startswith(("V", "I", "W", "E")):  # a listing's continuation lines
                blocks[-1].append(raw)
            continue
        line = _PREFIX.sub("", raw)
        if line.startswith("Output code:"):
            blocks.append([])
        elif blocks and not line.startswith("Output code written"):
            blocks[-1].append(line)
    return blocks


def _buffer(arg: str) -> str | None:
    """The buffer an argument names: ``buf3``, ``out=buf3``, or the base
    of a view, ``reinterpret_tensor(buf3, ...)`` (also after ``out=``)."""
    m = _VIEW.match(arg.strip())
    return m.group(1) if m else None


def _writes(name: str, args: list[str], cpp: dict[str, list[bool]], buf: str) -> bool:
    if name.startswith("extern_kernels."):
        return any(a.replace(" ", "").startswith("out=") and _buffer(a) == buf for a in args)
    if name in cpp:
        return any(_buffer(a) == buf and i < len(cpp[name]) and not cpp[name][i] for i, a in enumerate(args))
    return any(_buffer(a) == buf for a in args if "=" not in a.split("(", 1)[0])


def _kernels_in(lines: list[str], outputs: int) -> list[str]:
    cpp: dict[str, list[bool]] = {}
    for line in lines:
        m = _CPP_SIG.match(line)
        if m:
            cpp[m.group(1)] = ["const" in t for t in m.group(2).split(",")]
    try:
        start = next(i for i, line in enumerate(lines) if re.match(r"\s*def call\(", line))
    except StopIteration:
        return []
    body = lines[start:]
    probes = [(i, m.group(1)) for i, line in enumerate(body) if (m := _PROBE.search(line))]
    found: list[str] = []
    for at, buf in probes[-outputs:] if outputs > 0 else []:
        want = buf
        for line in reversed(body[:at]):
            stripped = line.strip()
            if stripped.startswith("#") or _PROBE.search(line):
                continue
            alias = _ALIAS.match(line)
            if alias and alias.group(1) == want and "=" in line and "(" not in line.split("=", 1)[0]:
                if not re.search(r"empty_strided|empty\(", line):
                    want = alias.group(2)  # a reused or reinterpreted buffer: its writer came before
                    continue
            m = _CALL.match(line)
            if m and "=" not in m.group(1):
                name, args = m.group(1), _split_args(m.group(2))
                if name in ("del", "assert_size_stride", "print") or name.startswith("torch."):
                    continue
                if _writes(name, args, cpp, want):
                    if name not in found:
                        found.append(name)
                    break
    return found


def kernels_from_log(log: Path, outputs: int) -> list[str]:
    """The kernels that wrote the buffers of the last ``outputs`` probe
    calls of each compiled graph in ``log`` (empty when none is found)."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    found: list[str] = []
    for block in _blocks(text):
        for k in _kernels_in(block, outputs):
            if k not in found:
                found.append(k)
    return found

"""graphprobe's benchmarks: the cost of recording, as ratios measured in one run.

Run ``python -m benchmarks`` (full, under 10 minutes on 2 cores),
``--quick`` (about 2 minutes) or ``--smoke`` (seconds; for the test suite).
See benchmarks/README.md for the columns and how to read them.

One idea per module: :mod:`benchmarks.models` (what runs),
:mod:`benchmarks.variants` (how it runs: eager, compiled, CUDA graph, with
graphprobe L0/L1, with hooks), :mod:`benchmarks.measure` (timing, memory,
bytes), :mod:`benchmarks.floor` (read bandwidth and the stats kernel's cost),
:mod:`benchmarks.report` (goals, Markdown, JSON), :mod:`benchmarks.suite`
(the plan and the run).
"""

from __future__ import annotations

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    from benchmarks.__main__ import main as _main

    return _main(argv)

"""The writer thread's lifecycle, shared by ``acl_save`` files and dump.json
documents: :func:`flush`, the byte budget of data in flight, the counters,
and the exit hook that writes what is pending before the interpreter ends.
The thread itself is C++ (csrc/writer)."""

from __future__ import annotations

import atexit
import sys

import torch

from graphprobe._ops import _C

__all__ = ["DEFAULT_WRITE_BUDGET", "WriteError", "flush", "set_write_budget", "writer_stats"]

#: Raised by :func:`flush` when writes failed on the writer thread (an OSError).
WriteError = _C.IoError

#: Bytes of saved data that may be in flight (copied, not yet written) at once.
DEFAULT_WRITE_BUDGET: int = int(_C.WRITER_DEFAULT_BUDGET)


def _devices_to_synchronize() -> list[int]:
    """The CUDA devices graphprobe used in this process (a record table or a
    saved tensor on them), ascending; empty while CUDA is not initialised.

    Only these: synchronising every visible device would create a CUDA
    context (~0.5 GB) on each one, in every rank process, and fails on a
    device in EXCLUSIVE_PROCESS mode that another rank holds.
    """
    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return []
    return [int(d) for d in _C.cuda_devices_used()]


def _synchronize_devices() -> None:
    # Replays still queued on a device have not run their host callbacks yet;
    # waiting for the devices makes flush() cover them.
    for device in _devices_to_synchronize():
        torch.cuda.synchronize(device)
    # The NPU (through its runtime; nothing when none is registered).
    _C.synchronize_privateuse1()


def flush() -> None:
    """Waits until every file graphprobe queued so far (acl_save files and
    dump.json documents) is written.

    Synchronises the CUDA devices graphprobe used and the current NPU (so that graph replays
    still queued have handed over their data), then waits for the writer. Raises
    :data:`WriteError` (an ``OSError``) naming the files that could not be
    written since the previous ``flush()``; later saves are unaffected.
    """
    _synchronize_devices()
    _C.writer_flush()


def set_write_budget(nbytes: int) -> None:
    """Sets the byte budget for saved data in flight (default 256 MiB).

    When copies not yet written reach the budget, the next save waits (on
    CUDA graph replay: the stream waits) until the writer catches up. A single
    tensor larger than the budget is admitted once nothing else is in flight.
    """
    nbytes = int(nbytes)
    if nbytes <= 0:
        raise ValueError(f"set_write_budget: nbytes must be positive, got {nbytes}")
    _C.writer_set_budget(nbytes)


def writer_stats(reset_peak: bool = False) -> dict[str, int]:
    """The writer's counters: ``budget_bytes``, ``bytes_in_flight``,
    ``peak_bytes_in_flight``, ``files_written``, ``failed_writes`` (since the
    process started) and ``pending`` (saves not yet written). With
    ``reset_peak`` the peak restarts from the current bytes in flight after
    being read."""
    stats = dict(_C.writer_stats())
    if reset_peak:
        _C.writer_reset_peak()
    return stats


def _at_exit() -> None:
    # Interpreter exit: write what is pending and join the writer thread. An
    # exception cannot propagate from here usefully, so failures are printed.
    try:
        _synchronize_devices()
    except Exception as exc:  # pragma: no cover - a broken device at exit
        print(f"graphprobe: could not synchronise CUDA at exit: {exc}", file=sys.stderr)
    errors = _C.writer_shutdown()
    if errors:
        print(errors, file=sys.stderr)


atexit.register(_at_exit)

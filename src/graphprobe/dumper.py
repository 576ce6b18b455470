"""AclGraphDumper: whole-network statistics recorded inside graphs.

Example::

    dumper = AclGraphDumper("config.json")
    dumper.start(model)               # before torch.compile / graph capture
    with torch.cuda.graph(g):
        out = model(static_input)
    for batch in batches:
        static_input.copy_(batch)
        g.replay()
        dumper.step()                 # dump_path/step{N}/pid{P}/dump.json

``start`` adds probe ops through hooks; the ops are compiled or captured
with the model and write device-resident records on every execution;
``step`` brings this step's records back with one copy per device.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import warnings
import weakref
from typing import Any

import torch

from graphprobe import _ops
from graphprobe import npu as _npu
from graphprobe import saving as _saving  # noqa: F401  (its atexit hook writes pending dump.json files)
from graphprobe.config import ConfigValueError, DumpConfig, load_config
from graphprobe.dump_folder import check_module_names, prepare_dump_path
from graphprobe.dynamo_cache import drop_unguarded_compiled_forwards, guard_module_hooks
from graphprobe.output_files import make_dirs
from graphprobe.wiring.apis import ApiWiring
from graphprobe.wiring.modules import ModuleWiring
from graphprobe.wiring.probe import new_session

__all__ = ["AclGraphDumper", "GraphDumper", "DumperStateError", "DumpWriteError", "current_rank"]

_C = _ops._C


class DumperStateError(RuntimeError):
    """A dumper method was called in an order that cannot work."""


class DumpWriteError(OSError):
    """A step folder, dump.json or tensor file could not be written; the
    message names the file and how many records were lost. Steps are written
    by a background thread, so a failure is raised by the next ``step()``,
    ``flush()`` or ``stop()``. The dumper stays usable: later steps are
    written once the cause (disk full, permissions, ...) is gone."""


def current_rank() -> int | None:
    """The torch.distributed rank, or ``RANK`` from the environment (torchrun
    sets it before the process group exists), or None for a single process."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank()
    env = os.environ.get("RANK")
    if env is None or env == "":
        return None
    if not (env.isascii() and env.isdigit()):  # "²".isdigit() is True, int("²") fails
        raise ConfigValueError(f"environment variable RANK: got {env!r}; allowed: a non-negative integer "
                               "(torchrun sets it), or unset it")
    return int(env)


class AclGraphDumper:
    """Whole-network statistics dumper (msprobe's ``AclGraphDumper``).

    Args:
        config_path: path of a ``config.json``; ``None`` loads the built-in
            default (L0 statistics of every module into ``./graphprobe_dump``).
    """

    # The engine's record store is one per process, so one dumper may be
    # started at a time.
    _started: weakref.ref[AclGraphDumper] | None = None

    def __init__(self, config_path: str | os.PathLike[str] | None = None) -> None:
        self.config: DumpConfig = load_config(config_path)
        self._wiring: list[Any] = []
        self._started_once = False
        self._active = False
        self._selected = True
        self._step = 0
        self._failed_records_base = 0
        self._write_seq = -1  # the writer job of the latest step (see step())
        self._staging: str | None = None  # tensor task: where tensors wait for step()
        self._enabled = self.config.dump_enable
        self._config_mtime = self._mtime()
        self._warned_empty = False  # the "step recorded nothing" warning is given once

    @property
    def step_number(self) -> int:
        """The N of the next ``step{N}`` folder."""
        return self._step

    def start(self, model: torch.nn.Module) -> None:
        """Wires ``model``. Call before ``torch.compile`` or graph capture.

        Graphs captured before ``start()`` contain no probes and record
        nothing. For torch.compile, ``start()`` turns on dynamo's guards on
        module hooks (``torch._dynamo.config.skip_nnmodule_hook_guards =
        False``, process-wide), so code compiled from then on is recompiled
        with the probes instead of being silently reused; code that dynamo compiled
        for the model's classes before that is dropped (so that it recompiles
        with the probes) and reported with a warning.

        ``model`` may be the ``OptimizedModule`` that ``torch.compile``
        returns: its original module is wired, so records carry the eager
        names (no ``_orig_mod.``) and match an eager dump.
        """
        model = _unwrap_compiled(model)
        _npu.ensure_runtime()  # torch_npu may have been imported after graphprobe
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"AclGraphDumper.start: model must be a torch.nn.Module, got {type(model).__name__}")
        if self._started_once:
            raise DumperStateError("AclGraphDumper.start was already called on this dumper; create a new one")
        other = AclGraphDumper._started() if AclGraphDumper._started else None
        if other is not None and other._active:
            raise DumperStateError("another AclGraphDumper is started in this process; call its stop() first")
        rank = current_rank()
        self._started_once = True
        self._selected = rank is None or self.config.selects_rank(rank)
        if not self._selected:
            return  # ranks not selected wire nothing and record nothing
        # Dynamo does not guard on module hooks by default: code compiled for
        # an unwired instance of the same class would be reused for this one
        # and record nothing. Guarding on hooks (process-wide, a few more
        # guard checks per call) makes wired models compile their own graph.
        if guard_module_hooks():
            _warn_compiled_before_start(model)
        check_module_names(model)
        # Absolute from here on: a later os.chdir() must not move the dump.
        self.config = dataclasses.replace(self.config, dump_path=prepare_dump_path(self.config.dump_path))
        if self.config.task == "tensor":
            # Full tensors are staged per probe and moved to their record
            # names at step(); the folder is hidden inside dump_path so that
            # renames never cross file systems.
            self._staging = os.path.join(self.config.dump_path, f".staging_pid{os.getpid()}")
            make_dirs(self._staging)
            _C.set_tensor_staging(self._staging)
        if self.config.level in ("L0", "mix"):
            self._wiring.append(ModuleWiring(model, self.config.keywords))
        if self.config.level in ("L1", "mix"):
            self._wiring.append(ApiWiring(model, self.config.keywords))
        _C.finish_step(None, self.config.task, self.config.level)  # records made before start() are not ours
        self._failed_records_base = _C.writer_stats()["failed_records"]
        _C.set_enabled(self._enabled)
        _C.set_active(True)
        self._active = True
        AclGraphDumper._started = weakref.ref(self)

    def step(self, dump: bool = True) -> None:
        """Ends an iteration: hands this step's records to the writer thread
        and advances N.

        Only the collection of the rows (one copy per device) runs on the
        caller's thread; the step folder, dump.json and (tensor task) the
        tensor files are made by the writer thread. step() waits for the
        previous step's files, which had a whole iteration to be written,
        and, once this step is queued, raises :class:`DumpWriteError` if they
        (or anything else queued before) failed; this step's failures are
        raised by the next ``step()``, :meth:`flush` or :meth:`stop`.

        ``dump=False`` discards the records (warm-up and dummy runs) and does
        not advance N. Does nothing on a rank that ``rank`` does not select or
        after ``stop()``; raises :class:`DumperStateError` before ``start()``
        (nothing is wired, so nothing could have been recorded). The first
        step that records nothing while recording is on warns once, with the
        likely cause.
        """
        if not self._started_once:
            raise DumperStateError(
                "AclGraphDumper.step was called before start(model): nothing is wired, so nothing was recorded; "
                "call dumper.start(model) before torch.compile / graph capture and the first iteration"
            )
        if not isinstance(dump, bool):
            raise TypeError(f"AclGraphDumper.step: dump must be a bool, got {dump!r} ({type(dump).__name__})")
        if not self._active:
            return
        recording = self._enabled
        if not dump:
            summary = _C.finish_step(None, self.config.task, self.config.level)
        else:
            # With the switch off and nothing recorded, no folder is written;
            # N still counts iterations so step numbers line up with the bench.
            step_dir = self._step_dir()
            self._step += 1
            # The previous step's files had a whole iteration to reach the
            # disk. Its failures are taken before this step's job is queued,
            # so they are raised here, and this step's by the next call.
            errors = self._wait_and_take_errors(self._write_seq)
            try:
                summary = _C.finish_step(step_dir, self.config.task, self.config.level, self._enabled)
            except Exception as exc:
                if errors:  # both are reported
                    raise DumpWriteError(errors) from exc
                raise
        if summary["write_seq"] >= 0:  # the writer runs step jobs in order: the latest covers the earlier
            self._write_seq = summary["write_seq"]
        self._reload_switch()
        self._report(summary)
        if not dump:
            return
        if recording:
            self._warn_if_nothing_recorded(summary)
        if errors:
            raise DumpWriteError(errors)

    def enable(self, on: bool = True) -> None:
        """The live switch: turns recording off or on between iterations,
        without re-compiling or re-capturing.

        Captured probe kernels read the switch from device memory on every
        replay; while it is off they return at once and no record is made.
        A step in which nothing was recorded and that ends with the switch off
        writes no folder (its number is still used, so steps keep counting
        iterations).
        """
        if not isinstance(on, bool):
            raise TypeError(f"AclGraphDumper.enable: expected a bool, got {type(on).__name__}")
        self._enabled = on
        if self._active:
            _C.set_enabled(on)

    @property
    def enabled(self) -> bool:
        """Whether recording is switched on."""
        return self._enabled

    def _mtime(self) -> int | None:
        source = self.config.source
        if source is None or source.startswith("<"):
            return None
        try:
            return os.stat(source).st_mtime_ns
        except OSError:
            return None

    def _reload_switch(self) -> None:
        """msprobe's ``dump_enable``: an edit of the config file between steps
        flips the switch. Only that key is re-read; the rest needs a restart."""
        mtime = self._mtime()
        if mtime is None or mtime == self._config_mtime:
            return
        self._config_mtime = mtime
        try:
            fresh = load_config(self.config.source)
        except Exception as exc:  # a half-saved edit must not kill the job
            warnings.warn(f"graphprobe: config file changed but cannot be used ({exc}); keeping dump_enable="
                          f"{self._enabled}", RuntimeWarning, stacklevel=3)
            return
        if fresh.dump_enable != self._enabled:
            self.enable(fresh.dump_enable)

    @property
    def lost_records(self) -> int:
        """Tensor records lost to failed writes since ``start()``: those of
        steps whose folder or dump.json could not be written, and tensor
        files that could not be moved to their record names."""
        return _C.writer_stats()["failed_records"] - self._failed_records_base

    @staticmethod
    def _wait_and_take_errors(seq: int) -> str:
        """Waits for writer job ``seq`` (and so for every step before it);
        returns the failures not yet reported, empty when none."""
        if seq >= 0:
            _C.writer_wait(seq)
        return _C.writer_take_errors()

    def _check_writes(self, seq: int) -> None:
        errors = self._wait_and_take_errors(seq)
        if errors:
            raise DumpWriteError(errors)

    def flush(self) -> None:
        """Waits until the files of past steps (folders, dump.json, tensor
        files) are on disk; raises :class:`DumpWriteError` if a write failed."""
        self._check_writes(self._write_seq)

    def stop(self) -> None:
        """Removes all wiring and waits for the last dump.json to be written
        (raising :class:`DumpWriteError` if a write failed); probes captured
        in existing graphs stop counting."""
        for w in self._wiring:
            w.remove()
        self._wiring.clear()
        was_active, self._active = self._active, False
        if was_active:
            _C.set_active(False)
            _C.set_enabled(True)
            _C.reset()
            new_session()  # code traced under this dumper holds the sites reset() forgot: recompile it
            if self._staging is None:
                self._check_writes(self._write_seq)
                return
            _C.set_tensor_staging(None)
            try:
                self._check_writes(self._write_seq)  # the last step still moves files out of staging
            finally:
                shutil.rmtree(self._staging, ignore_errors=True)
                self._staging = None

    def _step_dir(self) -> str:
        rank = current_rank() if torch.distributed.is_available() and torch.distributed.is_initialized() else None
        leaf = f"rank{rank}" if rank is not None else f"pid{os.getpid()}"
        return os.path.join(self.config.dump_path, f"step{self._step}", leaf)

    def _report(self, summary: dict[str, Any]) -> None:
        dropped = summary.get("dropped", 0)
        if dropped:
            warnings.warn(
                f"graphprobe: {dropped} records were dropped since the last step because the record table "
                "is full; call step() after every iteration",
                RuntimeWarning,
                stacklevel=3,
            )
        overwritten = summary.get("overwritten") or []
        if overwritten:
            shown = ", ".join(overwritten[:5]) + (" ..." if len(overwritten) > 5 else "")
            warnings.warn(
                f"graphprobe: {len(overwritten)} records were written more than once since the last step "
                f"(several replays per step; only the latest values are kept, see 'write_count'): {shown}",
                RuntimeWarning,
                stacklevel=3,
            )

    def _warn_if_nothing_recorded(self, summary: dict[str, Any]) -> None:
        if self._warned_empty or summary.get("records", 0) or not self._wiring:
            return
        self._warned_empty = True
        keywords = self.config.keywords
        hint = f" or statistics.list {list(keywords)} matches nothing that ran" if keywords else ""
        warnings.warn(
            f"graphprobe: step {self._step - 1} recorded nothing although the model is wired and recording is on. "
            "Likely cause: the model was compiled (torch.compile) or captured (CUDA graph) before start(), so the "
            "code that ran has no probes; fix: call torch._dynamo.reset() (or capture again) after start(), or "
            f"start() before compiling; also possible: the wired model did not run in this step{hint}. "
            "(warned once per dumper)",
            RuntimeWarning,
            stacklevel=3,
        )


def _unwrap_compiled(model: Any) -> Any:
    """The module inside ``torch.compile``'s ``OptimizedModule``: wiring it
    keeps the eager record names, and the compiled wrapper traces its hooks."""
    optimized = getattr(getattr(torch, "_dynamo", None), "OptimizedModule", None)
    if optimized is not None and isinstance(model, optimized):
        return model._orig_mod
    return model


def _warn_compiled_before_start(model: torch.nn.Module) -> None:
    stale, dropped = drop_unguarded_compiled_forwards(model)
    if not stale:
        return
    if dropped:
        what = ("graphprobe dropped it, so the next compiled call recompiles with the probes (other instances of "
                "these classes recompile once too)")
    else:
        what = "call torch._dynamo.reset() before start(), or compile only after start()"
    warnings.warn(
        f"graphprobe: start(): torch.compile held code compiled before start() for {', '.join(stale)}, without "
        f"guards on module hooks: called through the same torch.compile wrapper it would run without probes and "
        f"record nothing; {what}.",
        RuntimeWarning,
        stacklevel=3,
    )


GraphDumper = AclGraphDumper

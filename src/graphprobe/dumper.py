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

import atexit
import dataclasses
import os
import shutil
import sys
import warnings
import weakref
from collections.abc import Mapping
from typing import Any

import torch

from graphprobe import _ops
from graphprobe import aclgraph_layout as _aclgraph
from graphprobe import npu as _npu
from graphprobe import writer as _writer  # its atexit hook writes pending dump.json files
from graphprobe.config import ConfigValueError, DumpConfig, config_from_arguments, load_config
from graphprobe.config_env import CONFIG_ENV, config_path_from_env, save_repro_module
from graphprobe.dump_folder import (
    make_staging,
    prepare_dump_path,
    release_staging,
    remove_stale_staging,
    step_folders,
)
from graphprobe.dynamo_cache import (
    RecompileBudget,
    drop_unguarded_compiled_forwards,
    guard_module_hooks,
    hooked_instances_per_class,
)
from graphprobe.module_names import check_module_names
from graphprobe.replay.capture import ReplayWiring
from graphprobe.replay.capture import set_recording as set_replay_recording
from graphprobe.replay.judge import replay_at_step
from graphprobe.wiring import api_backward as _api_backward
from graphprobe.wiring import custom_api as _custom_api
from graphprobe.wiring import inductor_fixes as _inductor_fixes
from graphprobe.wiring import slicing as _slicing
from graphprobe.wiring.apis import ApiWiring
from graphprobe.wiring.backward import record_parameter_grads
from graphprobe.wiring.modules import ModuleWiring
from graphprobe.wiring.probe import new_session

__all__ = ["AclGraphDumper", "GraphDumper", "DumperStateError", "DumpWriteError", "current_rank"]

_C = _ops._C
_DIST_AVAILABLE = torch.distributed.is_available()


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


class _Wired:
    """What a started dumper changed in the process: its wiring, the tensor
    task's staging folder and its latest writer job. Kept apart from the
    dumper so that a dumper dropped without ``stop()`` (a re-run notebook
    cell) can still be undone by the next ``start()`` and at exit."""

    def __init__(self, owner: AclGraphDumper, model: torch.nn.Module) -> None:
        self.owner = weakref.ref(owner)
        self.model_name = type(model).__name__
        self.wiring: list[Any] = []
        # Whether any wiring records parameter gradients at step() (set by start()).
        self.param_recorders = False
        self.staging: str | None = None
        self.write_seq = -1
        self.dump_path = ""  # set by start(); named by the exit warning about unwritten records
        self.budget: RecompileBudget | None = None  # dynamo's recompile limits raised for the wired model

    def unwire(self) -> None:
        """Removes the wiring and makes the engine forget this dumper's
        sites; idempotent. Files of finished steps are still written; the
        tensors staged since the last ``step()`` are dropped after the
        writer is done with them (see :meth:`_discard_staged`)."""
        for w in self.wiring:
            w.remove()
        self.wiring.clear()
        if self.budget is not None:
            self.budget.remove()
            self.budget = None
        if AclGraphDumper._live is self:
            if self.staging is not None:
                self._discard_staged()
            AclGraphDumper._live = None
            _C.set_active(False)
            _C.set_enabled(True)
            _C.reset()
            new_session()  # code traced under this dumper holds the sites reset() forgot: recompile it
            if self.staging is not None:
                _C.set_tensor_staging(None)
            _C.set_checksums(False)
            _C.set_sketches(True)

    def _discard_staged(self) -> None:
        """Tensor task without a last ``step()``: the probes have queued
        writes into the staging folder that no step job follows, so
        :meth:`drop_staging` would remove the folder under them and their
        failures would reach the next dumper's ``step()``. Those not yet
        written are dropped, and a job that clears the staging after the
        rest is queued (a discarded step: ``step(dump=False)``); its number
        becomes ``write_seq``, which drop_staging and stop() wait for."""
        if self.staging is None:
            return
        _C.writer_cancel(self.staging + os.sep, self.write_seq)
        summary = _C.finish_step(None, "tensor", "")
        if summary["write_seq"] >= 0:
            self.write_seq = summary["write_seq"]

    def drop_staging(self) -> None:
        """Removes the staging folder once the writer has moved every staged
        tensor of a finished step out of it."""
        if self.staging is None:
            return
        try:
            if self.write_seq >= 0:
                _C.writer_wait(self.write_seq)
        finally:
            shutil.rmtree(self.staging, ignore_errors=True)
            release_staging(self.staging)
            self.staging = None


class AclGraphDumper:
    """Whole-network statistics dumper (msprobe's ``AclGraphDumper``).

    Args:
        config_path: path of a ``config.json``, or a dict of its keys
            (``{"dump_path": "runs/compiled", "level": "mix"}``); ``None``
            with no keyword arguments loads the built-in default (L0
            statistics of every submodule into ``./graphprobe_dump``).
        **config: the config file's keys as keyword arguments, instead of a
            file: ``AclGraphDumper(dump_path="runs/compiled", level="mix")``;
            validated exactly as the file (``dump_path`` required). Not
            together with ``config_path``.

    The environment variable ``GRAPHPROBE_CONFIG``, when set, replaces
    whichever was given (:mod:`graphprobe.config_env`).
    """

    # The engine's record store is one per process, so one dumper may be
    # started at a time.
    _started: weakref.ref[AclGraphDumper] | None = None
    # The wiring of the started dumper; outlives a dumper dropped without stop().
    _live: _Wired | None = None

    def __init__(self, config_path: str | os.PathLike[str] | Mapping[str, Any] | None = None, **config: Any) -> None:
        # $GRAPHPROBE_CONFIG replaces config_path and keywords (graphprobe diagnose runs the user's script with it).
        # The path given (not a dict or keywords) is named in its errors.
        given = config_path if isinstance(config_path, (str, os.PathLike)) else None
        env = config_path_from_env(given) if os.environ.get(CONFIG_ENV, "") else None
        self.config: DumpConfig = load_config(env) if env is not None else config_from_arguments(config_path, config)
        self._wired: _Wired | None = None
        self._started_once = False
        self._active = False
        self._selected = True
        self._step = 0
        self._failed_records_base = 0
        self._enabled = self.config.dump_enable
        # The config file whose mtime step() reads for dump_enable (None: a dict or keywords).
        source = self.config.source
        self._stat_path: str | None = None if source is None or source.startswith("<") else os.fspath(source)
        self._config_mtime = self._mtime()
        self._warned_empty = False  # the "step recorded nothing" warning is given once
        self._switched_off = False  # the switch was off at some point since the last step()
        self._aclgraph_calls: _aclgraph.CallCounter | None = None  # tensor.layout "aclgraph": call indices
        # _step_dir()'s pieces, named once (the dump path is final after start()).
        self._step_prefix: str | None = None
        self._rank_leaf: tuple[int, str] | None = None
        self._pid_leaf: tuple[int, str] | None = None

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
        _inductor_fixes.install()  # inductor bugs the probes' fusion can reach (wiring/inductor_fixes.py)
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"AclGraphDumper.start: model must be a torch.nn.Module, got {type(model).__name__}")
        if self._started_once:
            raise DumperStateError("AclGraphDumper.start was already called on this dumper; create a new one")
        _take_over_dropped_dumper()
        other = AclGraphDumper._started() if AclGraphDumper._started else None
        if other is not None and other._active:
            raise DumperStateError(
                "another AclGraphDumper is started in this process (it records into "
                f"{other.config.dump_path!r}); call its stop() first: one dumper records at a time")
        rank = current_rank()
        # tensor.custom_api paths are resolved before anything is wired: a bad one raises here.
        custom_targets = [_custom_api.resolve(i, path) for i, path in enumerate(self.config.custom_api)]
        self._started_once = True
        self._selected = rank is None or self.config.selects_rank(rank)
        if not self._selected:
            _warn_stale_rank(rank, self.config)
            return  # ranks not selected wire nothing and record nothing
        # Dynamo does not guard on module hooks by default: code compiled for
        # an unwired instance of the same class would be reused for this one
        # and record nothing. Guarding on hooks (process-wide, a few more
        # guard checks per call) makes wired models compile their own graph.
        if guard_module_hooks():
            _warn_compiled_before_start(model)
        check_module_names(model)
        save_repro_module(model)  # only under graphprobe diagnose ($GRAPHPROBE_REPRO_MODULE); never raises
        # Absolute from here on: a later os.chdir() must not move the dump.
        self.config = dataclasses.replace(self.config, dump_path=prepare_dump_path(self.config.dump_path))
        self._step_prefix = None
        remove_stale_staging(self.config.dump_path)
        _warn_used_dump_path(self.config.dump_path)
        wired = _Wired(self, model)
        if self.config.task == "tensor":
            # Full tensors are staged per probe and moved to their record
            # names at step(); the folder is hidden inside dump_path so that
            # renames never cross file systems.
            wired.staging = make_staging(self.config.dump_path)
            _C.set_tensor_staging(wired.staging)
        wired.dump_path = self.config.dump_path
        _C.set_checksums(self.config.summary_mode == "md5")  # statistics.summary_mode (config_checksum.py)
        _C.set_sketches(self.config.sketch)  # statistics.sketch (config.py)
        if self.config.records_modules:
            modules = ModuleWiring(model, self.config.keywords, grads=self.config.records_grads)
            wired.wiring.append(modules)
            # Instances compiled as frames of their own need a variant each (dynamo_cache.py).
            wired.budget = RecompileBudget(hooked_instances_per_class(model, modules.hooked))
            if not modules.entries and not self.config.records_apis and not custom_targets:
                warnings.warn(f"graphprobe: start(): {_no_module_cause(model, self.config)}", RuntimeWarning,
                              stacklevel=2)
        if self.config.records_apis:
            wired.wiring.append(ApiWiring(model, self.config.keywords, grads=_api_backward.wanted(self.config)))
        if self.config.replay is not None:  # "replay": keeps module calls to re-run at step() (graphprobe.replay)
            wired.wiring.append(ReplayWiring(model, self.config.replay))
        if self.config.slices:  # statistics task only (config.py)
            wired.wiring.append(_slicing.SliceWiring(self.config.slices))
        if custom_targets:
            wired.wiring.append(_custom_api.CustomApiWiring(custom_targets))
        if self.config.task == "tensor" and self.config.tensor_layout == "aclgraph":
            self._aclgraph_calls = _aclgraph.CallCounter()
        wired.param_recorders = any(getattr(w, "param_grads", None) is not None for w in wired.wiring)
        _C.finish_step(None, self.config.task, self.config.level)  # records made before start() are not ours
        self._failed_records_base = _C.writer_stats()["failed_records"]
        _C.set_enabled(self._enabled)
        set_replay_recording(self._enabled)
        _C.set_active(True)
        self._active = True
        self._wired = wired
        AclGraphDumper._live = wired
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
        # Issue 39: step() on the caller's thread <= 0.1 ms. Right after a forward, most of what step()
        # costs is the memory it touches for the first time since (a few microseconds per Python call
        # or C++ call, not per row), so this path makes as few calls and objects as it can: one
        # check for the usual case, two calls into the engine, a tuple back.
        if not self._active or (dump is not True and dump is not False):
            self._check_step_call(dump)
            return
        recording = self._enabled
        config = self.config
        # Named once per step: the replay and the dump use the same folder.
        step_dir = self._step_dir() if dump else None
        wired = self._wired
        if wired is not None:
            # Parameter gradients as the optimizer sees them (wiring/backward.py), then "replay": this
            # step's kept calls re-run, replay.json written (graphprobe.replay). Both are looked for
            # only where start() wired them.
            if wired.param_recorders:
                record_parameter_grads(wired.wiring, dump and recording)
            if config.replay is not None:
                replay_at_step(wired.wiring, config.replay, step_dir)
        # The config file's mtime for dump_enable is read by the same call, after the step ended (as
        # _reload_switch read it); with the aclgraph layout only after its files are made, below.
        aclgraph = self._aclgraph_calls is not None
        stat_path = None if aclgraph else self._stat_path
        errors = ""
        if step_dir is None:
            write_seq, written, records, dropped, overwritten, mtime = _C.step_end(
                None, config.task, config.level, True, stat_path)
        else:
            # A step that recorded nothing writes no folder (an empty dump.json
            # per step would fill the disk with nothing when step() runs
            # without the model); N still counts iterations so that step
            # numbers line up with the bench, and the first such step warns.
            self._step += 1
            # The previous step's files had a whole iteration to reach the
            # disk. Its failures are taken before this step's job is queued,
            # so they are raised here, and this step's by the next call.
            errors = _C.writer_wait_errors(wired.write_seq if wired is not None else -1)
            try:
                write_seq, written, records, dropped, overwritten, mtime = _C.step_end(
                    step_dir, config.task, config.level, False, stat_path)
            except Exception as exc:
                if errors:  # both are reported
                    raise DumpWriteError(errors) from exc
                raise
            if aclgraph and written:
                errors = "\n".join(filter(None, [errors, self._file_aclgraph_layout(step_dir, write_seq)]))
        if aclgraph:
            mtime = self._mtime()
        switched_off, self._switched_off = self._switched_off, not self._enabled
        if write_seq >= 0 and self._wired is not None:
            # The writer runs step jobs in order: the latest covers the earlier.
            self._wired.write_seq = write_seq
        if mtime is not None and mtime != self._config_mtime:
            self._reload_switch(mtime)
        if dropped or overwritten:
            self._report(dropped, overwritten or [])
        if not dump:
            return
        if recording and not records and not self._warned_empty:
            self._warn_if_nothing_recorded(records, switched_off)
        if errors:
            raise DumpWriteError(errors)

    def _check_step_call(self, dump: object) -> None:
        """step()'s checks, in their order, for a call that does nothing
        or raises: before start(), a non-bool ``dump``, after stop()."""
        if not self._started_once:
            raise DumperStateError(
                "AclGraphDumper.step was called before start(model): nothing is wired, so nothing was recorded; "
                "call dumper.start(model) before torch.compile / graph capture and the first iteration"
            )
        if not isinstance(dump, bool):
            raise TypeError(f"AclGraphDumper.step: dump must be a bool, got {dump!r} ({type(dump).__name__})")

    def _file_aclgraph_layout(self, step_dir: str, seq: int) -> str:
        """``tensor.layout: "aclgraph"``: waits for this step's files (as
        msprobe's step() does) and gives them msprobe's aclgraph names
        (graphprobe/aclgraph_layout.py); returns the failures."""
        _C.writer_wait(seq)
        if self._aclgraph_calls is None or not os.path.isfile(os.path.join(step_dir, "dump.json")):
            return ""  # the write failed: the writer reports it
        return "\n".join(_aclgraph.convert_process_folder(step_dir, self._aclgraph_calls))

    def enable(self, on: bool = True) -> None:
        """The live switch: turns recording off or on between iterations,
        without re-compiling or re-capturing.

        Captured probe kernels read the switch from device memory on every
        replay; while it is off they return at once and no record is made.
        A step in which nothing was recorded writes no folder (its number is
        still used, so steps keep counting iterations).
        """
        if not isinstance(on, bool):
            raise TypeError(f"AclGraphDumper.enable: expected a bool, got {type(on).__name__}")
        self._enabled = on
        if not on:
            self._switched_off = True
        if self._active:
            _C.set_enabled(on)
            set_replay_recording(on)

    @property
    def enabled(self) -> bool:
        """Whether recording is switched on."""
        return self._enabled

    def _mtime(self) -> int | None:
        if self._stat_path is None:
            return None
        try:
            return os.stat(self._stat_path).st_mtime_ns
        except OSError:
            return None

    def _reload_switch(self, mtime: int) -> None:
        """msprobe's ``dump_enable``: an edit of the config file between steps
        flips the switch (step() saw the file's ``mtime`` change). Only that
        key is re-read; the rest needs a restart."""
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

    def _write_seq(self) -> int:
        """The writer job of the latest step; -1 before the first."""
        return self._wired.write_seq if self._wired is not None else -1

    def _check_writes(self, seq: int) -> None:
        """Waits for writer job ``seq`` (and so for every step before it;
        none when -1); raises the failures not yet reported."""
        errors = _C.writer_wait_errors(seq)
        if errors:
            raise DumpWriteError(errors)

    def flush(self) -> None:
        """Waits until the files of past steps (folders, dump.json, tensor
        files) are on disk; raises :class:`DumpWriteError` if a write failed."""
        self._check_writes(self._write_seq())

    def stop(self) -> None:
        """Removes all wiring and waits for the last dump.json to be written
        (raising :class:`DumpWriteError` if a write failed); probes captured
        in existing graphs stop counting. Records made since the last
        ``step()`` are not written: stop() warns with their number (call
        ``step()`` after each iteration, the last one included)."""
        wired = self._wired
        if wired is not None and self._active:
            _warn_unwritten(_C.pending_records(), self._step, "stop()", wired.dump_path, stacklevel=3)
        was_active, self._active = self._active, False
        if wired is None:
            return
        wired.unwire()
        if not was_active:
            return
        try:
            self._check_writes(wired.write_seq)  # the last step may still move files out of staging
        finally:
            wired.drop_staging()

    def _step_dir(self) -> str:
        # The process folder: rank{R} while a process group exists (it may be created or destroyed
        # between steps, so that is asked each step: ~0.2 us), else pid{P}; each kind named once.
        if _DIST_AVAILABLE and torch.distributed.is_initialized():
            rank = torch.distributed.get_rank()
            if self._rank_leaf is None or self._rank_leaf[0] != rank:
                self._rank_leaf = (rank, f"rank{rank}")
            leaf = self._rank_leaf[1]
        else:
            pid = os.getpid()  # a fork's child names its own folder
            if self._pid_leaf is None or self._pid_leaf[0] != pid:
                self._pid_leaf = (pid, f"pid{pid}")
            leaf = self._pid_leaf[1]
        if self._step_prefix is None:
            self._step_prefix = os.path.join(self.config.dump_path, "step")
        return f"{self._step_prefix}{self._step}{os.sep}{leaf}"

    def _report(self, dropped: int, overwritten: list[str]) -> None:
        if dropped:
            warnings.warn(
                f"graphprobe: {dropped} records were dropped since the last step because the record table "
                "is full; call step() after every iteration",
                RuntimeWarning,
                stacklevel=3,
            )
        if overwritten:
            shown = ", ".join(overwritten[:5]) + (" ..." if len(overwritten) > 5 else "")
            warnings.warn(
                f"graphprobe: {len(overwritten)} records were written more than once since the last step "
                f"(several replays per step; only the latest values are kept, see 'write_count'): {shown}",
                RuntimeWarning,
                stacklevel=3,
            )

    def _warn_if_nothing_recorded(self, records: int, switched_off: bool) -> None:
        """The first step that recorded nothing while recording was on warns
        once, naming the cause it has evidence for, or else every candidate."""
        wired = self._wired
        if self._warned_empty or records or wired is None or not wired.wiring:
            return
        self._warned_empty = True
        head = (f"graphprobe: step {self._step - 1} recorded nothing although the model is wired and recording is "
                "on, so no step folder was written (nor will be for later steps that record nothing; their numbers "
                "are still used). ")
        modules = [w for w in wired.wiring if isinstance(w, ModuleWiring)]
        if modules and not modules[0].entries and len(wired.wiring) == 1:
            cause = f"Cause: {_no_module_cause(None, self.config)}"
        else:
            candidates = []
            if switched_off:
                candidates.append("recording was switched off (enable(False) or dump_enable) during this step")
            candidates.append("the model was compiled (torch.compile) or captured (CUDA graph) before start(), so "
                              "the code that ran has no probes; fix: call torch._dynamo.reset() (or capture again) "
                              "after start(), or start() before compiling")
            candidates.append("the wired model did not run in this step (step() without a forward)")
            if self.config.keywords:
                candidates.append(f"statistics.list {list(self.config.keywords)} matches nothing that ran")
            cause = "Possible causes: " + "; ".join(f"({i + 1}) {c}" for i, c in enumerate(candidates)) + "."
        warnings.warn(head + cause + " (warned once per dumper)", RuntimeWarning, stacklevel=3)


def _no_module_cause(model: torch.nn.Module | None, config: DumpConfig) -> str:
    """Why L0 wiring hooked nothing: no submodule, or none that the keywords select."""
    records = (f"level {config.level} records the calls of the model's submodules (not of the model itself, as "
               "msprobe)")
    if config.keywords:
        return (f"{records}, and no submodule's '{{path}}.{{Class}}' contains a statistics.list keyword "
                f"{list(config.keywords)} (case-insensitive), so nothing is recorded; fix statistics.list, or leave "
                "it empty to record every submodule.")
    what = "the model has no submodules" if model is None else f"the {type(model).__name__} has no submodules"
    return (f"{records}, and {what}, so nothing is recorded; use level \"L1\" or \"mix\" to record its API calls, "
            "or wrap the model in a container module.")


def _warn_unwritten(count: int, step: int, where: str, dump_path: str, stacklevel: int) -> None:
    """Records collected since the last ``step()`` are lost unless a step()
    writes them: say how many and how to write them."""
    if count <= 0:
        return
    warnings.warn(
        f"graphprobe: {where}: {count} records collected since the last step() were never written; call "
        f"dumper.step() after each iteration (the last one too) to write them to {dump_path}/step{step}/.",
        RuntimeWarning,
        stacklevel=stacklevel,
    )


def _take_over_dropped_dumper() -> None:
    """Undoes the wiring of a dumper that was dropped without ``stop()``.

    Re-running a notebook cell (``dumper = AclGraphDumper(...);
    dumper.start(model)``) drops the first dumper while its hooks stay on the
    model: every call would be recorded twice and the hooks would outlive the
    new dumper's ``stop()``. Nobody can call ``stop()`` on a dumper no longer
    referenced, so the new ``start()`` does it (with a warning); a dumper that
    is still referenced must be stopped by its owner (``start()`` refuses)."""
    wired = AclGraphDumper._live
    if wired is None or wired.owner() is not None:
        return
    wired.unwire()
    errors = ""
    try:
        wired.drop_staging()
    finally:
        errors = _C.writer_take_errors() if wired.write_seq >= 0 else ""
    failed = f" Its last writes failed: {errors}" if errors else ""
    warnings.warn(
        f"graphprobe: start(): an earlier AclGraphDumper that wired a {wired.model_name} was dropped without "
        "stop() (a re-run notebook cell?); graphprobe removed its wiring so that calls are not recorded twice, "
        f"and its finished steps were written. Call dumper.stop() before creating a new dumper.{failed}",
        RuntimeWarning,
        stacklevel=3,
    )


def _warn_stale_rank(rank: int | None, config: DumpConfig) -> None:
    """A process that is not part of a distributed job (no process group,
    ``WORLD_SIZE`` unset or 1) but whose ``RANK`` the config does not select
    would record nothing without a word: a ``RANK`` left over in the shell.
    Distributed ranks that the config leaves out stay silent (intended)."""
    if rank is None or (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return
    world = os.environ.get("WORLD_SIZE", "")
    if world.isascii() and world.isdigit() and int(world) > 1:
        return
    ranks = ", ".join(str(r.start) if len(r) == 1 else f"{r.start}-{r.stop - 1}" for r in config.ranks)
    warnings.warn(
        f"graphprobe: start(): this process records nothing: the environment variable RANK={rank} is not in the "
        f"config's rank list [{ranks}] ({config.source}), and no distributed job is running (torch.distributed "
        "is not initialized, WORLD_SIZE is " + (repr(world) if world else "unset") + "). If RANK is left over from "
        "an earlier job, unset it; otherwise add the rank to the config's \"rank\" field.",
        RuntimeWarning,
        stacklevel=3,
    )


def _warn_used_dump_path(dump_path: str) -> None:
    """A second run into a used ``dump_path`` puts its step folders next to
    the first run's (``step0/pid111`` and ``step0/pid222``): say so at
    ``start()``, naming what is there, before anything is mixed."""
    found = step_folders(dump_path)
    if not found:
        return
    shown = ", ".join(found[:5]) + (f", ... ({len(found)} in all)" if len(found) > 5 else "")
    try:
        procs = sorted(e.name for e in os.scandir(os.path.join(dump_path, found[0])) if e.is_dir())
    except OSError:
        procs = []
    held = (f"; {found[0]} holds {', '.join(procs[:8])}" + (f", ... ({len(procs)} in all)" if len(procs) > 8 else "")
            if procs else "")
    warnings.warn(
        f"graphprobe: start(): dump_path {dump_path!r} already holds step folders of an earlier run ({shown}{held}). "
        "This run writes step0, step1, ... into the same folders, next to the earlier run's process folders "
        "(or over them, for the same rank). `graphprobe compare` then finds two pid folders in a step and refuses "
        "to guess which to pair (it lists them; --pid-pairing newest pairs the newest). Use a new dump_path for "
        "each run, or remove the old step folders first.",
        RuntimeWarning,
        stacklevel=3,
    )


def _at_exit() -> None:
    """Interpreter exit with a dumper still started (Ctrl-C, an exception,
    no ``stop()``): records made since the last ``step()`` are counted and
    reported on stderr (they are not written: a forgotten step() must not
    pass unnoticed); the tensors staged for a step that will never end are
    not written (so that the exit is prompt), and the staging folder is
    removed once the finished steps' files are out of it. Registered after
    graphprobe.writer's hook, so it runs before the writer is shut down."""
    wired = AclGraphDumper._live
    if wired is None:
        return
    owner = wired.owner()
    try:
        count = _C.pending_records()
    except Exception:  # pragma: no cover - a broken device at exit
        count = 0
    if count > 0:
        step = f"step{owner.step_number}" if owner is not None else "the next step"
        print(f"graphprobe: at exit: {count} records collected since the last step() were never written; call "
              f"dumper.step() after each iteration (the last one too) to write them to {wired.dump_path}/{step}/, "
              "and dumper.stop() at the end.", file=sys.stderr)
    if wired.staging is None:
        return
    try:
        # Replays still in flight on a device write through host callbacks:
        # they end before the staging folder is cancelled and removed.
        _writer._synchronize_devices()
        _C.writer_cancel(wired.staging + os.sep, wired.write_seq)
        # Every write still queued (finished steps, a staged file being
        # written now) ends before the folder is removed under it.
        errors = _C.writer_shutdown()
        if errors:
            print(errors, file=sys.stderr)
        wired.drop_staging()
    except Exception as exc:  # pragma: no cover - nothing can be raised usefully at exit
        print(f"graphprobe: could not remove the staging folder {wired.staging!r} at exit: {exc}", file=sys.stderr)


atexit.register(_at_exit)


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

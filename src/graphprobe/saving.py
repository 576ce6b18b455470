"""acl_save: save a whole tensor every time it is computed, also inside graphs.

``acl_save(x, "./dump/act.pt")`` writes ``./dump/act_0.pt``, ``act_1.pt``, …
— one file per *execution* (eager call, compiled call, or CUDA graph replay),
numbered per path when the data is taken. ``torch.load`` returns a CPU tensor
equal bit for bit to ``x`` at that execution.

The work is done by the ``graphprobe::save`` operator and a bounded writer
thread in C++ (csrc/writer): the op copies ``x`` (on CUDA asynchronously; in
a captured graph through a host callback on every replay) and a writer thread
serialises ``.pt`` files. Call :func:`~graphprobe.writer.flush` to wait for
the files and to see write errors; the writer's budget, counters and exit
hook are in :mod:`graphprobe.writer`. See docs/acl_save.md.

Example::

    import graphprobe
    y = graphprobe.acl_save(model_part(x), "./dump/act.pt")
    ...
    graphprobe.flush()          # files complete, write errors raised here
"""

from __future__ import annotations

import os
import stat

import torch

from graphprobe import _ops
from graphprobe._ops import _C
from graphprobe._text import first_unsafe
from graphprobe.output_files import make_dirs

# The writer's lifecycle lives in graphprobe.writer; these names stay importable from here.
from graphprobe.writer import DEFAULT_WRITE_BUDGET, WriteError, flush, set_write_budget, writer_stats

__all__ = ["acl_save", "save", "flush", "set_write_budget", "writer_stats", "WriteError", "DEFAULT_WRITE_BUDGET"]



@torch.compiler.assume_constant_result
def _checked_path(path: str) -> str:
    """The absolute form of ``path`` once its folder exists (a missing one
    is created, mode 0750, as ``dump_path`` is) and is known to be writable.

    Runs when ``acl_save`` is called: eagerly, while dynamo traces (its result
    is a constant of the compiled graph), or while a CUDA graph is captured.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"acl_save: path must be a str or os.PathLike, got {type(path).__name__}")
    text = os.fspath(path)
    if not isinstance(text, str):
        raise TypeError(f"acl_save: path must be text, got {type(text).__name__} {text!r}")
    bad = first_unsafe(text)
    if bad is not None:
        raise ValueError(f"acl_save: path {text!r} holds a control or format character ({bad[1]} at index "
                         f"{bad[0]}) or is not valid UTF-8 (a lone surrogate); graphprobe passes paths to C++ as "
                         "UTF-8 C strings: rename the file or folder")
    full = os.path.abspath(text)
    if os.path.isdir(full):
        raise IsADirectoryError(f"acl_save: path {path!r} names a folder; give a file name such as 'dump/act.pt'")
    parent = os.path.dirname(full)
    try:
        st = os.stat(parent)
    except FileNotFoundError:
        _create_folder(parent, path)
        st = os.stat(parent)
    except NotADirectoryError:
        raise NotADirectoryError(f"acl_save: a parent of {path!r} is not a folder ({parent})") from None
    except PermissionError:
        raise PermissionError(f"acl_save: the folder of {path!r} cannot be reached ({parent}): permission denied") from None
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(f"acl_save: the parent of {path!r} is not a folder ({parent})")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PermissionError(f"acl_save: the folder of {path!r} is not writable ({parent})")
    # Files are numbered per path: the real path, so that a folder reached
    # through a symbolic link continues the same numbering.
    real = os.path.join(os.path.realpath(parent), os.path.basename(full))
    bad = first_unsafe(real)
    if bad is not None:
        raise ValueError(f"acl_save: the folder of {text!r} resolves to {real!r}, which holds a control or format "
                         f"character or is not valid UTF-8 ({bad[1]} at index {bad[0]}): rename the folder")
    return real


def _create_folder(parent: str, path: str | os.PathLike) -> None:
    """Creates the missing folder of ``path`` (and its missing parents, mode
    0750 less the umask); the errors name ``path`` and the folder."""
    try:
        make_dirs(parent)
    except (FileExistsError, NotADirectoryError):
        raise NotADirectoryError(f"acl_save: a parent of {path!r} is not a folder ({parent})") from None
    except PermissionError:
        raise PermissionError(f"acl_save: the folder of {path!r} does not exist and cannot be created ({parent}): "
                              "permission denied") from None
    except OSError as exc:
        raise OSError(exc.errno, f"acl_save: the folder of {path!r} does not exist and cannot be created "
                                 f"({parent}): {exc.strerror or exc}") from None


def acl_save(x: torch.Tensor, path: str | os.PathLike) -> torch.Tensor:
    """Saves ``x`` to ``{stem}_{n}{suffix}`` beside ``path`` on every execution.

    Returns ``x`` itself (the op returns nothing; it is side-effectful and
    survives dead-code elimination even when the result is unused). A missing
    folder of ``path`` is created when ``acl_save`` is called (mode 0750 less
    the umask, as ``dump_path`` is).

    Raises, when called (eagerly, at trace time under ``torch.compile``, or at
    capture time): ``TypeError`` if ``x`` is quantized or of a dtype no
    loadable file holds (the sub-byte int1..7/uint1..7), ``ValueError`` if
    ``x`` is a real tensor on the ``meta`` device (no data),
    ``NotADirectoryError`` if a parent of ``path`` is not a folder,
    ``IsADirectoryError`` if ``path`` is a folder, ``PermissionError`` if the
    folder is not writable or cannot be created.
    Under ``torch.compile`` dynamo re-raises these wrapped in its own
    RuntimeError subclass (the original is the exception's ``__context__``).
    Failures of the writes themselves are raised by :func:`flush`.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"acl_save: x must be a torch.Tensor, got {type(x).__name__}")
    if x.layout != torch.strided:
        raise TypeError(f"acl_save: only dense (strided) tensors can be saved, got layout {x.layout}")
    _check_savable(x)
    _ops.save(x, _checked_path(path))
    return x


def _writable_dtypes() -> frozenset[torch.dtype]:
    """The dtypes the writer saves as files torch.load reads bit for bit."""
    return frozenset(getattr(torch, n) for n in _C.writable_dtype_names() if hasattr(torch, n))


_WRITABLE_DTYPES = _writable_dtypes()


def _is_fake(x: torch.Tensor) -> bool:
    """Whether ``x`` is a tracing stand-in (FakeTensor, also under a functional wrapper)."""
    try:
        from torch._subclasses.fake_tensor import is_fake
    except ImportError:  # pragma: no cover - torch without FakeTensor
        return False
    return bool(is_fake(x))


def _check_savable(x: torch.Tensor) -> None:
    """Refuses, at the call, a tensor whose data no file can hold.

    Quantized tensors and dtypes without a loadable file format raise
    ``TypeError``; a real tensor on the ``meta`` device (shape only, no data)
    raises ``ValueError``. While ``torch.compile`` traces, tensors are fake
    stand-ins (reporting the device they stand for) and are let through: the
    compiled code saves the real ones.
    """
    if x.is_quantized:
        raise TypeError(f"acl_save: x is a quantized tensor (dtype {x.dtype}); quantized tensors cannot be saved. "
                        "Save x.dequantize() (the values) or x.int_repr() (the stored integers) instead")
    if x.dtype not in _WRITABLE_DTYPES:
        allowed = ", ".join(sorted(str(d).removeprefix("torch.") for d in _WRITABLE_DTYPES))
        raise TypeError(f"acl_save: tensors of dtype {x.dtype} cannot be saved as a file torch.load reads; "
                        f"saved are the dtypes {allowed}")
    if x.device.type == "meta" and not torch.compiler.is_compiling() and not _is_fake(x):
        raise ValueError("acl_save: x is on the meta device, which holds a shape but no data, so there is "
                         "nothing to save; save a tensor on cpu, cuda or an accelerator with a graphprobe "
                         "runtime (npu)")


#: msprobe's name is acl_save; ``graphprobe.save`` is the same function.
save = acl_save

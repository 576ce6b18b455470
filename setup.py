"""Build of graphprobe's two native modules.

* ``graphprobe._C``: the engine (probe ops, stats kernels, capture runtime,
  writer). Built against the installed torch; CUDA sources (``*.cu`` and
  ``*_cuda.cpp``) are added when that torch has CUDA and a toolkit is found.
* ``graphprobe._C_npu``: the Ascend NPU runtime (``csrc/npu``), built only
  where ``torch_npu`` imports (CANN installed and set up), as msprobe builds
  its aclgraph extension; ``graphprobe._C`` never links torch_npu.
  ``GRAPHPROBE_NO_NPU=1`` skips it.
* ``graphprobe._compare``: the compare engine. Torch-free, so ``graphprobe
  compare`` needs no torch at run time; it uses the pybind11 headers that torch
  ships, so the build needs no extra package.

Set ``GRAPHPROBE_FORCE_CPU=1`` to skip CUDA sources even when CUDA is present,
and ``GRAPHPROBE_ONLY=engine|compare|npu`` to build one module (development), or
``none`` for none (``scripts/setup_env.sh`` installs the package that way and
builds the modules in place, incrementally).
"""
from __future__ import annotations

import glob
import os

from setuptools import Extension, setup
from torch.utils import cpp_extension

ROOT = os.path.dirname(os.path.abspath(__file__))
TORCH_FREE_DIRS = ["format", "fs", "identity"]
ENGINE_DIRS = ["record", "engine", "ops", "stats", "capture", "runtime", "writer", "compare_tensors", "python"]


def _sources(dirs: list[str], cuda: bool) -> list[str]:
    out: list[str] = []
    for d in dirs:
        for path in sorted(glob.glob(os.path.join("csrc", d, "*.cpp")) + glob.glob(os.path.join("csrc", d, "*.cu"))):
            name = os.path.basename(path)
            is_cuda = name.endswith(".cu") or name.endswith("_cuda.cpp")
            if name == "compare_module.cpp":
                continue
            if is_cuda and not cuda:
                continue
            out.append(path)
    return out


def _with_cuda() -> bool:
    if os.environ.get("GRAPHPROBE_FORCE_CPU") == "1":
        return False
    import torch

    return torch.version.cuda is not None and cpp_extension.CUDA_HOME is not None


WITH_CUDA = _with_cuda()
CXX_FLAGS = ["-O3", "-Wall", "-Wno-unused-function"]
# No --use_fast_math: it turns float conversions into flush-to-zero ones
# (cvt.ftz), and the GPU statistics would drop subnormals (1e-40) that the CPU
# path keeps. The statistics kernel is memory-bound; fast math buys nothing.
# scripts/check_cuda_compile.sh checks the PTX built with these flags.
NVCC_FLAGS = ["-O3"]
common_include = [os.path.join(ROOT, "csrc")]

engine_sources = _sources(ENGINE_DIRS + TORCH_FREE_DIRS, WITH_CUDA)
if WITH_CUDA:
    engine = cpp_extension.CUDAExtension(
        "graphprobe._C",
        engine_sources,
        include_dirs=common_include,
        define_macros=[("GRAPHPROBE_WITH_CUDA", "1")],
        extra_compile_args={"cxx": CXX_FLAGS, "nvcc": NVCC_FLAGS},
    )
else:
    engine = cpp_extension.CppExtension(
        "graphprobe._C",
        engine_sources,
        include_dirs=common_include,
        extra_compile_args={"cxx": CXX_FLAGS},
    )



def _torch_npu_paths() -> tuple[list[str], list[str]] | None:
    """torch_npu's header and library folders, when torch_npu imports."""
    if os.environ.get("GRAPHPROBE_NO_NPU") == "1":
        return None
    try:
        import torch_npu  # noqa: F401  (needs CANN: an Ascend machine)
    except Exception:
        return None
    base = os.path.dirname(torch_npu.__file__)
    libs = [os.path.join(base, "lib")]
    cann = os.environ.get("ASCEND_TOOLKIT_HOME") or os.environ.get("ASCEND_HOME_PATH")
    if cann:
        libs.append(os.path.join(cann, "lib64"))
    return [os.path.join(base, "include"), os.path.join(base, "include", "third_party", "acl", "inc")], libs


NPU_SOURCES = sorted(glob.glob(os.path.join("csrc", "npu", "*.cpp")))  # scripts/check_npu_compile.sh reads these
npu_paths = _torch_npu_paths()
npu = (
    cpp_extension.CppExtension(
        "graphprobe._C_npu",
        NPU_SOURCES,
        include_dirs=common_include + npu_paths[0],
        library_dirs=npu_paths[1],
        libraries=["torch_npu", "ascendcl"],
        extra_compile_args={"cxx": CXX_FLAGS},
    )
    if npu_paths
    else None
)

compare = Extension(
    "graphprobe._compare",
    _sources(["compare", "format", "fs", "python/compare"], False) + ["csrc/python/compare_module.cpp"],
    include_dirs=common_include + cpp_extension.include_paths()[:1],
    extra_compile_args=["-O3", "-std=c++20", "-Wall", "-fvisibility=hidden"],
    language="c++",
)

only = os.environ.get("GRAPHPROBE_ONLY")
if only not in (None, "", "engine", "compare", "npu", "none"):
    raise SystemExit(f"GRAPHPROBE_ONLY={only!r}: allowed are engine, compare, npu or none")
_names = {"engine": "graphprobe._C", "compare": "graphprobe._compare", "npu": "graphprobe._C_npu"}
ext_modules = [e for e in (engine, npu, compare) if e is not None and (not only or e.name == _names.get(only))]


# Precompiled header (csrc/pch/engine.h): most files of _C parse torch's
# ATen/core/Tensor.h (about 2.5 s of CPU each); with the PCH it is parsed once.
# GRAPHPROBE_NO_PCH=1 builds without. _compare has none: its heavy files are
# pybind11 bindings, and a pybind11 PCH made every file slower (the header's
# comment); the NPU module is left alone.
PCH_HEADERS = {"graphprobe._C": "csrc/pch/engine.h"}


def _pch_flags(header: str, cflags: list[str], post_cflags: list[str], build_dir: str) -> list[str]:
    """Compiles ``header`` into a .gch with exactly the flags of the module's
    files (g++ ignores a .gch made with other flags: slow, not wrong;
    -Winvalid-pch says so), and returns the flags that make each file use it.

    The .gch lives in a folder named by a digest of the header, the flags, the
    compiler and torch, so that a change to any of them changes the files'
    command line and ninja rebuilds them all."""
    import hashlib
    import shlex
    import subprocess

    import torch

    text = open(os.path.join(ROOT, header), encoding="utf-8").read()
    compiler = cpp_extension._wrap_compiler(cpp_extension.get_cxx_compiler())
    flags = shlex.split(" ".join(cflags)) + shlex.split(" ".join(post_cflags))
    flags = [f for f in flags if f != "-c"]
    key = "\0".join([text, *compiler, *flags, torch.__version__, torch.__file__])
    folder = os.path.abspath(os.path.join(build_dir, "pch-" + hashlib.sha256(key.encode()).hexdigest()[:16]))
    target = os.path.join(folder, "graphprobe_pch.h")
    gch = target + ".gch"
    if not _pch_up_to_date(gch):
        for old in glob.glob(os.path.join(build_dir, "pch-*")):
            if os.path.abspath(old) != folder:
                import shutil

                shutil.rmtree(old, ignore_errors=True)
        os.makedirs(folder, exist_ok=True)
        with open(target, "w", encoding="utf-8") as out:
            out.write(text)
        command = [*compiler, "-MMD", "-MF", gch + ".d", *flags, "-x", "c++-header", target, "-o", gch]
        print(f"[pch] {header}: " + " ".join(command), flush=True)  # scripts/setup_env.sh shows "[pch] {header}"
        subprocess.run(command, check=True)
    return ["-Winvalid-pch", "-include", shlex.quote(target)]


def _pch_up_to_date(gch: str) -> bool:
    """The .gch exists and no file it was made from is newer."""
    try:
        made = os.stat(gch).st_mtime
        deps = open(gch + ".d", encoding="utf-8").read().replace("\\\n", " ").split(":", 1)[1].split()
        return all(os.stat(d).st_mtime <= made for d in deps)
    except (OSError, IndexError):
        return False


class BuildExt(cpp_extension.BuildExtension):
    """One build folder per module: both compile csrc/format and csrc/fs, with
    different flags, and must not share object files. Files of a module with a
    precompiled header (PCH_HEADERS) use it."""

    def build_extension(self, ext: Extension) -> None:
        base = self.build_temp
        self.build_temp = os.path.join(base, ext.name.split(".")[-1])
        compile_objects = cpp_extension._write_ninja_file_and_compile_objects
        header = PCH_HEADERS.get(ext.name) if os.environ.get("GRAPHPROBE_NO_PCH") != "1" else None
        build_dir = self.build_temp

        def with_pch(**kwargs):
            # The PCH only saves time: where it cannot be made (another
            # torch's call, a compiler that refuses the header) the module is
            # built without it, and says so.
            try:
                flags = _pch_flags(header, kwargs["cflags"], kwargs["post_cflags"], build_dir)
            except Exception as e:  # noqa: BLE001
                print(f"[pch] {header}: not used ({type(e).__name__}: {e}); building without it", flush=True)
                flags = []
            if flags:
                kwargs["post_cflags"] = list(kwargs["post_cflags"]) + flags
            return compile_objects(**kwargs)

        if header:
            cpp_extension._write_ninja_file_and_compile_objects = with_pch
            # ccache (which torch's build puts before the compiler wherever it
            # is installed) caches a compile that uses a PCH only with this
            # sloppiness (ccache's manual, "Precompiled headers"); without it
            # it runs the compiler every time.
            sloppiness = [s for s in os.environ.get("CCACHE_SLOPPINESS", "").split(",") if s]
            for needed in ("pch_defines", "time_macros"):
                if needed not in sloppiness:
                    sloppiness.append(needed)
            os.environ["CCACHE_SLOPPINESS"] = ",".join(sloppiness)
        try:
            super().build_extension(ext)
        finally:
            self.build_temp = base
            cpp_extension._write_ninja_file_and_compile_objects = compile_objects


setup(
    ext_modules=ext_modules,
    cmdclass={"build_ext": BuildExt.with_options(use_ninja=True)},
)

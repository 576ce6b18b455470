#!/usr/bin/env bash
# Compiles every CUDA source of the engine (csrc/**/*.cu, csrc/**/*_cuda.cpp)
# and the torch-free kernel check with nvcc for Hopper (sm_90), without
# linking, with the flags the extension build uses (setup.py's NVCC_FLAGS and
# torch's COMMON_NVCC_FLAGS). Then checks the PTX of the statistics kernels
# for flush-to-zero conversions (what --use_fast_math brings in: the GPU
# statistics would drop subnormals the CPU path keeps).
#
# The code runs only on a GPU machine (scripts/gpu_check.sh); this catches
# compile errors on machines with a toolkit but no GPU (this project's CI).
# Prints a skip line and succeeds where there is no nvcc.
#
# Which torch headers:
#   (default)                the installed torch's (include_paths())
#   --torch-include DIR      a torch/include folder, e.g. from another version
#   --torch-wheel FILE.whl   a torch wheel: its torch/include is unpacked into
#                            a temporary folder (any wheel of the version will
#                            do; the headers do not depend on the Python tag)
#   TORCH_INCLUDE_ROOT=DIR   same as --torch-include
# Example, the GPU machine's torch (2.11.0+cu130):
#   pip download torch==2.11.0 --no-deps -d /tmp/t211
#   bash scripts/check_cuda_compile.sh --torch-wheel /tmp/t211/torch-2.11.0-*.whl
#
# --host-sources also compiles (syntax only, host compiler) every other C++
# source of the engine with the same headers and C++ standard: the build on
# the GPU machine compiles those with torch 2.11's C++17.
#
# Stand-ins: the only generated header is c10/cuda/impl/cuda_cmake_macros.h,
# and only when the headers lack it (torch's CPU wheel does not ship this
# build-generated file; CUDA wheels do). The sources include no cuBLAS,
# cuSPARSE or cuSOLVER header (no ATen/cuda/CUDAContext.h), so none is stubbed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/check_lib.sh
NVCC=${NVCC:-$(command -v nvcc || true)}
PY=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}  # scripts/setup_env.sh made .venv
TORCH_INCLUDE_ROOT=${TORCH_INCLUDE_ROOT:-}
WHEEL=""
HOST=0
while [ $# -gt 0 ]; do
  case "$1" in
    --torch-include) TORCH_INCLUDE_ROOT=$2; shift 2 ;;
    --torch-wheel) WHEEL=$2; shift 2 ;;
    --host-sources) HOST=1; shift ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "check_cuda_compile: unknown argument '$1' (allowed: --torch-include DIR, --torch-wheel FILE, --host-sources)" >&2; exit 2 ;;
  esac
done
if [ -z "$NVCC" ]; then
  echo "check_cuda_compile: no nvcc, skipped"
  exit 0
fi
# The default check (this torch's headers) is skipped when nothing it reads
# changed since it last passed: the second run of scripts/test.sh then starts
# pytest within seconds. CUDA_CHECK_FORCE=1 (or deleting the stamp) reruns it.
stamp_file=build/.graphprobe-cuda-check
stamp=""
if [ -z "$WHEEL" ] && [ -z "$TORCH_INCLUDE_ROOT" ] && [ "$HOST" = 0 ]; then
  stamp=$( {
    "$NVCC" --version
    $PY -c "import torch; print(torch.__version__)"
    echo "${CUDA_CHECK_STDS:-}"
  } | sources_stamp)
  exit_if_checked check_cuda_compile "$stamp_file" "$stamp" CUDA_CHECK_FORCE
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ -n "$WHEEL" ]; then
  [ -f "$WHEEL" ] || { echo "check_cuda_compile: --torch-wheel: no such file '$WHEEL'" >&2; exit 2; }
  $PY - "$WHEEL" "$work/wheel" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    names = [n for n in z.namelist() if n.startswith("torch/include/")]
    if not names:
        sys.exit(f"check_cuda_compile: {sys.argv[1]} holds no torch/include folder")
    for n in names:
        z.extract(n, sys.argv[2])
EOF
  TORCH_INCLUDE_ROOT="$work/wheel/torch/include"
fi
if [ -n "$TORCH_INCLUDE_ROOT" ]; then
  [ -f "$TORCH_INCLUDE_ROOT/c10/core/ScalarType.h" ] ||
    { echo "check_cuda_compile: '$TORCH_INCLUDE_ROOT' is not a torch include folder (no c10/core/ScalarType.h)" >&2; exit 2; }
  TORCH_INC="-I$TORCH_INCLUDE_ROOT -I$TORCH_INCLUDE_ROOT/torch/csrc/api/include"
  TORCH_ROOT=$TORCH_INCLUDE_ROOT
else
  TORCH_INC=$($PY -c "from torch.utils.cpp_extension import include_paths; print(' '.join('-I' + p for p in include_paths()))")
  TORCH_ROOT=$($PY -c "from torch.utils.cpp_extension import include_paths; print(include_paths()[0])")
fi
TORCH_VERSION=$(awk '/^#define TORCH_VERSION_(MAJOR|MINOR|PATCH) /{v = v (v == "" ? "" : ".") $3} END {print v}' \
  "$TORCH_ROOT/torch/headeronly/version.h" 2>/dev/null || true)
PY_INC=$($PY -c "import sysconfig; print(sysconfig.get_paths()['include'])")
# The flags of the extension build: setup.py's NVCC_FLAGS (read, not run) and
# torch's own nvcc defaults.
NVCC_FLAGS=$($PY - <<'EOF'
import ast
tree = ast.parse(open("setup.py").read())
for node in tree.body:
    if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "NVCC_FLAGS" for t in node.targets):
        print(" ".join(ast.literal_eval(node.value)))
        break
else:
    raise SystemExit("check_cuda_compile: setup.py defines no NVCC_FLAGS list")
EOF
)
COMMON='-D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__ -D__CUDA_NO_BFLOAT16_CONVERSIONS__ -D__CUDA_NO_HALF2_OPERATORS__ --expt-relaxed-constexpr'
# The C++ standard torch's cpp_extension builds with (2.11: C++17; 2.13:
# C++20), read from that torch's cpp_extension.py; C++17 for a bare include
# folder. CUDA_CHECK_STDS="c++17 c++20" checks several.
if [ -n "$WHEEL" ]; then
  EXT_SRC=$($PY -c "import sys, zipfile; print(zipfile.ZipFile(sys.argv[1]).read('torch/utils/cpp_extension.py').decode())" "$WHEEL")
elif [ -z "$TORCH_INCLUDE_ROOT" ]; then
  EXT_SRC=$(cat "$($PY -c "import torch.utils.cpp_extension as c; print(c.__file__)")")
else
  EXT_SRC=""
fi
# The flag it adds to every compile (common_cflags), not one in a docstring.
DEFAULT_STD=$(printf '%s\n' "$EXT_SRC" | sed -n "s/.*common_cflags += \['-std=\(c++[0-9]*\)'.*/\1/p" | head -1)
DEFAULT_STD=${DEFAULT_STD:-c++17}
STDS=${CUDA_CHECK_STDS:-$DEFAULT_STD}

stub="$work/stub"
mkdir -p "$stub/c10/cuda/impl"
STUBBED="none"
if [ ! -f "$TORCH_ROOT/c10/cuda/impl/cuda_cmake_macros.h" ]; then
  echo '#pragma once' >"$stub/c10/cuda/impl/cuda_cmake_macros.h"
  STUBBED="c10/cuda/impl/cuda_cmake_macros.h (absent from these headers: a CPU wheel)"
fi
echo "check_cuda_compile: torch headers ${TORCH_VERSION:-?} from $TORCH_ROOT; stand-ins: $STUBBED"
echo "check_cuda_compile: nvcc flags: $NVCC_FLAGS (setup.py) + torch's $COMMON"

n=0
for std in $STDS; do
  # shellcheck disable=SC2086
  "$NVCC" -x cu -std=$std $NVCC_FLAGS -arch=sm_90 -w -Icsrc -c csrc/tests/stats_kernel_compile.cu -o "$work/k$n.o"
  echo "check_cuda_compile: ok [$std] csrc/tests/stats_kernel_compile.cu"
  for src in $(find csrc -name '*.cu' -o -name '*_cuda.cpp' | grep -v '^csrc/tests/' | sort); do
    # shellcheck disable=SC2086
    "$NVCC" -x cu -std=$std $NVCC_FLAGS $COMMON -arch=sm_90 -w -I"$stub" -Icsrc $TORCH_INC -I"$PY_INC" \
      -DGRAPHPROBE_WITH_CUDA -c "$src" -o "$work/$n.o"
    echo "check_cuda_compile: ok [$std] $src"
    n=$((n + 1))
  done
done

if [ "$HOST" = 1 ]; then
  CXX=${CXX:-c++}
  CUDA_INC=$(dirname "$(dirname "$(readlink -f "$NVCC")")")/include
  for std in $STDS; do
    for src in $(find csrc -name '*.cpp' ! -name '*_cuda.cpp' | grep -v -e '^csrc/tests/' -e '^csrc/compare/' \
                 -e '^csrc/python/compare_module.cpp' | sort); do
      # shellcheck disable=SC2086
      "$CXX" -std=$std -fsyntax-only -w -I"$stub" -Icsrc $TORCH_INC -I"$PY_INC" -I"$CUDA_INC" \
        -DGRAPHPROBE_WITH_CUDA -DTORCH_API_INCLUDE_EXTENSION_H -DTORCH_EXTENSION_NAME=_C "$src"
      echo "check_cuda_compile: ok [$std, host] $src"
    done
  done
fi

# Flush-to-zero: with --use_fast_math every float conversion in the kernels
# becomes cvt.ftz and subnormal inputs read as 0.
ptx_bad=0
# shellcheck disable=SC2086
"$NVCC" -x cu -std=c++17 $NVCC_FLAGS -arch=sm_90 -Icsrc -ptx csrc/tests/stats_kernel_compile.cu -o "$work/kernels.ptx"
# shellcheck disable=SC2086
"$NVCC" -x cu -std=c++17 $NVCC_FLAGS $COMMON -arch=sm_90 -w -I"$stub" -Icsrc $TORCH_INC -I"$PY_INC" \
  -DGRAPHPROBE_WITH_CUDA -ptx csrc/stats/stats_cuda.cu -o "$work/launcher.ptx"
for ptx in "$work/kernels.ptx" "$work/launcher.ptx"; do
  if grep -q '\.ftz' "$ptx"; then
    echo "check_cuda_compile: FAIL: $(grep -c '\.ftz' "$ptx") flush-to-zero instructions in the PTX of the" \
      "statistics kernels ($(basename "$ptx")), e.g.: $(grep -m1 '\.ftz' "$ptx" | tr -s ' \t' ' ')" >&2
    ptx_bad=1
  fi
done
[ "$ptx_bad" = 0 ] || exit 1
echo "check_cuda_compile: PTX of the statistics kernels has no flush-to-zero instruction"
echo "check_cuda_compile: $n CUDA sources compile (${STDS// /, }) against torch ${TORCH_VERSION:-?} with $("$NVCC" --version | tail -1)"
if [ -n "$stamp" ]; then
  mkdir -p build
  echo "$stamp" >"$stamp_file"
fi

#!/usr/bin/env bash
# Compiles every CUDA source of the engine (csrc/**/*.cu, csrc/**/*_cuda.cpp)
# and the torch-free kernel check with nvcc for Hopper (sm_90), without
# linking. Meant for machines with a CUDA toolkit but a CPU build of torch
# (this project's CI): torch's CPU wheel ships the ATen CUDA headers but not
# the CUDA math-library headers they include, so minimal stand-ins for those
# few declarations are generated in a temporary folder. The code runs only on
# a GPU machine (scripts/gpu_check.sh); this catches compile errors elsewhere.
# Prints a skip line and succeeds where there is no nvcc.
set -euo pipefail
cd "$(dirname "$0")/.."
NVCC=${NVCC:-$(command -v nvcc || true)}
if [ -z "$NVCC" ]; then
  echo "check_cuda_compile: no nvcc, skipped"
  exit 0
fi
PY=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}  # scripts/setup_env.sh made .venv
TORCH_INC=$($PY -c "from torch.utils.cpp_extension import include_paths; print(' '.join('-I' + p for p in include_paths()))")
PY_INC=$($PY -c "import sysconfig; print(sysconfig.get_paths()['include'])")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stub="$work/stub"
mkdir -p "$stub/c10/cuda/impl"
echo '#pragma once' >"$stub/c10/cuda/impl/cuda_cmake_macros.h"
printf '#pragma once\ntypedef struct cublasContext* cublasHandle_t;\ntypedef int cublasStatus_t;\n' >"$stub/cublas_v2.h"
printf '#pragma once\ntypedef struct cublasLtContext* cublasLtHandle_t;\n' >"$stub/cublasLt.h"
printf '#pragma once\ntypedef struct cusparseContext* cusparseHandle_t;\ntypedef int cusparseStatus_t;\n' >"$stub/cusparse.h"
printf '#pragma once\ntypedef struct cusolverDnContext* cusolverDnHandle_t;\n' >"$stub/cusolverDn.h"
printf '#pragma once\ntypedef int cusolverStatus_t;\n' >"$stub/cusolver_common.h"
n=0
for src in csrc/tests/stats_kernel_compile.cu $(find csrc -name '*.cu' -o -name '*_cuda.cpp' | grep -v '^csrc/tests/' | sort); do
  # shellcheck disable=SC2086
  "$NVCC" -x cu -std=c++20 -O1 -arch=sm_90 -w -I"$stub" -Icsrc $TORCH_INC -I"$PY_INC" \
    -DGRAPHPROBE_WITH_CUDA -c "$src" -o "$work/$n.o"
  echo "check_cuda_compile: ok $src"
  n=$((n + 1))
done
echo "check_cuda_compile: $n CUDA sources compile with $("$NVCC" --version | tail -1)"

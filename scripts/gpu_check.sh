#!/usr/bin/env bash
# One call on a lent GPU machine (fresh, no network, torch with CUDA
# preinstalled), at most GPU_CHECK_BUDGET seconds (default 480 = 8 minutes):
#
#   0. environment: torch, CUDA, GPUs, pytest present or not
#   1. build     GRAPHPROBE_ONLY=engine python3 setup.py build_ext --inplace
#                (toolkit and headers checked first; more time without ninja)
#   2. smoke     tests/gpu/smoke.py: each risky case in its own process under
#                its own timeout, PASS/FAIL per case
#   3. pytest    tests/gpu file by file, cheapest first, each file in its own
#                process under a timeout, and a per-test timeout inside
#                (GRAPHPROBE_TEST_TIMEOUT, faulthandler: stacks, then exit)
#   4. kernel    benchmarks.gpu_bandwidth: GB/s of the statistics kernel against
#                torch.sum and a copy, 16 MiB to 1 GiB (time kept for it
#                out of pytest's share: GPU_CHECK_KERNEL_S, default 35)
#   5. bench     benchmarks --quick, only if GPU_CHECK_BENCH_MIN seconds are left
#
# Each stage has a time budget (printed by --dry-run); a stage that would
# start after the overall deadline is reported as NOT RUN. Everything printed
# also goes to $OUT/gpu_check.log ($OUT defaults to /tmp/graphprobe-gpu), with
# build.log, smoke.json, smoke-*.log, pytest-*.log/xml there too.
# A skipped GPU test fails (GRAPHPROBE_FAIL_ON_SKIP=1): a silent skip would
# read as a pass.
#
#   bash scripts/gpu_check.sh            # the run
#   bash scripts/gpu_check.sh --dry-run  # the plan and budgets; runs nothing (CPU is fine)
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/check_lib.sh
parse_run_args gpu_check 2,25 "$@"

OUT_DIR=${OUT:-/tmp/graphprobe-gpu}
mkdir -p "$OUT_DIR"
exec > >(tee -a "$OUT_DIR/gpu_check.log") 2>&1

TOTAL=${GPU_CHECK_BUDGET:-480}
PY=${PYTHON:-python3}
# Without ninja torch builds one source at a time: the build gets more time.
if command -v ninja >/dev/null 2>&1 || $PY -c "import ninja" 2>/dev/null; then HAVE_NINJA=1; else HAVE_NINJA=0; fi
BUILD_BUDGET=${GPU_CHECK_BUILD_S:-$([ "$HAVE_NINJA" = 1 ] && echo 180 || echo 270)}
SMOKE_BUDGET=${GPU_CHECK_SMOKE_S:-180}
SMOKE_CASE_TIMEOUT=${GPU_CHECK_SMOKE_CASE_S:-75}
TEST_TIMEOUT=${GRAPHPROBE_TEST_TIMEOUT:-60}
BENCH_MIN=${GPU_CHECK_BENCH_MIN:-60}
KERNEL_BUDGET=${GPU_CHECK_KERNEL_S:-35}
RESERVE=15  # for the summary and fetching $OUT
# Cheapest first: a hang or crash late costs the least.
PYTEST_FILES=(tests/gpu/test_acl_save_cuda.py tests/gpu/test_checksum_cuda.py tests/gpu/test_sketch_cuda.py tests/gpu/test_cuda_graph_l0.py tests/gpu/test_bitwise_pair_cuda.py
  tests/gpu/test_tensor_task_cuda.py tests/gpu/test_aclgraph_features_cuda.py tests/gpu/test_cuda_graph_l1.py tests/gpu/test_backward_cuda.py tests/gpu/test_backward_l1_cuda.py tests/gpu/test_examples_gpu.py)
export PYTHONUNBUFFERED=1 GRAPHPROBE_FAIL_ON_SKIP=1 MAX_JOBS=${MAX_JOBS:-16} GRAPHPROBE_TEST_TIMEOUT=$TEST_TIMEOUT
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"

start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
left() { echo $(( TOTAL - RESERVE - $(elapsed) )); }
declare -A RESULT

plan() {
  local pytest_budget=$(( TOTAL - RESERVE - BUILD_BUDGET - SMOKE_BUDGET - KERNEL_BUDGET ))
  echo "gpu_check plan: total ${TOTAL} s ($RESERVE s kept for the summary); output in $OUT_DIR"
  echo "  0 env     ~5 s      torch/CUDA/GPU versions; is pytest importable"
  echo "  1 build   ${BUILD_BUDGET} s    GRAPHPROBE_ONLY=engine $PY setup.py build_ext --inplace (MAX_JOBS=$MAX_JOBS," \
    "$([ "$HAVE_NINJA" = 1 ] && echo "ninja" || echo "NO NINJA: serial build")), headers checked first"
  echo "  2 smoke   ${SMOKE_BUDGET} s    $PY tests/gpu/smoke.py, ${SMOKE_CASE_TIMEOUT} s per case, one process per case:"
  $PY tests/gpu/smoke.py --list | sed 's/^/              - /'
  echo "  3 pytest  ~${pytest_budget} s    (what is left) file by file, ${TEST_TIMEOUT} s per test (faulthandler), in this order:"
  printf '              - %s\n' "${PYTEST_FILES[@]}"
  echo "              (tests/gpu/test_smoke_cases.py left out: stage 2 ran those cases)"
  echo "  4 kernel  ${KERNEL_BUDGET} s     $PY -m benchmarks.gpu_bandwidth (statistics kernel GB/s vs torch.sum and copy," \
    "float32/bfloat16, 16 MiB-1 GiB; sizes left when time is up are listed)"
  echo "  5 bench   only if >= ${BENCH_MIN} s are left: $PY -m benchmarks --quick"
}

if [ "$DRY" = 1 ]; then
  plan
  echo "gpu_check: dry run, nothing was built or run"
  exit 0
fi
plan

# ------------------------------------------------------------------ 0 env
echo "== 0 env"
$PY -c "import torch, sys; print('python', sys.version.split()[0], '| torch', torch.__version__, '| cuda', torch.version.cuda, '| devices', torch.cuda.device_count(), [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])" ||
  echo "gpu_check: torch could not report its CUDA devices"
nvidia-smi --query-gpu=index,name,memory.total,driver_version,compute_mode --format=csv,noheader || echo "gpu_check: nvidia-smi not available"
HAVE_PYTEST=1
if ! $PY -c "import pytest" 2>/dev/null; then
  HAVE_PYTEST=0
  echo "gpu_check: *** pytest is NOT installed: stage 3 cannot run; only the smoke cases (stage 2) test the GPU paths ***"
fi

# ------------------------------------------------------------------ 1 build
echo "== 1 build (budget ${BUILD_BUDGET} s)"
if ! $PY - <<'EOF'
import os, shutil, sys
import torch
from torch.utils import cpp_extension as ce
problems = []
if torch.version.cuda is None:
    problems.append(f"torch {torch.__version__} is a CPU build: the CUDA paths cannot be built")
home = ce.CUDA_HOME
nvcc = os.path.join(home, "bin", "nvcc") if home else shutil.which("nvcc")
if not home or not os.path.exists(nvcc or ""):
    problems.append(f"no CUDA toolkit: CUDA_HOME={home!r}, nvcc={nvcc!r} (set CUDA_HOME)")
elif not os.path.exists(os.path.join(home, "include", "cuda_runtime_api.h")):
    problems.append(f"CUDA headers missing: {os.path.join(home, 'include', 'cuda_runtime_api.h')}")
inc = ce.include_paths()[0]
for header in ("c10/cuda/CUDAStream.h", "c10/cuda/CUDAGuard.h", "c10/cuda/impl/cuda_cmake_macros.h", "ATen/Dispatch.h"):
    if not os.path.exists(os.path.join(inc, header)):
        problems.append(f"torch header missing: {os.path.join(inc, header)}")
print(f"build env: CUDA_HOME={home} torch include={inc}")
for p in problems:
    print("gpu_check: BUILD CANNOT START:", p)
sys.exit(1 if problems else 0)
EOF
then
  RESULT[build]="FAIL (headers/toolkit, see above)"
else
  b0=$(date +%s)
  # The engine only: the GPU tests do not use the compare module.
  GRAPHPROBE_ONLY=engine timeout "$BUILD_BUDGET" $PY setup.py build_ext --inplace >"$OUT_DIR/build.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then
    grep -E -m20 'error|Error' "$OUT_DIR/build.log"
    tail -30 "$OUT_DIR/build.log"
    RESULT[build]="FAIL (rc $rc$([ $rc = 124 ] && echo ', timed out'))"
  else
    # torch first: the extension has no RPATH to libc10; torch loads it.
    if $PY -c "import torch, graphprobe._C as C, graphprobe; ok = torch._C._dispatch_has_kernel_for_dispatch_key('graphprobe::save', 'CUDA'); print('graphprobe from', graphprobe.__file__, '| CUDA kernels registered:', ok); raise SystemExit(0 if ok else 1)"; then
      RESULT[build]="PASS ($(( $(date +%s) - b0 )) s)"
    else
      RESULT[build]="FAIL (built, but not importable with CUDA kernels)"
    fi
  fi
fi
echo "build: ${RESULT[build]}"
if [[ "${RESULT[build]}" != PASS* ]]; then
  echo "GPU CHECK: BUILD FAILED after $(elapsed) s; logs in $OUT_DIR"
  exit 1
fi

# ------------------------------------------------------------------ 2 smoke
echo "== 2 smoke (budget ${SMOKE_BUDGET} s, ${SMOKE_CASE_TIMEOUT} s per case)"
budget=$(( SMOKE_BUDGET < $(left) ? SMOKE_BUDGET : $(left) ))
$PY tests/gpu/smoke.py --out "$OUT_DIR" --timeout "$SMOKE_CASE_TIMEOUT" --budget "$budget"
smoke_rc=$?
RESULT[smoke]=$([ $smoke_rc = 0 ] && echo PASS || echo "FAIL (see SMOKE lines)")

# ------------------------------------------------------------------ 3 pytest
echo "== 3 pytest (what is left: $(left) s)"
pytest_rc=0
if [ "$HAVE_PYTEST" = 0 ]; then
  RESULT[pytest]="NOT RUN (pytest missing)"
  pytest_rc=1
else
  for f in "${PYTEST_FILES[@]}"; do
    name=$(basename "$f" .py)
    remaining=$(( $(left) - KERNEL_BUDGET ))  # stage 4's time is kept
    if [ "$remaining" -lt 20 ]; then
      echo "PYTEST NOT RUN $f (no time left)"
      RESULT[pytest]="INCOMPLETE"
      pytest_rc=1
      continue
    fi
    timeout -k 5 "$remaining" $PY -m pytest "$f" -q -rA -p no:cacheprovider --junitxml="$OUT_DIR/pytest-$name.xml" \
      >"$OUT_DIR/pytest-$name.log" 2>&1
    rc=$?
    status=$([ $rc = 0 ] && echo PASS || { [ $rc = 124 ] && echo TIMEOUT || echo "FAIL (rc $rc)"; })
    echo "PYTEST $status $f"
    grep -E '^(PASSED|FAILED|ERROR|SKIPPED)|passed|failed|Timeout|Fatal Python error' "$OUT_DIR/pytest-$name.log" | tail -25 | sed 's/^/    /'
    [ $rc = 0 ] || pytest_rc=1
  done
  RESULT[pytest]=${RESULT[pytest]:-$([ $pytest_rc = 0 ] && echo PASS || echo FAIL)}
fi

# ------------------------------------------------------------------ 4 kernel
if [ "$(left)" -ge 20 ]; then
  kb=$(( KERNEL_BUDGET < $(left) ? KERNEL_BUDGET : $(left) ))
  echo "== 4 kernel (budget $kb s)"
  # The measuring loop stops 15 s early: imports, CUDA start-up and writing.
  timeout -k 5 "$kb" $PY -m benchmarks.gpu_bandwidth --out "$OUT_DIR" --budget $(( kb > 30 ? kb - 15 : 15 )) 2>&1 | tail -20
  rc=${PIPESTATUS[0]}
  RESULT[kernel]=$([ "$rc" = 0 ] && echo "ran (gpu_bandwidth.md)" || echo "FAIL (rc $rc$([ "$rc" = 124 ] && echo ', timed out'))")
else
  RESULT[kernel]="NOT RUN ($(left) s left)"
fi

# ------------------------------------------------------------------ 5 bench
if [ -f benchmarks/__main__.py ] && [ "$(left)" -ge "$BENCH_MIN" ]; then
  echo "== 5 bench ($(left) s left)"
  timeout "$(left)" $PY -m benchmarks --quick --out "$OUT_DIR" 2>&1 | tail -40
  RESULT[bench]="ran (rc ${PIPESTATUS[0]})"
else
  RESULT[bench]="NOT RUN ($(left) s left, needs $BENCH_MIN)"
fi

echo "== summary after $(elapsed) s"
for stage in build smoke pytest kernel bench; do echo "  $stage: ${RESULT[$stage]:-NOT RUN}"; done
rc=$(( smoke_rc != 0 || pytest_rc != 0 ))
echo "GPU CHECK: $([ $rc = 0 ] && echo PASS || echo FAIL); logs in $OUT_DIR"
exit "$rc"

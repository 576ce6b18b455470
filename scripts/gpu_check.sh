#!/usr/bin/env bash
# One command for a lent GPU machine (torch with CUDA preinstalled, no network):
# builds the extension with CUDA, runs tests/gpu, prints a short summary.
# A skipped GPU test fails the run (GRAPHPROBE_FAIL_ON_SKIP=1): device time is
# scarce, and a silent skip would read as a pass. Takes a few minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=${OUT:-/tmp/graphprobe-gpu}
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1 GRAPHPROBE_FAIL_ON_SKIP=1 MAX_JOBS=${MAX_JOBS:-16}
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
start=$(date +%s)
if ! python3 setup.py build_ext --inplace >"$OUT_DIR/build.log" 2>&1; then
  tail -40 "$OUT_DIR/build.log"; echo "GPU CHECK: BUILD FAILED"; exit 1
fi
echo "build: $(( $(date +%s) - start )) s"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
python3 -c "import graphprobe, graphprobe._C; print('graphprobe from', graphprobe.__file__)"
python3 -m pytest tests/gpu -q -rA -p no:cacheprovider --junitxml="$OUT_DIR/gpu-junit.xml" 2>&1 | tee "$OUT_DIR/gpu-tests.log"
rc=${PIPESTATUS[0]}
if [ -f benchmarks/__main__.py ] && [ "${GRAPHPROBE_GPU_BENCH:-1}" = 1 ]; then
  python3 -m benchmarks --quick --out "$OUT_DIR" 2>&1 | tail -40
fi
echo "GPU CHECK: pytest exit $rc after $(( $(date +%s) - start )) s"
exit "$rc"

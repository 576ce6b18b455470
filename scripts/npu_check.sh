#!/usr/bin/env bash
# The check for the day an Ascend machine (torch_npu, CANN, an NPU) exists:
# nothing of the NPU path has run on hardware yet (docs/limitations.md).
# At most NPU_CHECK_BUDGET seconds (default 600):
#
#   0. env     torch, torch_npu, CANN version, npu-smi; pytest present or not
#   1. build   python3 setup.py build_ext --inplace with torch_npu importable:
#              graphprobe._C and graphprobe._C_npu (needs CANN's set_env.sh)
#   2. pytest  tests/npu (eager, torch.npu.NPUGraph replays with acl_save,
#              torchair reduce-overhead (npugraph_ex), GE mode refused; the
#              Sketch's int64 hash ops on the device, test_npu_sketch.py); a
#              skip fails (GRAPHPROBE_FAIL_ON_SKIP=1)
#
# Output also goes to $OUT/npu_check.log ($OUT defaults to /tmp/graphprobe-npu).
# Known trap (docs/limitations.md): CANN < 8.5 fails host functions launched
# on the current stream with "Allocate SQ failed"; msprobe's workaround is the
# default stream. The check prints the CANN version so that a failure there
# can be read against it.
#
#   bash scripts/npu_check.sh            # the run
#   bash scripts/npu_check.sh --dry-run  # the plan; runs nothing
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/check_lib.sh
parse_run_args npu_check 2,22 "$@"
OUT_DIR=${OUT:-/tmp/graphprobe-npu}
TOTAL=${NPU_CHECK_BUDGET:-600}
BUILD_BUDGET=${NPU_CHECK_BUILD_S:-300}
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 GRAPHPROBE_FAIL_ON_SKIP=1
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" MAX_JOBS=${MAX_JOBS:-$(nproc)}
echo "npu_check plan: total ${TOTAL} s; output in $OUT_DIR"
echo "  0 env     torch / torch_npu / CANN versions, npu-smi"
echo "  1 build   ${BUILD_BUDGET} s  $PY setup.py build_ext --inplace (graphprobe._C and graphprobe._C_npu)"
echo "  2 pytest  what is left: $PY -m pytest tests/npu (a skip fails)"
if [ "$DRY" = 1 ]; then
  echo "npu_check: dry run, nothing was built or run"
  exit 0
fi
mkdir -p "$OUT_DIR"
exec > >(tee -a "$OUT_DIR/npu_check.log") 2>&1
start=$(date +%s)

echo "== 0 env"
$PY -c "import torch, torch_npu; print('torch', torch.__version__, '| torch_npu', torch_npu.__version__, '| npus', torch.npu.device_count())" ||
  { echo "NPU CHECK: FAIL: torch_npu does not import (CANN set up? source .../ascend-toolkit/set_env.sh)"; exit 1; }
cat "${ASCEND_TOOLKIT_HOME:-/usr/local/Ascend/ascend-toolkit/latest}"/*/ascend_toolkit_install.info 2>/dev/null | grep -i version ||
  echo "npu_check: CANN version not found (ASCEND_TOOLKIT_HOME=${ASCEND_TOOLKIT_HOME:-unset})"
npu-smi info 2>/dev/null | head -20 || echo "npu_check: npu-smi not available"

echo "== 1 build (budget ${BUILD_BUDGET} s)"
if ! timeout "$BUILD_BUDGET" $PY setup.py build_ext --inplace >"$OUT_DIR/build.log" 2>&1; then
  grep -E -m20 'error|Error' "$OUT_DIR/build.log"; tail -30 "$OUT_DIR/build.log"
  echo "NPU CHECK: BUILD FAILED; log in $OUT_DIR/build.log"
  exit 1
fi
$PY -c "import torch, torch_npu, graphprobe._C_npu, graphprobe.npu as n; assert n.ensure_runtime(); print('graphprobe._C_npu registered')" ||
  { echo "NPU CHECK: FAIL: graphprobe._C_npu was not built or does not register"; exit 1; }

left=$(( TOTAL - ($(date +%s) - start) - 10 ))
echo "== 2 pytest ($left s left)"
timeout -k 5 "$left" $PY -m pytest tests/npu -q -rA -p no:cacheprovider --junitxml="$OUT_DIR/pytest-npu.xml"
rc=$?
echo "NPU CHECK: $([ $rc = 0 ] && echo PASS || echo "FAIL (rc $rc)") after $(( $(date +%s) - start )) s; logs in $OUT_DIR"
exit "$rc"

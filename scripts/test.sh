#!/usr/bin/env bash
# The test command: sets up .venv and the build (scripts/setup_env.sh; a few
# seconds once done), runs the C++ unit tests, the CUDA compile check (where
# nvcc exists), then pytest (tests/gpu skips without CUDA; -rs prints why
# each test was skipped). Extra arguments go to pytest.
#
#   bash scripts/test.sh --quick [PYTEST ARGS]   the quick subset (QUICK below):
#       about 1 minute of CPU (measured 2026-12-02: 46 s user+sys, 187 s wall
#       on the shared 2-core machine at load 16); config, the compare command
#       and its summary, the compare rules, one eager-vs-torch.compile compare
#       end to end and the demo. No C++ unit tests, no CUDA compile check, no
#       slow compile tests: those run in the full run (and CI, .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK=(
  tests/test_first_hour_config.py tests/test_first_hour_summary.py tests/test_first_hour_cli.py
  tests/test_first_hour_training.py tests/test_first_hour_xlsx.py tests/test_first_hour_imports.py
  tests/test_config.py tests/test_compare_summary.py tests/test_compare_cli.py tests/test_msprobe_flags.py
  tests/test_compare_rules.py tests/test_compare_pairing_rules.py tests/test_compare_divergence_rules.py
  tests/test_compare_end_to_end.py tests/test_first_hour.py
)
quick=0
if [ "${1:-}" = "--quick" ]; then
  quick=1
  shift
fi
bash scripts/setup_env.sh --tools
if [ $quick = 0 ]; then
  bash scripts/run_cpp_tests.sh
  bash scripts/check_cuda_compile.sh
fi
# .venv/bin first on PATH: tests that run a console script of a package
# installed into .venv (msprobe's `msprobe compare`) find it there.
export PATH="$PWD/.venv/bin:$PATH"
if [ $quick = 1 ]; then
  exec .venv/bin/python -m pytest "${QUICK[@]}" -q -rs -p no:cacheprovider "$@"
fi
.venv/bin/python -m pytest tests -q -rs -p no:cacheprovider "$@"

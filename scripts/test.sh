#!/usr/bin/env bash
# The test command: installs and builds (scripts/setup_env.sh), runs the C++
# unit tests, then pytest (tests/gpu skips without CUDA).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
if [ -x scripts/run_cpp_tests.sh ] || [ -f scripts/run_cpp_tests.sh ]; then
  bash scripts/run_cpp_tests.sh
fi
bash scripts/check_cuda_compile.sh
python3 -m pytest tests -q -p no:cacheprovider "$@"

#!/usr/bin/env bash
# The test command: sets up .venv and the build (scripts/setup_env.sh; a few
# seconds once done), runs the C++ unit tests, the CUDA compile check (where
# nvcc exists), then pytest (tests/gpu skips without CUDA; -rs prints why
# each test was skipped). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
bash scripts/run_cpp_tests.sh
bash scripts/check_cuda_compile.sh
# .venv/bin first on PATH: tests that run a console script of a package
# installed into .venv (msprobe's `msprobe compare`) find it there.
export PATH="$PWD/.venv/bin:$PATH"
.venv/bin/python -m pytest tests -q -rs -p no:cacheprovider "$@"

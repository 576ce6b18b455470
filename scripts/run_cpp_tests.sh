#!/usr/bin/env bash
# Builds and runs the C++ unit tests of the torch-free code (csrc/record,
# csrc/format, csrc/fs, csrc/identity, csrc/compare) with CMake into
# build/cpp-tests. No torch needed.
# Usage: scripts/run_cpp_tests.sh [extra cmake -D options]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD_DIR:-build/cpp-tests}
cmake -S csrc/tests -B "$BUILD" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} "$@" >/dev/null
cmake --build "$BUILD" -j "${JOBS:-$(nproc)}"
ctest --test-dir "$BUILD" --output-on-failure

#!/usr/bin/env bash
# The C++ unit tests built with AddressSanitizer and UndefinedBehaviorSanitizer
# (-fsanitize=address,undefined, any report is fatal), into build/cpp-tests-asan.
# test_json_reader includes a mutation run over malformed documents, so this is
# the check that the parsers survive hostile input without memory errors.
# Usage: scripts/asan_parsers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
BUILD_DIR=build/cpp-tests-asan BUILD_TYPE=Debug exec scripts/run_cpp_tests.sh -DGRAPHPROBE_SANITIZE=address,undefined

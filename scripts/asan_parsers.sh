#!/usr/bin/env bash
# The C++ unit tests built with AddressSanitizer and UndefinedBehaviorSanitizer
# (-fsanitize=address,undefined, any report is fatal), into build/cpp-tests-asan.
# This is the check that the parsers of input files survive hostile input
# without memory errors:
#  * dump.json: test_json_reader includes a mutation run over malformed
#    documents and a torn (sparse, NUL-filled) file;
#  * torch.save tensor files (compare of tensor dumps): test_pt_archive reads
#    valid files of every dtype, 20000 random mutations of one, and then every
#    crafted file of tests/reliability/crafted_pt.py (claims of sizes, strides,
#    offsets and counts past what the file holds, a lying zip directory,
#    hostile pickle opcodes, memoised values reused to amplify memory), each
#    of which must be refused with FormatError.
# Usage: scripts/asan_parsers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
BUILD=build/cpp-tests-asan
BUILD_DIR=$BUILD BUILD_TYPE=Debug scripts/run_cpp_tests.sh -DGRAPHPROBE_SANITIZE=address,undefined

# The crafted .pt files (stdlib Python only), read by the sanitized reader.
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
CRAFTED=$BUILD/crafted_pt
rm -rf "$CRAFTED"
"$PYTHON" tests/reliability/crafted_pt.py "$CRAFTED" >/dev/null
echo "asan_parsers: reading $(ls "$CRAFTED" | wc -l) crafted .pt files under ASan/UBSan"
GRAPHPROBE_PT_FILES=$CRAFTED GRAPHPROBE_TEST_TMP=$BUILD "$BUILD/test_pt_archive"
echo "asan_parsers: all parsers clean"

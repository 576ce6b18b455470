#!/usr/bin/env bash
# Compiles every NPU source (csrc/npu/*.cpp: the optional graphprobe._C_npu
# extension, setup.py's NPU_SOURCES) with -fsyntax-only against the headers
# of the torch-npu wheel that matches the installed torch (they bundle CANN's
# acl/acl_rt.h), with the C++ standard of the extension build and -Wall
# -Werror. No Ascend machine, CANN or torch_npu import is needed: the wheel is
# downloaded with `pip download --no-deps` and only its headers are unpacked.
#
# The wheel is cached in build/npu-wheel (a second run does not download),
# and the check is skipped when nothing it reads changed since it last passed
# (NPU_CHECK_FORCE=1 reruns it).
#
# When the wheel cannot be fetched (no network, no wheel for this torch) the
# check FAILS, saying why, unless GRAPHPROBE_SKIP_NPU_CHECK=1 (then it says it
# skipped). NPU_WHEEL=FILE.whl uses that wheel instead of downloading.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/check_lib.sh
PY=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
CXX=${CXX:-c++}
TORCH_VERSION=$($PY -c "import torch; print(torch.__version__.split('+')[0])")
PYTAG=$($PY -c "import sys; print(f'cp{sys.version_info[0]}{sys.version_info[1]}')")
cache=build/npu-wheel
mkdir -p "$cache"

wheel=${NPU_WHEEL:-}
if [ -z "$wheel" ]; then
  wheel=$(ls "$cache"/torch_npu-"$TORCH_VERSION"-"$PYTAG"-*.whl 2>/dev/null | head -1 || true)
fi
if [ -z "$wheel" ]; then
  echo "check_npu_compile: downloading torch-npu==$TORCH_VERSION into $cache (only its headers are used)"
  if ! $PY -m pip download -q --disable-pip-version-check --no-deps "torch-npu==$TORCH_VERSION" -d "$cache" \
      >"$cache/download.log" 2>&1; then
    tail -5 "$cache/download.log" >&2
    if [ "${GRAPHPROBE_SKIP_NPU_CHECK:-0}" = 1 ]; then
      echo "check_npu_compile: SKIPPED: the torch-npu $TORCH_VERSION wheel could not be downloaded" \
        "(GRAPHPROBE_SKIP_NPU_CHECK=1); the NPU sources were NOT checked"
      exit 0
    fi
    echo "check_npu_compile: FAIL: the torch-npu $TORCH_VERSION wheel could not be downloaded (log above), so the" \
      "NPU sources were not checked. GRAPHPROBE_SKIP_NPU_CHECK=1 skips this check; NPU_WHEEL=FILE.whl uses a wheel" >&2
    exit 1
  fi
  wheel=$(ls "$cache"/torch_npu-"$TORCH_VERSION"-"$PYTAG"-*.whl | head -1)
fi
[ -f "$wheel" ] || { echo "check_npu_compile: no such wheel '$wheel'" >&2; exit 2; }

# setup.py's NPU_SOURCES glob, evaluated as setup.py does.
sources=$(
  $PY - <<'PYEOF'
import ast, glob, os
tree = ast.parse(open("setup.py").read())
for node in tree.body:
    if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "NPU_SOURCES" for t in node.targets):
        print(" ".join(eval(compile(ast.Expression(node.value), "setup.py", "eval"), {"glob": glob, "os": os})))
        break
else:
    raise SystemExit("check_npu_compile: setup.py defines no NPU_SOURCES")
PYEOF
)
[ -n "$sources" ] || { echo "check_npu_compile: FAIL: setup.py's NPU_SOURCES is empty" >&2; exit 1; }

stamp_file=build/.graphprobe-npu-check
stamp=$( { "$CXX" --version | head -1; echo "$TORCH_VERSION"; } | sources_stamp "$wheel")
exit_if_checked check_npu_compile "$stamp_file" "$stamp" NPU_CHECK_FORCE

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
$PY - "$wheel" "$work" <<'PYEOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    names = [n for n in z.namelist() if n.startswith("torch_npu/include/")]
    if not any(n.endswith("acl/acl_rt.h") for n in names):
        sys.exit(f"check_npu_compile: {sys.argv[1]} holds no torch_npu/include/**/acl/acl_rt.h")
    for n in names:
        z.extract(n, sys.argv[2])
PYEOF
NPU_INC="$work/torch_npu/include"
TORCH_INC=$($PY -c "from torch.utils.cpp_extension import include_paths; print(' '.join('-isystem ' + p for p in include_paths()))")
PY_INC=$($PY -c "import sysconfig; print(sysconfig.get_paths()['include'])")
# The C++ standard torch's cpp_extension builds with (the flag it adds to
# every compile, not one in a docstring).
STD=$(sed -n "s/.*common_cflags += \['-std=\(c++[0-9]*\)'.*/\1/p" \
  "$($PY -c "import torch.utils.cpp_extension as c; print(c.__file__)")" | head -1)
STD=${STD:-c++17}
n=0
for src in $sources; do
  # The wheel's and torch's headers as system headers: their warnings are not ours.
  # shellcheck disable=SC2086
  "$CXX" -std="$STD" -fsyntax-only -Wall -Werror -Icsrc -isystem "$NPU_INC" -isystem "$NPU_INC/third_party/acl/inc" \
    $TORCH_INC -isystem "$PY_INC" -DTORCH_API_INCLUDE_EXTENSION_H -DTORCH_EXTENSION_NAME=_C_npu "$src"
  echo "check_npu_compile: ok [$STD] $src"
  n=$((n + 1))
done
echo "check_npu_compile: $n NPU source(s) compile against $(basename "$wheel") (CANN's acl/acl_rt.h bundled)" \
  "and torch $TORCH_VERSION"
mkdir -p build
echo "$stamp" >"$stamp_file"

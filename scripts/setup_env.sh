#!/usr/bin/env bash
# Sets graphprobe up on a fresh machine, and does nothing that is already done
# on the next run (a few seconds then):
#  1. a project-local virtual environment, .venv (nothing is installed into
#     the system Python; a torch 2.13.0 already there is reused, not copied);
#  2. torch 2.13.0 (CPU build) and what graphprobe needs installed into it;
#     with --tools also the tools of the tests and of long runs (pytest,
#     transformers, pyarrow, duckdb, dask);
#  3. graphprobe installed into it in editable mode (the `graphprobe` command);
#  4. the two C++ modules built in place (src/graphprobe/*.so) in the
#     persistent build/ folder: ninja recompiles only what changed, ccache is
#     used when installed, and the build is skipped when no source, compiler
#     input or torch changed since the last one. Progress: one line per file.
# Environment: PYTHON (the interpreter that creates .venv, default python3),
# MAX_JOBS (parallel compiles, default: CPU count), CFLAGS (default
# "-g0 -DNDEBUG -O3 -fwrapv"),
# GRAPHPROBE_FORCE_CPU=1.
# Other scripts use .venv/bin/python after this.
set -euo pipefail
cd "$(dirname "$0")/.."
with_tools=0
case "${1:-}" in
  --tools) with_tools=1 ;;
  "") ;;
  *) echo "usage: bash scripts/setup_env.sh [--tools]  (--tools: also the test and long-run tools)" >&2; exit 2 ;;
esac
VENV=.venv
PY=$VENV/bin/python
say() { echo "setup: $*" >&2; }

# 1. The virtual environment. When the base interpreter already has this very
# torch (2.13.0), the venv sees its site-packages instead of installing a
# second copy (700 MB, a minute or two); everything is still installed into
# .venv, nothing into the system Python.
if [ ! -x "$PY" ]; then
  BASE=${PYTHON:-python3}
  opts=()
  if "$BASE" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '2.13.0')" 2>/dev/null; then
    opts=(--system-site-packages)
    say "creating the virtual environment $VENV (reusing the torch 2.13.0 of $BASE)"
  else
    say "creating the virtual environment $VENV"
  fi
  if ! "$BASE" -m venv ${opts[@]+"${opts[@]}"} "$VENV" 2>"$VENV.log"; then
    # Debian's python3 without python3-venv has no ensurepip: make the venv
    # without pip and install pip into it with the base interpreter's pip.
    rm -rf "$VENV"
    "$BASE" -m venv ${opts[@]+"${opts[@]}"} --without-pip "$VENV"
    "$BASE" -m pip --python "$PY" install -q pip \
      || { say "cannot create $VENV: install python3-venv (Debian: apt-get install python3-venv)"; exit 1; }
  fi
  rm -f "$VENV.log"
fi

# 2. Dependencies, pinned: a bare 'torch' would pull a multi-GB CUDA build.
# What graphprobe and its demo need is installed always; the tools of the
# tests and of long runs only with --tools (scripts/test.sh and .ci/run pass
# it): they are a minute of a fresh machine's first demo (63 s of 278 s,
# measured 2026-12-02). openpyxl: the extra for `graphprobe compare --xlsx`
# (pyproject's "xlsx"), so that --xlsx works on first use in this .venv.
# Tools: pytest, hypothesis; transformers (pinned; it does not depend on
# torch): third-party models for the tests; pyarrow, duckdb, dask,
# distributed: graphprobe.history (docs/history.md, pyproject's "history").
DEPS=("torch==2.13.0" "numpy" "setuptools>=64" "wheel" "ninja" "openpyxl>=3.1")
TOOLS=("pytest" "hypothesis" "transformers==4.57.1" "pyarrow==26.0.1" "duckdb==2.0.1" "dask[dataframe]==2026.8.0" "distributed==2026.8.0")
want=("${DEPS[@]}")
[ "$with_tools" = 1 ] && want+=("${TOOLS[@]}")
deps_stamp=$VENV/.graphprobe-deps
done_deps=$(cat "$deps_stamp" 2>/dev/null || true)
# Installed already: the stamp names this exact list, or the list with the
# tools when they are not asked for.
if [ "$done_deps" != "${want[*]}" ] && [ "$done_deps" != "${DEPS[*]} ${TOOLS[*]}" ]; then
  say "installing ${want[*]} into $VENV (first run: a minute or two)"
  "$PY" -m pip install -q --disable-pip-version-check "${want[@]}"
  echo "${want[*]}" >"$deps_stamp"
fi

# 3. Editable install, without compiling (GRAPHPROBE_ONLY=none): the modules
# are built in place below, where the editable install finds them.
# --no-build-isolation: build against the torch above, never a freshly fetched one.
if [ ! -x "$VENV/bin/graphprobe" ] || ! "$PY" - <<EOF 2>/dev/null
import importlib.util, sys
spec = importlib.util.find_spec("graphprobe")
sys.exit(spec is None or not spec.origin.startswith("$PWD/src/"))
EOF
then
  say "installing graphprobe (editable) into $VENV"
  GRAPHPROBE_ONLY=none "$PY" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e .
fi

# 4. The C++ modules. Without debug information unless CFLAGS says otherwise
# (-g0: a quarter less compile time). CFLAGS replaces Python's own compile
# flags, so the default restates the ones a `pip install` build gets
# (-DNDEBUG -O3 -fwrapv): tests run what users run. CFLAGS="-g -O1" gives a
# build with torch's debug-only assertions on.
export CFLAGS=${CFLAGS:--g0 -DNDEBUG -O3 -fwrapv}
# One build at a time: two ninja runs in one build/ folder (two terminals, a
# test run started while a build runs) write each other's objects and logs.
mkdir -p build
exec 9>build/.setup.lock
if ! flock -n 9; then
  say "another set-up is building in this checkout; waiting for it"
  flock 9
fi
# The stamp covers everything the build reads.
build_stamp=build/.graphprobe-build
stamp=$( {
  find csrc -type f ! -path 'csrc/tests/*' -print0 | sort -z | xargs -0 sha256sum
  sha256sum setup.py
  "$PY" -c "import sys, torch; print(sys.version, torch.__version__, torch.version.cuda)"
  echo "FORCE_CPU=${GRAPHPROBE_FORCE_CPU:-} nvcc=$(command -v nvcc || true) CFLAGS=$CFLAGS"
} | sha256sum | cut -d' ' -f1)
if [ "$(cat "$build_stamp" 2>/dev/null)" = "$stamp" ] && ls src/graphprobe/_C.*.so src/graphprobe/_compare.*.so >/dev/null 2>&1; then
  say "C++ modules are up to date (build/ unchanged)"
  exit 0
fi
if [ -d /usr/lib/ccache ]; then
  export PATH=/usr/lib/ccache:$PATH  # compiler names that go through ccache
  say "building the C++ modules with ccache"
else
  say "building the C++ modules (first time: several minutes on 2 cores; later: only what changed)"
fi
mkdir -p build
log=build/setup-build.log
: >"$log"
# --force: setuptools' own up-to-date test ignores headers; ninja, which reads
# the compiler's dependency files, decides what really needs compiling.
MAX_JOBS=${MAX_JOBS:-$(nproc)} "$PY" setup.py build_ext --inplace --force >"$log" 2>&1 &
pid=$!
# One line per compiled file, from ninja's "[k/n] c++ ... -c /path/src.cpp" lines,
# and one for the precompiled header (setup.py's "[pch] HEADER: command").
tail -n +1 -f --pid=$pid "$log" 2>/dev/null \
  | sed -un -e 's#^\[\([0-9]*/[0-9]*\)\].* -c \(-c \)\{0,1\}\([^ ]*\).*#  [\1] \3#p' \
      -e 's#^\[pch\] \([^:]*\):.*#  [pch] \1 (precompiled header of the engine'"'"'s files)#p' | sed -u "s#$PWD/##" >&2 || true
if ! wait $pid; then
  say "build failed; the end of $log:"
  tail -40 "$log" >&2
  exit 1
fi
echo "$stamp" >"$build_stamp"
say "built src/graphprobe/_C and _compare (log: $log)"

#!/usr/bin/env bash
# Installs what graphprobe needs on a fresh machine of this kind and builds it
# from source against torch 2.13.0 (the CPU build on this disk). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# Pin torch: a bare 'torch' would pull a multi-GB CUDA build.
$PY -m pip install -q --disable-pip-version-check "torch==2.13.0" "numpy" "pytest" "hypothesis" "setuptools>=64" "wheel" "ninja"
# --no-build-isolation: build against the torch above, never a freshly fetched one.
MAX_JOBS=${MAX_JOBS:-2} $PY -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e .

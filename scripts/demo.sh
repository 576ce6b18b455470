#!/usr/bin/env bash
# The demo command: sets up .venv and the build (scripts/setup_env.sh; a few
# seconds once done), then runs `graphprobe demo` with a fault injected into
# one module of the graph-mode run. Extra arguments go to `graphprobe demo`
# (see `graphprobe demo --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
if [ "$#" -eq 0 ]; then
  set -- --inject-fault layers.1.mlp
fi
exec .venv/bin/python -m graphprobe demo "$@"

# Functions shared by the check scripts (sourced, not run):
# gpu_check.sh / npu_check.sh (device runs) and check_cuda_compile.sh /
# check_npu_compile.sh (compile checks). Sourced after `cd` to the repository.

# parse_run_args NAME HELP_LINES "$@": sets DRY=1 for --dry-run; -h prints
# lines HELP_LINES (a sed range) of the calling script.
parse_run_args() {
  local name=$1 help=$2 arg
  shift 2
  DRY=0
  for arg in "$@"; do
    case "$arg" in
      --dry-run) DRY=1 ;;
      -h|--help) sed -n "${help}p" "$0"; exit 0 ;;
      *) echo "$name: unknown argument '$arg' (allowed: --dry-run)" >&2; exit 2 ;;
    esac
  done
}

# sources_stamp [FILE...] < TOOL_FACTS: one hash of csrc/, setup.py, the
# calling script and this file, the FILEs and the text on stdin (compiler
# and torch versions), so that a check reruns whenever any of them changes.
sources_stamp() {
  {
    find csrc -type f -print0 | sort -z | xargs -0 sha256sum
    sha256sum setup.py "$0" "${BASH_SOURCE[0]}" "$@"
    cat
  } | sha256sum | cut -d' ' -f1
}

# exit_if_checked NAME STAMP_FILE STAMP FORCE_VAR: ends the calling script
# when the last passing check left the same stamp, unless $FORCE_VAR is 1.
exit_if_checked() {
  local name=$1 file=$2 stamp=$3 force=$4
  if [ "${!force:-0}" != 1 ] && [ "$(cat "$file" 2>/dev/null)" = "$stamp" ]; then
    echo "$name: sources unchanged since the last passing check, skipped ($force=1 reruns it)"
    exit 0
  fi
}

"""Issue 40 items 4 and 1: `bash scripts/test.sh --quick` runs a listed
subset (no C++ unit tests, no CUDA compile check), the full run still runs
the CUDA compile check, and the README's first screen names the commands,
the recipe and what ran on which hardware."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "test.sh"


def _quick_list() -> list[str]:
    # The QUICK=( ... ) array, read by bash itself.
    code = f'eval "$(sed -n \'/^QUICK=(/,/^)/p\' {SCRIPT})"; printf "%s\\n" "${{QUICK[@]}}"'
    done = subprocess.run(["bash", "-c", code], capture_output=True, text=True, timeout=30, check=True)
    return done.stdout.split()


def test_the_quick_subset_lists_existing_cpu_test_files() -> None:
    files = _quick_list()
    assert len(files) >= 10 and len(set(files)) == len(files)
    for f in files:
        assert (ROOT / f).is_file(), f
        assert f.startswith("tests/test_") and "/gpu/" not in f and "/npu/" not in f, f
    # The first-hour checks of issue 40 are in it.
    assert {"tests/test_first_hour_config.py", "tests/test_first_hour_summary.py"} <= set(files)


def test_quick_skips_the_compile_checks_and_the_full_run_keeps_them() -> None:
    text = SCRIPT.read_text()
    guarded = text.split("if [ $quick = 0 ]; then", 1)[1].split("fi", 1)[0]
    assert "bash scripts/check_cuda_compile.sh" in guarded and "bash scripts/run_cpp_tests.sh" in guarded
    assert text.count("check_cuda_compile.sh") == 1  # only there
    assert '.venv/bin/python -m pytest tests -q -rs -p no:cacheprovider "$@"' in text


def test_the_readme_first_screen() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    first = "\n".join(lines[:45])
    for command in ("bash scripts/demo.sh", "bash scripts/test.sh --quick", "bash scripts/test.sh "):
        assert command in first, command
    assert "AclGraphDumper(dump_path=" in first and "graphprobe compare runs/compiled runs/eager" in first
    # What ran on which hardware, on the first screen.
    assert "never run on a GPU" in first and "never run on an NPU" in first

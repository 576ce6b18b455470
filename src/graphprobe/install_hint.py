"""The command that installs an optional package for *this* graphprobe.

A source checkout (``src/graphprobe`` next to ``setup.py``: scripts/setup_env.sh's
``.venv``) is an editable install whose extras pip does not re-read --
``pip install 'graphprobe[xlsx]'`` would fetch graphprobe from the index -- so
there the command is ``<this python> -m pip install PACKAGES``; anywhere else it
is the extra.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["history_install_command", "install_command"]


def install_command(packages: str, extra: str, package_dir: Path | None = None,
                    executable: str | None = None) -> str:
    """``<python> -m pip install PACKAGES`` from a source checkout, else
    ``pip install 'graphprobe[EXTRA]'``. ``packages`` is pip's text
    (``"pyarrow duckdb 'dask[dataframe]'"``); the last two arguments are for
    tests (default: this package's folder and ``sys.executable``)."""
    package_dir = Path(__file__).resolve().parent if package_dir is None else package_dir
    python = sys.executable if executable is None else executable
    if package_dir.parent.name == "src" and (package_dir.parent.parent / "setup.py").is_file():
        try:
            shown = os.path.relpath(python)  # ".venv/bin/python" from the checkout
        except ValueError:  # another drive (Windows)
            shown = python
        shown = shown if not shown.startswith("..") else python
        return f"{shown} -m pip install {packages}"
    return f"pip install 'graphprobe[{extra}]'"


def history_install_command() -> str:
    """The command that installs what ``graphprobe.history`` needs (pyproject's
    ``history`` extra)."""
    return install_command("pyarrow duckdb 'dask[dataframe]' distributed", "history")

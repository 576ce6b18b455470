"""Issue 40 item 7: --xlsx without openpyxl names the install command that
works for this install (a source checkout's .venv: ``<python> -m pip
install openpyxl``; a pip install: ``pip install 'graphprobe[xlsx]'``), and
scripts/setup_env.sh installs openpyxl."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from compare_fixtures import cli, simple_model_dump, write_dump
from graphprobe.compare.workbook import openpyxl_install_command

ROOT = Path(__file__).resolve().parents[1]


def test_a_source_checkout_gets_its_own_interpreters_pip(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    monkeypatch.setitem(sys.modules, "openpyxl", None)  # import openpyxl raises ImportError
    monkeypatch.chdir(ROOT)
    t = write_dump(tmp_path / "t.json", simple_model_dump())
    b = write_dump(tmp_path / "b.json", simple_model_dump())
    code, _, err = cli(capsys, "compare", str(t), str(b), "-o", str(tmp_path / "o"), "--xlsx")
    assert code == 2
    python = os.path.relpath(sys.executable) if not os.path.relpath(sys.executable).startswith("..") \
        else sys.executable
    assert f"install it with {python} -m pip install openpyxl, or leave out --xlsx" in err
    assert "graphprobe[xlsx]" not in err
    assert err.splitlines()[0].startswith("graphprobe compare: error: --xlsx needs openpyxl")


def test_a_pip_install_gets_the_extra(tmp_path: Path) -> None:
    site = tmp_path / "lib" / "python3.11" / "site-packages" / "graphprobe"
    site.mkdir(parents=True)
    assert openpyxl_install_command(site, "/usr/bin/python3") == "pip install 'graphprobe[xlsx]'"
    checkout = tmp_path / "repo"
    (checkout / "src" / "graphprobe").mkdir(parents=True)
    (checkout / "setup.py").write_text("")
    assert openpyxl_install_command(checkout / "src" / "graphprobe", "/opt/venv/bin/python") == \
        "/opt/venv/bin/python -m pip install openpyxl"


def test_the_set_up_installs_openpyxl() -> None:
    script = (ROOT / "scripts" / "setup_env.sh").read_text()
    deps = next(line for line in script.splitlines() if line.startswith("DEPS=("))
    assert '"openpyxl' in deps

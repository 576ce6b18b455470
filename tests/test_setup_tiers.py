"""The set-up in two tiers: the demo installs what graphprobe needs, the test
command adds the tools (issue 40 item 3: a fresh machine's first demo spent a
minute installing pytest, transformers, pyarrow, duckdb and dask), and what is
left out says how to get it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from graphprobe.install_hint import history_install_command, install_command

ROOT = Path(__file__).resolve().parents[1]


def _list(script: str, name: str) -> list[str]:
    line = next(l for l in script.splitlines() if l.startswith(f"{name}=("))
    return re.findall(r'"([^"]+)"', line)


def test_the_demo_installs_only_what_graphprobe_needs() -> None:
    script = (ROOT / "scripts" / "setup_env.sh").read_text()
    core = _list(script, "DEPS")
    tools = _list(script, "TOOLS")
    assert any(d.startswith("torch==") for d in core)
    for tool in ("pytest", "hypothesis", "transformers", "pyarrow", "duckdb", "dask", "distributed"):
        assert not any(d.startswith(tool) for d in core), tool
        assert any(d.startswith(tool) for d in tools), tool
    assert "bash scripts/setup_env.sh\n" in (ROOT / "scripts" / "demo.sh").read_text()


@pytest.mark.parametrize("script", ["scripts/test.sh", ".ci/run"])
def test_the_test_commands_install_the_tools(script: str) -> None:
    assert "bash scripts/setup_env.sh --tools\n" in (ROOT / script).read_text()


def test_install_command_for_a_checkout_and_for_an_install(tmp_path: Path) -> None:
    checkout = tmp_path / "co"
    (checkout / "src" / "graphprobe").mkdir(parents=True)
    (checkout / "setup.py").write_text("")
    assert install_command("pyarrow duckdb", "history", checkout / "src" / "graphprobe", "/v/bin/python") == \
        "/v/bin/python -m pip install pyarrow duckdb"
    site = tmp_path / "site-packages" / "graphprobe"
    site.mkdir(parents=True)
    assert install_command("pyarrow duckdb", "history", site, "/v/bin/python") == "pip install 'graphprobe[history]'"


def test_a_missing_history_package_names_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    from graphprobe.history import writer

    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    with pytest.raises(ImportError) as err:
        writer._require_pyarrow()
    assert "needs pyarrow" in str(err.value)
    assert history_install_command() in str(err.value)
    assert "pyarrow" in history_install_command()

"""`graphprobe demo`: the whole loop finds an injected fault."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from graphprobe.cli import main

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


@pytest.mark.slow
def test_demo_names_the_injected_module_and_the_report_renders(tmp_path, capsys):
    code = main(["demo", "--inject-fault", "layers.1.mlp:3", "--steps", "2", "--device", "cpu", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "first divergence: Module.layers.1.mlp.FeedForward.forward.0" in out
    assert "layers.1.mlp:3 -> found as the first divergence" in out
    reports = sorted(tmp_path.glob("compare/step*/compare_report_*.html"))
    assert len(reports) == 2 and len(list(tmp_path.glob("compare/step*/compare_result_*.csv"))) == 2
    if CHROMIUM is None:
        pytest.skip("no chromium binary on PATH: the rendering part is not checked")
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", reports[0].as_uri()],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert re.search(r'data-plot-width="[1-9]\d*"', dom), "the plot was not laid out"
    marker = re.search(r'<g id="first-divergence">.*?</g>', dom, re.S)
    assert marker and "Module.layers.1.mlp.FeedForward.forward.0" in marker.group(0)


def test_demo_rejects_unknown_module_and_bad_options(tmp_path, capsys):
    assert main(["demo", "--inject-fault", "layers.9.nope", "--out", str(tmp_path), "--device", "cpu"]) == 2
    assert "no module 'layers.9.nope'" in capsys.readouterr().err
    assert main(["demo", "--inject-fault", "layers.1.mlp:x", "--out", str(tmp_path), "--device", "cpu"]) == 2
    assert "scale 'x' is not a number" in capsys.readouterr().err
    assert main(["demo", "--steps", "0"]) == 2

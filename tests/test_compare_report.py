"""The HTML report, rendered by headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from compare_fixtures import entry, simple_model_dump, tensor, write_dump

from graphprobe.compare import compare

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


def dump_dom(page: Path) -> str:
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH (Debian: apt-get install chromium)")
def test_report_renders_plot_and_first_divergence(tmp_path: Path) -> None:
    t = write_dump(tmp_path / "t.json", simple_model_dump(3.0, 1))
    b = write_dump(tmp_path / "b.json", simple_model_dump())
    run = compare(t, b, tmp_path / "out", progress=False)
    (outcome,) = run.outcomes
    assert outcome.report_path is not None
    html = outcome.report_path.read_text()
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "") and "https://" not in html
    dom = dump_dom(outcome.report_path)
    # The inline script ran after layout: the plot has a width and 3 points.
    width = re.search(r'data-plot-width="(\d+)"', dom)
    assert width and int(width.group(1)) > 0
    assert 'data-points="3"' in dom
    assert re.search(r'<circle class="pt error"[^>]*data-entry="Module.layers.1.Linear.forward.0"', dom)
    assert re.search(r'<circle class="pt pass"[^>]*data-entry="Module.layers.0.Linear.forward.0"', dom)
    marker = re.search(r'<g id="first-divergence">.*?</g>', dom, re.S)
    assert marker and "Module.layers.1.Linear.forward.0" in marker.group(0)
    assert "First divergence: <code>Module.layers.1.Linear.forward.0</code>" in dom
    assert re.search(r'<table id="worst">.*Module\.layers\.1\.Linear\.forward\.0\.output\.0', dom, re.S)


def test_report_without_divergence_and_many_entries(tmp_path: Path) -> None:
    # 5000 entries are bucketed; an all-pass comparison has no marker.
    big = {f"Module.m{i}.ReLU.forward.0": entry([tensor(1.0)], [tensor(1.0)]) for i in range(5000)}
    t = write_dump(tmp_path / "t.json", big)
    run = compare(t, t, tmp_path / "out", progress=False)
    html = run.outcomes[0].report_path.read_text()
    assert 'id="first-divergence"' not in html and "No divergence found." in html
    assert html.count('<circle class="pt') == 2500  # buckets of 2
    assert "5000 entries, shown as 2500 buckets" in html

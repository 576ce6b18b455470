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


@pytest.mark.parametrize("link", ["step", "dump"])
def test_demo_into_an_out_with_a_linked_step_folder_refuses_with_exit_2(tmp_path, capsys, link):
    # An earlier demo's --out (its eager.json names eager/ as the dump path) in which step0, or eager/ itself, is
    # a link: the demo removes step folders, and must neither follow the link nor end in a traceback (issue #36).
    import json
    import os

    out = tmp_path / "out"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "step0").mkdir(parents=True)
    (elsewhere / "step0" / "keep.txt").write_text("keep")
    (out / "eager.json").write_text(json.dumps({"task": "statistics", "dump_path": str(out / "eager"), "level": "L0",
                                                "rank": []}))
    if link == "step":
        (out / "eager").mkdir()
        (out / "eager" / "step0").symlink_to(elsewhere / "step0", target_is_directory=True)
    else:
        (out / "eager").symlink_to(elsewhere, target_is_directory=True)
    assert main(["demo", "--steps", "1", "--device", "cpu", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "symbolic link" in err and "Traceback" not in err, err
    assert (elsewhere / "step0" / "keep.txt").read_text() == "keep"
    assert os.path.islink(out / "eager" / "step0" if link == "step" else out / "eager")


def test_demo_diagnose_into_an_out_whose_diagnose_folder_is_a_link_refuses(tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "diagnose").symlink_to(elsewhere, target_is_directory=True)
    assert main(["demo", "--diagnose", "--steps", "1", "--out", str(out)]) == 2
    assert "symbolic link" in capsys.readouterr().err
    assert list(elsewhere.iterdir()) == [] and (out / "diagnose").is_symlink()

"""msprobe 26.2.0's own ``msprobe compare`` reads every dump.json graphprobe
writes -- statistics with the Sketch key, and md5 checksums -- and lists the
same rows as graphprobe's compare (issue 35's acceptance)."""

from __future__ import annotations

import glob
import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from compare_fixtures import read_csv

import graphprobe
from graphprobe.compare import compare

pytestmark = pytest.mark.skipif(
    shutil.which("msprobe") is None or importlib.util.find_spec("msprobe") is None,
    reason="msprobe (pip install mindstudio-probe) is not installed")


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(torch.relu(self.fc(x)) + x)


def _dump(tmp: Path, name: str, level: str, summary_mode: str, compiled: bool) -> Path:
    torch.manual_seed(0)
    model = Block()
    cfg = tmp / f"{name}.json"
    cfg.write_text(json.dumps({"dump_path": str(tmp / name), "level": level,
                               "statistics": {"summary_mode": summary_mode}}))
    dumper = graphprobe.AclGraphDumper(str(cfg))
    dumper.start(model)
    run = torch.compile(model, backend="aot_eager", fullgraph=True) if compiled else model
    with torch.no_grad():
        run(torch.randn(4, 8, generator=torch.Generator().manual_seed(1)))
    dumper.step()
    dumper.stop()
    (path,) = glob.glob(str(tmp / name / "step0" / "*" / "dump.json"))
    return Path(path)


@pytest.mark.parametrize("level", ["L0", "mix"])
@pytest.mark.parametrize("summary_mode", ["statistics", "md5"])
def test_msprobe_compare_reads_our_dumps(tmp_path: Path, level: str, summary_mode: str) -> None:
    t = _dump(tmp_path, "compiled", level, summary_mode, compiled=True)
    b = _dump(tmp_path, "eager", level, summary_mode, compiled=False)
    records = json.loads(t.read_text())["data"]
    assert any("Sketch" in rec for e in records.values() for part in e.values() if isinstance(part, list)
               for rec in part if isinstance(rec, dict)), "the dump holds no Sketch: nothing tested"
    out = tmp_path / "msprobe"
    done = subprocess.run(["msprobe", "compare", "-tp", str(t), "-gp", str(b), "-o", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (theirs,) = glob.glob(str(out / "compare_result_*.csv"))
    run = compare(t, b, tmp_path / "ours", progress=False, html=False, jobs=1)
    (o,) = run.outcomes
    ours = read_csv(Path(o.csv_path))
    their_rows = read_csv(Path(theirs))
    assert [r["NPU Name"] for r in their_rows] == [r["NPU Name"] for r in ours]

"""Several processes dumping into one root lose and clobber nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

PROCS, STEPS = 4, 200

CHILD = textwrap.dedent(
    """
    import json, os, sys, torch, graphprobe
    root, tag = sys.argv[1], float(sys.argv[2])
    cfg = os.path.join(os.path.dirname(root), f"cfg{os.getpid()}.json")
    json.dump({"dump_path": root}, open(cfg, "w"))
    model = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Identity())
    d = graphprobe.AclGraphDumper(cfg)
    d.start(model)
    for step in range(%d):
        model(torch.full((4, 4), tag * 1000 + step))
        d.step()
    d.stop()
    print(os.getpid())
    """
    % STEPS
)


@pytest.mark.slow
def test_processes_share_one_dump_root(tmp_path):
    root = tmp_path / "dump"
    procs = [
        subprocess.Popen([sys.executable, "-c", CHILD, str(root), str(tag)], stdout=subprocess.PIPE, text=True)
        for tag in range(PROCS)
    ]
    pids = {}
    for tag, p in enumerate(procs):
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0
        pids[tag] = int(out.strip())
    for step in range(STEPS):
        folders = sorted(os.listdir(root / f"step{step}"))
        assert folders == sorted(f"pid{pid}" for pid in pids.values()), step
        for tag, pid in pids.items():
            data = json.loads((root / f"step{step}" / f"pid{pid}" / "dump.json").read_text())["data"]
            rec = data["Module.0.ReLU.forward.0"]["input_args"][0]
            assert rec["Max"] == rec["Min"] == tag * 1000 + step

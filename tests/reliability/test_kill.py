"""SIGKILL at random moments never leaves a partial dump.json or .pt file."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest
import torch

HERE = os.path.dirname(__file__)
KILLS = 20


@pytest.mark.slow
def test_sigkill_leaves_only_complete_files(tmp_path):
    rng = random.Random(1234)
    dump_path, save_dir = tmp_path / "dump", tmp_path / "saves"
    save_dir.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [HERE, os.environ.get("PYTHONPATH")]))}
    for i in range(KILLS):
        proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "dump_loop.py"), str(dump_path / f"run{i}"), str(save_dir / f"run{i}")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        )
        (save_dir / f"run{i}").mkdir()
        assert proc.stdout.readline().strip() == b"ready", proc.stderr.read().decode()
        time.sleep(rng.uniform(0.05, 0.6))  # somewhere inside a step, a write or a rename
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    dumps = list(dump_path.rglob("dump.json"))
    assert dumps, "the children wrote nothing before being killed"
    for path in dumps:
        data = json.loads(path.read_text())  # must parse: complete or absent
        assert len(data["data"]) == 8, path
    saves = list(save_dir.rglob("*.pt"))
    for path in saves:
        t = torch.load(path)
        assert t.shape == (256, 256) and bool((t == t.flatten()[0]).all()), path
    leftovers = [p for p in tmp_path.rglob("*") if ".tmp." in p.name]
    # Temporary files may remain after a kill; they are never read and never
    # carry a final name.
    assert all(not p.name.endswith((".json", ".pt")) for p in leftovers)

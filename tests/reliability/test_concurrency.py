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


def test_threads_saving_concurrently(tmp_path):
    import threading

    import torch

    import graphprobe

    threads, saves = 8, 100
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for i in range(saves):
                graphprobe.acl_save(torch.full((64,), float(t * 1000 + i)), str(tmp_path / f"t{t}.pt"))
        except BaseException as exc:  # reported below, not swallowed
            errors.append(exc)

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    graphprobe.flush()
    assert not errors
    for t in range(threads):
        # One path per thread: file n holds that thread's n-th value.
        for i in range(saves):
            got = torch.load(tmp_path / f"t{t}_{i}.pt")
            assert torch.equal(got, torch.full((64,), float(t * 1000 + i))), (t, i)
    # And all threads on one shared path: every value exactly once.
    shared = tmp_path / "shared"
    shared.mkdir()
    pool = [threading.Thread(target=lambda t=t: [graphprobe.acl_save(torch.tensor([t * 1000 + i]), str(shared / "s.pt"))
                                                 for i in range(saves)]) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    graphprobe.flush()
    values = sorted(int(torch.load(shared / f"s_{n}.pt").item()) for n in range(threads * saves))
    assert values == sorted(t * 1000 + i for t in range(threads) for i in range(saves))

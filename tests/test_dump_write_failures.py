"""dump.json write failures: a clear error at step(), counts, and recovery."""

from __future__ import annotations

import os
import stat

import pytest
import torch

import graphprobe
from graphprobe.dumper import DumpWriteError


def test_unwritable_step_folder_then_recovery(write_config, read_step, tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    # A regular file where the step folder must go: no permission trick needed
    # (tests may run as root, which ignores mode bits).
    (tmp_path / "dump" / "step0").write_text("in the way")
    model(torch.ones(1, 2))
    dumper.step()  # the folder is made by the writer thread: the failure is not known yet
    model(torch.ones(1, 2))
    # Linear: input, output, weight, bias; ReLU: input, output
    with pytest.raises(DumpWriteError, match=r"step0/pid\d+/dump.json': .*cannot create folder .*step0.*6 tensor records lost"):
        dumper.step()
    assert dumper.lost_records == 6
    model(torch.ones(1, 2))
    dumper.step()  # the dumper is still healthy
    dumper.stop()
    assert len(read_step(str(tmp_path / "dump"), 1)["data"]) == 2
    assert len(read_step(str(tmp_path / "dump"), 2)["data"]) == 2
    mode = stat.S_IMODE(os.stat(tmp_path / "dump" / "step1").st_mode)
    assert mode & 0o027 == 0, oct(mode)  # folders 0750 (less the umask)
    files = list((tmp_path / "dump" / "step1").glob("*/dump.json"))
    assert stat.S_IMODE(os.stat(files[0]).st_mode) & 0o137 == 0  # files 0640
    assert not list((tmp_path / "dump").rglob("*.tmp.*")), "no temporary file is left behind"


def test_symlink_at_dump_json_is_replaced_not_followed(write_config, read_step, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    model = torch.nn.Sequential(torch.nn.ReLU())
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    folder = tmp_path / "dump" / "step0" / f"pid{os.getpid()}"
    folder.mkdir(parents=True)
    (folder / "dump.json").symlink_to(victim)
    model(torch.ones(2))
    dumper.step()
    dumper.stop()
    assert victim.read_text() == "precious"
    assert not (folder / "dump.json").is_symlink()
    assert list(read_step(str(tmp_path / "dump"), 0)["data"]) == ["Module.0.ReLU.forward.0"]


def test_failed_background_write_is_raised_at_the_next_step(write_config, read_step, tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    # A folder where dump.json must go: the writer thread's rename fails.
    (tmp_path / "dump" / "step0" / f"pid{os.getpid()}" / "dump.json").mkdir(parents=True)
    model(torch.ones(1, 2))
    dumper.step()  # queued; the failure is not known yet
    model(torch.ones(1, 2))
    with pytest.raises(DumpWriteError, match=r"step0/pid\d+/dump.json.*4 tensor records lost"):
        dumper.step()
    assert dumper.lost_records == 4  # input, output, weight, bias
    model(torch.ones(1, 2))
    dumper.step()
    dumper.stop()  # waits for the last file; nothing failed since
    assert len(read_step(str(tmp_path / "dump"), 2)["data"]) == 1


@pytest.mark.parametrize("surfaces_at", ["flush", "stop"])
def test_failed_step_folder_is_raised_by_flush_and_stop(write_config, read_step, tmp_path, surfaces_at):
    model = torch.nn.Sequential(torch.nn.ReLU())
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    model(torch.ones(2))
    dumper.step()
    (tmp_path / "dump" / "step1").write_text("in the way")
    model(torch.ones(2))
    dumper.step()  # returns before the writer thread tries the folder
    with pytest.raises(DumpWriteError, match=r"(?s)1 write\(s\) failed.*step1.*2 tensor records lost"):
        getattr(dumper, surfaces_at)()
    assert dumper.lost_records == 2
    if surfaces_at == "flush":
        dumper.stop()  # reported once: nothing else failed
    assert list(read_step(str(tmp_path / "dump"), 0)["data"]) == ["Module.0.ReLU.forward.0"]
    assert (tmp_path / "dump" / "step1").read_text() == "in the way"

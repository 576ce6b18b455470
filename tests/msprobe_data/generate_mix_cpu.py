"""Writes the mix_cpu fixtures: a small CNN trained for three steps on CPU,
dumped by msprobe's own PrecisionDebugger (task statistics, level mix:
forward and backward API and module records, parameters, parameters_grad),
then compared by msprobe's own compare. Run once by hand; the outputs are
committed:

    pip install mindstudio-probe      # 26.2.0 made the committed files
    python3 tests/msprobe_data/generate_mix_cpu.py tests/msprobe_data/mix_cpu

which runs, for the two pairs,

    msprobe compare -tp step1/dump.json -gp step0/dump.json -o OUT   # ordinary training step
    msprobe compare -tp step2/dump.json -gp step1/dump.json -o OUT   # a buffer zeroed: inf/NaN

and gzips each dump.json and msprobe's CSV. Step 2 divides by a buffer set to
0 after step 1, so its records carry inf and NaN statistics. The model's
forward uses non-tensor arguments of several kinds (int, float, bool, str,
None, slices) and an in-place op.
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile


def dump(work: str) -> None:
    """Runs the training steps under msprobe's PrecisionDebugger."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from msprobe.pytorch import PrecisionDebugger

    config = {"task": "statistics", "dump_path": os.path.join(work, "dump"), "rank": [], "step": [],
              "level": "mix", "statistics": {"scope": [], "list": [], "data_mode": ["all"],
                                             "summary_mode": "statistics"}}
    config_path = os.path.join(work, "config.json")
    with open(config_path, "w") as f:
        json.dump(config, f)
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.bn = nn.BatchNorm2d(8)
            self.fc1 = nn.Linear(8 * 4 * 4, 32)
            self.norm = nn.LayerNorm(32, eps=1e-5)
            self.fc2 = nn.Linear(32, 10, bias=False)
            self.register_buffer("scale", torch.ones(1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = F.relu(self.bn(self.conv(x)), inplace=True)
            h = F.max_pool2d(h, 2)
            h = h.reshape(h.size(0), -1)
            h = self.norm(self.fc1(h))
            h = F.gelu(h, approximate="tanh")
            h = torch.narrow(h, 1, 0, 16).repeat(1, 2) + h * 0.5
            h = h.masked_fill(h > 2.0, 2.0)
            h = h.clone()
            h[:, 1:3] = 0.25
            h = h / self.scale
            return self.fc2(h)

    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    debugger = PrecisionDebugger(config_path=config_path)
    x = torch.randn(4, 3, 8, 8)
    y = torch.tensor([1, 3, 5, 7])
    for step in range(3):
        debugger.start(model)
        loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        debugger.stop()
        debugger.step()
        opt.step()
        if step == 1:
            with torch.no_grad():
                model.scale.zero_()


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        dump(work)
        for step in range(3):
            (src,) = glob.glob(os.path.join(work, "dump", f"step{step}", "proc*", "dump.json"))
            with open(src, "rb") as f, gzip.open(os.path.join(out, f"step{step}.dump.json.gz"), "wb") as g:
                shutil.copyfileobj(f, g)
        for target, bench in ((1, 0), (2, 1)):
            res = os.path.join(work, f"cmp{target}{bench}")
            (t,) = glob.glob(os.path.join(work, "dump", f"step{target}", "proc*", "dump.json"))
            (b,) = glob.glob(os.path.join(work, "dump", f"step{bench}", "proc*", "dump.json"))
            subprocess.run(["msprobe", "compare", "-tp", t, "-gp", b, "-o", res], check=True,
                           stdout=subprocess.DEVNULL)
            (csv,) = glob.glob(os.path.join(res, "compare_result_*.csv"))
            with open(csv, "rb") as f, gzip.open(os.path.join(out, f"msprobe_step{target}_vs_step{bench}.csv.gz"),
                                                 "wb") as g:
                shutil.copyfileobj(f, g)


if __name__ == "__main__":
    main(sys.argv[1])

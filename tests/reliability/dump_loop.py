"""Child process for the kill test: dumps (and, when available, saves) in a loop
until killed. Usage: python dump_loop.py DUMP_PATH SAVE_DIR"""

from __future__ import annotations

import json
import os
import sys

import torch

import graphprobe


def main() -> None:
    dump_path, save_dir = sys.argv[1], sys.argv[2]
    os.makedirs(os.path.dirname(dump_path), exist_ok=True)
    config = os.path.join(os.path.dirname(dump_path), f"config_{os.getpid()}.json")
    with open(config, "w") as f:
        json.dump({"dump_path": dump_path}, f)
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(8)])
    dumper = graphprobe.AclGraphDumper(config)
    dumper.start(model)
    save = getattr(graphprobe, "acl_save", None)
    print("ready", flush=True)
    step = 0
    while True:
        x = torch.full((32, 64), float(step))
        y = model(x)
        if save is not None:
            save(torch.full((256, 256), float(step)), os.path.join(save_dir, "x.pt"))
        dumper.step()
        step += 1
        del y


if __name__ == "__main__":
    main()

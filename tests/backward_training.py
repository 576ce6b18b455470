"""Trains a tiny transformers Llama (random weights) for a few steps with a
dumper recording, for the backward-record tests and the benchmark:

    python tests/backward_training.py graphprobe eager OUT [STEPS]
    python tests/backward_training.py graphprobe inductor OUT
    python tests/backward_training.py msprobe eager OUT

graphprobe: ``AclGraphDumper`` at L0, ``dumper.step()`` after each optimizer
step; msprobe: its eager ``PrecisionDebugger`` at L0 (``data_mode`` all),
``start()``/``stop()``/``step()`` around each step. Same seed, same data.
Each tool runs in its own process (msprobe patches torch for the rest of the
process). Writes OUT/grads.pt: the float64 copy of every parameter's
``.grad`` at each dumped step ({step: {name: tensor}}), the independent
reference the tests compare the recorded statistics with.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import torch


def llama(layers: int = 2, hidden: int = 32) -> torch.nn.Module:
    """LlamaForCausalLM, small config, random weights, eager attention."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=64, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, attn_implementation="eager"))


def batch(step: int, micro: int = 0) -> torch.Tensor:
    """Token ids of one (micro) batch."""
    return torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(100 * step + micro + 1))


def main(tool: str, mode: str, out: str, steps: int = 2) -> None:
    """Runs ``steps`` training steps under ``tool`` ("graphprobe",
    "msprobe") in ``mode`` ("eager", "aot_eager", "inductor")."""
    model = llama()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    os.makedirs(out, exist_ok=True)
    config = os.path.join(out, "config.json")
    grads: dict[int, dict[str, torch.Tensor]] = {}
    if tool == "msprobe":
        from msprobe.pytorch import PrecisionDebugger

        with open(config, "w") as f:
            json.dump({"task": "statistics", "dump_path": out, "rank": [], "step": [], "level": "L0",
                       "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"}}, f)
        debugger = PrecisionDebugger(config_path=config)
        for step in range(steps):
            debugger.start(model)
            ids = batch(step)
            model(input_ids=ids, labels=ids).loss.backward()
            debugger.stop()
            grads[step] = {n: p.grad.double().clone() for n, p in model.named_parameters() if p.grad is not None}
            opt.step()
            opt.zero_grad()
            debugger.step()
    else:
        import graphprobe
        from graphprobe import AclGraphDumper

        with open(config, "w") as f:
            json.dump({"dump_path": out, "level": "L0"}, f)
        dumper = AclGraphDumper(config)
        dumper.start(model)
        run: Any = model if mode == "eager" else torch.compile(model, backend=mode)
        for step in range(steps):
            ids = batch(step)
            run(input_ids=ids, labels=ids).loss.backward()
            grads[step] = {n: p.grad.double().clone() for n, p in model.named_parameters() if p.grad is not None}
            opt.step()
            opt.zero_grad()
            dumper.step()
        dumper.stop()
        graphprobe.flush()
    torch.save(grads, os.path.join(out, "grads.pt"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 2)

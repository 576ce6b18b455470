"""A long training run with graphprobe's flight recorder: a transformers
Llama under torch.compile, every step's L0 statistics (forward, backward,
parameter gradients) in a history, full dumps kept only around a trigger.

    python examples/long_run/flight_recorder.py                          # 300 steps, a NaN planted at step 250
    python examples/long_run/flight_recorder.py --plant grad --at 120    # the gradient x100 at step 120
    python examples/long_run/flight_recorder.py --steps 40 --at 30 --backend aot_eager   # quick

It stops at the first NaN/Inf trigger (deviation triggers are printed and
keep their dumps too). At the end it asks the history (DuckDB) for the first
anomaly of any kind and the first non-finite value, writes the HTML report
and lists the step folders still on disk. Output under --out
(default ./flight_recorder_out; its dump/ and history/ are replaced).
Needs transformers, pyarrow and duckdb (`bash scripts/setup_env.sh --tools`
installs them; scripts/test.sh does it too).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch

from graphprobe import AclGraphDumper
from graphprobe.history import query
from graphprobe.history.recorder import FlightRecorder
from graphprobe.history.report import write_report
from graphprobe.history.rules import AnomalyRule


def build_model() -> torch.nn.Module:
    """A 2-layer Llama (random weights, no download)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(config).train()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--plant", choices=("nan", "grad", "none"), default="nan",
                   help="nan: one weight set to NaN before step AT; grad: the loss (so every gradient) x100 at AT")
    p.add_argument("--at", type=int, default=250, help="the step of the planted anomaly")
    p.add_argument("--backend", default="inductor", help="torch.compile backend (default: %(default)s)")
    p.add_argument("--keep", type=int, default=5, help="full dumps kept before a trigger")
    p.add_argument("--out", default="flight_recorder_out")
    a = p.parse_args()
    out = Path(a.out)
    for sub in ("dump", "history"):
        shutil.rmtree(out / sub, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps({"task": "statistics", "level": "L0", "dump_path": str(out / "dump")}))

    model = build_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    dumper = AclGraphDumper(str(out / "config.json"))
    dumper.start(model)  # before torch.compile: the probes go into the graph
    compiled = torch.compile(model, backend=a.backend)
    rule = AnomalyRule(k=6.0, window=20, min_history=10)
    # max_triggers: the deviation rule also fires on the ordinary jumps of a young training run (k=6 over
    # 20 steps); each of those keeps its dumps too, so that the NaN's are still kept when it comes.
    rec = FlightRecorder(dumper, out / "history", every=50, keep=a.keep, after=2, rule=rule, max_triggers=1000,
                         on_trigger=lambda t: print(f"trigger: {t}"))
    gen = torch.Generator().manual_seed(1)
    for step in range(a.steps):
        if a.plant == "nan" and step == a.at:
            with torch.no_grad():
                model.model.layers[1].mlp.down_proj.weight[0, 0] = float("nan")
        ids = torch.randint(0, 128, (2, 16), generator=gen)
        loss = compiled(input_ids=ids, labels=ids, use_cache=False).loss
        (loss * (100.0 if a.plant == "grad" and step == a.at else 1.0)).backward()
        opt.step()
        opt.zero_grad()
        rec.step(loss=loss.detach())
        if any(t.kind == "nonfinite" for t in rec.triggers):
            break  # a real run might stop or roll back here; the example stops at the first NaN/Inf
    rec.close()
    dumper.stop()

    for label, deviation in (("first anomaly", True), ("first non-finite", False)):
        found = query.first_anomaly(out / "history", rule, deviation=deviation)
        print(f"{label}:", "none" if found is None else
              f"step {found.step}, rank {found.rank}, {found.record} ({found.kind})")
    print("report:", write_report(out / "history", out / "history_report.html", rule=rule))
    kept = sorted(int(d.name[4:]) for d in (out / "dump").iterdir() if d.name.startswith("step"))
    print("step folders on disk:", kept)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

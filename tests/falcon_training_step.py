"""One training step of a small transformers FalconModel under torch.compile,
wired by graphprobe (tests/test_inductor_fixes.py runs it in a subprocess).

    .venv/bin/python tests/falcon_training_step.py [LEVEL] [DTYPE] [BACKEND] [DUMP_PATH]

defaults: mix bfloat16 inductor; exit 0 when the step runs and every
gradient is within 10x eager's own error from float64 gradients. Found on held-out
clean training pairs (2026-12-02): at L1 or mix, bfloat16 or float16, under
inductor with more than one thread, the step crashed (glibc heap corruption,
or "Cannot access data pointer of Storage that is invalid" in the compiled
backward). The cause is inductor's pytorch/pytorch#191837: the probes of
Falcon's rotary embedding (``mul``, ``cat``) change the fusion so that the
backward of ``cos[position_ids]`` (an accumulating ``index_put``) lands in a
2-D tiled kernel whose parallel scatter applies the tile offset twice and
writes out of bounds. At L0 in float32 the same kernel ran without a crash
and gave query_key_value's weight a gradient 1000x eager's error (the
first divergence named it: the "false alarm" of that pair was a true one).
``start()`` applies the upstream fix (wiring/inductor_fixes.py).
"""
import copy
import json
import os
import sys
import tempfile

import torch

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
import transformers as tf  # noqa: E402

from graphprobe import AclGraphDumper  # noqa: E402

level, dtype, backend = (sys.argv[1:] + ["mix", "bfloat16", "inductor"][len(sys.argv) - 1:])[:3]
torch.manual_seed(0)
model = tf.FalconModel(tf.FalconConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                       max_position_embeddings=64, attn_implementation="eager"))
model = model.to(getattr(torch, dtype)).train()
eager = copy.deepcopy(model)
ids = torch.randint(0, 64, (1, 8))
dump_path = sys.argv[4] if len(sys.argv) > 4 else os.path.join(tempfile.mkdtemp(), f"gp_falcon_{level}_{dtype}")
dumper = AclGraphDumper(dump_path=dump_path, level=level)
dumper.start(model)
compiled = torch.compile(model, backend=backend)
compiled(ids, use_cache=False).last_hidden_state.float().pow(2).mean().backward()
dumper.step()
dumper.stop()
# The out-of-bounds scatter also gave wrong gradients where it did not crash
# (upstream saw that on aarch64). Each gradient is measured against float64
# eager gradients: the compiled step's error may be a few times eager's own
# rounding error in this dtype, not more.
reference = eager.double()
reference(ids, use_cache=False).last_hidden_state.pow(2).mean().backward()
eager = copy.deepcopy(reference).to(getattr(torch, dtype))
eager.zero_grad(set_to_none=True)
eager(ids, use_cache=False).last_hidden_state.float().pow(2).mean().backward()
worst = []
for (name, p), q, r in zip(model.named_parameters(), eager.parameters(), reference.parameters()):
    truth = r.grad.norm().item()
    if truth == 0:
        continue
    compiled_err = (p.grad.double() - r.grad).norm().item() / truth
    eager_err = (q.grad.double() - r.grad).norm().item() / truth
    worst.append((compiled_err / max(eager_err, 1e-6), name, compiled_err, eager_err))
ratio, name, compiled_err, eager_err = max(worst)
print(f"worst gradient: {name}: compiled {compiled_err:.3g}, eager {eager_err:.3g} from float64")
assert ratio <= 10, f"{name}: gradient error {compiled_err:.3g} from float64, {ratio:.3g}x eager's {eager_err:.3g}"
records = json.load(open(os.path.join(dump_path, "step0", os.listdir(os.path.join(dump_path, "step0"))[0],
                                       "dump.json")))["data"]
assert records, "no records written"
print(f"ok: {level} {dtype} {backend}: {len(records)} records, gradients agree with eager")

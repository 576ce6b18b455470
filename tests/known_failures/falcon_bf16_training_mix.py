"""Known failure (found 2026-12-02, not fixed): graphprobe at L1 or mix breaks
a low-precision training step of transformers' FalconModel under inductor.

    .venv/bin/python tests/known_failures/falcon_bf16_training_mix.py [LEVEL] [DTYPE] [BACKEND]

defaults: mix bfloat16 inductor. Seen on torch 2.13.0 CPU: mix/bfloat16 ->
``RuntimeError: Cannot access data pointer of Storage that is invalid`` in the
compiled backward's ``extern_kernels.mm(reinterpret_tensor(buf93, ...))``;
L1/bfloat16 and L1/float16 -> glibc aborts (``corrupted size vs. prev_size``,
``double free or corruption``, ``corrupted double-linked list``). The same
step runs without graphprobe, with L0, with float32 at mix, with
``aot_eager``, and without backward (no_grad). Not the shared-probes lowering
(it fails with ``shared_probes.install`` disabled). At L1 the API probes of
``mul`` and ``cat`` together reproduce it (``statistics.list: ["mul", "cat"]``:
Falcon's rotary embedding, ``q * cos + cat(-q2, q1) * sin``; the failing
inductor kernel fuses its backward: ``cpp_fused__to_copy_add_arange_bmm_cat_cos_
expand_index_put_mul_..._slice_backward``); either alone, ``to``, ``matmul``,
``linear``/``dropout``/``softmax`` alone do not; float32 with the same list
runs. graphprobe's CPU statistics kernel only reads its input (stats_cpu.cpp),
so the bad write is in inductor's code for the graph the probes make: not
found yet. Not collected by pytest (a
crash would take the session down); run it by hand. Exit 0 when the step runs.
"""
import os
import sys

import torch

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
import transformers as tf  # noqa: E402

from graphprobe import AclGraphDumper  # noqa: E402

level, dtype, backend = (sys.argv[1:] + ["mix", "bfloat16", "inductor"][len(sys.argv) - 1:])[:3]
torch.manual_seed(0)
model = tf.FalconModel(tf.FalconConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                       max_position_embeddings=64, attn_implementation="eager"))
model = model.to(getattr(torch, dtype)).train()
dumper = AclGraphDumper(dump_path=os.path.join(os.environ.get("TMPDIR", "/tmp"), f"gp_falcon_{level}_{dtype}"),
                        level=level)
dumper.start(model)
compiled = torch.compile(model, backend=backend)
out = compiled(torch.randint(0, 64, (1, 8)), use_cache=False).last_hidden_state
out.float().pow(2).mean().backward()
dumper.step()
dumper.stop()
print(f"ok: {level} {dtype} {backend}")

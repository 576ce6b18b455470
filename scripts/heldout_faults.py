"""Graph-only faults on architectures the first-divergence matrix does not
hold (Phi-3, StableLM, Falcon, BLOOM, OLMoE): the matrix's fault kinds
(module output scale, softmax scale where the attention goes through
``eager_attention_forward``, precision loss, a decomposition change, a
backward-only gradient scale), fp32 at L0 and bf16 at mix, each judged as the
matrix judges it (tests/real_model_training.py): where the fault must be named
comes from a differential eager trace, never from graphprobe's dumps.

    .venv/bin/python scripts/heldout_faults.py phi3,stablelm,falcon,bloom,olmoe [OUT [inductor [head]]]

The switchable faults (scale, softmax, precision) run on one ``aot_eager``
compile by default, ``inductor`` as third argument compiles them with
inductor instead (each pair then carries inductor's own rounding too).
``head`` as fourth argument trains the gradient fault's step with a language
model's loss (cross entropy through a fixed head, tests/real_model_training.py
``LOSS``) instead of the mean square of the outputs, which after a final
LayerNorm leaves every gradient rounding residue.

The architectures are those of scripts/heldout_clean_training.py (same tiny
configs); results: benchmarks/results/real_model_matrix.md, "Held-out faults".
"""
import os
import sys

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import real_model_faults as F  # noqa: E402
import real_model_training as T  # noqa: E402
import real_models as rm  # noqa: E402
from heldout_clean_training import bloom, falcon, olmoe, phi3, stablelm  # noqa: E402  (the same tiny configs)


# name: (builder, fault target, attention module (None: no eager_attention_forward), norm op, grad target)
HELD_OUT = {
    "phi3": (phi3, "layers.1.mlp", "layers.1.self_attn", "rsqrt", "layers.1.mlp.down_proj"),
    "stablelm": (stablelm, "layers.1.mlp", None, "layer_norm", "layers.1.mlp.down_proj"),
    "falcon": (falcon, "h.1.mlp", None, "layer_norm", "h.1.mlp.dense_4h_to_h"),
    "bloom": (bloom, "h.1.mlp", None, "layer_norm", "h.1.mlp.dense_4h_to_h"),
    "olmoe": (olmoe, "layers.1.self_attn.o_proj", None, "rsqrt", "layers.1.self_attn.o_proj"),
}

if __name__ == "__main__":
    for name, (b, target, attention, norm, grad) in HELD_OUT.items():
        F.ARCHS[name] = F.Arch(name, b, rm._token_inputs, target, attention, "silu", norm, grad)
    out = sys.argv[2] if len(sys.argv) > 2 else "heldout_faults_out"
    if len(sys.argv) > 3:
        T.SWITCH_BACKEND = sys.argv[3]
    if len(sys.argv) > 4:
        T.LOSS = sys.argv[4]
    configs = [(a, d, lv) for a in sys.argv[1].split(",") for d, lv in (("fp32", "L0"), ("bf16", "mix"))]
    for name, dt, level in configs:
        root = os.path.join(out, f"{name}-{dt}-{level}")
        try:
            cases = T.forward_faults(name, dt, level, root, ("scale", "softmax", "precision", "decomp"))
            cases.append(T.grad_fault(name, dt, level, os.path.join(root, "grad")))
            for c in cases:
                print(T.describe(c), "|", (c.message or "")[:300], flush=True)
        except Exception as e:  # noqa: BLE001 -- one architecture's failure must not hide the others'
            print(name, dt, level, "ERROR", type(e).__name__, str(e)[:300], flush=True)

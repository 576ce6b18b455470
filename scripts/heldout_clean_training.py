"""Clean eager-vs-inductor training steps (AdamW, 2 steps) on architectures the
first-divergence matrix does not hold (Phi-3, StableLM, Falcon, BLOOM, OLMoE; ResNet with
BatchNorm and ConvNeXt, vision, from the 2026-12-02 evening run on),
fp32 at L0 and bf16 at mix, judged as the matrix's clean pairs are
(tests/real_model_training.py): every pair should be silent.

    .venv/bin/python scripts/heldout_clean_training.py phi3,stablelm,falcon,bloom,olmoe [OUT [DTYPE:LEVEL,... [LOSS [AUTOCAST]]]]

(default configurations: fp32:L0,bf16:mix; e.g. fp16:L0,fp32:mix,bf16:L0 for the others;
LOSS: square-mean, the default, or head -- tests/real_model_training.py, LOSS;
AUTOCAST: bfloat16 or float16, the forward under torch.autocast with fp32 weights -- use DTYPE fp32)

First run (2026-12-02, torch 2.13.0 CPU, at 8323981): 11 of 18 pairs silent.
False alarms: phi3 bf16 mix (steps 0 and 1: Tensor.to.13.backward, Torch.matmul.2.forward),
stablelm bf16 mix (step 1: Torch.matmul.3.forward), falcon fp32 L0 (step 0:
query_key_value's backward, Sketch 0.8 %), olmoe fp32 L0 (step 0: a decoder layer's
backward, Sketch 3e-6 at 1.5x the floor) and olmoe bf16 mix (steps 0 and 1: Tensor.to.27,
Functional.softmax.0). falcon bf16 mix does not run at all.
Second run (2026-12-02, after the inductor fix and own-code hooks): falcon fp32 L0
silent (its alarm was true: inductor bug pytorch#191837 gave query_key_value a
wrong gradient; tests/falcon_training_step.py), falcon bf16 mix runs and is silent,
olmoe fp32 L0 silent (its hooks had run uncompiled past dynamo's recompile limit).
Third run (the API mode run eagerly from eager code; the compare rules of
docs/formats.md for summed gradients, an output's Mean, a gradient's
extremes and inputs without a Sketch): 20 of 20 silent
(benchmarks/results/real_model_matrix.md).
"""
import os, sys
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests'))
import real_models as rm
import real_model_faults as F
import real_model_training as T
import torch
import transformers as tf

def phi3():
    return tf.Phi3Model(tf.Phi3Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0, bos_token_id=1,
        eos_token_id=2, attn_implementation="eager"))
def olmoe():
    return tf.OlmoeModel(tf.OlmoeConfig(vocab_size=64, hidden_size=32, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64, num_experts=4, num_experts_per_tok=2,
        pad_token_id=0, bos_token_id=1, eos_token_id=2, attn_implementation="eager"))
def stablelm():
    return tf.StableLmModel(tf.StableLmConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64, attn_implementation="eager"))
def bloom():
    return tf.BloomModel(tf.BloomConfig(vocab_size=64, hidden_size=32, n_layer=2, n_head=4, attn_implementation="eager"))
def falcon():
    return tf.FalconModel(tf.FalconConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=64, attn_implementation="eager"))

class _AlwaysTrain(torch.nn.Module):
    """Keeps the model in training mode (the matrix's builder calls eval()):
    BatchNorm then normalises with batch statistics and updates its running
    buffers in place, as in real training."""
    def __init__(self, m):
        super().__init__()
        self.m = m
    def train(self, mode=True):
        return super().train(True)
    def forward(self, x):
        return self.m(x)

def resnet():
    return _AlwaysTrain(tf.ResNetModel(tf.ResNetConfig(num_channels=3, embedding_size=8, hidden_sizes=[8, 16],
        depths=[1, 1], layer_type="basic", hidden_act="relu")))
def convnext():
    return tf.ConvNextModel(tf.ConvNextConfig(num_channels=3, hidden_sizes=[8, 16], depths=[1, 1], num_stages=2,
        patch_size=2, image_size=16))

def _image(dt):
    return ((rm._floats((2, 3, 16, 16), dt),), {})

for name, b in [("resnet", resnet), ("convnext", convnext)]:
    F.ARCHS[name] = F.Arch(name, b, _image, "encoder", None, "relu", "layer_norm")
for name, b in [("phi3", phi3), ("stablelm", stablelm), ("falcon", falcon), ("bloom", bloom), ("olmoe", olmoe)]:
    F.ARCHS[name] = F.Arch(name, b, rm._token_inputs, "layers.1.mlp", None, "silu", "layer_norm")
if __name__ == "__main__":
    OUT = sys.argv[2] if len(sys.argv) > 2 else "heldout_clean_training_out"
    pairs = [tuple(c.split(":")) for c in (sys.argv[3] if len(sys.argv) > 3 else "fp32:L0,bf16:mix").split(",")]
    if len(sys.argv) > 4:
        T.LOSS = sys.argv[4]
    if len(sys.argv) > 5:  # bfloat16 or float16: the forward under torch.autocast, float32 weights
        T.AUTOCAST = getattr(torch, sys.argv[5])
    configs = [(a, d, l) for a in sys.argv[1].split(",") for d, l in pairs]
    for name, dt, level in configs:
        try:
            for c in T.clean_training(name, dt, level, os.path.join(OUT, f"{name}-{dt}-{level}"), steps=2):
                print(T.describe(c), '|', (c.message or '')[:400], flush=True)
        except Exception as e:
            print(name, dt, level, "ERROR", type(e).__name__, str(e)[:300], flush=True)

"""The first divergence with faults where the matrix never puts them, of
kinds it never uses, and clean training of architectures no earlier round
used (issue #35, round six, 2026-12-04).

``sites``: the matrix's architectures with the fault moved to the first
attention block, the final norm, the embedding, the pooler or an MoE gate,
and two faults that leave the four statistics as they were -- "swap"
(features 0 and 1 of the output exchanged: Max, Min, Mean and Norm
unchanged) and "sign" (feature 0 negated: Norm unchanged) -- beside the
matrix's scale and precision faults and a backward-only gradient scale on
another Linear. ``clean``: round three's clean training (two AdamW steps,
eager vs inductor) on FNet (Fourier mixing), Funnel (pooling), XLNet
(relative attention), ConvBERT, SqueezeBERT (grouped 1-d convolutions),
EfficientNet and MobileNetV2 (BatchNorm in training mode over 2 elements a
channel at their end), RegNet and Wav2Vec2 (a convolutional feature
extractor, GroupNorm, a weight-normed positional convolution).

    .venv/bin/python scripts/heldout_round6.py sites NAMES OUT [BACKEND [DTYPE:LEVEL,...]]
    .venv/bin/python scripts/heldout_round6.py clean NAMES OUT [DTYPE:LEVEL,... [LOSS]]
    .venv/bin/python scripts/heldout_round6.py cnn OUT

``cnn``: a conv/BatchNorm/ReLU stack at a real size (8 x 64 x 32 x 32, four
blocks), two AdamW steps with cross entropy, eager vs inductor, fp32 L0:
sums over 8192 positions a channel, which the tiny models never have.

NAMES: SITES' keys (``model@site``) or BUILDERS'. Results:
benchmarks/results/real_model_matrix.md, "Held-out, round six".
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import heldout_round3 as R3  # noqa: E402  (also puts tests/ on the path)
import transformers as tf  # noqa: E402

import real_model_faults as F  # noqa: E402
import real_model_training as T  # noqa: E402
import real_models as rm  # noqa: E402

V = R3.V


def fnet():
    return tf.FNetModel(tf.FNetConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, intermediate_size=64,
                                      max_position_embeddings=64))
def funnel():
    return tf.FunnelModel(tf.FunnelConfig(vocab_size=V, block_sizes=[1, 1], d_model=32, n_head=4, d_head=8,
                                          d_inner=64))
def xlnet():
    return tf.XLNetModel(tf.XLNetConfig(vocab_size=V, d_model=32, n_layer=2, n_head=4, d_inner=64))
def convbert():
    return tf.ConvBertModel(tf.ConvBertConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64, embedding_size=32, max_position_embeddings=64))
def squeezebert():
    return tf.SqueezeBertModel(tf.SqueezeBertConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64, embedding_size=32, max_position_embeddings=64, q_groups=2,
        k_groups=2, v_groups=2, post_attention_groups=2, intermediate_groups=2, output_groups=2))
def efficientnet():
    return tf.EfficientNetModel(tf.EfficientNetConfig(image_size=32, width_coefficient=0.25, depth_coefficient=0.2,
                                                      hidden_dim=320))
def mobilenet_v2():
    return tf.MobileNetV2Model(tf.MobileNetV2Config(image_size=32, depth_multiplier=0.25))
def regnet():
    return tf.RegNetModel(tf.RegNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], groups_width=8))
def wav2vec2():
    return tf.Wav2Vec2Model(tf.Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
        num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4))


BUILDERS = {f.__name__: f for f in (fnet, funnel, xlnet, convbert, squeezebert, efficientnet, mobilenet_v2, regnet,
                                    wav2vec2)}


def inputs_of(name: str):
    """The inputs a model of this round takes."""
    if name in ("efficientnet", "mobilenet_v2", "regnet"):
        return lambda dt: ((rm._floats((2, 3, 32, 32), dt),), {})
    if name == "wav2vec2":
        return lambda dt: ((rm._floats((1, 400), dt),), {})
    return rm._bert_inputs

# model@site -> (target module of the forward faults, Linear whose output
# gradient the grad fault scales).
SITES = {
    "llama@attn0": ("layers.0.self_attn", "layers.0.self_attn.o_proj"),
    "llama@norm": ("norm", "layers.0.mlp.up_proj"),
    "llama@embed": ("embed_tokens", "layers.1.self_attn.v_proj"),
    "gpt2@attn0": ("h.0.attn", "h.0.attn.c_attn"),
    "gpt2@lnf": ("ln_f", "h.0.mlp.c_fc"),
    "bert@attn0": ("encoder.layer.0.attention", "encoder.layer.0.attention.self.value"),
    "bert@pooler": ("pooler", "encoder.layer.1.intermediate.dense"),
    "opt@attn0": ("decoder.layers.0.self_attn", "decoder.layers.0.self_attn.k_proj"),
    "opt@final": ("decoder.final_layer_norm", "decoder.layers.0.fc1"),
    "vit@embed": ("embeddings", "encoder.layer.0.attention.attention.query"),
    "vit@ln": ("layernorm", "encoder.layer.1.output.dense"),
    "gpt_neox@attn0": ("layers.0.attention", "layers.0.attention.query_key_value"),
    "moe@gate": ("layers.0.moe.gate", "layers.0.moe.gate"),
}
KINDS = ("scale", "precision", "swap", "sign")


def register() -> None:
    """Adds each model@site to the matrix's architecture table."""
    for key, (target, grad) in SITES.items():
        base = F.ARCHS[key.split("@")[0]]
        F.ARCHS[key] = F.Arch(key, base.build, base.inputs, target, None, base.act, base.norm, grad)


def conv_stack(out: str) -> int:
    """The ``cnn`` part: prints each step's first divergence."""
    import glob

    import graphprobe
    import torch
    from graphprobe.compare import compare
    from torch import nn

    def block(c_in: int) -> nn.Module:
        return nn.Sequential(nn.Conv2d(c_in, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU())

    x = torch.randn(8, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    y = torch.randint(0, 10, (8,), generator=torch.Generator().manual_seed(2))
    for mode in ("eager", "inductor"):
        torch.manual_seed(0)
        body = nn.Sequential(block(3), block(64), block(64), block(64))
        model = nn.ModuleDict({"body": body, "head": nn.Linear(64, 10)}).train()
        torch._dynamo.reset()
        dumper = graphprobe.AclGraphDumper(T._config(os.path.join(out, mode), "L0"))
        dumper.start(model)

        def forward(t: torch.Tensor) -> torch.Tensor:
            return model["head"](model["body"](t).mean((2, 3)))

        run = forward if mode == "eager" else torch.compile(forward, backend="inductor")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        for _ in range(2):
            nn.functional.cross_entropy(run(x), y).backward()
            opt.step()
            opt.zero_grad()
            dumper.step()
        dumper.stop()
        graphprobe.flush()
    for step in range(2):
        t, b = (glob.glob(os.path.join(out, m, "dump", f"step{step}", "*", "dump.json"))[0]
                for m in ("inductor", "eager"))
        o = compare(t, b, os.path.join(out, f"cmp{step}"), html=False, progress=False, jobs=1).outcomes[0]
        print(f"cnn fp32 L0 step {step}: {o.first_divergence} | {o.divergence.message if o.divergence else ''}")
    return 0


def main(argv: list[str]) -> int:
    """Runs the part of ``argv`` (the usage above)."""
    if argv[:1] == ["clean"]:
        return R3.main(argv, BUILDERS, {}, inputs_of, __doc__)
    if argv[:1] == ["cnn"] and len(argv) == 2:
        return conv_stack(argv[1])
    if len(argv) < 3 or argv[0] != "sites":
        print(__doc__)
        return 2
    register()
    names, out = argv[1].split(","), argv[2]
    unknown = [n for n in names if n not in SITES]
    if unknown:
        print(f"unknown site(s) {', '.join(unknown)}; allowed: {', '.join(SITES)}")
        return 2
    T.SWITCH_BACKEND = argv[3] if len(argv) > 3 else "inductor"
    configs = [tuple(c.split(":")) for c in (argv[4] if len(argv) > 4 else "fp32:L0,bf16:mix").split(",")]
    R3.run_all(names, configs, out, lambda name, dt, level, root: R3.faults_and_grad(name, dt, level, root, KINDS))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

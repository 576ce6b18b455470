"""Clean training of architectures no earlier round used (issue #35, round
seven, 2026-12-05): every step should be silent.

OLMo-2 (norms after each sublayer, QK-norm), RoFormer (rotary positions in
an encoder), Megatron-BERT (pre-LN BERT), BioGPT (scaled embeddings,
learned positions), DeepSeek-V3 (sigmoid routing with a bias, shared
experts, low-rank attention), RWKV (time mixing: exponentials and decays),
LeViT (BatchNorm inside the attention, attention biases), ConvNeXt V2
(global response normalisation), Swin V2 (cosine attention, a clamped logit
scale, a positional MLP), BEiT (relative position bias, layer scale),
PoolFormer (pooling minus its input, GroupNorm), WavLM (gated relative
position bias over a convolutional feature extractor).

    .venv/bin/python scripts/heldout_round7.py clean NAMES OUT [DTYPE:LEVEL,... [LOSS]]
    .venv/bin/python scripts/heldout_round7.py faults NAMES OUT [BACKEND [LOSS [DTYPE:LEVEL,...]]]

``faults``: round three's graph-only faults (scale, precision, lowering,
decomposition; softmax where the model has a module-level attention
function) and the backward-only gradient scale, at SITES.

NAMES: BUILDERS' keys, comma-separated. Results:
benchmarks/results/real_model_matrix.md, "Held-out, round seven".
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import heldout_round3 as R3  # noqa: E402  (also puts tests/ on the path)
import transformers as tf  # noqa: E402

import real_models as rm  # noqa: E402

V = R3.V


def olmo2():
    return tf.Olmo2Model(tf.Olmo2Config(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64))
def roformer():
    return tf.RoFormerModel(tf.RoFormerConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64, embedding_size=32, max_position_embeddings=64))
def megatron_bert():
    return tf.MegatronBertModel(tf.MegatronBertConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64, max_position_embeddings=64))
def biogpt():
    return tf.BioGptModel(tf.BioGptConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                          intermediate_size=64, max_position_embeddings=64))
def deepseek_v3():
    return tf.DeepseekV3Model(tf.DeepseekV3Config(vocab_size=V, hidden_size=32, intermediate_size=64,
        moe_intermediate_size=16, num_hidden_layers=2, first_k_dense_replace=1, num_attention_heads=4,
        num_key_value_heads=4, n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2, n_group=2,
        topk_group=1, q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=8,
        max_position_embeddings=64))
def rwkv():
    return tf.RwkvModel(tf.RwkvConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, attention_hidden_size=32,
                                      intermediate_size=64, context_length=64))
def levit():
    return tf.LevitModel(tf.LevitConfig(image_size=32, hidden_sizes=[16, 24, 32], num_attention_heads=[2, 2, 2],
        depths=[1, 1, 1], key_dim=[4, 4, 4], patch_size=16, stride=2, down_ops=[["Subsample", 4, 2, 2, 2, 2],
        ["Subsample", 4, 2, 2, 2, 2]]))
def convnextv2():
    return tf.ConvNextV2Model(tf.ConvNextV2Config(image_size=32, num_channels=3, patch_size=4,
                                                  hidden_sizes=[8, 16], depths=[1, 1], num_stages=2))
def swinv2():
    return tf.Swinv2Model(tf.Swinv2Config(image_size=16, patch_size=2, num_channels=3, embed_dim=8, depths=[1, 1],
                                          num_heads=[2, 2], window_size=2))
def beit():
    return tf.BeitModel(tf.BeitConfig(image_size=16, patch_size=4, num_channels=3, hidden_size=32,
        num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, use_relative_position_bias=True,
        layer_scale_init_value=0.1, use_mean_pooling=True))
def poolformer():
    return tf.PoolFormerModel(tf.PoolFormerConfig(image_size=32, num_channels=3, hidden_sizes=[8, 16],
                                                  depths=[1, 1], num_encoder_blocks=2, patch_sizes=[7, 3],
                                                  strides=[4, 2], padding=[2, 1]))
def wavlm():
    return tf.WavLMModel(tf.WavLMConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
        num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, num_buckets=16, max_bucket_distance=32))


BUILDERS = {f.__name__: f for f in (olmo2, roformer, megatron_bert, biogpt, deepseek_v3, rwkv, levit, convnextv2,
                                    swinv2, beit, poolformer, wavlm)}
# (target module, attention module of the softmax fault -- None: not
# applicable --, activation op of the lowering fault, norm op of the
# decomposition fault, the Linear whose output gradient the grad fault scales).
SITES = {
    "olmo2": ("layers.1.mlp", None, "silu", "rsqrt", "layers.1.mlp.down_proj"),
    "deepseek_v3": ("layers.1.mlp", None, "silu", "rsqrt", "layers.1.mlp.shared_experts.down_proj"),
    "rwkv": ("blocks.1.feed_forward", None, "relu", "layer_norm", "blocks.1.feed_forward.value"),
    "roformer": ("encoder.layer.1.intermediate", None, "gelu", "layer_norm", "encoder.layer.1.output.dense"),
    "beit": ("encoder.layer.1.intermediate", None, "gelu", "layer_norm", "encoder.layer.1.output.dense"),
}
VISION = {"levit": 32, "convnextv2": 32, "swinv2": 16, "beit": 16, "poolformer": 32}
NO_CACHE = {"olmo2", "biogpt", "deepseek_v3"}  # take use_cache


def inputs_of(name: str):
    """The inputs a model of this round takes."""
    if name in VISION:
        size = VISION[name]
        return lambda dt: ((rm._floats((2, 3, size, size), dt),), {})
    if name == "wavlm":
        return lambda dt: ((rm._floats((1, 400), dt),), {})
    if name == "rwkv":
        return lambda dt: ((rm._ids(1, 8, V),), {"use_cache": False})
    return rm._token_inputs if name in NO_CACHE else rm._bert_inputs


def main(argv: list[str]) -> int:
    """Runs the part of ``argv`` (the usage above)."""
    if argv[:1] in (["clean"], ["faults"]):
        return R3.main(argv, BUILDERS, SITES, inputs_of, __doc__)
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

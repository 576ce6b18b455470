"""Clean training of architectures no earlier round used (issue #35, round
nine, 2026-12-05): every step should be silent; faults at five of them.

ESM (rotary attention, token dropout rescaling the embeddings), CANINE
(hashed character embeddings, strided downsampling convolution), Jamba
(Mamba layers beside attention and a top-2 MoE), SwiftFormer (efficient
additive attention, BatchNorm), YOLOS (ViT with detection tokens), MobileNet
v1 (depthwise convolutions, BatchNorm, ReLU6), BigBird (block-sparse
attention with random blocks), XLM-RoBERTa-XL (pre-LayerNorm BERT), UMT5
(per-layer relative position buckets, gated GELU, no biases), Switch
Transformers (top-1 routing with expert capacity), FalconMamba (Mamba with
RMS-normalised B, C and dt), Helium (Llama-like, RMSNorm), I-BERT (integer
approximations of GELU, softmax and LayerNorm, ``quant_mode``), Hiera
(hierarchical ViT attending within mask units).

    .venv/bin/python scripts/heldout_round9.py clean NAMES OUT [DTYPE:LEVEL,... [LOSS]]
    .venv/bin/python scripts/heldout_round9.py faults NAMES OUT [BACKEND [LOSS [DTYPE:LEVEL,...]]]
    .venv/bin/python scripts/heldout_round9.py trainmode NAMES OUT [DTYPE:LEVEL,... [LOSS]]
    .venv/bin/python scripts/heldout_round9.py invisible NAMES OUT [DTYPE:LEVEL,...]

The parts are round eight's (scripts/heldout_round8.py): ``trainmode`` runs
in train mode (dropout, BatchNorm's batch statistics) with both runs seeded
alike and inductor drawing as eager does; ``invisible`` swaps and negates
output features at SITES. CANINE and I-BERT fail in bfloat16 without
graphprobe ("expected scalar type Float but found BFloat16"; "mat1 and mat2
must have the same dtype"): float32 only.

NAMES: BUILDERS' keys, comma-separated. Results:
benchmarks/results/real_model_matrix.md, "Held-out, round nine".
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import heldout_round3 as R3  # noqa: E402  (also puts tests/ on the path)
import heldout_round8 as R8  # noqa: E402
import transformers as tf  # noqa: E402

import real_models as rm  # noqa: E402

V = R3.V


def esm():
    return tf.EsmModel(tf.EsmConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64, position_embedding_type="rotary", pad_token_id=1,
        mask_token_id=2, token_dropout=True))
def canine():
    return tf.CanineModel(tf.CanineConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, downsampling_rate=4, num_hash_buckets=64, num_hash_functions=2,
        local_transformer_stride=4, max_position_embeddings=64))
def jamba():
    return tf.JambaModel(tf.JambaConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, expert_layer_period=2,
        expert_layer_offset=1, attn_layer_period=2, attn_layer_offset=1, mamba_d_state=8, mamba_d_conv=4,
        mamba_expand=2, mamba_dt_rank=4, use_mamba_kernels=False))
def swiftformer():
    return tf.SwiftFormerModel(tf.SwiftFormerConfig(image_size=32, num_channels=3, depths=[1, 1, 1, 1],
        embed_dims=[8, 16, 24, 32], mlp_ratio=2, downsamples=[True, True, True, True]))
def yolos():
    return tf.YolosModel(tf.YolosConfig(image_size=[32, 32], patch_size=8, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64, num_detection_tokens=4), add_pooling_layer=False)
def mobilenet_v1():
    return tf.MobileNetV1Model(tf.MobileNetV1Config(image_size=32, depth_multiplier=0.25))
def big_bird():
    return tf.BigBirdModel(tf.BigBirdConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64, block_size=4, num_random_blocks=1))
def xlm_roberta_xl():
    return tf.XLMRobertaXLModel(tf.XLMRobertaXLConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64, max_position_embeddings=64))
def umt5():
    return tf.UMT5Model(tf.UMT5Config(vocab_size=V, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                                      relative_attention_num_buckets=8))
def switch_transformers():
    return tf.SwitchTransformersModel(tf.SwitchTransformersConfig(vocab_size=V, d_model=32, d_kv=8, d_ff=64,
        expert_capacity=8, num_layers=2, num_sparse_encoder_layers=1, num_decoder_layers=2,
        num_sparse_decoder_layers=1, num_heads=4, num_experts=4, relative_attention_num_buckets=8))
def falcon_mamba():
    return tf.FalconMambaModel(tf.FalconMambaConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, state_size=8,
                                                    expand=2, conv_kernel=4, use_mambapy=False))
def helium():
    return tf.HeliumModel(tf.HeliumConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64))
def ibert():
    return tf.IBertModel(tf.IBertConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                        intermediate_size=64, max_position_embeddings=64, quant_mode=True))
def hiera():
    return tf.HieraModel(tf.HieraConfig(image_size=[32, 32], patch_size=[3, 3], patch_stride=[2, 2],
        patch_padding=[1, 1], embed_dim=8, depths=[1, 1, 1, 1], num_heads=[1, 1, 1, 1], masked_unit_size=[8, 8],
        query_stride=[2, 2], mlp_ratio=2.0))


BUILDERS = {f.__name__: f for f in (esm, canine, jamba, swiftformer, yolos, mobilenet_v1, big_bird, xlm_roberta_xl,
                                    umt5, switch_transformers, falcon_mamba, helium, ibert, hiera)}
# As round eight's SITES: (target module, attention module of the softmax
# fault -- None: not applicable --, activation op of the lowering fault,
# norm op of the decomposition fault, the Linear whose output gradient the
# grad fault scales).
SITES = {
    "esm": ("encoder.layer.1.intermediate", None, "gelu", "layer_norm", "encoder.layer.1.output.dense"),
    "umt5": ("encoder.block.1.layer.1.DenseReluDense", None, "tanh", "rsqrt",
             "encoder.block.1.layer.1.DenseReluDense.wo"),
    "helium": ("layers.1.mlp", "layers.1.self_attn", "silu", "rsqrt", "layers.1.mlp.down_proj"),
    "yolos": ("encoder.layer.1.intermediate", None, "gelu", "layer_norm", "encoder.layer.1.output.dense"),
    "falcon_mamba": ("layers.1.mixer", None, "silu", "rsqrt", "layers.1.mixer.out_proj"),
}
VISION = {"swiftformer", "yolos", "mobilenet_v1", "hiera"}
NO_CACHE = {"jamba", "falcon_mamba", "helium"}  # take use_cache
SEQ2SEQ = {"umt5", "switch_transformers"}


def inputs_of(name: str):
    """The inputs a model of this round takes."""
    if name in VISION:
        return lambda dt: ((rm._floats((2, 3, 32, 32), dt),), {})
    if name in SEQ2SEQ:
        return lambda dt: ((rm._ids(1, 8, V),), {"decoder_input_ids": rm._ids(1, 6, V, seed=2), "use_cache": False})
    if name == "big_bird":  # block-sparse attention needs more than (5 + 2 x random blocks) x block_size tokens
        return lambda dt: ((rm._ids(1, 32, V),), {})
    return rm._token_inputs if name in NO_CACHE else rm._bert_inputs


def main(argv: list[str]) -> int:
    """Runs the part of ``argv`` (the usage above)."""
    return R8.run_parts(argv, BUILDERS, SITES, inputs_of, __doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

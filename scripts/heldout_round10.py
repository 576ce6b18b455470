"""Clean training of architectures no earlier round used (issue #35, round
ten, 2026-12-05): every step should be silent; faults at five of them.

Gemma 2 (soft-capped attention logits, sliding window, four norms a layer),
DiffLlama (differential attention: two softmaxes subtracted), LFM2 (short
gated convolutions beside attention), LongT5 (local attention; its
transient-global attention fails under torch.compile in transformers 4.57.1,
a cat of mismatched shapes, without graphprobe), mBART (pre-LayerNorm BART
with final norms), Data2Vec-Audio (convolutional
feature extractor, positional convolution), AST (audio spectrogram
transformer), MobileViT v2 (separable self-attention, GroupNorm), OLMo
(non-parametric LayerNorm, clipped QKV), SmolLM3 (layers without rotary
positions), DINOv2 with registers (register tokens, layer scale), RemBERT
(decoupled embeddings), PatchTSMixer (MLP mixing over patches and channels,
no attention), gpt-oss (attention sinks, clamped SwiGLU experts).

    .venv/bin/python scripts/heldout_round10.py clean NAMES OUT [DTYPE:LEVEL,... [LOSS]]
    .venv/bin/python scripts/heldout_round10.py faults NAMES OUT [BACKEND [LOSS [DTYPE:LEVEL,...]]]
    .venv/bin/python scripts/heldout_round10.py trainmode NAMES OUT [DTYPE:LEVEL,... [LOSS]]
    .venv/bin/python scripts/heldout_round10.py invisible NAMES OUT [DTYPE:LEVEL,...]

The parts are round eight's (scripts/heldout_round8.py): ``trainmode`` runs
in train mode (dropout, BatchNorm's batch statistics) with both runs seeded
alike and inductor drawing as eager does; ``invisible`` swaps and negates
output features at SITES.

NAMES: BUILDERS' keys, comma-separated. Results:
benchmarks/results/real_model_matrix.md, "Held-out, round ten".
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


def gemma2():
    return tf.Gemma2Model(tf.Gemma2Config(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64, sliding_window=4,
        attn_logit_softcapping=50.0, final_logit_softcapping=30.0))
def diffllama():
    return tf.DiffLlamaModel(tf.DiffLlamaConfig(vocab_size=V, hidden_size=32, intermediate_size=64,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64))
def lfm2():
    return tf.Lfm2Model(tf.Lfm2Config(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, conv_L_cache=3,
        layer_types=["conv", "full_attention"], block_auto_adjust_ff_dim=False))
def longt5():
    return tf.LongT5Model(tf.LongT5Config(vocab_size=V, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
        relative_attention_num_buckets=8, encoder_attention_type="local", local_radius=4,
        global_block_size=4))
def mbart():
    return tf.MBartModel(tf.MBartConfig(vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
        max_position_embeddings=64))
def data2vec_audio():
    return tf.Data2VecAudioModel(tf.Data2VecAudioConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=4,
        num_conv_pos_embedding_groups=2, conv_pos_kernel_size=5, num_conv_pos_embeddings_layers=1))
def ast():
    return tf.ASTModel(tf.ASTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        patch_size=8, frequency_stride=8, time_stride=8, max_length=32, num_mel_bins=16))
def mobilevitv2():
    return tf.MobileViTV2Model(tf.MobileViTV2Config(image_size=64, width_multiplier=0.25))
def olmo():
    return tf.OlmoModel(tf.OlmoConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, clip_qkv=8.0))
def smollm3():
    return tf.SmolLM3Model(tf.SmolLM3Config(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, no_rope_layers=[1, 0],
        pad_token_id=0))
def dinov2_reg():
    return tf.Dinov2WithRegistersModel(tf.Dinov2WithRegistersConfig(image_size=32, patch_size=8, hidden_size=32,
        num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2, num_register_tokens=2, layerscale_value=0.1))
def rembert():
    return tf.RemBertModel(tf.RemBertConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        input_embedding_size=16, output_embedding_size=16, intermediate_size=64, max_position_embeddings=64))
def patchtsmixer():
    return tf.PatchTSMixerModel(tf.PatchTSMixerConfig(context_length=32, patch_length=4, patch_stride=4,
        num_input_channels=3, d_model=16, num_layers=2, expansion_factor=2, mode="mix_channel",
        gated_attn=True, self_attn=True, self_attn_heads=2, norm_mlp="LayerNorm"))
def gpt_oss():
    return tf.GptOssModel(tf.GptOssConfig(vocab_size=V, hidden_size=32, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, num_local_experts=4, num_experts_per_tok=2,
        max_position_embeddings=64, sliding_window=4, layer_types=["sliding_attention", "full_attention"]))


BUILDERS = {f.__name__: f for f in (gemma2, diffllama, lfm2, longt5, mbart, data2vec_audio, ast, mobilevitv2, olmo,
                                    smollm3, dinov2_reg, rembert, patchtsmixer, gpt_oss)}
# As round eight's SITES: (target module, attention module of the softmax
# fault -- None: not applicable --, activation op of the lowering fault,
# norm op of the decomposition fault, the Linear whose output gradient the
# grad fault scales).
SITES = {
    "gemma2": ("layers.1.mlp", "layers.1.self_attn", "gelu", "rsqrt", "layers.1.mlp.down_proj"),
    "diffllama": ("layers.1.mlp", None, "silu", "rsqrt", "layers.1.mlp.down_proj"),
    "olmo": ("layers.1.mlp", "layers.1.self_attn", "silu", "layer_norm", "layers.1.mlp.down_proj"),
    "mbart": ("encoder.layers.1.fc1", None, "gelu", "layer_norm", "encoder.layers.1.fc2"),
    "dinov2_reg": ("encoder.layer.1.mlp", None, "gelu", "layer_norm", "encoder.layer.1.mlp.fc2"),
}
VISION = {"dinov2_reg"}
NO_CACHE = {"gemma2", "diffllama", "lfm2", "olmo", "smollm3", "gpt_oss"}  # take use_cache
SEQ2SEQ = {"longt5", "mbart"}


def inputs_of(name: str):
    """The inputs a model of this round takes."""
    if name in VISION:
        return lambda dt: ((rm._floats((2, 3, 32, 32), dt),), {})
    if name in SEQ2SEQ:
        return lambda dt: ((rm._ids(1, 8, V),), {"decoder_input_ids": rm._ids(1, 6, V, seed=2), "use_cache": False})
    if name == "mobilevitv2":  # its last stage unfolds 2 x 2 patches of a 64 / 32 image
        return lambda dt: ((rm._floats((2, 3, 64, 64), dt),), {})
    if name == "data2vec_audio":  # raw audio: 400 samples
        return lambda dt: ((rm._floats((2, 400), dt),), {})
    if name == "ast":  # a spectrogram: 32 frames x 16 mel bins
        return lambda dt: ((rm._floats((2, 32, 16), dt),), {})
    if name == "patchtsmixer":  # a time series: 32 steps x 3 channels
        return lambda dt: ((rm._floats((2, 32, 3), dt),), {})
    return rm._token_inputs if name in NO_CACHE else rm._bert_inputs


def main(argv: list[str]) -> int:
    """Runs the part of ``argv`` (the usage above)."""
    return R8.run_parts(argv, BUILDERS, SITES, inputs_of, __doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The first divergence on architectures no test, matrix or earlier held-out
run had used (issue #35, round four, 2026-12-04): encoder-decoders (BART,
Whisper), CLIP's text tower, DINOv2, MobileViT and SegFormer (vision;
MobileViT's BatchNorm in training mode), Mamba (a selective scan, no
attention), Cohere, GLM-4, ModernBERT and GraniteMoE, in tiny
configurations, judged as the matrix judges its pairs
(tests/real_model_training.py).

    .venv/bin/python scripts/heldout_round4.py clean NAMES OUT [DTYPE:LEVEL,... [LOSS [AUTOCAST]]]
    .venv/bin/python scripts/heldout_round4.py faults NAMES OUT [BACKEND [LOSS [DTYPE:LEVEL,...]]]

The arguments are round three's (scripts/heldout_round3.py). Results:
benchmarks/results/real_model_matrix.md, "Held-out, round four".
"""

from __future__ import annotations

import os
import sys
from typing import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import heldout_round3 as R3  # noqa: E402  (also puts tests/ on the path)
import torch  # noqa: E402
import transformers as tf  # noqa: E402

import real_models as rm  # noqa: E402
from heldout_clean_training import _AlwaysTrain  # noqa: E402

V = R3.V


def bart():
    return tf.BartModel(tf.BartConfig(vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
        max_position_embeddings=64, attn_implementation="eager"))
def whisper():
    return tf.WhisperModel(tf.WhisperConfig(vocab_size=V, num_mel_bins=16, d_model=32, encoder_layers=2,
        decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
        decoder_ffn_dim=64, max_source_positions=16, max_target_positions=16, pad_token_id=0, bos_token_id=1,
        eos_token_id=2, decoder_start_token_id=1, attn_implementation="eager"))
def clip_text():
    return tf.CLIPTextModel(tf.CLIPTextConfig(vocab_size=V, hidden_size=32, intermediate_size=64,
        num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=16, hidden_act="gelu",
        attn_implementation="eager"))
def dinov2():
    return tf.Dinov2Model(tf.Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2,
        image_size=16, patch_size=4, attn_implementation="eager"))
def mobilevit():
    return _AlwaysTrain(tf.MobileViTModel(tf.MobileViTConfig(num_channels=3, image_size=32, patch_size=2,
        hidden_sizes=[16, 20, 24], neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 48], num_attention_heads=2,
        expand_ratio=2.0, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0)))
def segformer():
    return tf.SegformerModel(tf.SegformerConfig(num_channels=3, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
        hidden_sizes=[8, 16], patch_sizes=[3, 3], strides=[2, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2]))
def mamba():
    return tf.MambaModel(tf.MambaConfig(vocab_size=V, hidden_size=32, state_size=8, num_hidden_layers=2, expand=2,
        conv_kernel=4))
def cohere():
    return tf.CohereModel(tf.CohereConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0, bos_token_id=1,
        eos_token_id=2, attn_implementation="eager"))
def glm4():
    return tf.Glm4Model(tf.Glm4Config(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64, pad_token_id=0,
        attn_implementation="eager"))
def modernbert():
    return tf.ModernBertModel(tf.ModernBertConfig(vocab_size=V, hidden_size=32, intermediate_size=64,
        num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=64, pad_token_id=0, bos_token_id=1,
        eos_token_id=2, cls_token_id=1, sep_token_id=2, global_attn_every_n_layers=2, local_attention=4,
        attn_implementation="eager"))
def granitemoe():
    return tf.GraniteMoeModel(tf.GraniteMoeConfig(vocab_size=V, hidden_size=32, intermediate_size=32,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
        max_position_embeddings=64, attn_implementation="eager"))


BUILDERS = {f.__name__: f for f in (bart, whisper, clip_text, dinov2, mobilevit, segformer, mamba, cohere, glm4,
                                    modernbert, granitemoe)}

# (target module, attention module of the softmax fault, activation op of the
# lowering fault, norm op of the decomposition fault, grad fault's module):
# round three's FAULT_SITES.
FAULT_SITES = {
    "bart": ("decoder.layers.1.fc2", "decoder.layers.1.self_attn", "gelu", "layer_norm", "decoder.layers.1.fc2"),
    "whisper": ("decoder.layers.1.fc2", "decoder.layers.1.self_attn", "gelu", "layer_norm",
                "decoder.layers.1.fc2"),
    "clip_text": ("text_model.encoder.layers.1.mlp", "text_model.encoder.layers.1.self_attn", "gelu", "layer_norm",
                  "text_model.encoder.layers.1.mlp.fc2"),
    "dinov2": ("encoder.layer.1.mlp", "encoder.layer.1.attention.attention", "gelu", "layer_norm",
               "encoder.layer.1.mlp.fc2"),
    "cohere": ("layers.1.mlp", "layers.1.self_attn", "silu", "rsqrt", "layers.1.mlp.down_proj"),
    "glm4": ("layers.1.mlp", "layers.1.self_attn", "silu", "rsqrt", "layers.1.mlp.down_proj"),
    "modernbert": ("layers.1.mlp", "layers.1.attn", "gelu", "layer_norm", "layers.1.mlp.Wo"),
    "granitemoe": ("layers.1.block_sparse_moe", "layers.1.self_attn", "silu", "rsqrt", "layers.1.self_attn.o_proj"),
}


def _image(size: int) -> Callable[[torch.dtype], rm.Inputs]:
    return lambda dt: ((rm._floats((2, 3, size, size), dt),), {})


def _seq2seq(dt: torch.dtype) -> rm.Inputs:
    # Explicit masks, as for T5 (tests/real_models.py, _t5_inputs): without
    # them BART builds its decoder mask one column wider under dynamo.
    return (rm._ids(1, 8, V),), {"attention_mask": torch.ones(1, 8, dtype=torch.long),
                                 "decoder_input_ids": rm._ids(1, 6, V, seed=2),
                                 "decoder_attention_mask": torch.ones(1, 6, dtype=torch.long), "use_cache": False}


def _audio(dt: torch.dtype) -> rm.Inputs:
    # Whisper's encoder wants 2 x max_source_positions frames.
    return (rm._floats((1, 16, 32), dt),), {"decoder_input_ids": rm._ids(1, 6, V, seed=2), "use_cache": False}


def inputs_of(name: str) -> Callable[[torch.dtype], rm.Inputs]:
    """The inputs a model of this round takes."""
    special = {"bart": _seq2seq, "whisper": _audio, "dinov2": _image(16), "segformer": _image(16),
               "mobilevit": _image(32), "clip_text": rm._bert_inputs, "modernbert": rm._bert_inputs}
    return special.get(name, rm._token_inputs)


if __name__ == "__main__":
    sys.exit(R3.main(sys.argv[1:], BUILDERS, FAULT_SITES, inputs_of, __doc__))

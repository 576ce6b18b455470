"""The first divergence on architectures no test, matrix or earlier held-out
run had used (issue #35, round five, 2026-12-04): BLOOM (ALiBi, a fused QKV),
Falcon (parallel attention and MLP, multi-query), Phi (partial rotary,
parallel blocks), MPNet (relative position bias), GPT-Neo (local and global
attention in turn) and Nemotron (squared ReLU, LayerNorm1P), in tiny
configurations, judged as the matrix judges its pairs
(tests/real_model_training.py). The softmax fault patches
``eager_attention_forward``: only Phi has one (the others compute their
attention inline; no softmax fault there).

    .venv/bin/python scripts/heldout_round5.py clean NAMES OUT [DTYPE:LEVEL,... [LOSS [AUTOCAST]]]
    .venv/bin/python scripts/heldout_round5.py faults NAMES OUT [BACKEND [LOSS [DTYPE:LEVEL,...]]]

The arguments are round three's (scripts/heldout_round3.py). Results:
benchmarks/results/real_model_matrix.md, "Held-out, round five".
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


def bloom():
    return tf.BloomModel(tf.BloomConfig(vocab_size=V, hidden_size=32, n_layer=2, n_head=4))
def falcon():
    return tf.FalconModel(tf.FalconConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        attn_implementation="eager"))
def phi():
    return tf.PhiModel(tf.PhiConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, partial_rotary_factor=0.5, max_position_embeddings=64, attn_implementation="eager"))
def mpnet():
    return tf.MPNetModel(tf.MPNetConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64))
def gpt_neo():
    return tf.GPTNeoModel(tf.GPTNeoConfig(vocab_size=V, hidden_size=32, num_layers=2, num_heads=4,
        attention_types=[[["global", "local"], 1]], window_size=4, max_position_embeddings=64,
        attn_implementation="eager"))
def nemotron():
    return tf.NemotronModel(tf.NemotronConfig(vocab_size=V, hidden_size=32, intermediate_size=64,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        attn_implementation="eager"))


BUILDERS = {f.__name__: f for f in (bloom, falcon, phi, mpnet, gpt_neo, nemotron)}

# (target module, attention module of the softmax fault, activation op of the
# lowering fault, norm op of the decomposition fault, grad fault's module):
# round three's FAULT_SITES.
FAULT_SITES = {
    "bloom": ("h.1.mlp", None, "tanh", "layer_norm", "h.1.mlp.dense_4h_to_h"),
    "falcon": ("h.1.mlp", None, "gelu", "layer_norm", "h.1.mlp.dense_4h_to_h"),
    "phi": ("layers.1.mlp", "layers.1.self_attn", "tanh", "layer_norm", "layers.1.mlp.fc2"),
    "mpnet": ("encoder.layer.1.intermediate", None, "gelu", "layer_norm", "encoder.layer.1.output.dense"),
    "gpt_neo": ("h.1.mlp", None, "tanh", "layer_norm", "h.1.mlp.c_proj"),
    "nemotron": ("layers.1.mlp", None, "relu", "layer_norm", "layers.1.mlp.down_proj"),
}


def inputs_of(name: str):
    """The inputs a model of this round takes."""
    return rm._bert_inputs if name == "mpnet" else rm._token_inputs


if __name__ == "__main__":
    sys.exit(R3.main(sys.argv[1:], BUILDERS, FAULT_SITES, inputs_of, __doc__))

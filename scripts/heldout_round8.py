"""Clean training of architectures no earlier round used (issue #35, round
eight, 2026-12-05): every step should be silent.

Gemma 3 (sliding and full attention, QK-norm, scaled embeddings), Qwen3-MoE
(top-k routing with renormalised weights), Mamba-2 (chunked state-space
scan), RecurrentGemma (RG-LRU recurrence beside local attention), Pegasus
(encoder-decoder, sinusoidal positions), HuBERT (convolutional features,
weight-normalised positional convolution), SEW-D (squeezed disentangled
attention), PVT v2 (spatial-reduction attention, depthwise convolution in
the MLP), FocalNet (focal modulation), BiT (weight-standardised
convolutions, GroupNorm), CvT (convolutional projections with BatchNorm;
depths 1, 2, 3: transformers 4.57 indexes each stage's drop-path rates by
the stage), PatchTST (patches of a time series, scaled by its own mean and
std),
Nystromformer (landmark attention, an iterative pseudo-inverse), DBRX
(MoE with fused expert weights).

    .venv/bin/python scripts/heldout_round8.py clean NAMES OUT [DTYPE:LEVEL,... [LOSS]]
    .venv/bin/python scripts/heldout_round8.py faults NAMES OUT [BACKEND [LOSS [DTYPE:LEVEL,...]]]
    .venv/bin/python scripts/heldout_round8.py trainmode NAMES OUT [DTYPE:LEVEL,... [LOSS]]
    .venv/bin/python scripts/heldout_round8.py invisible NAMES OUT [DTYPE:LEVEL,...]

``invisible``: round six's two faults that leave the four statistics as they
were (features 0 and 1 of the target's output swapped; feature 0 negated)
at SITES, against inductor.

``trainmode``: clean training in train mode (dropout, stochastic depth,
BatchNorm's batch statistics), both runs seeded alike and inductor drawing
its random numbers as eager mode does (``fallback_random``); NAMES from any
held-out round (3 to 8) and from the matrix (tests/real_model_faults.py).

``faults``: round three's graph-only faults (scale, precision, lowering,
decomposition; softmax where the model has a module-level attention
function) and the backward-only gradient scale, at SITES. Qwen3-MoE and
DBRX are not among them: the harness compiles its faults with
``fullgraph=True``, which their data-dependent routing refuses ("Could not
guard on data-dependent expression"). Nystromformer runs in float32 only:
in bfloat16 it fails without graphprobe ("expected scalar type BFloat16 but
found Float").
RecurrentGemma cannot take a second training step even without graphprobe
(its recurrent state keeps the first step's graph: "Trying to backward
through the graph a second time").

NAMES: BUILDERS' keys, comma-separated. Results:
benchmarks/results/real_model_matrix.md, "Held-out, round eight".
"""

from __future__ import annotations

import os
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import heldout_round3 as R3  # noqa: E402  (also puts tests/ on the path)
import transformers as tf  # noqa: E402

import real_models as rm  # noqa: E402

V = R3.V


def gemma3():
    return tf.Gemma3TextModel(tf.Gemma3TextConfig(vocab_size=V, hidden_size=32, intermediate_size=64,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64,
        sliding_window=4, layer_types=["sliding_attention", "full_attention"]))
def qwen3_moe():
    return tf.Qwen3MoeModel(tf.Qwen3MoeConfig(vocab_size=V, hidden_size=32, intermediate_size=64,
        moe_intermediate_size=16, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
        num_experts=4, num_experts_per_tok=2, max_position_embeddings=64))
def mamba2():
    return tf.Mamba2Model(tf.Mamba2Config(vocab_size=V, hidden_size=32, num_hidden_layers=2, state_size=8, expand=2,
                                          head_dim=8, num_heads=8, n_groups=1, chunk_size=4))
def recurrent_gemma():
    return tf.RecurrentGemmaModel(tf.RecurrentGemmaConfig(vocab_size=V, hidden_size=32, intermediate_size=64,
        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, lru_width=32, attention_window_size=8,
        block_types=["recurrent", "attention"]))
def pegasus():
    return tf.PegasusModel(tf.PegasusConfig(vocab_size=V, d_model=32, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
        max_position_embeddings=64))
def hubert():
    return tf.HubertModel(tf.HubertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=4))
def sew_d():
    return tf.SEWDModel(tf.SEWDConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=4, squeeze_factor=2, max_position_embeddings=64, position_buckets=16))
def pvt_v2():
    return tf.PvtV2Model(tf.PvtV2Config(image_size=32, num_channels=3, num_encoder_blocks=2, depths=[1, 1],
        sr_ratios=[2, 1], hidden_sizes=[16, 32], patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2],
        mlp_ratios=[2, 2]))
def focalnet():
    return tf.FocalNetModel(tf.FocalNetConfig(image_size=32, patch_size=4, num_channels=3, embed_dim=8, depths=[1, 1],
                                              focal_levels=[2, 2], focal_windows=[3, 3]))
def bit():
    return tf.BitModel(tf.BitConfig(num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                                    num_groups=4, layer_type="preactivation", global_padding="SAME"))
def cvt():
    return tf.CvtModel(tf.CvtConfig(num_channels=3, embed_dim=[8, 16, 32], num_heads=[1, 2, 2], depth=[1, 2, 3],
                                    mlp_ratio=[2.0, 2.0, 2.0], drop_path_rate=[0.0, 0.0, 0.0]))
def patchtst():
    return tf.PatchTSTModel(tf.PatchTSTConfig(num_input_channels=3, context_length=32, patch_length=8, patch_stride=8,
        d_model=32, num_attention_heads=4, num_hidden_layers=2, ffn_dim=64, scaling="std"))
def nystromformer():
    return tf.NystromformerModel(tf.NystromformerConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64, num_landmarks=4, segment_means_seq_len=8,
        max_position_embeddings=64, conv_kernel_size=3))
def dbrx():
    return tf.DbrxModel(tf.DbrxConfig(vocab_size=V, d_model=32, n_heads=4, n_layers=2, max_seq_len=64,
        attn_config={"kv_n_heads": 2}, ffn_config={"ffn_hidden_size": 16, "moe_num_experts": 4, "moe_top_k": 2}))


BUILDERS = {f.__name__: f for f in (gemma3, qwen3_moe, mamba2, recurrent_gemma, pegasus, hubert, sew_d, pvt_v2,
                                    focalnet, bit, cvt, patchtst, nystromformer, dbrx)}
# (target module, attention module of the softmax fault -- None: not
# applicable --, activation op of the lowering fault, norm op of the
# decomposition fault, the Linear whose output gradient the grad fault scales).
SITES = {
    "gemma3": ("layers.1.mlp", "layers.1.self_attn", "gelu", "rsqrt", "layers.1.mlp.down_proj"),
    "mamba2": ("layers.1.mixer", None, "silu", "rsqrt", "layers.1.mixer.out_proj"),
    "pegasus": ("encoder.layers.0.fc2", None, "gelu", "layer_norm", "encoder.layers.0.fc2"),
    "pvt_v2": ("encoder.layers.1.blocks.0.mlp", None, "gelu", "layer_norm",
               "encoder.layers.1.blocks.0.mlp.dense2"),
    "hubert": ("encoder.layers.1.feed_forward", None, "gelu", "layer_norm",
               "encoder.layers.1.feed_forward.output_dense"),
}
VISION = {"pvt_v2": 32, "focalnet": 32, "bit": 32, "cvt": 32}
AUDIO = {"hubert", "sew_d"}
NO_CACHE = {"gemma3", "qwen3_moe", "recurrent_gemma", "dbrx"}  # take use_cache


def inputs_of(name: str):
    """The inputs a model of this round takes."""
    if name in VISION:
        size = VISION[name]
        return lambda dt: ((rm._floats((2, 3, size, size), dt),), {})
    if name in AUDIO:
        return lambda dt: ((rm._floats((1, 400), dt),), {})
    if name == "patchtst":
        return lambda dt: ((rm._floats((2, 32, 3), dt),), {})
    if name == "mamba2":
        return lambda dt: ((rm._ids(1, 8, V),), {"use_cache": False})
    if name == "pegasus":
        return lambda dt: ((rm._ids(1, 8, V),), {"decoder_input_ids": rm._ids(1, 6, V, seed=2), "use_cache": False})
    return rm._token_inputs if name in NO_CACHE else rm._bert_inputs


def invisible(names: list[str], out: str, configs: str, builders: dict, sites: dict, inputs: Any) -> int:
    """The ``invisible`` part: round six's swap and sign faults at ``sites``
    of ``names``, against inductor, for each DTYPE:LEVEL of ``configs``."""
    import real_model_training as T
    R3.register(builders, sites, inputs)
    T.SWITCH_BACKEND = "inductor"
    R3.run_all(names, R3._pairs(configs), out,
               lambda name, dt, level, root: T.forward_faults(name, dt, level, root, ("swap", "sign")))
    return 0


def run_parts(argv: list[str], builders: dict, sites: dict, inputs_of, doc: str) -> int:  # noqa: ANN001
    """Runs a later round's part of ``argv`` (clean, faults, trainmode,
    invisible: this round's usage) on that round's ``builders``."""
    if argv[:1] == ["trainmode"]:
        import real_model_training as T
        T.TRAIN_MODE = True
        R3.register(builders, sites, inputs_of)
        return R3.main(["clean", *argv[1:]], builders, sites, inputs_of, doc)
    if argv[:1] == ["invisible"] and len(argv) >= 3:
        return invisible(argv[1].split(","), argv[2], argv[3] if len(argv) > 3 else "fp32:L0,bf16:mix",
                         builders, sites, inputs_of)
    if argv[:1] in (["clean"], ["faults"]):
        return R3.main(argv, builders, sites, inputs_of, doc)
    print(doc)
    return 2


def main(argv: list[str]) -> int:
    """Runs the part of ``argv`` (the usage above)."""
    if argv[:1] == ["trainmode"]:
        # Every held-out round's models and the matrix's (real_model_faults.ARCHS), in train mode.
        import importlib

        import real_model_training as T
        T.TRAIN_MODE = True
        for r in range(3, 8):
            m = importlib.import_module(f"heldout_round{r}")
            R3.register(m.BUILDERS, getattr(m, "SITES", getattr(m, "FAULT_SITES", {})), m.inputs_of)
        R3.register(BUILDERS, SITES, inputs_of)
        every = {n: a.build for n, a in T.F.ARCHS.items()}
        return R3.main(["clean", *argv[1:]], every, SITES, lambda n: T.F.ARCHS[n].inputs, __doc__)
    return run_parts(argv, BUILDERS, SITES, inputs_of, __doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

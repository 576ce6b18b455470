"""The first divergence on architectures no test, matrix or earlier held-out
run had used (issue #35, round three, 2026-12-03): 19 transformers models in
tiny configurations -- GPT-J, CodeGen, MPT, Mixtral, Qwen2-MoE, DeBERTa-v2,
ELECTRA, RoBERTa, Gemma, StarCoder2, Persimmon, Granite, GPTBigCode, XGLM,
Qwen3, ALBERT, MobileBERT, Swin, DeiT -- judged as the matrix judges its
pairs (tests/real_model_training.py).

    .venv/bin/python scripts/heldout_round3.py clean NAMES OUT [DTYPE:LEVEL,... [LOSS [AUTOCAST]]]
    .venv/bin/python scripts/heldout_round3.py faults NAMES OUT [BACKEND [LOSS [DTYPE:LEVEL,...]]]

``clean``: eager vs inductor, two AdamW training steps (default fp32:L0,bf16:mix,
head loss), every pair should be silent. ``faults``: the graph-only faults of
the matrix (module output scale, softmax scale, precision, a custom inductor
lowering, a decomposition change, the backward-only gradient scale) on the
models of :data:`FAULT_SITES`, against ``BACKEND`` (default inductor); where
the fault must be named comes from a differential eager trace
(tests/real_model_faults.py), never from graphprobe's dumps.
Results: benchmarks/results/real_model_matrix.md, "Held-out, round three".
"""

from __future__ import annotations

import os
import sys
from typing import Callable

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
sys.path.insert(0, HERE)
import torch  # noqa: E402
import transformers as tf  # noqa: E402

import real_model_faults as F  # noqa: E402
import real_model_training as T  # noqa: E402
import real_models as rm  # noqa: E402
from heldout_clean_training import _image  # noqa: E402  (the vision models' input)

V = 64  # vocabulary of every text model


def gptj():
    return tf.GPTJModel(tf.GPTJConfig(vocab_size=V, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_positions=64,
                                      attn_implementation="eager"))
def codegen():
    return tf.CodeGenModel(tf.CodeGenConfig(vocab_size=V, n_embd=32, n_layer=2, n_head=4, rotary_dim=4,
                                            n_positions=64, n_ctx=64))
def mpt():
    return tf.MptModel(tf.MptConfig(vocab_size=V, d_model=32, n_layers=2, n_heads=4, max_seq_len=64))
def mixtral():
    return tf.MixtralModel(tf.MixtralConfig(vocab_size=V, hidden_size=32, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
        max_position_embeddings=64, attn_implementation="eager"))
def qwen2_moe():
    return tf.Qwen2MoeModel(tf.Qwen2MoeConfig(vocab_size=V, hidden_size=32, intermediate_size=32,
        moe_intermediate_size=16, shared_expert_intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, max_position_embeddings=64,
        attn_implementation="eager"))
def deberta_v2():
    return tf.DebertaV2Model(tf.DebertaV2Config(vocab_size=V, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64, max_position_embeddings=64, relative_attention=True,
        pos_att_type=["p2c", "c2p"], position_buckets=8))
def electra():
    return tf.ElectraModel(tf.ElectraConfig(vocab_size=V, embedding_size=16, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64, max_position_embeddings=64, attn_implementation="eager"))
def roberta():
    return tf.RobertaModel(tf.RobertaConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64, pad_token_id=1, attn_implementation="eager"))
def gemma():
    return tf.GemmaModel(tf.GemmaConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=1, head_dim=8, max_position_embeddings=64,
        attn_implementation="eager"))
def starcoder2():
    return tf.Starcoder2Model(tf.Starcoder2Config(vocab_size=V, hidden_size=32, intermediate_size=64,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        attn_implementation="eager"))
def persimmon():
    return tf.PersimmonModel(tf.PersimmonConfig(vocab_size=V, hidden_size=32, intermediate_size=64,
        num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=64))
def granite():
    return tf.GraniteModel(tf.GraniteConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, attn_implementation="eager"))
def gpt_bigcode():
    return tf.GPTBigCodeModel(tf.GPTBigCodeConfig(vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=64,
        multi_query=True, attn_implementation="eager"))
def xglm():
    return tf.XGLMModel(tf.XGLMConfig(vocab_size=V, d_model=32, num_layers=2, attention_heads=4, ffn_dim=64,
        max_position_embeddings=64))
def qwen3():
    return tf.Qwen3Model(tf.Qwen3Config(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64,
        attn_implementation="eager"))
def albert():
    return tf.AlbertModel(tf.AlbertConfig(vocab_size=V, embedding_size=16, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64, max_position_embeddings=64, attn_implementation="eager"))
def mobilebert():
    return tf.MobileBertModel(tf.MobileBertConfig(vocab_size=V, hidden_size=32, embedding_size=16,
        num_hidden_layers=2, num_attention_heads=4, intermediate_size=32, intra_bottleneck_size=16,
        true_hidden_size=16, max_position_embeddings=64))
def swin():
    return tf.SwinModel(tf.SwinConfig(image_size=16, patch_size=2, num_channels=3, embed_dim=8, depths=[1, 1],
        num_heads=[2, 2], window_size=2))
def deit():
    return tf.DeiTModel(tf.DeiTConfig(image_size=16, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64, attn_implementation="eager"))


BUILDERS = {f.__name__: f for f in (gptj, codegen, mpt, mixtral, qwen2_moe, deberta_v2, electra, roberta, gemma,
                                    starcoder2, persimmon, granite, gpt_bigcode, xglm, qwen3, albert, mobilebert,
                                    swin, deit)}
ENCODERS = {"deberta_v2", "electra", "roberta", "albert", "mobilebert"}  # no use_cache argument
VISION = {"swin", "deit"}

# Where the faults go: (target module, attention module whose query the
# softmax fault scales -- None where the model has no module-level
# eager_attention_forward --, activation op of the lowering fault, norm op of
# the decomposition fault, the Linear whose output gradient the grad fault scales).
FAULT_SITES = {
    "gptj": ("h.1.mlp", None, "tanh", "layer_norm", "h.1.mlp.fc_out"),
    "mpt": ("blocks.1.ffn", None, "gelu", "layer_norm", "blocks.1.ffn.down_proj"),
    "gemma": ("layers.1.mlp", "layers.1.self_attn", "gelu", "rsqrt", "layers.1.mlp.down_proj"),
    "starcoder2": ("layers.1.mlp", "layers.1.self_attn", "gelu", "layer_norm", "layers.1.mlp.c_proj"),
    "persimmon": ("layers.1.mlp", "layers.1.self_attn", "relu", "layer_norm", "layers.1.mlp.dense_4h_to_h"),
    "granite": ("layers.1.mlp", "layers.1.self_attn", "silu", "rsqrt", "layers.1.mlp.down_proj"),
    "gpt_bigcode": ("h.1.mlp", "h.1.attn", "gelu", "layer_norm", "h.1.mlp.c_proj"),
    "qwen3": ("layers.1.mlp", "layers.1.self_attn", "silu", "rsqrt", "layers.1.mlp.down_proj"),
    "deit": ("encoder.layer.1.intermediate", "encoder.layer.1.attention.attention", "gelu", "layer_norm",
             "encoder.layer.1.output.dense"),
    "deberta_v2": ("encoder.layer.1.intermediate", None, "gelu", "layer_norm", "encoder.layer.1.output.dense"),
    "xglm": ("layers.1.fc2", None, "gelu", "layer_norm", "layers.1.fc2"),
    "mixtral": ("layers.1.block_sparse_moe", "layers.1.self_attn", "silu", "rsqrt",
                "layers.1.block_sparse_moe.experts.1.w2"),
}


def inputs_of(name: str) -> Callable[[torch.dtype], rm.Inputs]:
    """The inputs a model of this round takes."""
    return _image if name in VISION else rm._bert_inputs if name in ENCODERS else rm._token_inputs


def register(builders: dict[str, Callable[[], torch.nn.Module]], sites: dict[str, tuple],
             inputs: Callable[[str], Callable[[torch.dtype], rm.Inputs]]) -> None:
    """Adds the models to the matrix's architecture table (tests/real_model_faults.py)."""
    for name, build in builders.items():
        target, attention, act, norm, grad = sites.get(name, ("", None, "silu", "layer_norm", ""))
        F.ARCHS[name] = F.Arch(name, build, inputs(name), target, attention, act, norm, grad)


def _pairs(text: str) -> list[tuple[str, str]]:
    return [tuple(c.split(":")) for c in text.split(",")]  # type: ignore[misc]


def main(argv: list[str], builders: dict[str, Callable[[], torch.nn.Module]] = BUILDERS,
         sites: dict[str, tuple] = FAULT_SITES,
         inputs: Callable[[str], Callable[[torch.dtype], rm.Inputs]] = inputs_of, usage: str = __doc__) -> int:
    """Runs the clean pairs or the faults of ``argv`` (the usage above) on
    ``builders``' models, the faults where ``sites`` puts them."""
    if len(argv) < 3 or argv[0] not in ("clean", "faults"):
        print(usage)
        return 2
    register(builders, sites, inputs)
    part, names, out = argv[0], argv[1].split(","), argv[2]
    unknown = [n for n in names if n not in builders or (part == "faults" and n not in sites)]
    if unknown:
        allowed = builders if part == "clean" else sites
        print(f"unknown model(s) {', '.join(unknown)}; allowed for {part}: {', '.join(allowed)}")
        return 2
    if part == "clean":
        configs = _pairs(argv[3] if len(argv) > 3 else "fp32:L0,bf16:mix")
        T.LOSS = argv[4] if len(argv) > 4 else "head"
        if len(argv) > 5:
            T.AUTOCAST = getattr(torch, argv[5])
    else:
        T.SWITCH_BACKEND = argv[3] if len(argv) > 3 else "inductor"
        T.LOSS = argv[4] if len(argv) > 4 else "head"
        configs = _pairs(argv[5] if len(argv) > 5 else "fp32:L0,bf16:mix")
    if part == "clean":
        run_all(names, configs, out, lambda name, dt, level, root: T.clean_training(name, dt, level, root, steps=2))
    else:
        run_all(names, configs, out, lambda name, dt, level, root: faults_and_grad(
            name, dt, level, root, ("scale", "softmax", "precision", "lowering", "decomp")))
    return 0


def faults_and_grad(name: str, dt: str, level: str, root: str, kinds: tuple[str, ...]) -> list:
    """The forward faults of ``kinds`` and the backward-only gradient scale."""
    cases = T.forward_faults(name, dt, level, root, kinds)
    cases.append(T.grad_fault(name, dt, level, os.path.join(root, "grad")))
    return cases


def run_all(names: list[str], configs: list[tuple[str, str]], out: str,
            cases_of: Callable[[str, str, str, str], list]) -> None:
    """Prints a line per case of ``cases_of(name, dtype, level, root)`` for
    every model and configuration, each under ``out/{name}-{dtype}-{level}``."""
    for name in names:
        for dt, level in configs:
            root = os.path.join(out, f"{name}-{dt}-{level}")
            try:
                for c in cases_of(name, dt, level, root):
                    print(T.describe(c), "|", (c.message or "")[:300], flush=True)
            except Exception as e:  # noqa: BLE001 -- one model's failure must not hide the others'
                print(name, dt, level, "ERROR", type(e).__name__, str(e)[:300], flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

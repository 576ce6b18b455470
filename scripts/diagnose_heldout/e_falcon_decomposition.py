"""Held-out case (e), issue #37: a decomposition fault in transformers FalconModel:
the decomposition of aten.native_layer_norm in inductor's table (which
aot_eager_decomp_partition and inductor use) returns the normalized output x1.001.
Expected origin: h.0.input_layernorm; bisect aot_eager_decomp_partition /
decomposition, debug info native_layer_norm."""
import torch
import torch._functorch.config
import torch._inductor.config
from torch._decomp import decomposition_table
from torch._inductor.decomposition import decompositions
from transformers import FalconConfig, FalconModel
from graphprobe import AclGraphDumper

aten = torch.ops.aten
_layer_norm = decomposition_table[aten.native_layer_norm.default]


def wrong_layer_norm(x, shape, weight, bias, eps):
    out, mean, rstd = _layer_norm(x, shape, weight, bias, eps)
    return out * 1.001, mean, rstd


decompositions[aten.native_layer_norm.default] = wrong_layer_norm
torch._inductor.config.fx_graph_cache = False
torch._functorch.config.enable_autograd_cache = False

torch.manual_seed(0)
model = FalconModel(FalconConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                 max_position_embeddings=64, attn_implementation="eager")).eval()
dumper = AclGraphDumper()
dumper.start(model)
compiled = torch.compile(model)
with torch.no_grad():
    for step in range(2):
        compiled(torch.randint(0, 64, (1, 8), generator=torch.Generator().manual_seed(step)))
        dumper.step()
dumper.stop()

"""Held-out case (d), issue #37: a custom inductor lowering fault in
transformers GPTJModel (activation gelu_new, which computes torch.tanh):
inductor's lowering of aten.tanh is replaced by one computing tanh(x) * 1.001.
Process state (the lowering table) the repro does not carry.
Expected origin: h.0.mlp.act; bisect inductor / lowerings, debug info tanh;
repro.reproduces false with the reason."""
import torch
import torch._functorch.config
import torch._inductor.config
from torch._inductor.lowering import lowerings
from transformers import GPTJConfig, GPTJModel
from graphprobe import AclGraphDumper

aten = torch.ops.aten
_tanh = lowerings[aten.tanh.default]
_mul = lowerings[aten.mul.Tensor]


def wrong_tanh(x):
    return _mul(_tanh(x), 1.001)


lowerings[aten.tanh.default] = wrong_tanh
# The caches' keys do not see a changed lowering: compile afresh.
torch._inductor.config.fx_graph_cache = False
torch._functorch.config.enable_autograd_cache = False

torch.manual_seed(0)
model = GPTJModel(GPTJConfig(vocab_size=64, n_positions=64, n_embd=32, n_layer=2, n_head=4, rotary_dim=4,
                             n_inner=64, activation_function="gelu_new", attn_implementation="eager")).eval()
dumper = AclGraphDumper()
dumper.start(model)
compiled = torch.compile(model)
with torch.no_grad():
    for step in range(2):
        compiled(torch.randint(0, 64, (1, 8), generator=torch.Generator().manual_seed(step)))
        dumper.step()
dumper.stop()

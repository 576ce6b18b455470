"""Held-out case (d), issue #37: a custom inductor lowering fault in
transformers BloomModel (its MLP's BloomGelu computes torch.tanh): inductor's
lowering of aten.tanh is replaced by one computing tanh(x) * 1.001. Process
state (the lowering table) that the repro does not carry.
Expected origin: h.0.mlp.gelu_impl; bisect inductor / lowerings, debug info
tanh; repro.reproduces false with the reason.
(GPT-J, tried first, cannot be compiled by inductor on torch 2.13 at all:
the joint-graph attention pattern pass fails on its tensor-valued scale_attn.)"""
import torch
import torch._functorch.config
import torch._inductor.config
from torch._inductor.lowering import lowerings
from transformers import BloomConfig, BloomModel
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
model = BloomModel(BloomConfig(vocab_size=64, hidden_size=32, n_layer=2, n_head=4,
                               attn_implementation="eager")).eval()
dumper = AclGraphDumper()
dumper.start(model)
compiled = torch.compile(model)
with torch.no_grad():
    for step in range(2):
        compiled(torch.randint(0, 64, (1, 8), generator=torch.Generator().manual_seed(step)))
        dumper.step()
dumper.stop()

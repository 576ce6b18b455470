"""Held-out case (c), issue #37: a backward-only fault in a training script
(transformers StableLmModel, SGD) that calls optimizer.step() BEFORE
dumper.step(). The gradient that layers.1.mlp.down_proj's output receives is
scaled x1.002 in graph mode only (an autograd Function, identity in forward,
whose backward scales only while compiling), so down_proj's backward computes
wrong gradients from a correct incoming one.
Expected origin: layers.1.mlp.down_proj, its backward creates."""
import torch
from transformers import StableLmConfig, StableLmModel
from graphprobe import AclGraphDumper

torch.manual_seed(0)
model = StableLmModel(StableLmConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64,
                                     attn_implementation="eager")).eval()


class GraphOnlyGradScale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad * 1.002 if torch.compiler.is_compiling() else grad


def grad_fault(module, args, output):
    return GraphOnlyGradScale.apply(output)


model.layers[1].mlp.down_proj.register_forward_hook(grad_fault)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
dumper = AclGraphDumper()
dumper.start(model)
compiled = torch.compile(model)
for step in range(2):
    ids = torch.randint(0, 64, (1, 8), generator=torch.Generator().manual_seed(step))
    loss = compiled(ids, use_cache=False).last_hidden_state.pow(2).mean()
    loss.backward()
    optimizer.step()       # BEFORE dumper.step(): the parameters change before the dumper's step
    optimizer.zero_grad()
    dumper.step()
dumper.stop()

"""Held-out case (f), issue #37 ("every 'not judged' reason is the true one; no
summary says 'outside the scope' while a module in the scope was not judged"):
the graph-only fault planted as such faults often are, by replacing the
attention's forward on the instance with a closure (transformers Phi3Model,
default cache). Replay does not run a forward replaced by a callable not bound
to the module, so layers.1.self_attn cannot be judged; its projections inherit.
Expected: no origin; layers.1.self_attn "not judged" with that reason; the
summary says the error is then in its own code, not "outside the scope"."""
import torch
from transformers import Phi3Config, Phi3Model
from graphprobe import AclGraphDumper

torch.manual_seed(0)
model = Phi3Model(Phi3Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                             pad_token_id=0, bos_token_id=1, eos_token_id=2, attn_implementation="eager")).eval()
attention = model.layers[1].self_attn
inner = attention.forward


def patched(*args, **kwargs):
    out = inner(*args, **kwargs)
    if torch.compiler.is_compiling():  # the injected fault: x1.001 in graph mode only
        return (out[0] * 1.001,) + tuple(out[1:])
    return out


attention.forward = patched
dumper = AclGraphDumper()
dumper.start(model)
compiled = torch.compile(model)
with torch.no_grad():
    for step in range(2):
        compiled(torch.randint(0, 64, (1, 8), generator=torch.Generator().manual_seed(step)))
        dumper.step()
dumper.stop()

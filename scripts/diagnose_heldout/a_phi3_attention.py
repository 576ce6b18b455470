"""Held-out case (a), issue #37: a graph-only fault in one attention module of a
decoder LM (transformers Phi3Model) called with its default cache (use_cache
left at its default: a DynamicCache is passed to every attention).
Expected origin: layers.1.self_attn, creates; the repro reproduces."""
import torch
from transformers import Phi3Config, Phi3Model
from graphprobe import AclGraphDumper

torch.manual_seed(0)
model = Phi3Model(Phi3Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                             pad_token_id=0, bos_token_id=1, eos_token_id=2, attn_implementation="eager")).eval()


def graph_only_attention(module, args, output):
    # The injected fault: the attention output x1.001 (fp32), in graph mode only.
    if torch.compiler.is_compiling():
        return (output[0] * 1.001,) + tuple(output[1:])
    return output


model.layers[1].self_attn.register_forward_hook(graph_only_attention)
dumper = AclGraphDumper()
dumper.start(model)
compiled = torch.compile(model)
with torch.no_grad():
    for step in range(2):
        out = compiled(torch.randint(0, 64, (1, 8), generator=torch.Generator().manual_seed(step)))
        assert out.past_key_values is not None  # the default cache was used
        dumper.step()
dumper.stop()

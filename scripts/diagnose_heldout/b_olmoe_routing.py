"""Held-out case (b), issue #37: an MoE routing flip in transformers OlmoeModel
(2 layers, 4 experts, top-2). In graph mode only, the router (layers.0.mlp.gate)
hands token 3 its expert logits in reverse order, so that token is sent to
other experts; every other token's logits are unchanged.
Expected origin: layers.0.mlp.gate (the router), creates."""
import torch
from transformers import OlmoeConfig, OlmoeModel
from graphprobe import AclGraphDumper

torch.manual_seed(0)
model = OlmoeModel(OlmoeConfig(vocab_size=64, hidden_size=32, intermediate_size=32, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64,
                               num_experts=4, num_experts_per_tok=2, pad_token_id=0, bos_token_id=1,
                               eos_token_id=2, attn_implementation="eager")).eval()


def graph_only_routing_flip(module, args, output):
    # The injected fault: token 3's router logits reversed (its top-2 experts change), graph mode only.
    if torch.compiler.is_compiling():
        rows = torch.arange(output.shape[0]).unsqueeze(-1)
        return torch.where(rows == 3, output.flip(-1), output)
    return output


model.layers[0].mlp.gate.register_forward_hook(graph_only_routing_flip)
dumper = AclGraphDumper()
dumper.start(model)
compiled = torch.compile(model)
with torch.no_grad():
    for step in range(2):
        compiled(torch.randint(0, 64, (1, 8), generator=torch.Generator().manual_seed(step)))
        dumper.step()
dumper.stop()

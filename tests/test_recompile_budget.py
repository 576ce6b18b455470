"""Wired modules compiled as frames of their own stay compiled past dynamo's
recompile limit (dynamo_cache.RecompileBudget).

An MoE's experts called from code that runs eagerly between graphs are each
compiled as a frame of their own. Unwired, one compiled variant serves every
expert; wired, each expert's frame inlines its children's hooks, which record
under that expert's names, so each needs a variant of its own. Past
``torch._dynamo.config.recompile_limit`` (8) variants dynamo ran the rest of
the experts uncompiled: the program measured was not the program compiled,
and a fault of the compiled code vanished there.
"""

from __future__ import annotations

import torch
from torch import nn

from graphprobe import AclGraphDumper


class _Expert(nn.Module):
    """An MLP: its forward calls wired children."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.up = nn.Linear(d, 2 * d)
        self.down = nn.Linear(2 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x)))


def _loop(experts: nn.ModuleList, x: torch.Tensor) -> torch.Tensor:
    out = x
    for expert in experts:
        out = out + expert(x)
    return out


# Runs eagerly while the experts it calls are compiled one by one, as an MoE
# that routes with data (a graph break per expert) calls them.
_eager_loop = torch.compiler.disable(_loop, recursive=False)


class _Moe(nn.Module):
    def __init__(self, n: int = 12, d: int = 4) -> None:
        super().__init__()
        self.experts = nn.ModuleList(_Expert(d) for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _eager_loop(self.experts, x)


def _compiled_run(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, set[int]]:
    """Runs ``model`` compiled; returns its output and the ids of the
    tensors that compiled graphs were called with (parameters are graph
    inputs, so an expert that ran compiled has its weights among them)."""
    seen: set[int] = set()

    def backend(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):
        def run(*args: object) -> object:
            seen.update(id(a) for a in args)
            return gm(*args)
        return run

    with torch.no_grad():
        out = torch.compile(model, backend=backend)(x)
    return out, seen


def test_every_wired_expert_runs_compiled_past_the_recompile_limit(write_config, read_step, tmp_path):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = _Moe()
    assert len(model.experts) > torch._dynamo.config.recompile_limit
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(1))
    user_limits = (torch._dynamo.config.recompile_limit, torch._dynamo.config.accumulated_recompile_limit)
    dumper = AclGraphDumper(write_config(level="L0"))
    dumper.start(model)
    try:
        out, seen = _compiled_run(model, x)
        dumper.step()
    finally:
        dumper.stop()
        torch._dynamo.reset()
    uncompiled = [i for i, e in enumerate(model.experts) if id(e.up.weight) not in seen]
    assert not uncompiled, f"experts run uncompiled: {uncompiled}"
    # The user's limits are back once the model is unwired.
    assert (torch._dynamo.config.recompile_limit, torch._dynamo.config.accumulated_recompile_limit) == user_limits
    # The program is the model's: float64 reference of the same weights.
    with torch.no_grad():
        x64 = x.double()
        want = x64 + sum(e.down.weight.double() @ torch.relu(e.up.weight.double() @ x64.T
                                                            + e.up.bias.double()[:, None])
                         + e.down.bias.double()[:, None] for e in model.experts).T
    torch.testing.assert_close(out.double(), want, rtol=1e-5, atol=1e-5)
    # And every expert's calls were recorded once.
    data = read_step(str(tmp_path / "dump"), 0)["data"]
    for i in range(len(model.experts)):
        assert f"Module.experts.{i}.down.Linear.forward.0" in data
        assert f"Module.experts.{i}.down.Linear.forward.1" not in data


def test_a_limit_the_user_changes_while_wired_is_kept(write_config):
    model = _Moe(n=2)
    before = torch._dynamo.config.recompile_limit
    dumper = AclGraphDumper(write_config(level="L0"))
    dumper.start(model)
    try:
        assert torch._dynamo.config.recompile_limit == 2 * before  # two experts above wired Linears
        torch._dynamo.config.recompile_limit = 3
    finally:
        dumper.stop()
        kept = torch._dynamo.config.recompile_limit
        torch._dynamo.config.recompile_limit = before
    assert kept == 3


def test_a_model_without_repeated_classes_leaves_the_limits_alone(write_config):
    model = nn.Sequential(_Expert(4))
    before = (torch._dynamo.config.recompile_limit, torch._dynamo.config.accumulated_recompile_limit)
    dumper = AclGraphDumper(write_config(level="L0"))
    dumper.start(model)
    try:
        assert (torch._dynamo.config.recompile_limit, torch._dynamo.config.accumulated_recompile_limit) == before
    finally:
        dumper.stop()

"""The first update's rule (docs/formats.md, "Parameters after an update"):
at step 1 of a training run compared as step folders, step 0's gradients
say how far apart rounding can leave each parameter after the first
update; an update that itself differs is named.

Found on 2026-12-04: eager training against a compiled model whose
compiled optimizer step scaled every update by 1.5 (the loss 19 % apart at
step 2) gave "first divergence: none in 3 pairs" and --fail-on error
passed -- at step 1 every parameter was taken as the first update's doing.

Each dump is written here: AdamW's first step computed in float64 in the
test (the update is lr * g / (|g| + eps) + lr * wd * p), the statistics and
the Sketch from the independent numpy reference (tests/sketch_reference.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from compare_fixtures import entry, write_dump
from test_first_divergence_training import rec

from graphprobe.compare import compare

LR, WD, EPS = 1e-3, 1e-2, 1e-8
MODULES = ("fc0", "fc1", "fc2", "fc3")


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def adamw_first_step(p: torch.Tensor, g: torch.Tensor, lr: float = LR) -> torch.Tensor:
    """AdamW's first step: bias correction makes m / sqrt(v) = g / |g|."""
    return p - lr * (g / (g.abs() + EPS)) - lr * WD * p


class Run:
    """Four Linear modules (weight [16, 32], bias [16]): their parameters at
    steps 0 and 1 and the gradients of step 0, for one side of a pair."""

    def __init__(self, noise_seed: int | None, fault: float = 1.0, residue_bias: str = "fc3",
                 split_bias: str = "fc1", lr: float = LR) -> None:
        self.p0: dict[str, torch.Tensor] = {}
        self.g0: dict[str, torch.Tensor] = {}
        self.p1: dict[str, torch.Tensor] = {}
        for k, m in enumerate(MODULES):
            for name, shape in (("weight", (16, 32)), ("bias", (16,))):
                key = f"{m}.{name}"
                p = 0.1 * torch.randn(shape, dtype=torch.float64, generator=_gen(10 + 2 * k + len(name)))
                g = 1e-2 * torch.randn(shape, dtype=torch.float64, generator=_gen(50 + 2 * k + len(name)))
                if noise_seed is not None:  # float32 rounding of a gradient computed otherwise
                    g = g * (1 + 2e-7 * torch.randn(shape, dtype=torch.float64, generator=_gen(noise_seed + k)))
                if key == f"{residue_bias}.bias":
                    # A key projection's bias: zero in theory, rounding residue
                    # ~1e-7 of its neighbours, independent on the two sides.
                    g = 1e-9 * torch.randn(shape, dtype=torch.float64, generator=_gen(90 + (noise_seed or 0)))
                if key == f"{split_bias}.bias":
                    # A fused QKV bias: its key third is residue, the rest carries signal.
                    g = g.clone()
                    g[:5] = 1e-9 * torch.randn(5, dtype=torch.float64, generator=_gen(95 + (noise_seed or 0)))
                self.p0[key], self.g0[key] = p, g
                p1 = adamw_first_step(p, g, lr)
                self.p1[key] = p + fault * (p1 - p)

    def step(self, n: int) -> dict[str, Any]:
        params = self.p0 if n == 0 else self.p1
        x = torch.randn(4, 32, dtype=torch.float64, generator=_gen(7))
        data: dict[str, Any] = {}
        for m in MODULES:
            w, b = params[f"{m}.weight"], params[f"{m}.bias"]
            y = x @ w.T + b
            data[f"Module.{m}.Linear.forward.0"] = {**entry([rec(x)], [rec(y)]),
                                                    "parameters": {"weight": rec(w), "bias": rec(b)}}
            x = torch.cat([y, y], dim=1)
        for m in reversed(MODULES):
            gy = 1e-2 * torch.randn(4, 16, dtype=torch.float64, generator=_gen(30))
            data[f"Module.{m}.Linear.backward.0"] = {"input": [rec(gy)], "output": [rec(gy @ params[f"{m}.weight"])]}
            data[f"Module.{m}.Linear.parameters_grad.0"] = {"weight": [rec(self.g0[f"{m}.weight"])],
                                                           "bias": [rec(self.g0[f"{m}.bias"])]}
        return data


def compare_steps(tmp_path: Path, target: Run, bench: Run, steps: tuple[int, ...] = (0, 1)) -> list[Any]:
    for side, run in (("t", target), ("b", bench)):
        for n in steps:
            write_dump(tmp_path / side / f"step{n}" / "rank0" / "dump.json", run.step(n))
    outcomes = compare(tmp_path / "t", tmp_path / "b", tmp_path / "o", html=False, progress=False).outcomes
    for o in outcomes:
        assert o.error is None, o.error
    return sorted(outcomes, key=lambda o: o.pair.step)


def test_a_clean_first_update_is_silent_with_residue_gradients(tmp_path: Path) -> None:
    # Gradients 2e-7 apart: every element moves alike except those whose
    # gradient is residue (fc3's bias: all of it; fc1's fused bias: a third),
    # which move +-lr the other way. Those two parameters are beyond the
    # bound, fewer than half of those judged: silent.
    outcomes = compare_steps(tmp_path, Run(noise_seed=1), Run(noise_seed=None))
    assert [o.divergence for o in outcomes] == [None, None], [o.divergence.message for o in outcomes if o.divergence]
    beyond, judged = outcomes[1].update_rows
    assert judged == 7, outcomes[1].update_rows  # fc3's residue bias cannot be judged (e ~ 1)
    assert beyond == 1, outcomes[1].update_rows  # fc1's bias, a third of it residue
    assert outcomes[1].parameters_after_update is not None


def test_an_update_scaled_by_the_compiled_optimizer_is_named_at_step_1(tmp_path: Path) -> None:
    # Every update x1.01 on the target: 1 % of lr per element, far beyond
    # what gradients 2e-7 apart can flip (before this rule: silent, gate passed).
    outcomes = compare_steps(tmp_path, Run(noise_seed=1, fault=1.01), Run(noise_seed=None))
    assert outcomes[0].divergence is None
    d = outcomes[1].divergence
    assert d is not None and d.kinds == ("parameter",), outcomes[1].update_rows
    assert outcomes[1].first_divergence == "Module.fc0.Linear.forward.0"
    assert "the update itself differs" in d.message, d.message
    beyond, judged = outcomes[1].update_rows
    assert beyond >= 6 and judged == 7, outcomes[1].update_rows


def test_an_update_below_the_four_statistics_floor_is_named_by_its_sketch(tmp_path: Path) -> None:
    # lr 1e-4 and no residue gradient: x1.01 moves each parameter 1e-5 of
    # its Norm, below Max/Min/Mean/Norm's float32 floor (1e-4) in every row,
    # 5x the Sketch's. Step 1 must be judged again although no parameter
    # row differs beyond the four statistics' floor.
    clean = dict(residue_bias="", split_bias="", lr=1e-4)
    outcomes = compare_steps(tmp_path / "clean", Run(noise_seed=1, **clean), Run(noise_seed=None, **clean))
    assert [o.divergence for o in outcomes] == [None, None]
    assert outcomes[1].parameters_after_update is None  # nothing beyond the four statistics' floor
    assert outcomes[1].update_rows == (0, 8)
    outcomes = compare_steps(tmp_path / "fault", Run(noise_seed=1, fault=1.01, **clean),
                             Run(noise_seed=None, **clean))
    d = outcomes[1].divergence
    assert d is not None and "the update itself differs" in d.message, outcomes[1].update_rows
    assert "Sketch" in d.message, d.message


def test_without_step_0_step_1_keeps_the_parameters_as_the_updates_doing(tmp_path: Path) -> None:
    # The rule needs step 0's gradients: step 1 compared alone is judged as
    # before (the summary's parameter line is all that shows it).
    outcomes = compare_steps(tmp_path, Run(noise_seed=1, fault=1.01), Run(noise_seed=None), steps=(1,))
    assert outcomes[0].divergence is None
    assert outcomes[0].update_rows is None and outcomes[0].parameters_after_update is not None


def test_one_parameter_beyond_its_bound_is_not_named(tmp_path: Path) -> None:
    # Only fc2's weight updated x1.5 on the target: one parameter beyond, as
    # a gradient with a residue part makes it -- the rule names an update
    # that differs throughout, not one tensor's (docs/formats.md: its limit).
    target = Run(noise_seed=1)
    target.p1["fc2.weight"] = target.p0["fc2.weight"] + 1.5 * (target.p1["fc2.weight"] - target.p0["fc2.weight"])
    outcomes = compare_steps(tmp_path, target, Run(noise_seed=None))
    assert outcomes[1].divergence is None
    assert outcomes[1].update_rows == (2, 7)


# -- end to end: a compiled optimizer step --------------------------------------------

def _train(root: Path, compiled: bool, factor: float) -> Path:
    """Two AdamW steps of a small model at L0, eager or with the model and the
    optimizer step compiled (aot_eager); under compile the step scales every
    update by ``factor`` (a graph-only optimizer fault)."""
    import json

    import graphprobe

    torch._dynamo.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.LayerNorm(32), torch.nn.GELU(),
                                torch.nn.Linear(32, 8))
    x = torch.randn(4, 16, generator=_gen(1))
    target = torch.randint(0, 8, (4,), generator=_gen(2))
    config = root / "config.json"
    root.mkdir(parents=True)
    config.write_text(json.dumps({"dump_path": str(root / "dump"), "level": "L0"}))
    dumper = graphprobe.AclGraphDumper(str(config))
    dumper.start(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    params = list(model.parameters())
    scale = torch.tensor(factor)

    def step() -> None:
        old = [p.detach().clone() for p in params]
        opt.step()
        if torch.compiler.is_compiling():
            with torch.no_grad():
                for p, o in zip(params, old):
                    p.add_((p - o) * (scale - 1))

    run = torch.compile(model, backend="aot_eager") if compiled else model
    stepper = torch.compile(step, backend="aot_eager") if compiled else step
    try:
        for _ in range(2):
            torch.nn.functional.cross_entropy(run(x), target).backward()
            stepper()
            opt.zero_grad()
            dumper.step()
    finally:
        dumper.stop()
        graphprobe.flush()
        torch._dynamo.reset()
    return root / "dump"


def test_a_compiled_optimizer_step_that_differs_is_named_end_to_end(tmp_path: Path) -> None:
    # The dumper's parameter and gradient records of a real training run
    # (parameters_grad read when the optimizer step begins, also compiled),
    # compared as step folders: a x1.01 update is named at step 1, a clean
    # compiled step is not.
    bench = _train(tmp_path / "eager", compiled=False, factor=1.0)
    for factor, named in ((1.0, False), (1.01, True)):
        target = _train(tmp_path / f"compiled{factor}", compiled=True, factor=factor)
        run = compare(target, bench, tmp_path / f"o{factor}", html=False, progress=False)
        outcomes = sorted(run.outcomes, key=lambda o: o.pair.step)
        assert [o.pair.step for o in outcomes] == [0, 1]
        assert outcomes[0].divergence is None, outcomes[0].divergence.message
        d = outcomes[1].divergence
        if named:
            assert d is not None and d.kinds == ("parameter",), outcomes[1].update_rows
            assert "the update itself differs" in d.message, d.message
        else:
            assert d is None, d.message

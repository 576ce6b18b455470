"""The "Sketch" statistic (issue 35; docs/formats.md, "Sketch"): recorded
values against an independent numpy implementation of its definition, and
what compare's first divergence makes of it -- a redistribution that Max,
Min, Mean and Norm cannot see, and clean rounding that must stay silent.
Also the cancellation rule (a record far smaller than what produced it) and
integer outputs that change while their inputs agree.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from compare_fixtures import entry, write_dump
from sketch_reference import relative_l2, signs, sketch

import graphprobe
from graphprobe import _compare


class Echo(torch.nn.Module):
    """Returns its input: the recorded output is exactly the tensor given."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.echo = Echo()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.echo(x)


def _recorded_output(tmp_path, write_config, read_step, x: torch.Tensor, compiled: bool = False) -> dict[str, Any]:
    cfg = write_config(dump_path=str(tmp_path / "dump"), level="L0")
    net = Net()
    dumper = graphprobe.AclGraphDumper(cfg)
    dumper.start(net)
    runner = torch.compile(net, backend="aot_eager", fullgraph=True) if compiled else net
    with torch.no_grad():
        runner(x)
    dumper.step()
    dumper.stop()
    data = read_step(str(tmp_path / "dump"), 0)["data"]
    return data["Module.echo.Echo.forward.0"]["output"][0]


def _cases() -> list[tuple[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    big = torch.randn(300_001, generator=g)  # several 65536-element chunks, a ragged last group
    base = torch.randn(33, 47, generator=g)
    return [
        ("float32", torch.randn(5, 7, generator=g)),
        ("float32-threads", big),
        ("float64", torch.randn(129, generator=g, dtype=torch.float64)),
        ("bfloat16", torch.randn(3, 40, generator=g).to(torch.bfloat16)),
        ("float16", torch.randn(17, 3, generator=g).to(torch.float16)),
        ("transposed", base.t()),
        ("strided-slice", base[::2, 3:40:3]),
        ("single", torch.tensor([2.5])),
    ]


@pytest.mark.parametrize("name,x", _cases(), ids=[c[0] for c in _cases()])
def test_recorded_sketch_equals_the_definition(name, x, tmp_path, write_config, read_step):
    rec = _recorded_output(tmp_path, write_config, read_step, x)
    want = sketch(x)
    got = rec["Sketch"]
    # float32, bfloat16 and float16 accumulate in float32 per block of 16
    # additions a lane (docs/formats.md): at most ~16 * 2^-24 of the sum of
    # |x| off, and in practice far below the Sketch's float32 floor (1e-5
    # of the Norm) that compare judges it by.
    total = float(x.double().abs().sum())
    norm = float(torch.linalg.vector_norm(x.double()))
    for k in range(4):
        err = abs(got[k] - want[k])
        assert err <= 16 * 2.0**-24 * total, (name, k, got, want)
        assert err <= 1e-6 * norm, (name, k, got, want)


def test_sketch_under_compile_equals_eager(tmp_path, write_config, read_step):
    x = torch.randn(6, 11, generator=torch.Generator().manual_seed(3))
    eager = _recorded_output(tmp_path / "e", write_config, read_step, x)
    compiled = _recorded_output(tmp_path / "c", write_config, read_step, x, compiled=True)
    assert compiled["Sketch"] == eager["Sketch"]


def test_integer_and_bool_tensors_have_no_sketch(tmp_path, write_config, read_step):
    rec = _recorded_output(tmp_path / "i", write_config, read_step, torch.arange(10))
    assert "Sketch" not in rec and rec["Max"] == 9
    rec = _recorded_output(tmp_path / "b", write_config, read_step, torch.tensor([True, False]))
    assert "Sketch" not in rec


def test_signs_are_balanced_and_independent():
    # The estimator needs E[s_k(i)] = 0 and uncorrelated projections.
    s = signs(1 << 16)
    assert abs(s.mean()) < 0.01
    corr = (s @ s.T) / s.shape[1]
    off = corr - torch.eye(4).numpy()
    assert abs(off).max() < 0.02


# -- compare: hand-written dumps whose statistics are computed here in float64 --


def record(x: torch.Tensor, with_sketch: bool = True) -> dict[str, Any]:
    x64 = x.double()
    rec = {"type": "torch.Tensor", "dtype": str(x.dtype), "shape": list(x.shape), "Max": float(x64.max()),
           "Min": float(x64.min()), "Mean": float(x64.mean()), "Norm": float(torch.linalg.vector_norm(x64)),
           "requires_grad": False}
    if with_sketch:
        rec["Sketch"] = sketch(x)
    return rec


def _attention_pair(rel_l2: float, noise: float = 0.0, seed: int = 0):
    """Attention probabilities of random logits (bench) and a target moved
    by a pure redistribution of relative L2 size ``rel_l2``: a change
    orthogonal to the tensor and to the ones vector, zero at the largest and
    smallest element, so that Max, Min, Mean and Norm stay put (to second
    order). ``noise``: relative rounding-like noise on every element."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(8, 64, 64, generator=g, dtype=torch.float64)
    bench = torch.softmax(logits, -1).reshape(-1)
    d = torch.randn(bench.shape, generator=g, dtype=torch.float64)
    keep = torch.ones_like(bench, dtype=torch.bool)
    keep[bench.argmax()] = keep[bench.argmin()] = False
    d = d * keep
    for v in (bench * keep, keep.double()):
        d = d - (d @ v) / (v @ v) * v
    target = bench + d * (rel_l2 * torch.linalg.vector_norm(bench) / torch.linalg.vector_norm(d))
    if noise:
        target = target * (1 + noise * torch.randn(target.shape, generator=g, dtype=torch.float64))
    shape = logits.shape
    return logits, bench.reshape(shape).float(), target.reshape(shape).float()


def _chain(logits, probs, with_sketch=True):
    h = torch.tanh(logits).float()
    return {
        "Module.attn.Softmax.forward.0": entry([record(logits.float(), with_sketch)], [record(probs, with_sketch)]),
        "Module.out.Linear.forward.0": entry([record(probs, with_sketch)], [record(2 * probs, with_sketch)]),
        "Module.norm.LayerNorm.forward.0": entry([record(h, with_sketch)], [record(h, with_sketch)]),
    }


def run_pair(tmp_path, target, bench):
    t = write_dump(tmp_path / "target.json", target)
    b = write_dump(tmp_path / "bench.json", bench)
    return _compare.compare_files(str(t), str(b), _compare.CompareOptions())


def test_redistribution_invisible_to_the_four_statistics_is_named_by_the_sketch(tmp_path):
    # The size of issue 35's softmax-scale fault on a GPT-NeoX attention.
    logits, bench, target = _attention_pair(1.8e-4)
    truth = relative_l2(target, bench)
    # The four statistics barely move (far below the float32 floor 1e-4) ...
    x64, y64 = bench.double(), target.double()
    rms = float(torch.linalg.vector_norm(x64)) / math.sqrt(x64.numel())
    assert abs(float(y64.mean() - x64.mean())) / rms < 1e-6
    assert abs(float(torch.linalg.vector_norm(y64) / torch.linalg.vector_norm(x64)) - 1) < 1e-6
    assert float(y64.max()) == float(x64.max()) and float(y64.min()) == float(x64.min())
    # ... without the Sketch nothing is found ...
    plain = run_pair(tmp_path / "plain", _chain(logits, target, False), _chain(logits, bench, False))
    assert plain.first_divergence is None
    # ... with it, the softmax is named, on the Sketch, with an error near the truth.
    result = run_pair(tmp_path / "sk", _chain(logits, target), _chain(logits, bench))
    d = result.divergence
    assert result.first_divergence == "Module.attn.Softmax.forward.0", d
    assert "output" in d["kinds"]
    err = d["error"]
    assert err["worst_stat"] == "Sketch"
    assert 0.2 * truth <= err["error_sketch"] <= 3 * truth, (err["error_sketch"], truth)


def test_clean_rounding_stays_silent(tmp_path):
    # float32 rounding noise (1e-7 relative per element): no divergence.
    logits, bench, target = _attention_pair(0.0, noise=1.2e-7, seed=1)
    result = run_pair(tmp_path, _chain(logits, target), _chain(logits, bench))
    assert result.first_divergence is None


def test_sketch_on_one_side_only_is_not_judged(tmp_path):
    logits, bench, target = _attention_pair(1.8e-4)
    result = run_pair(tmp_path, _chain(logits, target, True), _chain(logits, bench, False))
    assert result.first_divergence is None


# -- cancellation: a gradient that is zero in theory -----------------------------


def _backward_pair(residue_scale: float, weight_fault: float = 1.0) -> tuple[dict, dict]:
    """A k-projection's training records: forward, backward and parameter
    gradients. The bias gradient sums the output gradient over tokens whose
    contributions cancel (it is ~1e-7 of them); target and bench leave
    different residues. weight_fault scales the target's weight gradient."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(64, 16, generator=g, dtype=torch.float64)
    w = torch.randn(16, 16, generator=g, dtype=torch.float64) / 4
    y = x @ w.T
    gy = torch.randn(64, 16, generator=g, dtype=torch.float64)
    gy = gy - gy.mean(0, keepdim=True)  # softmax's shift invariance: the bias gradient is 0
    gx = gy @ w
    gw = gy.T @ x
    res_b = 1e-7 * torch.randn(16, generator=g, dtype=torch.float64)
    res_t = res_b * residue_scale

    def side(res, wf):
        return {
            "Module.k.Linear.forward.0": entry([record(x.float())], [record(y.float())]),
            "Module.k.Linear.backward.0": {"input": [record(gy.float())], "output": [record(gx.float())]},
            "Module.k.Linear.parameters_grad.0": {
                "weight": [record((gw * wf).float())],
                "bias": [record(res.float())],
            },
        }

    return side(res_t, weight_fault), side(res_b, 1.0)


def test_residue_gradient_differing_by_half_is_rounding(tmp_path):
    target, bench = _backward_pair(residue_scale=1.5)
    result = run_pair(tmp_path, target, bench)
    assert result.first_divergence is None, result.divergence
    bias = next(r for r in result.rows if r.name == "Module.k.Linear.parameters_grad.0.bias")
    # Judged against the scale of what produced it, not its own RMS.
    assert bias.error["produced_from_rms"] is not None


def test_real_gradient_fault_is_still_named(tmp_path):
    target, bench = _backward_pair(residue_scale=1.0, weight_fault=1.001)
    result = run_pair(tmp_path, target, bench)
    assert result.first_divergence == "Module.k.Linear.parameters_grad.0", result.divergence


# -- integer outputs ------------------------------------------------------------


def _router_pair(flip: bool, input_noise: float):
    g = torch.Generator().manual_seed(9)
    logits = torch.randn(32, 4, generator=g)
    idx = logits.topk(2, dim=-1).indices
    idx_t = idx.clone()
    if flip:
        idx_t[3, 0] = (idx_t[3, 0] + 1) % 4
    logits_t = logits * (1 + input_noise)
    weights = torch.softmax(logits, -1)

    def side(lg, ix):
        return {
            "Module.gate.Router.forward.0": entry([record(lg)], [record(weights), record(ix, False)]),
            "Module.experts.Experts.forward.0": entry([record(weights), record(ix, False)], [record(weights * 3)]),
        }

    return side(logits_t, idx_t), side(logits, idx)


def test_integer_flip_with_inputs_within_floor_is_the_divergence(tmp_path):
    target, bench = _router_pair(flip=True, input_noise=1e-7)
    result = run_pair(tmp_path, target, bench)
    d = result.divergence
    assert result.first_divergence == "Module.gate.Router.forward.0", d
    assert "integer-output" in d["kinds"]
    assert "integer output changed" in d["message"] and "agree" in d["message"]


def test_integer_flip_behind_bfloat16_rounding_is_not_the_divergence(tmp_path):
    # A near tie flips with rounding: router inputs 1e-4 apart (bfloat16
    # data: within its floor, beyond float32 rounding) explain the flip, as
    # in a clean bfloat16 OLMoE under inductor. The router is not named.
    target, bench = _router_pair(flip=True, input_noise=1e-4)
    for side in (target, bench):
        side["Module.gate.Router.forward.0"]["input_args"][0]["dtype"] = "torch.bfloat16"
    result = run_pair(tmp_path, target, bench)
    assert result.first_divergence != "Module.gate.Router.forward.0", result.divergence
    d = result.divergence
    assert d is None or "integer-output" not in d["kinds"], d


def test_shapes_that_follow_a_rounding_flip_are_explained(tmp_path):
    # After the flip above, the tokens each expert receives follow the
    # changed indices: torch.where's output and the expert's input differ
    # in shape on the two sides. Recorded reasons (the integer records that
    # changed), so not a divergence -- before, "shape differs" at where.
    target, bench = _router_pair(flip=True, input_noise=1e-4)
    for side in (target, bench):
        side["Module.gate.Router.forward.0"]["input_args"][0]["dtype"] = "torch.bfloat16"
    g = torch.Generator().manual_seed(3)
    h = torch.randn(5, 8, generator=g)
    for side, ix, rows in ((target, torch.tensor([1, 4, 9]), 3), (bench, torch.tensor([1, 4, 9, 12]), 4)):
        mask = torch.zeros(16, dtype=torch.int64)
        mask[ix] = 1
        side["Torch.where.0.forward"] = entry([record(mask, False)], [record(ix, False)])
        side["Module.expert.Linear.forward.0"] = entry([record(h[:rows])], [record(h[:rows] * 2)])
    result = run_pair(tmp_path, target, bench)
    assert result.first_divergence is None, result.divergence
    # msprobe's Result calls each changed shape an error (kept in the CSV);
    # --fail-on error does not fail on them: the first-divergence rule
    # explains them (a clean bfloat16 OLMoE's second training step).
    errors = dict(result.counts)["error"]
    assert errors >= 2 and result.errors_within_noise == errors, (errors, result.errors_within_noise)


def test_shapes_that_follow_a_flip_of_its_own_still_fail_the_gate(tmp_path):
    # The flip is the divergence (inputs equal): nothing is excused.
    target, bench = _router_pair(flip=True, input_noise=0.0)
    g = torch.Generator().manual_seed(3)
    h = torch.randn(5, 8, generator=g)
    for side, rows in ((target, 3), (bench, 4)):
        side["Module.expert.Linear.forward.0"] = entry([record(h[:rows])], [record(h[:rows] * 2)])
    result = run_pair(tmp_path, target, bench)
    assert result.first_divergence == "Module.gate.Router.forward.0", result.divergence
    assert result.errors_within_noise == 0


def test_changed_integer_record_is_never_the_last_agreeing(tmp_path):
    # Inputs beyond their floor explain the flip; the experts then differ
    # beyond what was recorded: the message must not call the router agreeing.
    target, bench = _router_pair(flip=True, input_noise=3e-3)
    data_t, data_b = dict(target), dict(bench)
    result = run_pair(tmp_path, data_t, data_b)
    d = result.divergence
    assert d is not None, "the experts' input differs beyond the inputs' noise: a divergence"
    assert d["last_agreeing"] != "Module.gate.Router.forward.0"
    assert "Router.forward.0 (the last agreeing record)" not in d["message"]


def test_residue_passed_on_to_the_next_backward_call_is_rounding(tmp_path):
    """A normalisation's input gradient that is zero in theory (its loss
    does not depend on the input's scale) becomes the gradient arriving at
    the module before it: recognised there by its statistics, it keeps the
    scale of what produced it."""
    g = torch.Generator().manual_seed(11)
    h = 3 * torch.randn(64, 16, generator=g, dtype=torch.float64)  # the residual stream, RMS 3
    y = torch.nn.functional.layer_norm(h, (16,))
    gy = torch.ones_like(y)  # loss = y.sum(): the LayerNorm's input gradient is 0 in theory
    res_b = 1e-7 * torch.randn(64, 16, generator=g, dtype=torch.float64)
    w = torch.randn(16, 16, generator=g, dtype=torch.float64) / 4
    x = torch.randn(64, 16, generator=g, dtype=torch.float64)

    def side(res):
        return {
            "Module.prev.Linear.forward.0": entry([record(x.float())], [record(h.float())]),
            "Module.norm.LayerNorm.forward.0": entry([record(h.float())], [record(y.float())]),
            "Module.norm.LayerNorm.backward.0": {"input": [record(gy.float())], "output": [record(res.float())]},
            "Module.prev.Linear.backward.0": {"input": [record(res.float())], "output": [record((res @ w).float())]},
        }

    result = run_pair(tmp_path, side(res_b * 1.6), side(res_b))
    assert result.first_divergence is None, result.divergence
    rows = {r.name: r for r in result.rows}
    for name in ("Module.norm.LayerNorm.backward.0.output.0", "Module.prev.Linear.backward.0.input.0"):
        assert rows[name].error["produced_from_rms"] is not None, name


def test_sketch_can_be_switched_off(tmp_path, read_step):
    import json

    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"dump_path": str(tmp_path / "dump"), "level": "L0", "statistics": {"sketch": False}}))
    net = Net()
    dumper = graphprobe.AclGraphDumper(str(cfg))
    dumper.start(net)
    with torch.no_grad():
        net(torch.randn(4, 5))
    dumper.step()
    dumper.stop()
    rec = read_step(str(tmp_path / "dump"), 0)["data"]["Module.echo.Echo.forward.0"]["output"][0]
    assert "Sketch" not in rec and "Norm" in rec


def test_sketch_key_must_be_a_bool(tmp_path):
    import json

    from graphprobe.config import ConfigTypeError, load_config

    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"dump_path": str(tmp_path / "dump"), "statistics": {"sketch": "yes"}}))
    with pytest.raises(ConfigTypeError, match=r"statistics\.sketch.*'yes'.*true or false"):
        load_config(str(cfg))


class TransposeNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.echo = Echo()
        self.fc = torch.nn.Linear(4, 3, dtype=torch.float64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The probe of echo's output holds a non-contiguous tensor: the
        # Sketch and the checksum take a contiguous copy inside the kernel.
        return self.fc(self.echo(x.t())).sum()


@pytest.mark.parametrize("summary_mode", ["statistics", "md5"])
def test_copies_inside_the_kernel_survive_functorch(tmp_path, summary_mode):
    import json

    x = torch.randn(4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    ref = TransposeNet()
    wired = TransposeNet()
    wired.load_state_dict(ref.state_dict())
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"dump_path": str(tmp_path / "dump"), "level": "L0",
                               "statistics": {"summary_mode": summary_mode}}))
    dumper = graphprobe.AclGraphDumper(str(cfg))
    dumper.start(wired)
    try:
        got = torch.func.grad(lambda t: wired(t))(x)
        got_vmap = torch.func.vmap(torch.func.grad(lambda t: wired(t)))(torch.stack([x, 2 * x]))
    finally:
        dumper.stop()
    want = torch.func.grad(lambda t: ref(t))(x)
    assert torch.equal(got, want)
    assert torch.equal(got_vmap[0], want)


# -- a module's output is explained by its children's -----------------------------


def _parent_pair(child_drift: float, parent_fault: float) -> tuple[dict, dict]:
    """emb (a child with a weight) inside block (no parameters of its own,
    integer input). The drift is what an AdamW step leaves: four elements
    whose gradient was zero to rounding moved by +-lr on one side -- the
    Sketch sees it, Max/Min/Mean/Norm do not."""
    g = torch.Generator().manual_seed(21)
    w = torch.randn(512, 64, generator=g, dtype=torch.float64) * 0.02
    ids = torch.arange(512)
    w_t = w.clone()
    smallest = w.abs().view(-1).argsort()[:4]
    w_t.view(-1)[smallest] += torch.tensor([1.0, -1.0, 1.0, -1.0], dtype=torch.float64) * child_drift

    def side(weight, fault):
        out = weight[ids]
        return {
            "Module.block.emb.Embedding.forward.0": module_entry([record(ids, False)], [record(out.float())],
                                                                 record(weight.float())),
            "Module.block.Block.forward.0": entry([record(ids, False)], [record((out * fault).float())]),
        }

    return side(w_t, parent_fault), side(w, 1.0)


def module_entry(inputs, outputs, weight):
    e = entry(inputs, outputs)
    e["parameters"] = {"weight": weight}
    return e


def test_parent_output_moved_by_a_drifted_child_is_explained(tmp_path):
    target, bench = _parent_pair(child_drift=1e-3, parent_fault=1.0)
    result = run_pair(tmp_path, target, bench)
    assert result.first_divergence is None, result.divergence
    weight = next(r for r in result.rows if r.name.endswith("parameters.weight"))
    assert weight.error["worst_stat"] == "Sketch" and weight.z > 1  # the drift is seen, and not a cause


def test_parent_fault_is_named_at_the_parent(tmp_path):
    target, bench = _parent_pair(child_drift=0.0, parent_fault=1.001)
    result = run_pair(tmp_path, target, bench)
    assert result.first_divergence == "Module.block.Block.forward.0", result.divergence


def _step_after_adam(bias_grad_residue: bool) -> tuple[dict, dict]:
    """A key projection in the step after an AdamW update: its bias moved by
    +-lr an element on each side following the sign of its gradient. When
    that gradient is zero in theory (a residue, recorded in this step's
    parameters_grad too) the two sides' signs are unrelated."""
    g = torch.Generator().manual_seed(31)
    x = torch.randn(64, 16, generator=g, dtype=torch.float64)
    w = torch.randn(16, 16, generator=g, dtype=torch.float64) / 4
    lr = 1e-3
    b_bench = lr * torch.sign(torch.randn(16, generator=g, dtype=torch.float64))
    b_target = lr * torch.sign(torch.randn(16, generator=g, dtype=torch.float64))
    gy = torch.randn(64, 16, generator=g, dtype=torch.float64)
    if bias_grad_residue:
        gy = gy - gy.mean(0, keepdim=True)
    res = 1e-7 * torch.randn(16, generator=g, dtype=torch.float64)

    def side(b, noise):
        y = x @ w.T + b
        gb = gy.sum(0) + (res * noise if bias_grad_residue else 0)
        fwd = entry([record(x.float())], [record(y.float())])
        fwd["parameters"] = {"weight": record(w.float()), "bias": record(b.float())}
        return {
            "Module.key.Linear.forward.0": fwd,
            "Module.key.Linear.backward.0": {"input": [record(gy.float())], "output": [record((gy @ w).float())]},
            "Module.key.Linear.parameters_grad.0": {"weight": [record((gy.T @ x).float())], "bias": [record(gb.float())]},
        }

    return side(b_target, 1.5), side(b_bench, 1.0)


def test_parameter_with_a_residue_gradient_drifts_without_a_divergence(tmp_path):
    target, bench = _step_after_adam(bias_grad_residue=True)
    result = run_pair(tmp_path, target, bench)
    assert result.first_divergence is None, result.divergence


def test_parameter_with_a_real_gradient_that_differs_is_named(tmp_path):
    target, bench = _step_after_adam(bias_grad_residue=False)
    result = run_pair(tmp_path, target, bench)
    assert result.first_divergence == "Module.key.Linear.forward.0", result.divergence
    assert result.divergence["kinds"] == ["parameter"]

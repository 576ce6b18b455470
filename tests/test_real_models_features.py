"""This session's features on third-party models (transformers, tiny
configs, random weights): backward records in training, checksums, replay,
statistics.slice. References are independent of graphprobe's dumps: float64
statistics of ``p.grad`` and of the sliced tensors, the same model trained
without a dumper, the injection site of a graph-only fault
(tests/real_model_features.py).

A reduced set (aot_eager mostly, one inductor training run: GPT-2 at L0); every check on
five architectures with ``GRAPHPROBE_SLOW_TESTS=1``, and
``scripts/real_model_features.py`` writes the table
(benchmarks/results/real_model_features.md).
"""

from __future__ import annotations

import os

import pytest
import torch
from torch import nn

pytest.importorskip("transformers")

import real_model_features as f  # noqa: E402

SLOW = os.environ.get("GRAPHPROBE_SLOW_TESTS") == "1"
ALL = ["gpt2", "bert", "t5", "vit", "qwen2"]

# (model, level, compiled mode)
TRAINING = [(m, lv, md) for m in ALL for lv in ("L0", "mix") for md in ("aot_eager", "inductor")] if SLOW else [
    ("bert", "mix", "aot_eager"), ("gpt2", "L0", "inductor")]
CHECKSUMS = [(m, lv) for m in ALL for lv in ("L0", "mix")] if SLOW else [("vit", "L0"), ("bert", "mix")]
REPLAY = ALL if SLOW else ["gpt2", "vit"]
# Models whose gradients round differently with backward records on (open; benchmarks/results/real_model_features.md).
REORDERS = {"bert", "t5", "qwen2"}
SLICES = [(m, md) for m in ALL for md in ("eager", "aot_eager")] if SLOW else [("vit", "aot_eager"), ("t5", "eager")]


@pytest.mark.parametrize("name,level,mode", TRAINING)
def test_training_records_gradients_and_numerics(name, level, mode, tmp_path):
    """Two AdamW steps: the compiled record list is eager's; every
    parameters_grad record equals float64 statistics of the p.grad copied in
    the run; the dumper changes no number (eager: losses, gradients and
    trained weights bit for bit; compiled: within float32 rounding) and adds
    no warning."""
    plain = {m: f.train(name, m, None) for m in ("eager", mode)}
    eager = f.train(name, "eager", str(tmp_path / "eager"), level)
    compiled = f.train(name, mode, str(tmp_path / mode), level)
    known = f.KNOWN_INPLACE.get((name, level), set())
    lists = [f.masked(f.record_lists(run.out_dir, 2), known) for run in (eager, compiled)]
    assert f.first_list_difference(*lists) is None
    for run in (eager, compiled):
        checked, worst, problems = f.grad_stat_errors(run)
        assert not problems and checked > 10, problems
        assert worst <= f.RTOL
    # BERT: an input-gradient probe sums a module's own contributions to its
    # input's gradient before autograd adds the others (see the xfail below).
    assert f.bit_identical(eager, plain["eager"]) or (
        name in REORDERS and f.max_rel_diff(eager, plain["eager"]) <= 1e-6)
    assert f.max_rel_diff(compiled, plain[mode]) <= 1e-5
    assert f.new_warnings(eager, plain["eager"]) == []
    assert f.new_warnings(compiled, plain[mode]) == []


def test_eager_numerics_bit_identical_with_forward_records_only(tmp_path):
    """statistics.data_mode ["forward"] (no backward probes): BERT's losses,
    gradients and trained weights with the dumper equal those without, bit for bit."""
    plain = f.train("bert", "eager", None)
    run = f.train("bert", "eager", str(tmp_path), "L0", extra={"statistics": {"data_mode": ["forward"]}})
    assert f.bit_identical(run, plain)


@pytest.mark.xfail(strict=True, reason="inherent (open): BertSelfAttention's input feeds q, k, v inside it and the "
                   "residual outside; its input-gradient probe sums q+k+v first (the value it records), then autograd "
                   "adds the residual: another association than ((r+v)+k)+q without it (torch's "
                   "register_full_backward_hook and msprobe's eager dumper do the same)")
def test_eager_numerics_bit_identical_with_backward_records(tmp_path):
    """Backward records on: BERT's gradients should equal those without a
    dumper, bit for bit. They differ in the last bits (step-0 max 1.9e-8 of
    the largest gradient element): recording the gradient of a module's
    input means summing the module's own contributions to it first."""
    plain = f.train("bert", "eager", None, steps=1)
    run = f.train("bert", "eager", str(tmp_path), "L0", steps=1)
    assert f.bit_identical(run, plain)


class _Embeddings(nn.Module):
    """BERT's / GPT-2's embedding pattern: Embedding modules called with
    integer ids (no input of theirs, or of this module, needs a gradient)."""

    def __init__(self) -> None:
        super().__init__()
        self.wte, self.wpe, self.norm = nn.Embedding(16, 8), nn.Embedding(16, 8), nn.LayerNorm(8)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        return self.norm(self.wte(ids) + self.wpe(pos))


class _Embed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embeddings, self.head = _Embeddings(), nn.Linear(8, 8)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.embeddings(ids))


def _backward_names(mode: str, root: str, level: str) -> list[str]:
    import graphprobe

    torch.manual_seed(0)
    torch._dynamo.reset()
    model = _Embed()
    dumper = graphprobe.AclGraphDumper(f._write_config(root, level=level))
    dumper.start(model)
    try:
        run = model if mode == "eager" else torch.compile(model, backend=mode)
        run(torch.randint(0, 16, (2, 4), generator=torch.Generator().manual_seed(1))).sum().backward()
        dumper.step()
    finally:
        dumper.stop()
        graphprobe.flush()
        torch._dynamo.reset()
    return [k for k in f.load(root, 0) if ".backward" in k]


@pytest.mark.parametrize("level", ["L0", "mix"])
def test_backward_order_of_a_module_without_input_gradients(level, tmp_path):
    """The backward record list of the embedding pattern (BERT, GPT-2): eager
    = aot_eager. A module whose inputs need no gradient was listed before the
    records inside it in eager mode and after them in compiled code, until
    ff98a91."""
    eager = _backward_names("eager", str(tmp_path / "e"), level)
    assert eager == _backward_names("aot_eager", str(tmp_path / "a"), level)


@pytest.mark.parametrize("name,level", CHECKSUMS)
def test_checksums_bit_identical_eager_aot_eager_and_second_process(name, level, tmp_path):
    """md5 mode: every tensor of the aot_eager dump and of a second eager
    process bit-identical to eager's (0 bit-different, nothing unpaired)."""
    md5 = {"statistics": {"summary_mode": "md5"}}
    eager = f.forward_dump(name, "eager", str(tmp_path / "e"), level, **md5)
    others = [f.forward_dump(name, "aot_eager", str(tmp_path / "a"), level, **md5)]
    if SLOW or level == "L0":
        others.append(f.forward_dump_in_child(name, str(tmp_path / "c"), level, **md5))
    for other in others:
        counts = f.checksum_counts(other, eager)
        assert counts["first"] is None and set(counts) == {"bit-identical", "first"}, counts
        assert counts["bit-identical"] > 20


@pytest.mark.parametrize("name", REPLAY)
def test_replay_names_the_module_with_a_graph_only_fault(name, tmp_path):
    """x1.001 on one module's output only when compiling: that module (and
    its ancestors, whose replay re-runs it eagerly) creates, every other
    judged module inherits; the model's state_dict is bit-identical after."""
    result = f.replay(name, "aot_eager", str(tmp_path))
    assert result.unexpected == []
    assert result.verdicts[f.rm.SPECS[name].target] == "creates"
    assert result.counts.get("inherits", 0) > 10
    assert result.state_dict_identical


@pytest.mark.parametrize("name,mode", SLICES)
def test_slice_statistics_equal_float64_of_the_batch_slice(name, mode, tmp_path):
    """statistics.slice [{"end": 1}]: module outputs and a weight recorded
    with the slice's shape and float64 statistics of t[:1]."""
    checked, worst, problems = f.slice_spot_check(name, mode, str(tmp_path))
    assert problems == [] and checked == 3
    assert worst <= f.RTOL

"""The float64 referee (issue 25, item 3; docs/formats.md, "Float64 referee").

A small transformer run eagerly: the bench in float32, the target in float32
(or bfloat16) with a fault injected at a known module by a forward wrapper,
and the reference made by ``graphprobe.reference_dump`` (float64). The
expected entry is the injection site; the expected distances come from the
dtypes (float64 is the true value to ~1e-16; float32 rounding ~1e-7,
bfloat16 ~1e-3) -- never from the tool's earlier output.
"""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from models import make_transformer

import graphprobe
from graphprobe.cli import main
from graphprobe.compare import compare
from graphprobe.compare.referee import multiplier

FAULTY = "Module.layers.1.mlp.FeedForward.forward.0"  # the entry of the module the fault is injected into
TOKENS = torch.randint(0, 32, (2, 8), generator=torch.Generator().manual_seed(1))


def _model() -> torch.nn.Module:
    return make_transformer(0, vocab=32, dim=64, heads=4, blocks=3)


def _dump(model: torch.nn.Module, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    cfg = path.with_suffix(".config.json")
    cfg.write_text(json.dumps({"dump_path": str(path), "level": "L0"}))
    dumper = graphprobe.AclGraphDumper(str(cfg))
    dumper.start(model)
    with torch.no_grad():
        model(TOKENS)
    dumper.step()
    dumper.stop()
    return path


def _fault(model: torch.nn.Module, scale: float) -> torch.nn.Module:
    """``model`` with layers.1.mlp's output scaled by ``scale`` (as a
    miscompiled kernel would: a forward wrapper, no module of its own)."""
    module = model.layers[1].mlp
    forward = module.forward

    def faulty(*args: Any, **kwargs: Any) -> Any:
        return forward(*args, **kwargs) * scale

    module.forward = faulty
    return model


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("referee")
    base = _model()
    out = {"ref": graphprobe.reference_dump(base, TOKENS, root / "ref", level="L0")}
    out["fp32"] = _dump(base, root / "fp32")
    out["fp32_fault"] = _dump(_fault(copy.deepcopy(base), 1.001), root / "fp32_fault")
    out["fp32_fault_too"] = _dump(_fault(copy.deepcopy(base), 1.001), root / "fp32_fault_too")
    out["bf16"] = _dump(copy.deepcopy(base).to(torch.bfloat16), root / "bf16")
    out["bf16_fault"] = _dump(_fault(copy.deepcopy(base).to(torch.bfloat16), 1.01), root / "bf16_fault")
    return out


def _outcome(dumps: dict[str, Path], target: str, bench: str, out: Path, reference: bool = True):
    run = compare(dumps[target], dumps[bench], out, progress=False, html=False,
                  reference=dumps["ref"] if reference else None)
    (o,) = run.outcomes
    assert o.error is None, o.error
    return o


def test_reference_dump_is_float64_and_leaves_the_model_alone(dumps: dict[str, Path]) -> None:
    data = json.loads(next(dumps["ref"].rglob("dump.json")).read_text())["data"]
    dtypes = {rec["dtype"] for e in data.values() for side in ("input_args", "output") for rec in e.get(side, [])
              if isinstance(rec, dict) and rec.get("type") == "torch.Tensor"}
    assert "torch.float64" in dtypes and "torch.float32" not in dtypes, dtypes
    model = _model()
    graphprobe.reference_dump(model, TOKENS, dumps["ref"].parent / "ref_again")
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_fault_in_the_target_is_blamed(dumps: dict[str, Path], tmp_path: Path) -> None:
    o = _outcome(dumps, "fp32_fault", "fp32", tmp_path)
    assert o.first_divergence == FAULTY, o.divergence
    # The same position in execution order as the engine's (without the referee) gives for this entry.
    plain = _outcome(dumps, "fp32_fault", "fp32", tmp_path / "plain", reference=False)
    assert plain.first_divergence == FAULTY and plain.first_divergence_index is not None
    assert o.first_divergence_index == plain.first_divergence_index
    assert "the target is further from float64 than the bench" in o.divergence.message
    assert o.referee.bench_further_entry is None
    # Both sides' distances per row: at the faulty output the target is ~1e-3
    # (the x1.001) from float64, the bench at float32 rounding (< 1e-5).
    row = next(r for r in o.referee.rows if r.name == FAULTY + ".output.0")
    assert 5e-4 < row.target[0] < 2e-3 and row.bench[0] < 1e-5, row


def test_fault_in_the_bench_blames_nothing_on_the_target(dumps: dict[str, Path], tmp_path: Path) -> None:
    # Without the referee, the rule cannot tell which side is wrong: it names the fault site.
    plain = _outcome(dumps, "fp32", "fp32_fault", tmp_path / "plain", reference=False)
    assert plain.first_divergence == FAULTY
    o = _outcome(dumps, "fp32", "fp32_fault", tmp_path / "ref")
    assert o.first_divergence is None and o.divergence is None
    assert o.referee.bench_further_entry == FAULTY
    assert "the bench is further from float64 than the target here: the target is closer to the true value" in \
        o.referee.bench_further_message


def test_clean_pair_with_reference_names_nothing(dumps: dict[str, Path], tmp_path: Path) -> None:
    o = _outcome(dumps, "fp32", "fp32", tmp_path)
    assert o.first_divergence is None and o.referee.bench_further_entry is None


def test_a_difference_from_float64_both_sides_share_is_not_the_targets(dumps: dict[str, Path],
                                                                          tmp_path: Path) -> None:
    # Both runs carry the x1.001: each is 1e-3 from float64 at the fault site,
    # 10x the float32 floor, but the target is no further than the bench.
    o = _outcome(dumps, "fp32_fault", "fp32_fault_too", tmp_path)
    row = next(r for r in o.referee.rows if r.name == FAULTY + ".output.0")
    assert row.target[0] > 5e-4 and row.bench[0] > 5e-4, row
    assert o.first_divergence is None and o.referee.bench_further_entry is None, o.divergence


def test_bf16_target_is_further_everywhere_but_only_a_fault_is_blamed(dumps: dict[str, Path], tmp_path: Path) -> None:
    clean = _outcome(dumps, "bf16", "fp32", tmp_path / "clean")
    # Without the referee the dtypes differ (a hard difference): the rule names the first entry.
    assert _outcome(dumps, "bf16", "fp32", tmp_path / "plain", reference=False).first_divergence is not None
    # With it: the bfloat16 side is further from float64 on (nearly) every
    # floating output, by bfloat16 rounding, but within the bfloat16 floor:
    # nothing is blamed.
    measured = [r for r in clean.referee.rows if r.target and r.bench and ".output." in r.name]
    further = [r for r in measured if max(r.target) > max(r.bench)]
    assert measured and len(further) >= 0.9 * len(measured)
    assert clean.first_divergence is None, clean.divergence
    # A x1.01 fault on one bfloat16 module is blamed there, and nowhere before it.
    bad = _outcome(dumps, "bf16_fault", "fp32", tmp_path / "fault")
    assert bad.first_divergence == FAULTY, bad.divergence


def test_multiplier_is_torch_same() -> None:
    assert multiplier("torch.float32", 4096) == 2.0
    assert multiplier("torch.bfloat16", 4096) == 3.0
    assert multiplier("torch.float32", 999) == 3.0


def _csv(path: Path) -> list[dict[str, str]]:
    (f,) = path.rglob("compare_result_*.csv")
    with open(f, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_cli_reference_columns_and_exit_codes(dumps: dict[str, Path], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    d = {k: str(v) for k, v in dumps.items()}
    assert main(["compare", d["fp32_fault"], d["fp32"], "-o", str(tmp_path / "a"), "-q", "--no-report",
                 "--reference", d["ref"], "--fail-on", "error"]) == 1
    rows = _csv(tmp_path / "a")
    assert "Target Err vs Ref" in rows[0] and "Bench Err vs Ref" in rows[0]
    marked = {r["NPU Name"] for r in rows if r["First Divergence"] == "yes"}
    assert marked and all(n.startswith(FAULTY + ".") for n in marked)
    out = next(r for r in rows if r["NPU Name"] == FAULTY + ".output.0")
    assert float(out["Target Err vs Ref"]) > 100 * float(out["Bench Err vs Ref"])
    capsys.readouterr()
    assert main(["compare", d["fp32"], d["fp32_fault"], "-o", str(tmp_path / "b"), "-q", "--no-report",
                 "--reference", d["ref"], "--fail-on", "error"]) == 0
    assert "the bench is further from float64 than the target" in capsys.readouterr().out
    # Without --reference the CSV keeps the usual columns.
    assert main(["compare", d["fp32"], d["fp32"], "-o", str(tmp_path / "c"), "-q", "--no-report"]) == 0
    assert "Target Err vs Ref" not in _csv(tmp_path / "c")[0]


def test_reference_without_a_matching_dump_is_refused(dumps: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(Exception, match="REF|reference"):
        compare(dumps["fp32"], dumps["fp32"], tmp_path, progress=False, html=False, reference=tmp_path / "missing")

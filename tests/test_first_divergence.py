"""graphprobe's first divergence (issue 25; docs/formats.md, "First divergence").

Hand-written dump.json pairs whose statistics are computed here in float64
from known vectors, and small models run eagerly and under torch.compile
with a fault injected at a known place. Expected entries come from the
injection site; expected errors from the float64 computations -- never from
the tool's earlier output.
"""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from compare_fixtures import entry, write_dump

from graphprobe import _compare
from graphprobe.cli import main
from graphprobe.compare import compare, noise_floor_table

ROOT = Path(__file__).resolve().parent.parent

# The documented table (docs/formats.md, "Noise floor"): relative errors,
# (Mean/Norm, Max/Min).
FLOORS = {
    "float64": (1e-10, 1e-10),
    "float32": (1e-4, 1e-4),
    "float16": (1e-3, 2e-3),
    "bfloat16": (2e-3, 1.6e-2),
    "float8_e4m3": (3e-2, 0.25),
    "float8_e5m2": (6e-2, 0.5),
    "exact": (0.0, 0.0),
}


# -- statistics computed in float64 ---------------------------------------------

def stats(values: list[float], dtype: str = "torch.float32") -> dict[str, Any]:
    """A tensor record of a 1-D tensor holding ``values``, its statistics in float64."""
    return {"type": "torch.Tensor", "dtype": dtype, "shape": [len(values)], "Max": max(values), "Min": min(values),
            "Mean": math.fsum(values) / len(values), "Norm": math.sqrt(math.fsum(v * v for v in values)),
            "requires_grad": False}


BASE = [0.5 * math.sin(1.7 * i + 0.3) for i in range(64)]  # mean ~0: a relative Mean error would be meaningless
W = [0.2 * math.cos(0.9 * i) for i in range(64)]


def scaled(values: list[float], k: float) -> list[float]:
    return [v * k for v in values]


def shifted(values: list[float], d: float) -> list[float]:
    return [v + d for v in values]


def module_entry(inputs: list[Any], outputs: list[Any], weight: dict[str, Any] | None = None) -> dict[str, Any]:
    e = entry(inputs, outputs)
    if weight is not None:
        e["parameters"] = {"weight": weight}
    return e


def chain(fault: str | None = None, *, k: float = 1.001, where: str = "Module.b.MLP.forward.0") -> dict[str, Any]:
    """a (a Linear with a weight) -> b -> c. fault: 'output' scales b's output by k
    (and everything after it); 'weight' scales a's weight by k; 'add' adds k to b's output."""
    x = BASE
    w = scaled(W, k) if fault == "weight" else W
    y = scaled(x, 2.0)
    z = scaled(y, k) if fault == "output" else shifted(y, k) if fault == "add" else y
    data = {
        "Module.a.Linear.forward.0": module_entry([stats(x)], [stats(y)], stats(w)),
        "Module.b.MLP.forward.0": entry([stats(y)], [stats(z)]),
        "Module.c.Linear.forward.0": entry([stats(z)], [stats(scaled(z, 0.5))]),
    }
    assert where in data
    return data


def run_pair(tmp_path: Path, target: dict[str, Any], bench: dict[str, Any], **options: Any):
    t = write_dump(tmp_path / "target.json", target)
    b = write_dump(tmp_path / "bench.json", bench)
    return _compare.compare_files(str(t), str(b), _compare.CompareOptions(**options))


def rms(values: list[float]) -> float:
    return math.sqrt(math.fsum(v * v for v in values) / len(values))


# -- the rule on hand-written pairs ---------------------------------------------

def test_small_output_fault_is_named_with_its_error_and_floor(tmp_path: Path) -> None:
    r = run_pair(tmp_path, chain("output"), chain())
    d = r.divergence
    assert r.first_divergence == "Module.b.MLP.forward.0" and d["kinds"] == ["output"]
    # Every statistic of a x1.001 output moves by 1e-3 relative: Max and Min
    # relative to max(|stat|, RMS), Norm to itself.
    y = scaled(BASE, 2.0)
    e = d["error"]["errors"]
    assert e[0] == pytest.approx(abs(max(y)) * 1e-3 / max(abs(max(y)), rms(y)), rel=1e-6)
    assert e[3] == pytest.approx(1e-3, rel=1e-6)
    assert d["error"]["z"] == pytest.approx(max(v for v in e if v is not None) / 1e-4, rel=1e-6)
    assert d["error"]["floor_name"] == "float32" and d["error"]["floor"] == 1e-4
    assert d["z_inputs"] == 0 and d["row"] == "Module.b.MLP.forward.0.output.0"
    assert re.match(r"output 0: \w+ 0\.1 %, 10x the float32 floor 1e-4, while its inputs agree exactly$", d["message"])
    # msprobe's Result keeps msprobe's rules: 0.1 % with exact inputs is a
    # warning (> 10 x 0), never an error.
    assert r.counts["error"] == 0
    marked = [row.name for row in r.rows if row.first_divergence]
    assert marked == ["Module.b.MLP.forward.0.input.0", "Module.b.MLP.forward.0.output.0"]


def test_clean_pair_with_rounding_noise_has_no_divergence(tmp_path: Path) -> None:
    # Every statistic 1e-7 relative off (float32 rounding): below the 1e-4 floor.
    noisy = chain()
    for e in noisy.values():
        for rec in e["input_args"] + e["output"]:
            for s in ("Max", "Min", "Mean", "Norm"):
                rec[s] *= 1 + 1e-7
    r = run_pair(tmp_path, noisy, chain())
    assert r.first_divergence is None and r.divergence is None
    assert r.noise["upstream"] is False and r.noise["rows"] == 7
    assert 0 < r.noise["max_e"] <= 1.5e-7 and r.noise["max_z"] == pytest.approx(r.noise["max_e"] / 1e-4)


def test_additive_fault_shows_in_mean_and_max_not_in_norm(tmp_path: Path) -> None:
    r = run_pair(tmp_path, chain("add", k=1e-3), chain())
    d = r.divergence
    assert r.first_divergence == "Module.b.MLP.forward.0" and "output" in d["kinds"]
    y = scaled(BASE, 2.0)
    mean_b = math.fsum(y) / len(y)
    e = d["error"]["errors"]
    assert e[2] == pytest.approx(1e-3 / max(abs(mean_b), rms(y)), rel=1e-6)
    norm_t = math.sqrt(math.fsum((v + 1e-3) ** 2 for v in y))
    norm_b = math.sqrt(math.fsum(v * v for v in y))
    assert e[3] == pytest.approx(abs(norm_t - norm_b) / norm_b, rel=1e-6)
    assert e[3] < 1e-4 < e[2]  # the Norm alone would not show it


def test_weight_is_a_cause_not_an_input(tmp_path: Path) -> None:
    r = run_pair(tmp_path, chain("weight", k=1.3), chain())
    d = r.divergence
    assert r.first_divergence == "Module.a.Linear.forward.0" and d["kinds"] == ["parameter"]
    assert d["row"] == "Module.a.Linear.forward.0.parameters.weight"
    assert d["error"]["errors"][3] == pytest.approx(0.3, rel=1e-9)
    assert d["message"].startswith("parameter `weight` differs: ")
    assert not d["parameters_throughout"]
    # msprobe counts the weight among the inputs: its Result is pass throughout.
    assert r.counts["error"] == 0


def test_error_from_unrecorded_code_names_the_gap(tmp_path: Path) -> None:
    # Between b and c, code that is not recorded multiplies by 1.01; the
    # target also recorded a call (u) that the bench did not.
    x, y = BASE, scaled(BASE, 1.01)
    t = {"A.forward.0": entry([stats(x)], [stats(x)]), "B.forward.0": entry([stats(x)], [stats(x)]),
         "U.forward.0": entry([stats(x)], [stats(x)]), "C.forward.0": entry([stats(y)], [stats(y)])}
    b = {"A.forward.0": entry([stats(x)], [stats(x)]), "B.forward.0": entry([stats(x)], [stats(x)]),
         "C.forward.0": entry([stats(x)], [stats(x)])}
    d = run_pair(tmp_path, t, b).divergence
    assert d["entry"] == "C.forward.0" and d["kinds"] == ["unrecorded-input"]
    assert d["last_agreeing"] == "B.forward.0" and d["unmatched_between"] == ["U.forward.0"]
    assert "between B.forward.0 (the last agreeing record) and this call" in d["message"]
    # The first entry: the model's inputs.
    d = run_pair(tmp_path, {"A.forward.0": entry([stats(y)], [stats(y)])},
                 {"A.forward.0": entry([stats(x)], [stats(x)])}).divergence
    assert d["kinds"] == ["unrecorded-input"] and d["message"].endswith("the model's inputs already differ")


def test_noise_floor_table_is_the_documented_one() -> None:
    table = {name: (a, e) for name, _, a, e in noise_floor_table()}
    assert table == FLOORS
    docs = (ROOT / "docs" / "formats.md").read_text()
    for name, (a, e) in FLOORS.items():
        row = re.search(rf"^\| {re.escape(name)} \|[^|]*\| ([^|]+) \| ([^|]+) \|", docs, re.M)
        assert row, f"docs/formats.md: no floor table row for {name}"
        assert (float(row.group(1)), float(row.group(2))) == (a, e), name
    assert _compare.noise_floor_for("torch.bfloat16") == "bfloat16"
    assert _compare.noise_floor_for("torch.int32") == "exact"


def test_floor_scale_and_ratio_options(tmp_path: Path) -> None:
    # x1.001 is 10x the float32 floor: a floor 20x higher hides it.
    assert run_pair(tmp_path, chain("output"), chain(), floor_scale=20.0).first_divergence is None
    # The output is 10x the floor with exact inputs: any ratio passes it.
    assert run_pair(tmp_path, chain("output"), chain(), divergence_ratio=1e6).first_divergence == "Module.b.MLP.forward.0"
    with pytest.raises(ValueError, match="floor_scale"):
        run_pair(tmp_path, chain(), chain(), floor_scale=0.0)
    with pytest.raises(ValueError, match="floor_scale"):
        compare(tmp_path / "target.json", tmp_path / "bench.json", tmp_path / "o", floor_scale=-1.0)


def test_cli_prints_the_explanation_and_fails_on_the_divergence(tmp_path: Path, capsys) -> None:
    t = write_dump(tmp_path / "t.json", chain("output"))
    b = write_dump(tmp_path / "b.json", chain())
    args = ["compare", str(t), str(b), "-o", str(tmp_path / "o"), "--no-report", "-q"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert re.search(r"^first divergence: Module\.b\.MLP\.forward\.0 \(output 0: \w+ 0\.1 %, 10x the float32 floor "
                     r"1e-4, while its inputs agree exactly\); noise upstream: max 0 \(0x the floor\) over 3 rows$",
                     out, re.M), out
    assert "noise floors (relative error; Mean/Norm, Max/Min): float32 1e-4/1e-4" in out
    assert main([*args, "--fail-on", "error"]) == 1
    err = capsys.readouterr().err
    assert "--fail-on error: rank0: first divergence at Module.b.MLP.forward.0: output 0" in err
    assert main([*args, "--fail-on", "error", "--floor-scale", "20"]) == 0
    capsys.readouterr()
    assert main([*args, "--floor-scale", "0"]) == 2
    assert "--floor-scale" in capsys.readouterr().err
    # No divergence: the noise seen is printed.
    c = write_dump(tmp_path / "c.json", chain())
    assert main(["compare", str(c), str(b), "-o", str(tmp_path / "o2"), "--no-report", "-q", "--fail-on", "error"]) == 0
    assert re.search(r"^first divergence: none; noise seen: max 0 \(0x the floor\) over 7 rows$",
                     capsys.readouterr().out, re.M)


def test_empty_or_short_side_is_never_a_pass(tmp_path: Path, capsys) -> None:
    full = write_dump(tmp_path / "full.json", chain())
    empty = write_dump(tmp_path / "empty.json", {})
    args = ["compare", str(empty), str(full), "-o", str(tmp_path / "o"), "--no-report", "-q"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "NOT A PASS: the target recorded nothing (target: 0 entries, 0 rows; bench: 3 entries, 7 rows)" in out
    assert main([*args, "--fail-on", "error"]) == 1
    err = capsys.readouterr().err
    assert "the target recorded nothing" in err
    # Short: the target recorded one of three entries.
    short = write_dump(tmp_path / "short.json", dict(list(chain().items())[:1]))
    assert main(["compare", str(short), str(full), "-o", str(tmp_path / "o2"), "--no-report", "-q", "--fail-on",
                 "error"]) == 1
    assert "the target is short: only 3 of the 7 rows of the larger side are matched" in capsys.readouterr().err


def test_training_drift_names_the_first_step_whose_parameters_differ(tmp_path: Path, capsys) -> None:
    def step_dump(k: float) -> dict[str, Any]:
        x = BASE
        return {f"Module.l{i}.Linear.forward.0": module_entry([stats(x)], [stats(x)], stats(scaled(W, k)))
                for i in range(3)}

    for side, ks in (("t", (1.0, 1.0 + 1e-2, 1.0 + 2e-2)), ("b", (1.0, 1.0, 1.0))):
        for step, k in enumerate(ks):
            write_dump(tmp_path / side / f"step{step}" / "rank0" / "dump.json", step_dump(k))
    assert main(["compare", str(tmp_path / "t"), str(tmp_path / "b"), "-o", str(tmp_path / "o"), "--no-report",
                 "-q"]) == 0
    out = capsys.readouterr().out
    assert "parameters differ from step1 on (step1/rank0 first)" in out
    assert "step1/rank0: first divergence: Module.l0.Linear.forward.0 (parameter `weight` differs: Norm 1 %, 100x" in out
    assert "the parameters differ throughout (3 of 3 parameter rows beyond the floor)" in out
    assert "step0/rank0: first divergence" not in out
    # Several clean pairs: one line for all of them (a copy: a dump compared
    # with itself fails --fail-on, issue 40 item 8).
    shutil.copytree(tmp_path / "b", tmp_path / "b2")
    assert main(["compare", str(tmp_path / "b2"), str(tmp_path / "b"), "-o", str(tmp_path / "o2"), "--no-report",
                 "-q", "--fail-on", "error"]) == 0
    assert re.search(r"^first divergence: none in 3 pairs; noise seen: max 0 \(0x the floor, step0/rank0\) over 27 rows$",
                     capsys.readouterr().out, re.M)


# -- real models: eager against torch.compile -------------------------------------

torch = pytest.importorskip("torch")


class Chain(torch.nn.Module):
    """Two Linears with a multiply between them that no hook records at L0."""

    def __init__(self, graph_fault: float = 1.0) -> None:
        super().__init__()
        self.a = torch.nn.Linear(16, 16)
        self.b = torch.nn.Linear(16, 16)
        self.graph_fault = graph_fault

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.a(x)
        if torch.compiler.is_compiling() and self.graph_fault != 1.0:
            x = x * self.graph_fault  # only in the compiled graph, and not a module: not recorded
        return self.b(torch.relu(x))


def _dump(model: torch.nn.Module, x: torch.Tensor, path: Path, *, backend: str | None) -> None:
    import json

    import graphprobe

    path.parent.mkdir(parents=True, exist_ok=True)
    cfg = path.with_suffix(".config.json")
    cfg.write_text(json.dumps({"dump_path": str(path), "level": "L0"}))
    dumper = graphprobe.AclGraphDumper(str(cfg))
    dumper.start(model)
    run = torch.compile(model, backend=backend) if backend else model
    with torch.no_grad():
        run(x)
    dumper.step()
    dumper.stop()


def _graph_fault(module: torch.nn.Module, scale: float) -> None:
    """Scales ``module``'s output by ``scale`` only while torch.compile traces
    (a graph-only fault, as a miscompiled kernel would be)."""
    forward = module.forward

    def faulty(*args: Any, **kwargs: Any) -> Any:
        out = forward(*args, **kwargs)
        return out * scale if torch.compiler.is_compiling() else out

    module.forward = faulty


def _tiny(seed: int = 0):
    from models import make_transformer

    return make_transformer(seed, vocab=32, dim=16, heads=2, blocks=2)


def make_tiny(dtype: str) -> torch.nn.Module:
    """A slightly wider transformer (rounding noise worth measuring) in ``dtype``."""
    from models import make_transformer

    return make_transformer(0, vocab=32, dim=64, heads=4, blocks=3).to(getattr(torch, dtype))


def _compare_dumps(tmp_path: Path, target: torch.nn.Module, bench: torch.nn.Module, x: torch.Tensor, backend: str):
    torch._dynamo.reset()
    _dump(bench, x, tmp_path / "eager", backend=None)
    _dump(target, x, tmp_path / "graph", backend=backend)
    run = compare(tmp_path / "graph", tmp_path / "eager", tmp_path / "out", progress=False, html=False)
    (outcome,) = run.outcomes
    return outcome


@pytest.mark.slow
def test_real_model_graph_only_fault_and_weight_and_clean(tmp_path: Path) -> None:
    import copy

    x = torch.randint(0, 32, (2, 8), generator=torch.Generator().manual_seed(1))
    base = _tiny()
    # Clean pair: eager vs aot_eager.
    clean = _compare_dumps(tmp_path / "clean", copy.deepcopy(base), base, x, "aot_eager")
    assert clean.divergence is None and clean.coverage.problem is None, clean.divergence
    assert clean.noise.max_z < 1
    # x1.001 on layers.1.mlp, only in the graph: exactly that module.
    faulty = copy.deepcopy(base)
    _graph_fault(faulty.layers[1].mlp, 1.001)
    out = _compare_dumps(tmp_path / "fault", faulty, base, x, "aot_eager")
    assert out.first_divergence == "Module.layers.1.mlp.FeedForward.forward.0", out.divergence
    assert out.divergence.kinds == ("output",)
    # The float64 reference of the error: the output's Norm moves by exactly 1e-3.
    assert out.divergence.errors[3] == pytest.approx(1e-3, rel=1e-3)
    # Weight x1.3 on one Linear of the target: that Linear, as a parameter cause.
    heavy = copy.deepcopy(base)
    with torch.no_grad():
        heavy.layers[0].attn.proj.weight.mul_(1.3)
    w = _compare_dumps(tmp_path / "weight", heavy, base, x, "aot_eager")
    assert w.first_divergence == "Module.layers.0.attn.proj.Linear.forward.0", w.divergence
    assert "parameter" in w.divergence.kinds and "parameter `weight` differs" in w.divergence.message
    ref = base.layers[0].attn.proj.weight.detach().double()
    expected = float(((ref * 1.3).norm() - ref.norm()).abs() / ref.norm())
    assert w.divergence.errors[3] == pytest.approx(expected, rel=1e-4)


@pytest.mark.slow
def test_real_model_fault_in_unrecorded_code(tmp_path: Path) -> None:
    torch.manual_seed(0)
    bench = Chain()
    target = Chain(graph_fault=1.001)
    target.load_state_dict(bench.state_dict())
    x = torch.randn(4, 16)
    out = _compare_dumps(tmp_path, target, bench, x, "aot_eager")
    d = out.divergence
    assert out.first_divergence == "Module.b.Linear.forward.0", d
    assert d.kinds == ("unrecorded-input",) and d.last_agreeing == "Module.a.Linear.forward.0"
    assert "the error came from code that is not recorded between Module.a.Linear.forward.0" in d.message


@pytest.mark.slow
@pytest.mark.parametrize("dtype, scale, where, entry", [
    ("float32", 1.001, "layers.0.attn", "Module.layers.0.attn.SelfAttention.forward.0"),
    ("bfloat16", 1.01, "layers.1.mlp", "Module.layers.1.mlp.FeedForward.forward.0"),
])
def test_real_model_inductor_fault_named_and_clean_upstream(tmp_path: Path, dtype: str, scale: float, where: str,
                                                            entry: str) -> None:
    import copy

    x = torch.randint(0, 32, (2, 8), generator=torch.Generator().manual_seed(1))
    base = make_tiny(dtype)
    faulty = copy.deepcopy(base)
    _graph_fault(faulty.get_submodule(where), scale)
    out = _compare_dumps(tmp_path, faulty, base, x, "inductor")
    assert out.first_divergence == entry, out.divergence
    assert "output" in out.divergence.kinds
    # Everything inductor computed before it is at the floor of its dtype,
    # far below the fault: within it on the CPU the floors were measured on,
    # 1.02x it in bfloat16 on an AMD EPYC without AVX-512 (inductor's CPU
    # kernels follow the vector ISA, so their rounding does too).
    assert out.noise.upstream and out.noise.max_z < 1.5


@pytest.mark.slow
@pytest.mark.parametrize("level", ["L0", "L1", "mix"])
def test_demo_names_a_small_fault_at_every_level(tmp_path: Path, capsys, level: str) -> None:
    code = main(["demo", "--inject-fault", "layers.1.mlp:1.001", "--level", level, "--steps", "1", "--device", "cpu",
                 "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "layers.1.mlp:1.001 -> found as the first divergence" in out
    if level == "L1":
        # No module records: the first call fed by the injected multiply,
        # which is named as recorded only in the run under test.
        assert re.search(r"first divergence: Tensor\.__add__\.\d+\.forward \(input \d: .*recorded on one side "
                         r"only: Tensor\.__mul__\.0\.forward", out), out
    else:
        assert "first divergence: Module.layers.1.mlp.FeedForward.forward.0 (output 0:" in out

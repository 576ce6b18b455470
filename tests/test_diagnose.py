"""graphprobe diagnose (issue #27 parts 2-5): the stages against known fault
locations, the bisect driving torch's CompilerBisector, the environment
variables the dumper honours, and the two acceptance runs end to end.

References are independent of the tool: the module where the test injected
the fault, the lowering the fake compiler breaks, the backend the fault
needs (``torch.compiler.is_compiling()``: dynamo alone)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from graphprobe.cli import main
from graphprobe.config_env import CONFIG_ENV, config_path_from_env, save_repro_module
from graphprobe.diagnose.attribute import attribute, pick_origin, replay_scope
from graphprobe.diagnose.commands import Runner
from graphprobe.diagnose.entries import parse_entry, within
from graphprobe.diagnose.replay_files import ModuleVerdict, ReplayFormatError, read_replay
from graphprobe.diagnose.screen import FirstDivergence, StageError

PY = sys.executable
REPO = Path(__file__).resolve().parents[1]


def _mv(module: str, verdict: str, err: float = 0.0) -> ModuleVerdict:
    return ModuleVerdict(module, f"Module.{module}.X.forward.0", verdict, "", 0, "f",
                         [{"index": 0, "local_error": err, "eager_local_error": 0.0, "float64_error": err}])


# ----------------------------------------------------------------------------- names and the origin rule

def test_parse_entry():
    e = parse_entry("Module.layers.0.mlp.act.ReLU.forward.0")
    assert (e.module, e.cls, e.kind) == ("layers.0.mlp.act", "ReLU", "Module")
    assert parse_entry("Functional.relu.3").module is None
    assert parse_entry("Module.Net.forward.0").module == ""
    assert within("layers.0.mlp", "layers.0") and not within("layers.01", "layers.0") and within("x", "")


def test_origin_is_the_deepest_creating_module():
    # The fault is in layers.0.mlp.act: its ancestors create too (their replay
    # re-runs it eagerly), its siblings and the downstream modules inherit.
    mods = [_mv("layers.0.mlp.up", "inherits"), _mv("layers.0.mlp.act", "creates", 2.0),
            _mv("layers.0.mlp.proj", "inherits"), _mv("layers.0.mlp", "creates", 1.0),
            _mv("layers.0", "creates", 0.5)]
    origin, why = pick_origin(mods)
    assert origin is not None and origin.module == "layers.0.mlp.act"
    assert "none of its submodules" in why


def test_no_origin_when_everything_inherits():
    origin, why = pick_origin([_mv("a", "inherits"), _mv("a.b", "not judged")])
    assert origin is None and "inherits" in why
    origin, why = pick_origin([_mv("a", "not judged")])
    assert origin is None and "could be judged" in why


def test_replay_scope():
    out = FirstDivergence(0, "Module.a.b.Lin.forward.0", "a.b", "Lin", ("output",), "")
    assert replay_scope(out)[0] == "a.b"
    inp = FirstDivergence(0, "Module.a.b.Lin.forward.0", "a.b", "Lin", ("unrecorded-input",), "")
    assert replay_scope(inp)[0] == "a"
    api = FirstDivergence(0, "Functional.relu.0", None, None, ("output",), "")
    assert replay_scope(api)[0] == ""


@pytest.mark.parametrize("text, field", [
    ("[]", "list 'modules'"),
    ('{"modules": [{"module": "a", "entry": "e", "verdict": "maybe"}]}', "modules[0].verdict"),
    ('{"modules": [{"module": 1, "entry": "e", "verdict": "creates"}]}', "modules[0].module"),
    ("{", "JSON"),
])
def test_bad_replay_file_names_file_and_field(tmp_path, text, field):
    f = tmp_path / "replay.json"
    f.write_text(text)
    with pytest.raises(ReplayFormatError) as e:
        read_replay(f)
    assert str(f) in str(e.value) and field in str(e.value)


# ----------------------------------------------------------------------------- the environment variables

def test_graphprobe_config_replaces_the_config_path(tmp_path, monkeypatch):
    from graphprobe.dumper import AclGraphDumper

    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"task": "statistics", "dump_path": str(tmp_path / "from_env"), "level": "mix"}))
    monkeypatch.setenv(CONFIG_ENV, str(cfg))
    d = AclGraphDumper("does_not_exist.json")  # the script's own path is replaced
    assert d.config.level == "mix" and d.config.dump_path == str(tmp_path / "from_env")
    monkeypatch.setenv(CONFIG_ENV, "")
    assert config_path_from_env("mine.json") == "mine.json"  # empty counts as unset
    monkeypatch.setenv(CONFIG_ENV, str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match="missing.json"):
        AclGraphDumper()


def test_repro_module_save_never_raises(tmp_path, monkeypatch):
    import torch

    monkeypatch.setenv("GRAPHPROBE_REPRO_MODULE", "no.such")
    monkeypatch.setenv("GRAPHPROBE_REPRO_DIR", str(tmp_path / "m"))
    with pytest.warns(RuntimeWarning, match="no.such"):
        save_repro_module(torch.nn.Sequential(torch.nn.Linear(2, 2)))
    monkeypatch.setenv("GRAPHPROBE_REPRO_MODULE", "0")
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    save_repro_module(model)
    info = json.loads((tmp_path / "m" / "module.json").read_text())
    assert info["class"] == "Linear" and info["pickled"]
    back = torch.load(tmp_path / "m" / "module.pt", weights_only=False)
    assert torch.equal(back.weight, model[0].weight)
    # A hook that cannot be pickled (a local function): saved without hooks, and said so.
    model[0].register_forward_hook(lambda mod, args, out: out * 2)
    save_repro_module(model)
    info = json.loads((tmp_path / "m" / "module.json").read_text())
    assert info["pickled"] and info["hooks_dropped"] and "pickle" in info["pickle_error"].lower()
    back = torch.load(tmp_path / "m" / "module.pt", weights_only=False)
    assert not back._forward_hooks and len(model[0]._forward_hooks) == 1  # the user's module keeps its hook


# ----------------------------------------------------------------------------- stages with a fake command

# A stand-in for the user's script: reads $GRAPHPROBE_CONFIG like AclGraphDumper
# and writes dump.json and a hand-written replay.json in which the module
# FAULT creates the error -- under torch.compile only, and in the bisect only
# while the (simulated) lowering number FAULT_LOWERING of 8 is applied, found
# through the real CompilerBisector's subprocess protocol.
FAKE = textwrap.dedent('''
    import json, os, sys
    cfg = json.load(open(os.environ["GRAPHPROBE_CONFIG"]))
    fault, mode = sys.argv[1], sys.argv[2]
    mods = ["blk", "blk.up", "blk.act", "blk.proj", "out"]
    creates = not os.environ.get("TORCHDYNAMO_DISABLE")
    if os.environ.get("TORCH_BISECT_BACKEND"):
        from torch._inductor.compiler_bisector import CompilerBisector as CB
        backend = os.environ["TORCH_BISECT_BACKEND"]
        if mode == "eager":      # a branch on is_compiling(): present under every backend
            creates = True
        else:                    # an inductor lowering bug in lowering number 5
            creates = False
            if backend == "inductor":
                for i in range(8):
                    lowered = not CB.disable_subsystem("inductor", "lowerings", lambda i=i: f"node{i}")
                    if i == 5 and lowered:
                        creates = True
    sel = (cfg.get("replay") or {}).get("list") or mods
    step = os.path.join(cfg["dump_path"], "step0", f"pid{os.getpid()}")
    os.makedirs(step, exist_ok=True)
    open(os.path.join(step, "dump.json"), "w").write("{}")
    if "replay" in cfg:
        out = []
        for m in mods:
            if not any(m == k or m.startswith(k + ".") for k in sel):
                continue
            bad = creates and (m == fault or fault.startswith(m + "."))
            err = 0.5 if bad else 1e-7
            out.append({"module": m, "entry": f"Module.{m}.M.forward.0", "verdict": "creates" if bad else "inherits",
                        "reason": "", "outputs": [{"index": 0, "dtype": "torch.float32", "local_error": err,
                                                   "eager_local_error": 0.0, "float64_error": err, "floor": 1e-4}]})
        json.dump({"version": 1, "modules": out}, open(os.path.join(step, "replay.json"), "w"))
''')


@pytest.fixture
def fake(tmp_path):
    p = tmp_path / "fake_script.py"
    p.write_text(FAKE)
    return p


def test_attribute_with_hand_written_replay(tmp_path, fake):
    first = FirstDivergence(0, "Module.blk.M.forward.0", "blk", "M", ("output",), "")
    runner = Runner(tmp_path / "logs")
    res = attribute(runner, tmp_path, [PY, str(fake), "blk.act", "lowering"], first, None, lambda m: None)
    assert res.origin is not None and res.origin.module == "blk.act"
    verdicts = {m.module: m.verdict for m in res.modules}
    assert verdicts == {"blk": "creates", "blk.up": "inherits", "blk.act": "creates", "blk.proj": "inherits"}
    assert runner.records[0].env["GRAPHPROBE_REPRO_MODULE"] == "blk"


def test_attribute_without_replay_output_is_a_clear_error(tmp_path):
    script = tmp_path / "noreplay.py"
    script.write_text("import json,os\nc=json.load(open(os.environ['GRAPHPROBE_CONFIG']))\n"
                      "p=os.path.join(c['dump_path'],'step0','pid1');os.makedirs(p)\n"
                      "open(p+'/dump.json','w').write('{}')\n")
    first = FirstDivergence(0, "Module.blk.M.forward.0", "blk", "M", ("output",), "")
    with pytest.raises(StageError, match="no replay.json"):
        attribute(Runner(tmp_path / "logs"), tmp_path, [PY, str(script)], first, None, lambda m: None)


@pytest.mark.slow
@pytest.mark.parametrize("mode, expected", [
    ("lowering", ("inductor", "lowerings", 5, "node5")),
    ("eager", ("eager", None, None, None)),
])
def test_bisect_finds_the_injected_stage(tmp_path, fake, mode, expected):
    from graphprobe.diagnose.bisect import bisect

    runner = Runner(tmp_path / "logs")
    res = bisect(runner, tmp_path, [PY, str(fake), "blk.act", mode], "blk.act", None, lambda m: None)
    assert (res.backend, res.subsystem, res.bisect_number, res.debug_info) == expected, res.tests
    assert len(res.tests) == len(runner.records)
    assert all(r.env["TORCH_BISECT_BACKEND"] for r in runner.records)


OUTPUT_CODE = """\
V1201 12:00:00.000000 1 torch/_inductor/graph.py:2722] [0/0] [__output_code] Output code: 
V1201 12:00:00.000000 1 torch/_inductor/graph.py:2722] [0/0] [__output_code] cpp_fused_a_0 = async_compile.cpp_pybinding(['const float*', 'float*'], r'''
V1201 12:00:00.000000 1 torch/_inductor/graph.py:2722] [0/0] [__output_code] cpp_fused_b_1 = async_compile.cpp_pybinding(['float*'], r'''
V1201 12:00:00.000000 1 torch/_inductor/graph.py:2722] [0/0] [__output_code]     def call(self, args):
V1201 12:00:00.000000 1 torch/_inductor/graph.py:2722] [0/0] [__output_code]         cpp_fused_a_0(arg0_1, buf0)
V1201 12:00:00.000000 1 torch/_inductor/graph.py:2722] [0/0] [__output_code]         extern_kernels.addmm(arg1_1, buf0, arg2_1, alpha=1, beta=1, out=buf1)
V1201 12:00:00.000000 1 torch/_inductor/graph.py:2722] [0/0] [__output_code]         torch.ops.graphprobe.record_stats.default(buf1, 0, 0)
V1201 12:00:00.000000 1 torch/_inductor/graph.py:2722] [0/0] [__output_code]         buf2 = buf1; del buf1  # reuse
V1201 12:00:00.000000 1 torch/_inductor/graph.py:2722] [0/0] [__output_code]         cpp_fused_b_1(buf2)
V1201 12:00:00.000000 1 torch/_inductor/graph.py:2722] [0/0] [__output_code]         buf3 = reinterpret_tensor(buf2, (4, 4), (4, 1), 0); del buf2
V1201 12:00:00.000000 1 torch/_inductor/graph.py:2722] [0/0] [__output_code]         torch.ops.graphprobe.record_stats.default(buf3, 1, 0)
V1201 12:00:00.000000 1 torch/_inductor/graph.py:2722] [0/0] [__output_code]         return (buf3, )
"""


def test_kernels_from_output_code(tmp_path):
    from graphprobe.diagnose.kernels import kernels_from_log

    log = tmp_path / "k.log"
    log.write_text(OUTPUT_CODE)
    # The output probe reads buf3, a view of buf2, written in place by cpp_fused_b_1 (its argument is not const).
    assert kernels_from_log(log, 1) == ["cpp_fused_b_1"]
    # Input and output probes: the input's writer is the extern addmm (out=buf1).
    assert kernels_from_log(log, 2) == ["extern_kernels.addmm", "cpp_fused_b_1"]
    assert kernels_from_log(tmp_path / "missing.log", 1) == []


def test_runner_timeout_and_missing_program(tmp_path):
    runner = Runner(tmp_path / "logs", timeout=1)
    rec = runner.run("x", [PY, "-c", "import time; time.sleep(30)"], {"A": "1"})
    assert rec.exit_code is None and "killed after 1 s" in rec.note and rec.seconds < 20
    rec = runner.run("y", [str(tmp_path / "no_such_program")], {})
    assert rec.exit_code is None and "cannot start" in rec.note
    assert [r.stage for r in runner.records] == ["x", "y"] and rec.shell().endswith("no_such_program")


def test_cli_usage_errors(capsys, tmp_path):
    assert main(["demo", "--diagnose", "--inject-fault", "layers.9.nope", "--out", str(tmp_path)]) == 2
    assert "layers.9.nope" in capsys.readouterr().err and not (tmp_path / "diagnose").exists()
    assert main(["diagnose"]) == 2
    assert "no COMMAND" in capsys.readouterr().err
    assert main(["diagnose", "--reference-cmd", "'unclosed", "--", "true"]) == 2
    assert "--reference-cmd" in capsys.readouterr().err


def test_out_folder_of_something_else_is_refused(tmp_path, capsys):
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "mine.txt").write_text("keep")
    assert main(["diagnose", "-o", str(tmp_path / "o"), "--", PY, "-c", "pass"]) == 2
    assert "mine.txt" in capsys.readouterr().err and (tmp_path / "o" / "mine.txt").read_text() == "keep"


def test_failing_command_is_reported_with_its_log(tmp_path, capsys):
    code = main(["diagnose", "-o", str(tmp_path / "o"), "--no-bisect", "--", PY, "-c", "import sys; sys.exit(3)"])
    assert code == 2
    d = json.loads((tmp_path / "o" / "diagnosis.json").read_text())
    assert "exit code 3" in d["error"] and d["commands"][0]["exit_code"] == 3
    assert d["commands"][0]["env"]["TORCHDYNAMO_DISABLE"] == "1"
    # Run again into the same OUT: the earlier diagnose's files are replaced, not mixed in.
    (tmp_path / "o" / "runs" / "stale").mkdir(parents=True)
    assert main(["diagnose", "-o", str(tmp_path / "o"), "--no-bisect", "--", PY, "-c", "import sys; sys.exit(3)"]) == 2
    assert not (tmp_path / "o" / "runs" / "stale").exists()
    assert len(json.loads((tmp_path / "o" / "diagnosis.json").read_text())["commands"]) == 1


# ----------------------------------------------------------------------------- acceptance: the real thing

MODEL = textwrap.dedent('''
    import sys, torch
    from graphprobe import AclGraphDumper

    FAULT = sys.argv[1]
    if FAULT == "relu":
        torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"

    class Proj(torch.nn.Linear):
        def forward(self, x):
            y = super().forward(x)
            if FAULT == "proj" and self.faulty and torch.compiler.is_compiling():
                y = y * 1.001
            return y

    class MLP(torch.nn.Module):
        def __init__(self, d, faulty):
            super().__init__()
            self.up = torch.nn.Linear(d, 2 * d)
            self.act = torch.nn.ReLU()
            self.proj = Proj(2 * d, d)
            self.proj.faulty = faulty
        def forward(self, x):
            return self.proj(self.act(self.up(x)))

    class Block(torch.nn.Module):
        def __init__(self, d, faulty):
            super().__init__()
            self.norm = torch.nn.LayerNorm(d)
            self.mlp = MLP(d, faulty)
        def forward(self, x):
            return x + self.mlp(self.norm(x))

    class Net(torch.nn.Module):
        def __init__(self, d=16):
            super().__init__()
            self.layers = torch.nn.ModuleList(Block(d, i == 1) for i in range(3))
        def forward(self, x):
            for b in self.layers:
                x = b(x)
            return x

    torch.manual_seed(0)
    model = Net()
    dumper = AclGraphDumper()
    dumper.start(model)
    compiled = torch.compile(model, fullgraph=True)
    with torch.no_grad():
        for step in range(2):
            compiled(torch.randn(4, 16, generator=torch.Generator().manual_seed(step)))
            dumper.step()
    dumper.stop()
''')


def _diagnose(tmp_path: Path, fault: str) -> tuple[int, dict, Path]:
    script = tmp_path / "script.py"
    script.write_text(MODEL)
    out = tmp_path / "diag"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    proc = subprocess.run([PY, "-m", "graphprobe", "diagnose", "-o", str(out), "--", PY, str(script), fault],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=1500)
    print(proc.stdout[-6000:], proc.stderr[-3000:])
    return proc.returncode, json.loads((out / "diagnosis.json").read_text()), out


@pytest.mark.slow
def test_acceptance_inductor_relu_fault(tmp_path):
    code, d, out = _diagnose(tmp_path, "relu")
    assert code == 1, d.get("error")
    assert d["first_divergence"]["module"] == "layers.0.mlp.act"
    assert d["origin"]["module"] == "layers.0.mlp.act" and d["origin"]["verdict"] == "creates"
    assert d["bisect"]["backend"] == "inductor" and d["bisect"]["subsystem"]
    assert all(c["exit_code"] == 0 for c in d["commands"])
    assert d["kernels"] and all("relu" in k for k in d["kernels"]), d["kernels_note"]
    assert (out / "report.html").is_file() and (out / "repro" / "inputs.pt").is_file()
    # The repro shows the compiled module's error on the recorded inputs (exit 1: "creates").
    rep = subprocess.run([PY, str(out / "repro" / "repro.py")], capture_output=True, text=True, timeout=600)
    assert rep.returncode == 1 and "creates the error" in rep.stdout, rep.stdout + rep.stderr


@pytest.mark.slow
def test_acceptance_is_compiling_branch_in_a_projection(tmp_path):
    code, d, out = _diagnose(tmp_path, "proj")
    assert code == 1, d.get("error")
    assert d["origin"]["module"] == "layers.1.mlp.proj" and d["origin"]["verdict"] == "creates"
    assert d["bisect"]["backend"] == "eager"
    verdicts = {m["module"]: m["verdict"] for m in d["attribution"]["modules"]}
    assert verdicts.get("layers.1.mlp.proj") == "creates"
    assert d["kernels"], d["kernels_note"]  # inductor computes the projection (and the x1.001) in some kernel


@pytest.mark.slow
def test_demo_diagnose_names_the_injected_module(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    proc = subprocess.run([PY, "-m", "graphprobe", "demo", "--diagnose", "--inject-fault", "layers.1.mlp:1.5",
                           "--steps", "1", "--out", str(tmp_path)], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=1500)
    print(proc.stdout[-6000:], proc.stderr[-3000:])
    d = json.loads((tmp_path / "diagnose" / "diagnosis.json").read_text())
    assert proc.returncode == 1, d.get("error")
    assert d["origin"]["module"] == "layers.1.mlp" and d["origin"]["verdict"] == "creates"
    assert d["bisect"]["backend"] == "eager"


LLAMA = textwrap.dedent('''
    import torch
    from transformers import LlamaConfig, LlamaModel
    from graphprobe import AclGraphDumper

    torch.manual_seed(0)
    model = LlamaModel(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                   attn_implementation="eager")).eval()

    def graph_only(module, args, output):
        return output * 1.001 if torch.compiler.is_compiling() else output

    model.layers[0].mlp.register_forward_hook(graph_only)  # the injected fault: graph mode only
    dumper = AclGraphDumper()
    dumper.start(model)
    compiled = torch.compile(model, fullgraph=True)
    with torch.no_grad():
        for step in range(2):
            compiled(torch.randint(0, 64, (1, 8), generator=torch.Generator().manual_seed(step)), use_cache=False)
            dumper.step()
    dumper.stop()
''')


@pytest.mark.slow
def test_transformers_llama_graph_only_fault(tmp_path):
    pytest.importorskip("transformers")
    script = tmp_path / "llama.py"
    script.write_text(LLAMA)
    out = tmp_path / "diag"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    proc = subprocess.run([PY, "-m", "graphprobe", "diagnose", "-o", str(out), "--", PY, str(script)], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=1500)
    print(proc.stdout[-6000:], proc.stderr[-3000:])
    d = json.loads((out / "diagnosis.json").read_text())
    assert proc.returncode == 1, d.get("error")
    assert d["origin"]["module"] == "layers.0.mlp" and d["origin"]["verdict"] == "creates"
    verdicts = {m["module"]: m["verdict"] for m in d["attribution"]["modules"]}
    # Its submodules (upstream of the hook) inherit: the fault is after them.
    assert {k: v for k, v in verdicts.items() if k != "layers.0.mlp"} == {
        f"layers.0.mlp.{n}": "inherits" for n in ("gate_proj", "up_proj", "act_fn", "down_proj")}
    assert d["bisect"]["backend"] == "eager"
    # The repro carries the hook's source (a top-level function of the script) and shows the fault compiled.
    rep = subprocess.run([PY, str(out / "repro" / "repro.py")], capture_output=True, text=True, timeout=600)
    assert rep.returncode == 1 and "creates the error" in rep.stdout, rep.stdout + rep.stderr

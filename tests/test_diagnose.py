"""graphprobe diagnose (issue #27 parts 2-5): the stages against known fault
locations, the bisect driving torch's CompilerBisector, the environment
variables the dumper honours, and the two acceptance runs end to end.

References are independent of the tool: the module where the test injected
the fault, the lowering the fake compiler breaks, the backend the fault
needs (``torch.compiler.is_compiling()``: dynamo alone).

Cost: the default run holds every test under about a minute here (the
acceptance case B, a real diagnose with one bisect test: 60 s with the 2
shared cores loaded, with one inductor compile thread; the fake bisect of a lowering: about 17 s; the
repro runs: about 20 s). Three real runs take longer and run
only with ``GRAPHPROBE_SLOW_TESTS=1`` (the project's switch, as in
tests/test_real_models.py)::

    GRAPHPROBE_SLOW_TESTS=1 .venv/bin/python -m pytest tests/test_diagnose.py -q -p no:cacheprovider \\
        -k "inductor_relu or llama or demo_diagnose" -s

Their last results (benchmarks/results/diagnose_cost.md, 2 shared CPU
cores under load): acceptance A (inductor's ReLU fault, 20-test bisect)
passed in 483 s, 24 commands; the transformers Llama case passed in 78 s
(97 s on a rerun after the review's fixes, 2026-12-01 19:20 UTC);
the demo --diagnose case passed in 170 s (93 s on a second run). With the
bisect's tests two at a time (issue #37, 2026-12-02, load 4.6-5.8): A in
306-335 s (bisect 212 s: 21 tests asked, 2 more run ahead), the demo in
87-93 s."""

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
#: The project's switch for tests over about a minute (see the module docstring).
SLOW = os.environ.get("GRAPHPROBE_SLOW_TESTS") == "1"
gated = pytest.mark.skipif(not SLOW, reason="over a minute: runs with GRAPHPROBE_SLOW_TESTS=1 (docs/diagnose.md, "
                           "'Verified cases', has the last results)")


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


def test_origin_with_an_unjudged_submodule_says_so():
    # The fault may be in blk.a, which replay could not judge: the origin blk must not claim that none of its
    # submodules creates the error.
    origin, why = pick_origin([_mv("blk", "creates", 1.0), _mv("blk.a", "not judged"), _mv("blk.b", "inherits")])
    assert origin is not None and origin.module == "blk"
    assert "blk.a" in why and "not judged" in why and "none of its submodules does" not in why


def test_origin_ties_and_repeated_calls():
    from graphprobe.diagnose.replay_files import worst

    # Two sibling leaves create: the first in call order is the origin, the other is named.
    origin, why = pick_origin([_mv("p", "creates"), _mv("p.x", "creates", 0.1), _mv("p.y", "creates", 9.0)])
    assert origin.module == "p.x" and "p.y" in why
    # A module called three times: the "creates" call with the largest local error is reported.
    calls = [_mv("m", "inherits", 0.0), _mv("m", "creates", 0.2), _mv("m", "creates", 0.7)]
    assert worst(calls) is calls[2]
    # A call that could not be judged may hold the error: the module is not reported as inheriting.
    assert worst([_mv("m", "inherits"), _mv("m", "not judged")]).verdict == "not judged"


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
        backend = os.environ["TORCH_BISECT_BACKEND"]
        if mode == "eager":      # a branch on is_compiling(): present under every backend
            creates = True
        else:                    # an inductor lowering bug in lowering number 5
            creates = backend == "inductor"
            # Only a test of the lowerings asks the real bisector (torch imported: 3 s a test); under another
            # subsystem every lowering is applied, as the bisector's disable_subsystem would answer.
            if backend == "inductor" and os.environ.get("TORCH_BISECT_SUBSYSTEM") == "lowerings":
                from torch._inductor.compiler_bisector import CompilerBisector as CB
                creates = False
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


def test_screen_lists_its_two_runs_as_they_started_whichever_ends_first(tmp_path):
    # The reference and the target run at once; the target ends first here.
    # diagnosis.json's commands list the reference first all the same (a
    # fresh-clone CI run saw them swapped in test_nothing_diverges_...).
    from graphprobe.diagnose.screen import screen

    runner = Runner(tmp_path / "logs")
    slow = [PY, "-c", "import time; time.sleep(3); raise SystemExit(3)"]
    with pytest.raises(StageError):
        screen(runner, tmp_path / "o", [PY, "-c", "pass"], slow, "L0", None, lambda _: None)
    assert [r.stage for r in runner.records] == ["screen-reference", "screen-target"]
    assert runner.records[0].exit_code == 3 and runner.records[1].exit_code == 0


def test_cli_usage_errors(capsys, tmp_path):
    assert main(["demo", "--diagnose", "--inject-fault", "layers.9.nope", "--out", str(tmp_path)]) == 2
    assert "layers.9.nope" in capsys.readouterr().err and not (tmp_path / "diagnose").exists()
    assert main(["diagnose"]) == 2
    assert "no COMMAND" in capsys.readouterr().err
    assert main(["diagnose", "--reference-cmd", "'unclosed", "--", "true"]) == 2
    assert "--reference-cmd" in capsys.readouterr().err
    assert main(["diagnose", "--jobs", "0", "--", "true"]) == 2  # at least one bisect test at a time
    assert "--jobs" in capsys.readouterr().err


def test_out_folder_of_something_else_is_refused(tmp_path, capsys):
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "mine.txt").write_text("keep")
    assert main(["diagnose", "-o", str(tmp_path / "o"), "--", PY, "-c", "pass"]) == 2
    assert "mine.txt" in capsys.readouterr().err and (tmp_path / "o" / "mine.txt").read_text() == "keep"


def test_failing_command_is_reported_with_its_log(tmp_path, capsys):
    code = main(["diagnose", "-o", str(tmp_path / "o"), "--no-bisect", "--", PY, "-c", "import sys; sys.exit(3)"])
    assert code == 2
    d = json.loads((tmp_path / "o" / "diagnosis.json").read_text())
    # The reference and the target run at once (issue #37): both are recorded, the reference's failure reported.
    ref = [c for c in d["commands"] if c["stage"] == "screen-reference"]
    assert "screen (reference)" in d["error"] and "exit code 3" in d["error"] and ref[0]["exit_code"] == 3
    assert ref[0]["env"]["TORCHDYNAMO_DISABLE"] == "1" and len(d["commands"]) == 2
    # Run again into the same OUT: the earlier diagnose's files are replaced, not mixed in.
    (tmp_path / "o" / "runs" / "stale").mkdir(parents=True)
    assert main(["diagnose", "-o", str(tmp_path / "o"), "--no-bisect", "--", PY, "-c", "import sys; sys.exit(3)"]) == 2
    assert not (tmp_path / "o" / "runs" / "stale").exists()
    assert len(json.loads((tmp_path / "o" / "diagnosis.json").read_text())["commands"]) == 2


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
    # One compile thread: no pool of compile workers (each a fresh Python importing torch) to start in every
    # run of the script; on the 2 shared cores that pool costs more than it saves.
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), TORCHINDUCTOR_COMPILE_THREADS="1")
    proc = subprocess.run([PY, "-m", "graphprobe", "diagnose", "-o", str(out), "--", PY, str(script), fault],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=1500)
    print(proc.stdout[-6000:], proc.stderr[-3000:])
    return proc.returncode, json.loads((out / "diagnosis.json").read_text()), out


CLEAN = textwrap.dedent('''
    import torch
    from graphprobe import AclGraphDumper

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    dumper = AclGraphDumper()
    dumper.start(model)
    with torch.no_grad():
        for step in range(2):
            model(torch.randn(3, 8, generator=torch.Generator().manual_seed(step)))
            dumper.step()
    dumper.stop()
''')


@pytest.mark.slow
def test_nothing_diverges_exits_0_after_the_screen(tmp_path):
    # The same eager computation as target and reference (no torch.compile in the script): the reference is
    # independent of the tool, bit-identical runs. The issue #36 mutation pass: this branch never ran in a test.
    script = tmp_path / "clean.py"
    script.write_text(CLEAN)
    out = tmp_path / "diag"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    proc = subprocess.run([PY, "-m", "graphprobe", "diagnose", "-o", str(out), "--", PY, str(script)], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=900)
    d = json.loads((out / "diagnosis.json").read_text())
    assert proc.returncode == 0, (d.get("error"), proc.stdout[-3000:])
    assert d["first_divergence"] is None and d["origin"] is None and d["attribution"] is None and d["error"] is None
    assert d["bisect_skipped"] == "nothing diverges" and d["conclusion"].startswith("no divergence")
    assert [c["stage"] for c in d["commands"]] == ["screen-reference", "screen-target"]
    assert len(d["screen"]["pairs"]) == 2  # both steps compared
    check_schema(d)
    assert "no divergence" in proc.stdout


@pytest.mark.slow
@gated
def test_acceptance_inductor_relu_fault(tmp_path):
    code, d, out = _diagnose(tmp_path, "relu")
    assert code == 1, d.get("error")
    assert d["first_divergence"]["module"] == "layers.0.mlp.act"
    assert d["origin"]["module"] == "layers.0.mlp.act" and d["origin"]["verdict"] == "creates"
    assert d["bisect"]["backend"] == "inductor" and d["bisect"]["subsystem"]
    # Every run of the script exits 0 (but a bisect test run ahead and stopped once not needed: issue #37); the
    # repro, run last, exits 1: it reproduces (the inductor option that injects the fault is one the repro carries).
    assert all(c["exit_code"] == 0 for c in d["commands"][:-1] if not c["note"].startswith("stopped")), d["commands"]
    used = [t for t in d["bisect"]["tests"] if t["used"]]
    assert len(used) <= 21 and all(t["passed"] is not None for t in used)  # as many as the sequential bisect asks
    assert d["commands"][-1]["stage"] == "repro" and d["commands"][-1]["exit_code"] == 1
    assert d["repro"]["reproduces"] is True, d["repro"]["reproduces_note"]
    assert d["kernels"] and all("relu" in k for k in d["kernels"]), d["kernels_note"]
    assert (out / "report.html").is_file() and (out / "repro" / "inputs.pt").is_file()
    # The repro shows the compiled module's error on the recorded inputs (exit 1: "creates").
    rep = subprocess.run([PY, str(out / "repro" / "repro.py")], capture_output=True, text=True, timeout=600)
    assert rep.returncode == 1 and "creates the error" in rep.stdout, rep.stdout + rep.stderr


@pytest.mark.slow
def test_acceptance_is_compiling_branch_in_a_projection(tmp_path):
    code, d, out = _diagnose(tmp_path, "proj")
    assert code == 1, d.get("error")
    check_schema(d)  # every documented key and field, in a diagnosis that ran every stage
    assert d["origin"]["module"] == "layers.1.mlp.proj" and d["origin"]["verdict"] == "creates"
    assert d["bisect"]["backend"] == "eager"
    verdicts = {m["module"]: m["verdict"] for m in d["attribution"]["modules"]}
    assert verdicts.get("layers.1.mlp.proj") == "creates"
    # The bisect says dynamo alone (backend eager): inductor's kernels are not looked up (issue #37: that run
    # cost 101 s in the held-out cases and named nothing useful).
    assert d["kernels"] == [] and "implicates backend 'eager'" in d["kernels_note"]
    assert "kernels" not in d["stages"] and not any(c["stage"] == "kernels" for c in d["commands"])
    # A module-local fault: diagnose ran the repro, and it reproduces (issue #37 a).
    assert d["repro"]["reproduces"] is True, d["repro"]["reproduces_note"]
    assert [c["stage"] for c in d["commands"]][-1] == "repro"


@pytest.mark.slow
@gated
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
@gated
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


# ----------------------------------------------------------------------------- review: subprocesses, OUT, env, repro

def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for a reaper does not)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in f)
    except OSError:
        return False


def _wait_for(path: Path, seconds: float = 60.0) -> str:
    import time

    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        if path.is_file() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.1)
    raise AssertionError(f"{path} never appeared")


# A command that starts a child and waits: the child (a grandchild of diagnose) writes its pid and sleeps.
PARENT_OF_SLEEPER = ("import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import os, sys, time; "
                     "open(sys.argv[1], \"w\").write(str(os.getpid())); time.sleep(120)', sys.argv[1]]).wait()")


def test_timeout_stops_the_command_and_its_children(tmp_path):
    pidfile = tmp_path / "child.pid"
    rec = Runner(tmp_path / "logs", timeout=3).run("x", [PY, "-c", PARENT_OF_SLEEPER, str(pidfile)], {})
    assert rec.exit_code is None and "killed after 3 s" in rec.note
    child = int(_wait_for(pidfile))
    import time

    time.sleep(0.5)
    assert not _alive(child), "the command's child outlived the timeout"


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_interrupt_stops_children_and_says_what_ran(tmp_path, sig):
    import signal

    pidfile = tmp_path / "child.pid"
    out = tmp_path / "o"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    proc = subprocess.Popen([PY, "-m", "graphprobe", "diagnose", "-o", str(out), "--no-bisect", "--", PY, "-c",
                             PARENT_OF_SLEEPER, str(pidfile)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    # Generous limits, and waits on events rather than fixed sleeps: on a busy 2-core machine three Python
    # start-ups (diagnose, the command, its child) took over a minute (issue #36).
    try:
        child = int(_wait_for(pidfile, 600))
        proc.send_signal(getattr(signal, sig))
        text = proc.communicate(timeout=600)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, text
    import time

    t0 = time.monotonic()
    while _alive(child) and time.monotonic() - t0 < 60:  # SIGTERM'd: gone once the kernel has reaped it
        time.sleep(0.1)
    assert not _alive(child), "the user's command's child outlived the interrupted diagnose"
    d = json.loads((out / "diagnosis.json").read_text())
    assert "interrupted" in d["error"] and d["error"].startswith("screen:")
    # The reference and the target run at once (issue #37): the one the signal interrupted, and the other stopped.
    notes = {c["stage"]: c["note"] for c in d["commands"]}
    assert set(notes) == {"screen-reference", "screen-target"} and "interrupted" in notes["screen-target"], notes
    assert "stopped with its child processes" in notes["screen-reference"], notes
    assert "interrupted" in text and "screen-reference" in text


def test_out_folder_without_the_mark_is_never_emptied(tmp_path, capsys):
    # A user's folder whose only entries are named like diagnose's (TensorBoard's runs/, a logs/ folder).
    user = tmp_path / "experiment"
    (user / "runs").mkdir(parents=True)
    (user / "runs" / "events.out").write_text("data")
    (user / "logs").mkdir()
    assert main(["diagnose", "-o", str(user), "--no-bisect", "--", PY, "-c", "pass"]) == 2
    assert "not an earlier diagnose's" in capsys.readouterr().err
    assert (user / "runs" / "events.out").read_text() == "data" and (user / "logs").is_dir()
    # An earlier diagnose's folder (marked): a link diagnose did not write in it is refused (issue #36 item 2);
    # the link and what it points at stay.
    out = tmp_path / "o"
    assert main(["diagnose", "-o", str(out), "--no-bisect", "--", PY, "-c", "import sys; sys.exit(3)"]) == 2
    shutil_target = tmp_path / "precious"
    shutil_target.mkdir()
    (shutil_target / "f").write_text("keep")
    (out / "repro").symlink_to(shutil_target, target_is_directory=True)
    capsys.readouterr()
    assert main(["diagnose", "-o", str(out), "--no-bisect", "--", PY, "-c", "import sys; sys.exit(3)"]) == 2
    assert "'repro'" in capsys.readouterr().err
    assert (shutil_target / "f").read_text() == "keep" and (out / "repro").is_symlink()


#: The variables diagnose sets in some runs (docs/diagnose.md, "Environment variables").
CONTROLLED_ENV = ("GRAPHPROBE_CONFIG", "GRAPHPROBE_REPRO_MODULE", "GRAPHPROBE_REPRO_DIR", "TORCHDYNAMO_DISABLE",
                  "TORCH_BISECT_BACKEND", "TORCH_BISECT_SUBSYSTEM", "TORCH_BISECT_MAX")


def test_runs_do_not_inherit_the_variables_diagnose_controls(tmp_path, monkeypatch):
    from graphprobe.diagnose import commands

    for k in CONTROLLED_ENV:
        monkeypatch.setenv(k, "stale")
    monkeypatch.setenv("USER_OWN_VAR", "kept")
    dump = tmp_path / "env.json"
    script = [PY, "-c", "import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], 'w'))", str(dump)]
    Runner(tmp_path / "logs").run("t", script, {"GRAPHPROBE_CONFIG": "c.json"})
    env = json.loads(dump.read_text())
    assert env["GRAPHPROBE_CONFIG"] == "c.json" and env["USER_OWN_VAR"] == "kept"
    assert not [k for k in CONTROLLED_ENV if k != "GRAPHPROBE_CONFIG" and k in env]
    assert set(commands.CONTROLLED_ENV) == set(CONTROLLED_ENV)


def test_graphprobe_config_error_names_the_variable(tmp_path, monkeypatch):
    from graphprobe.dumper import AclGraphDumper

    monkeypatch.setenv(CONFIG_ENV, str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match=r"\$GRAPHPROBE_CONFIG=.*missing\.json.*mine\.json"):
        AclGraphDumper("mine.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"task": "statistics", "dump_path": "d", "level": "L9"}')
    monkeypatch.setenv(CONFIG_ENV, str(bad))
    with pytest.raises(ValueError, match=r"\$GRAPHPROBE_CONFIG=.*bad\.json.*L9"):
        AclGraphDumper()


def test_tail_reads_only_the_end_of_a_huge_log(tmp_path):
    from graphprobe.diagnose.commands import tail

    log = tmp_path / "big.log"
    with open(log, "w") as f:
        f.write("x" * 50_000_000 + "\n")
        f.write("".join(f"line {i}\n" for i in range(100)))
    import tracemalloc

    tracemalloc.start()
    try:
        assert tail(str(log), 3) == "line 97\nline 98\nline 99\n"
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000, f"tail read {peak} bytes into memory for 3 lines"


# A script saving a module for the repro as diagnose's attribute run does: a class of its own using the usual
# import aliases, a helper function, a constant (non-finite) and a class defined inside a function.
REPRO_SCRIPT = textwrap.dedent('''
    import math, os, sys
    import torch
    import torch.nn as nn
    from torch.nn import functional as F
    from graphprobe.config_env import save_repro_module

    SCALE = float("inf")
    GAIN = 2.0

    def main(x):  # a helper named like the repro's own functions once were
        return torch.tanh(x) * GAIN

    class Act(nn.Module):
        limit = SCALE
        def forward(self, x):
            return main(F.relu(x)).clamp(max=self.limit) + sum(math.sqrt(k) for k in [0.0])

    def local_model():
        class Inner(nn.Module):
            def forward(self, x):
                return x * 2
        return nn.Sequential(Inner())

    model = nn.Sequential(nn.Linear(4, 4), Act()) if sys.argv[1] == "top" else local_model()
    save_repro_module(model)
''')


def _repro_for(tmp_path: Path, kind: str, module: str, entry: str, args: list) -> Path:
    import torch

    from graphprobe.diagnose.repro import write_repro

    script = tmp_path / f"{kind}.py"
    script.write_text(REPRO_SCRIPT)
    saved = tmp_path / f"saved_{kind}"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), GRAPHPROBE_REPRO_MODULE="", GRAPHPROBE_REPRO_DIR=str(saved))
    subprocess.run([PY, str(script), kind], env=env, check=True, timeout=300)
    inputs = tmp_path / f"inputs_{kind}.pt"
    torch.save({"args": args, "kwargs": {}}, inputs)
    out = tmp_path / f"out_{kind}"
    write_repro(out, ModuleVerdict(module, entry, "creates", "", 0, "f", []), inputs, saved, "")
    return out / "repro" / "repro.py"


def test_repro_runs_as_written(tmp_path):
    import torch

    repro = _repro_for(tmp_path, "top", "", "Module.Sequential.forward.0", [torch.randn(2, 4)])
    rep = subprocess.run([PY, str(repro)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    # Runs through (no NameError for nn/F/GAIN/math, no inf literal, the script's main() not replaced by the
    # repro's): the module is fine, exit 0.
    assert rep.returncode == 0 and "relative max error" in rep.stdout, rep.stdout + rep.stderr
    # A class defined inside a function cannot be unpickled: the script says so (it used to be an IndentationError),
    # with exit 2, not 1 (1 is "the compiled module creates the error", which diagnose reads as reproducing).
    repro = _repro_for(tmp_path, "local", "", "Module.Sequential.forward.0", [torch.randn(2, 4)])
    rep = subprocess.run([PY, str(repro)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert rep.returncode == 2 and "cannot be rebuilt" in rep.stderr, rep.stdout + rep.stderr


CACHE_SCRIPT = textwrap.dedent('''
    import torch
    from graphprobe.config_env import save_repro_module

    class Cache:
        """A KV cache as transformers' DynamicCache: an object holding tensors, updated by the forward."""
        def update(self, x):
            self.keys = torch.cat([self.keys, x], dim=0)
            return self.keys

    class Attn(torch.nn.Module):
        def forward(self, x, cache):
            assert isinstance(cache, Cache), type(cache)  # the object itself, not the dict inputs.pt holds
            keys = cache.update(x)
            return x + keys.sum(0, keepdim=True)

    save_repro_module(Attn())
''')


def test_repro_rebuilds_an_object_input_fresh_for_each_run(tmp_path):
    # Issue #37 held-out case (a): an attention called with a DynamicCache. inputs.pt holds the cache as a dict of
    # its attributes with "__class__" (replay's _cpu_tree, loadable with weights_only=True); the repro passed that
    # dict on (TypeError: update expected at most 1 argument, exit 2: reproduces null), and would have passed the one
    # cache to the eager, compiled and float64 runs, each appending to what the one before had appended.
    import torch

    from graphprobe.diagnose.repro import write_repro

    script = tmp_path / "attn.py"
    script.write_text(CACHE_SCRIPT)
    saved = tmp_path / "saved"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), GRAPHPROBE_REPRO_MODULE="", GRAPHPROBE_REPRO_DIR=str(saved))
    subprocess.run([PY, str(script)], env=env, check=True, timeout=300)
    inputs = tmp_path / "inputs.pt"
    torch.save({"args": [torch.randn(2, 4)], "kwargs": {"cache": {"__class__": "__main__.Cache",
                                                                   "keys": torch.randn(3, 4)}}}, inputs)
    write_repro(tmp_path / "out", ModuleVerdict("", "Module.Attn.forward.0", "creates", "", 0, "f", []), inputs,
                saved, "")
    rep = subprocess.run([PY, str(tmp_path / "out" / "repro" / "repro.py"), "--backend", "eager"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert rep.returncode == 0 and "no error beyond eager's" in rep.stdout, rep.stdout + rep.stderr
    assert "output 0 (2, 4) torch.float32" in rep.stdout, rep.stdout


def test_repro_of_a_backward_origin_says_why_it_is_not_run(tmp_path):
    # Issue #37 held-out case (c): the origin is a Linear's backward. The repro runs forwards; its note said "the
    # dumper saved no replay_inputs file for it", although replay had saved the forward call's inputs and judged
    # the backward: not the true reason.
    from graphprobe.diagnose.repro import run_repro, write_repro

    origin = ModuleVerdict("layers.1.mlp.down_proj", "Module.layers.1.mlp.down_proj.Linear.backward.0", "creates", "",
                           0.002, "f", [])
    repro = write_repro(tmp_path / "out", origin, None, tmp_path / "nothing", "layers.1.mlp.down_proj")
    reproduces, note = run_repro(None, repro, {"backend": "eager"})
    assert reproduces is None and "saved no replay_inputs" not in note, note
    assert "Module.layers.1.mlp.down_proj.Linear.backward.0" in note and "forward only" in note, note


def test_repro_module_and_class_names_cannot_inject_code(tmp_path, monkeypatch):
    import torch

    from graphprobe.diagnose.repro import write_repro

    # A ModuleDict key may hold quotes and braces (not a dot); a class name anything.
    key = 'x""";open("PWNED_KEY","w");"""'
    model = torch.nn.ModuleDict({key: torch.nn.Linear(2, 2)})
    saved = tmp_path / "saved"
    monkeypatch.setenv("GRAPHPROBE_REPRO_MODULE", "")
    monkeypatch.setenv("GRAPHPROBE_REPRO_DIR", str(saved))
    save_repro_module(model)
    inputs = tmp_path / "inputs.pt"
    torch.save({"args": [torch.randn(3, 2)], "kwargs": {}}, inputs)
    entry = f"Module.{key}.{{open('PWNED_CLS','w')}}.forward.0"
    write_repro(tmp_path / "o", ModuleVerdict(key, entry, "creates", "", 0, "f", []), inputs, saved, "")
    rep = subprocess.run([PY, str(tmp_path / "o" / "repro" / "repro.py")], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert not (tmp_path / "PWNED_KEY").exists() and not (tmp_path / "PWNED_CLS").exists()
    assert rep.returncode == 0 and key in rep.stdout, rep.stdout + rep.stderr


# ----------------------------------------------------------------------------- diagnosis.json against the docs

#: diagnosis.json as docs/diagnose.md documents it: key -> the fields of its object (or of its list's items).
SCHEMA = {
    "version": None, "command": None, "reference_command": None, "level": None, "steps": None,
    "conclusion": None, "error": None,
    "first_divergence": ("step", "entry", "module", "class", "kinds", "message", "last_agreeing"),
    "attribution": ("scope", "why", "dump", "modules"),
    "origin": ("module", "entry", "step", "verdict", "reason", "local_error", "eager_local_error", "float64_error",
               "floor", "outputs", "inputs"),
    "bisect": ("backend", "subsystem", "bisect_number", "debug_info", "note", "jobs", "tests"),
    "bisect_skipped": None, "kernels": None, "kernels_note": None,
    "repro": ("folder", "script", "missing", "hooks_dropped", "rebuildable", "reproduces", "reproduces_note"),
    "screen": ("reference_dump", "target_dump", "compare_dir", "pairs"),
    "stages": None,
    "commands": ("stage", "argv", "env", "exit_code", "seconds", "log", "note", "via"),
    "runner": ("path", "note", "preloaded", "preload_seconds"),
    "files": ("diagnosis", "html", "summary"),
}
NESTED = {("attribution", "modules"): ("module", "entry", "step", "verdict", "reason", "local_error",
                                       "eager_local_error", "float64_error", "floor"),
          ("bisect", "tests"): ("test", "backend", "subsystem", "state", "range", "passed", "seen", "local_error",
                                "seconds", "log", "speculative", "used", "started"),
          ("screen", "pairs"): ("pair", "counts", "first_divergence", "csv", "report", "error")}


def _doc_rows() -> dict[str, str]:
    """The diagnosis.json table of docs/diagnose.md: documented key -> its row."""
    text = (REPO / "docs" / "diagnose.md").read_text()
    table = text.split("## diagnosis.json", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in table.splitlines():
        if line.startswith("| `"):
            keys = line.split("|")[1]
            for k in keys.split(","):
                rows[k.strip().strip("`")] = line
    return rows


def test_schema_table_is_the_documented_one():
    rows = _doc_rows()
    assert set(rows) == set(SCHEMA), set(rows) ^ set(SCHEMA)
    for key, fields in SCHEMA.items():
        for f in fields or ():
            assert f"`{f}`" in rows[key], (key, f)
    for (key, sub), fields in NESTED.items():
        for f in fields:
            assert f"`{f}`" in rows[key], (key, sub, f)


def check_schema(d: dict) -> None:
    """Every documented key is present, and every documented field of each object (and list item) present."""
    assert set(d) == set(SCHEMA), set(d) ^ set(SCHEMA)
    assert d["version"] == 1
    for key, fields in SCHEMA.items():
        v = d[key]
        if fields is None or v is None:
            continue
        for item in v if isinstance(v, list) else [v]:
            assert set(fields) <= set(item), (key, set(fields) - set(item))
    for (key, sub), fields in NESTED.items():
        for item in (d[key] or {}).get(sub, []):
            assert set(fields) <= set(item), (key, sub, set(fields) - set(item))


def test_diagnosis_json_of_a_failed_screen_has_every_documented_key(tmp_path):
    assert main(["diagnose", "-o", str(tmp_path / "o"), "--", PY, "-c", "import sys; sys.exit(3)"]) == 2
    check_schema(json.loads((tmp_path / "o" / "diagnosis.json").read_text()))


def test_report_html_escapes_names_and_commands(tmp_path):
    from graphprobe.diagnose.report import write_reports

    evil = "<script>alert(1)</script>"
    d = {"version": 1, "command": [PY, evil], "reference_command": None, "level": "L0", "steps": None,
         "conclusion": evil, "error": None, "first_divergence": None, "origin": None,
         "attribution": {"scope": evil, "why": evil, "dump": "d", "modules": [
             {"module": evil, "entry": evil, "step": 0, "verdict": "creates", "reason": evil, "local_error": 1.0,
              "eager_local_error": 0.0, "float64_error": 1.0, "floor": 1e-4}]},
         "bisect_skipped": None, "kernels": [], "kernels_note": None, "repro": None, "screen": None,
         "bisect": {"backend": None, "subsystem": None, "bisect_number": None, "debug_info": None, "note": evil,
                    "tests": [{"test": 0, "backend": "eager", "subsystem": None, "state": None, "passed": None,
                               "seen": evil, "local_error": None, "seconds": 1.0, "log": evil}]},
         "stages": {}, "commands": [{"stage": evil, "argv": [PY, evil], "env": {}, "exit_code": 0, "seconds": 1.0,
                                     "log": evil, "note": ""}]}
    write_reports(tmp_path, d)
    page = (tmp_path / "report.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "FAIL" not in page and "not judged (the bisect stopped)" in page  # an aborted test did not fail


def test_a_command_killed_by_a_signal_says_which(tmp_path):
    rec = Runner(tmp_path / "logs").run("x", [PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"], {})
    assert rec.exit_code == -9 and "SIGKILL" in rec.note


def test_progress_to_a_closed_pipe_does_not_lose_the_report(tmp_path):
    from graphprobe.diagnose.commands import say_to
    from graphprobe.diagnose.pipeline import DiagnoseOptions, diagnose

    class Closed:
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

    code, d = diagnose(DiagnoseOptions(command=[PY, "-c", "import sys; sys.exit(3)"], out=str(tmp_path / "o"),
                                       bisect=False), say_to(Closed()))
    assert code == 2 and "exit code 3" in d["error"]
    assert json.loads((tmp_path / "o" / "diagnosis.json").read_text())["error"] == d["error"]


def test_interrupted_bisect_removes_its_state_and_cache(tmp_path, fake, monkeypatch):
    from torch._inductor.compiler_bisector import CompilerBisector

    from graphprobe.diagnose.bisect import bisect

    runner = Runner(tmp_path / "logs")
    real_run = Runner.run

    def run(self, stage, argv, env, unset=(), stop=None):
        if stage == "bisect-2":
            raise KeyboardInterrupt
        return real_run(self, stage, argv, env, unset, stop)

    monkeypatch.setattr(Runner, "run", run)
    with pytest.raises(KeyboardInterrupt) as excinfo:
        bisect(runner, tmp_path, [PY, str(fake), "blk.act", "lowering"], "blk.act", None, lambda m: None)
    # While the caller still holds the traceback (as diagnose's Ctrl-C handler does), the bisector's state
    # folder, OUT/runs/bisect/inductor_cache, is gone and the bisector is off again.
    assert excinfo.value is not None
    assert not (tmp_path / "runs" / "bisect" / "inductor_cache").exists()
    assert CompilerBisector.in_process_cache is None and not CompilerBisector.bisection_enabled


def test_origin_inputs_are_the_file_replay_json_names(tmp_path):
    # A ModuleDict key holding '/': the dumper names the inputs file with '_' (docs/diagnose.md, replay.json).
    script = tmp_path / "odd.py"
    script.write_text(textwrap.dedent('''
        import json, os
        cfg = json.load(open(os.environ["GRAPHPROBE_CONFIG"]))
        leaf = os.path.join(cfg["dump_path"], "step0", "pid1")
        os.makedirs(os.path.join(leaf, "replay_inputs"))
        open(os.path.join(leaf, "dump.json"), "w").write("{}")
        open(os.path.join(leaf, "replay_inputs", "Module.blk.a_b.Linear.forward.0.pt"), "wb").write(b"x")
        mods = [{"module": "blk.a/b", "entry": "Module.blk.a/b.Linear.forward.0", "verdict": "creates",
                 "reason": "", "outputs": [{"index": 0, "local_error": 0.5, "eager_local_error": 0.0,
                                             "float64_error": 0.5, "floor": 1e-4}],
                 "inputs_file": "replay_inputs/Module.blk.a_b.Linear.forward.0.pt"},
                {"module": "blk.c", "entry": "Module.blk.c.Linear.forward.0", "verdict": "inherits", "reason": "",
                 "outputs": [], "inputs_file": "../../../../etc/passwd"}]
        json.dump({"version": 1, "modules": mods}, open(os.path.join(leaf, "replay.json"), "w"))
    '''))
    first = FirstDivergence(0, "Module.blk.M.forward.0", "blk", "M", ("output",), "")
    res = attribute(Runner(tmp_path / "logs"), tmp_path, [PY, str(script)], first, None, lambda m: None)
    assert res.origin is not None and res.origin.module == "blk.a/b"
    assert res.inputs_file is not None and res.inputs_file.name == "Module.blk.a_b.Linear.forward.0.pt"
    other = next(m for m in res.modules if m.module == "blk.c")
    assert other.inputs_path() is None  # a path leaving the replay.json folder is not followed


def test_repro_module_that_cannot_be_pickled_leaves_no_partial_file(tmp_path, monkeypatch):
    import threading

    import torch

    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    model[0].lock = threading.Lock()  # neither pickled nor deep-copied
    monkeypatch.setenv("GRAPHPROBE_REPRO_MODULE", "0")
    monkeypatch.setenv("GRAPHPROBE_REPRO_DIR", str(tmp_path / "m"))
    save_repro_module(model)
    info = json.loads((tmp_path / "m" / "module.json").read_text())
    assert info["module"] == "0" and not info["pickled"] and "lock" in info["pickle_error"]
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["module.json", "state_dict.pt"]


def test_graphprobe_config_warns_once(tmp_path, monkeypatch):
    import warnings

    from graphprobe.dumper import AclGraphDumper

    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"task": "tensor", "dump_path": str(tmp_path / "d"), "level": "L0",
                               "statistics": {"slice": [{"dim": 0, "end": 1}]}}))  # a config that warns
    monkeypatch.setenv(CONFIG_ENV, str(cfg))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        AclGraphDumper()
    assert len([w for w in caught if "slice" in str(w.message)]) == 1


def test_the_origin_alone_is_recorded_for_its_kernels(tmp_path):
    from graphprobe.diagnose.entries import selector
    from graphprobe.diagnose.pipeline import find_kernels
    from graphprobe.wiring.probe import matches  # the dumper's own statistics.list rule

    item = selector("layers.1", "Module.layers.1.Block.forward.0")
    picked = [p for p in ("layers.1.Block", "layers.10.Block", "layers.11.Block", "layers.1.mlp.MLP")
              if matches(p, (item.lower(),))]
    assert picked == ["layers.1.Block"]
    assert matches("layers.10.block", ("layers.1",))  # why the path alone is not enough (it was used before)
    assert selector("", "Module.Net.forward.0") == ""  # the root: every module (as the path alone)
    # The kernels run records that item only: the probes last in the output code are the origin's.
    find_kernels(Runner(tmp_path / "logs"), tmp_path, [PY, "-c", "import sys; sys.exit(1)"], "layers.1", 1,
                 select=item)
    cfg = json.loads((tmp_path / "runs" / "kernels.json").read_text())
    assert cfg["statistics"]["list"] == ["layers.1.Block"]


# ----------------------------------------------------------------------------- issue #37: held-out acceptance

@pytest.mark.slow
@gated
@pytest.mark.parametrize("case", ["a", "b", "c", "d", "e", "f"])
def test_heldout_acceptance(tmp_path, case):
    # scripts/diagnose_heldout.py's cases on transformers models no other test uses (Phi-3 with its default cache,
    # OLMoE, StableLM training, BLOOM, Falcon); 30-230 s each, benchmarks/results/diagnose_cost.md has the last run.
    pytest.importorskip("transformers")
    import importlib.util

    spec = importlib.util.spec_from_file_location("diagnose_heldout", REPO / "scripts" / "diagnose_heldout.py")
    heldout = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(heldout)
    result = heldout.run(case, tmp_path, 900, REPO / "src")
    assert result["pass"], (result["failures"], result["error"], result["conclusion"])

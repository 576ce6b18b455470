"""diagnose never touches what it did not write (issue #36 items 1, 2, 3, 19,
20, 23): the mark is never written through a link, a re-run removes only
the unchanged files of the run before, two diagnoses never share an OUT, no
name from the user's run becomes code in the repro, the command's children
do not outlive it, and a non-UTF-8 argument is carried through.

Fast: the commands are ``python -c`` one-liners (no torch import), except
the repro test, which saves a module in a subprocess as the attribute run does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from graphprobe.cli import main
from graphprobe.diagnose.commands import Runner

PY = sys.executable
REPO = Path(__file__).resolve().parents[1]
FAIL = [PY, "-c", "import sys; sys.exit(3)"]  # a screen that fails at once: diagnose writes its reports, exit 2


def _diagnose(out: Path, cmd: list[str] = FAIL) -> int:
    return main(["diagnose", "-o", str(out), "--no-bisect", "--", *cmd])


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
            and not p.is_symlink()}


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def _wait(predicate, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {seconds} s")
        time.sleep(0.05)


# ----------------------------------------------------------------------------- item 1: the mark

def test_a_planted_link_as_the_mark_is_refused_and_its_target_untouched(tmp_path, capsys):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "o"
    out.mkdir()
    (out / ".graphprobe_diagnose").symlink_to(victim)
    assert _diagnose(out) == 2
    err = capsys.readouterr().err
    assert ".graphprobe_diagnose" in err and "symbolic link" in err, err
    assert victim.read_text() == "precious"
    assert sorted(os.listdir(out)) == [".graphprobe_diagnose"]  # nothing ran, nothing was written
    assert os.path.islink(out / ".graphprobe_diagnose")


def test_the_mark_is_a_regular_file_created_by_diagnose(tmp_path):
    out = tmp_path / "o"
    assert _diagnose(out) == 2
    mark = out / ".graphprobe_diagnose"
    assert mark.is_file() and not mark.is_symlink()
    listed = {m["path"] for m in json.loads(mark.read_text())["files"]}
    assert {"diagnosis.json", "summary.txt", "report.html"} <= listed
    assert any(p.startswith("logs/") for p in listed)


# ----------------------------------------------------------------------------- item 2: a re-run removes only its own

def test_rerun_refuses_a_users_file_and_an_edited_file_and_removes_nothing(tmp_path, capsys):
    out = tmp_path / "o"
    assert _diagnose(out) == 2
    (out / "repro").mkdir()
    (out / "repro" / "repro.py").write_text("# the user's edited repro\n")
    (out / "logs" / "notes.txt").write_text("my notes")
    (log,) = (out / "logs").glob("*_screen-reference.log")
    log.write_text(log.read_text() + "edited by the user\n")
    before = _files(out)
    capsys.readouterr()
    assert _diagnose(out) == 2
    err = capsys.readouterr().err
    for name in ("repro/repro.py", "logs/notes.txt", f"logs/{log.name}"):
        assert name in err, err
    assert "nothing was removed" in err
    assert _files(out) == before  # every file as it was, diagnose's own included

    # Once the user's files are gone and the edit undone, the earlier run's files are replaced.
    (out / "repro" / "repro.py").unlink()
    (out / "logs" / "notes.txt").unlink()
    log.write_text(before[f"logs/{log.name}"].decode().replace("edited by the user\n", ""))
    assert _diagnose(out) == 2
    assert not (out / "repro").exists()  # an emptied folder of diagnose's goes
    d = json.loads((out / "diagnosis.json").read_text())
    # The reference and the target run at once (issue #37; the target stopped once the reference failed).
    assert len(d["commands"]) == 2 and len(list((out / "logs").iterdir())) == 2


def test_rerun_refuses_a_link_among_its_folders(tmp_path, capsys):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "f").write_text("keep")
    out = tmp_path / "o"
    assert _diagnose(out) == 2
    (out / "repro").symlink_to(precious, target_is_directory=True)
    assert _diagnose(out) == 2
    assert "'repro'" in capsys.readouterr().err
    assert (precious / "f").read_text() == "keep" and (out / "repro").is_symlink()


def test_an_older_text_mark_lists_nothing_so_nothing_is_removed(tmp_path, capsys):
    out = tmp_path / "o"
    (out / "logs").mkdir(parents=True)
    (out / "logs" / "000_screen-target.log").write_text("x")
    (out / ".graphprobe_diagnose").write_text("graphprobe diagnose output folder: a later diagnose ...\n")
    assert _diagnose(out) == 2
    assert "logs/000_screen-target.log" in capsys.readouterr().err
    assert (out / "logs" / "000_screen-target.log").read_text() == "x"


# ----------------------------------------------------------------------------- item 20: one diagnose per OUT

def test_a_second_diagnose_into_the_same_out_is_refused_with_the_first_ones_pid(tmp_path, capsys):
    out = tmp_path / "o"
    started, release = tmp_path / "started", tmp_path / "release"
    wait = ("import os, sys, time; open(sys.argv[1], 'w').close()\n"
            "t = time.monotonic()\n"
            "while not os.path.exists(sys.argv[2]) and time.monotonic() - t < 600: time.sleep(0.05)\n"
            "sys.exit(3)")
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    first = subprocess.Popen([PY, "-m", "graphprobe", "diagnose", "-o", str(out), "--no-bisect", "--", PY, "-c", wait,
                              str(started), str(release)], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        _wait(lambda: started.exists() or first.poll() is not None, 300, "the first diagnose's command started")
        assert first.poll() is None, first.stderr.read()
        assert _diagnose(out) == 2
        err = capsys.readouterr().err
        assert f"OUT is in use by pid {first.pid}" in err, err
    finally:
        release.touch()
        first.wait(timeout=300)
    assert first.returncode == 2  # its own command failed (exit 3); the second one did not disturb it
    d = json.loads((out / "diagnosis.json").read_text())
    assert sorted(c["stage"] for c in d["commands"]) == ["screen-reference", "screen-target"]
    # The lock went with its holder: the next diagnose takes the folder over.
    assert _diagnose(out) == 2 and "in use" not in capsys.readouterr().err


def test_a_stale_lock_of_a_dead_pid_is_taken_over(tmp_path, capsys):
    out = tmp_path / "o"
    dead = subprocess.run([PY, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout
    out.mkdir()
    (out / ".graphprobe_diagnose").write_text(json.dumps({"pid": int(dead), "files": []}))
    assert _diagnose(out) == 2
    assert "in use" not in capsys.readouterr().err
    assert json.loads((out / ".graphprobe_diagnose").read_text())["pid"] == os.getpid()


# ----------------------------------------------------------------------------- item 19: children left running

def test_children_left_running_by_a_command_that_exited_are_stopped(tmp_path):
    pidfile = tmp_path / "child.pid"
    # The command starts a sleeper and exits 0 at once, leaving it running in its process group.
    leave = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); "
             "open(sys.argv[1], 'w').write(str(p.pid))")
    child = None
    try:
        rec = Runner(tmp_path / "logs").run("x", [PY, "-c", leave, str(pidfile)], {})
        child = int(pidfile.read_text())
        assert rec.exit_code == 0
        _wait(lambda: not _alive(child), 30, "the sleeper the command left running was stopped")
        assert "1 child process(es) still running after it exited were stopped" in rec.note, rec.note
    finally:
        if child is not None and _alive(child):
            os.kill(child, signal.SIGKILL)
    # A command that leaves nothing behind has no note.
    assert Runner(tmp_path / "logs2").run("y", [PY, "-c", "pass"], {}).note == ""


# ----------------------------------------------------------------------------- item 23: non-UTF-8 arguments

def test_a_non_utf8_argument_is_carried_through_not_a_crash(tmp_path, capsys):
    arg = os.fsdecode(b"data_\xff.bin")  # a legal POSIX file name, as sys.argv holds it
    out = tmp_path / "o"
    assert main(["diagnose", "-o", str(out), "--no-bisect", "--", *FAIL, arg]) == 2
    d = json.loads((out / "diagnosis.json").read_text())
    assert d["command"][-1] == arg and os.fsencode(d["command"][-1]) == b"data_\xff.bin"
    assert "exit code 3" in d["error"]
    (log,) = (out / "logs").glob("*_screen-reference.log")
    assert b"data_\xff.bin" in log.read_bytes()  # the log holds the bytes given
    (out / "summary.txt").read_text(encoding="utf-8")  # valid UTF-8, the name escaped
    assert "data_\\udcff.bin" in (out / "report.html").read_text(encoding="utf-8")
    # Through the CLI, with a strict UTF-8 stdout, as a user runs it.
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), PYTHONIOENCODING="utf-8:strict")
    proc = subprocess.run([PY, "-m", "graphprobe", "diagnose", "-o", str(tmp_path / "o2"), "--no-bisect", "--",
                           *[os.fsencode(a) for a in FAIL], b"data_\xff.bin"], env=env, capture_output=True,
                          timeout=300)
    assert proc.returncode == 2 and b"UnicodeEncodeError" not in proc.stderr, proc.stderr[-2000:]
    assert b"data_\\udcff.bin" in proc.stdout


# ----------------------------------------------------------------------------- item 3: names never become code

QUALNAME_SCRIPT = textwrap.dedent('''
    import torch
    from graphprobe.config_env import save_repro_module

    # A class made by type(): inspect.getsource cannot read it, so its name goes into a comment of module.json.
    Evil = type("Evil", (torch.nn.Linear,), {})
    Evil.__qualname__ = "Evil\\nopen('PWNED_QUALNAME', 'w')"  # no dot: it is taken for a top-level class
    save_repro_module(torch.nn.Sequential(Evil(2, 2)))
''')


def test_a_class_qualname_with_a_newline_does_not_inject_code_into_the_repro(tmp_path):
    import torch

    from graphprobe.diagnose.replay_files import ModuleVerdict
    from graphprobe.diagnose.repro import write_repro

    script = tmp_path / "evil.py"
    script.write_text(QUALNAME_SCRIPT)
    saved = tmp_path / "saved"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), GRAPHPROBE_REPRO_MODULE="", GRAPHPROBE_REPRO_DIR=str(saved))
    subprocess.run([PY, str(script)], env=env, check=True, timeout=300, cwd=tmp_path)
    assert any("\n" in s.strip() and "PWNED" in s for s in json.loads((saved / "module.json").read_text())
               ["main_sources"]), "the test's premise: the class name reaches module.json with its newline"
    inputs = tmp_path / "inputs.pt"
    torch.save({"args": [torch.randn(3, 2)], "kwargs": {}}, inputs)
    write_repro(tmp_path / "o", ModuleVerdict("", "Module.Sequential.forward.0", "creates", "", 0, "f", []), inputs,
                saved, "")
    repro = tmp_path / "o" / "repro" / "repro.py"
    assert "left out" in repro.read_text()
    subprocess.run([PY, str(repro)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert not (tmp_path / "PWNED_QUALNAME").exists()


def test_repro_keeps_whole_definitions_and_single_bindings():
    from graphprobe.diagnose.repro import _checked_constants, _checked_sources

    good = "class A:\n    x = 1\n"
    assert _checked_sources([good, "# the source of B could not be read\n"]).startswith(good)
    assert "left out" in _checked_sources(["# the source of B\nimport os\n"])
    assert "left out" in _checked_sources(["def f():\n    pass\nimport os\n"])
    lines = _checked_constants({"nn": "import torch.nn as nn", "E": "E = float('inf')", "X": "X = 1; import os",
                                "Y": "Y = 2\nimport os"})
    assert "import torch.nn as nn" in lines and "E = float('inf')" in lines
    assert "import os" not in lines and lines.count("left out") == 2


# ----------------------------------------------------------------------------- issue #37 (c), (d): what is said

def _verdict(module: str, verdict: str, reason: str = ""):
    from graphprobe.diagnose.replay_files import ModuleVerdict

    err = 0.5 if verdict == "creates" else 0.0
    outputs = [] if verdict == "not judged" else [{"index": 0, "local_error": err, "eager_local_error": 0.0,
                                                   "float64_error": err, "floor": 1e-4}]
    return ModuleVerdict(module, f"Module.{module}.X.forward.0", verdict, reason, 0, "f", outputs)


CACHE = "not judged: input_kwargs['past_key_values'] is a DynamicCache, which replay cannot copy"


def test_no_summary_says_outside_the_scope_while_a_module_in_it_was_not_judged():
    from graphprobe.diagnose.attribute import pick_origin

    # A decoder layer's attention could not be judged (its cache); its projections inherit; the MLP inherits.
    mods = [_verdict("layers.0.self_attn", "not judged", CACHE), _verdict("layers.0.self_attn.q_proj", "inherits"),
            _verdict("layers.0.self_attn.o_proj", "inherits"), _verdict("layers.0.mlp", "inherits")]
    origin, why = pick_origin(mods)
    assert origin is None
    assert "outside the scope" not in why
    assert "layers.0.self_attn could not be judged (input_kwargs['past_key_values'] is a DynamicCache" in why
    assert "the error is then in layers.0.self_attn's own code" in why
    assert "not judged: not judged" not in why
    # A module not judged with no judged submodule: named with its reason, no claim about its own code.
    origin, why = pick_origin([_verdict("a", "inherits"), _verdict("b", "not judged", "not judged: dropout")])
    assert origin is None and "outside the scope" not in why and "b could not be judged (dropout)" in why
    assert "own code" not in why
    # Everything judged and inheriting: then, and only then, the error comes from outside the scope.
    assert "outside the scope" in pick_origin([_verdict("a", "inherits"), _verdict("a.b", "inherits")])[1]
    # Nothing judged: each module and its reason.
    why = pick_origin([_verdict("a", "not judged", CACHE), _verdict("a.b", "not judged", "not judged: x")])[1]
    assert "a: input_kwargs" in why and "a.b: x" in why and "not judged: not judged" not in why


def test_an_origin_with_unjudged_submodules_names_their_reasons():
    from graphprobe.diagnose.attribute import pick_origin

    origin, why = pick_origin([_verdict("blk", "creates"), _verdict("blk.a", "not judged", CACHE)])
    assert origin.module == "blk" and "blk.a (input_kwargs['past_key_values'] is a DynamicCache" in why


def test_attribute_prints_not_judged_once(tmp_path):
    from graphprobe.diagnose.attribute import attribute
    from graphprobe.diagnose.screen import FirstDivergence

    script = tmp_path / "s.py"
    script.write_text(textwrap.dedent(f'''
        import json, os
        cfg = json.load(open(os.environ["GRAPHPROBE_CONFIG"]))
        leaf = os.path.join(cfg["dump_path"], "step0", "pid1")
        os.makedirs(leaf)
        open(os.path.join(leaf, "dump.json"), "w").write("{{}}")
        mods = [{{"module": "blk", "entry": "Module.blk.B.forward.0", "verdict": "not judged",
                  "reason": {CACHE!r}, "outputs": []}},
                {{"module": "blk.lin", "entry": "Module.blk.lin.L.forward.0", "verdict": "inherits", "reason": "",
                  "outputs": [{{"index": 0, "local_error": 0.0, "eager_local_error": 0.0, "float64_error": 0.0,
                               "floor": 1e-4}}]}}]
        json.dump({{"version": 1, "modules": mods}}, open(os.path.join(leaf, "replay.json"), "w"))
    '''))
    said: list[str] = []
    first = FirstDivergence(0, "Module.blk.B.forward.0", "blk", "B", ("output",), "")
    res = attribute(Runner(tmp_path / "logs"), tmp_path, [PY, str(script)], first, None, said.append)
    text = "\n".join(said)
    assert "blk: not judged: input_kwargs" in text and "not judged: not judged" not in text, text
    assert res.origin is None and "blk's own code" in res.why


# ----------------------------------------------------------------------------- issue #37 (b): kernels

PREFIX = "V1201 12:00:00.000000 1 torch/_inductor/graph.py:2722] [0/0] [__output_code] "
VIEW_PROBE = [  # a probe that reads a view of an extern kernel's out= buffer, as in the held-out LM case
    "Output code: ",
    "cpp_fused_0 = async_compile.cpp_pybinding(['const float*', 'float*'], r'''",
    "    def call(self, args):",
    "        cpp_fused_0(arg0_1, buf14)",
    "        extern_kernels.addmm(arg1_1, buf14, arg2_1, alpha=1, beta=1, out=buf16)",
    "        torch.ops.graphprobe.record_stats.default(reinterpret_tensor(buf16, (2, 8, 32), (256, 32, 1), 0), 3, 0)",
    "        extern_kernels.mm(buf16, arg3_1, out=reinterpret_tensor(buf20, (16, 8), (8, 1), 0))",
    "        torch.ops.graphprobe.record_stats.default(buf20, 4, 0)",
    "        return (buf20, )",
]


def test_kernels_follow_a_view_in_the_probe_and_in_out(tmp_path):
    from graphprobe.diagnose.kernels import kernels_from_log

    log = tmp_path / "k.log"
    log.write_text("".join(PREFIX + line + "\n" for line in VIEW_PROBE))
    assert kernels_from_log(log, 1) == ["extern_kernels.mm"]  # out=reinterpret_tensor(buf20, ...)
    assert kernels_from_log(log, 2) == ["extern_kernels.addmm", "extern_kernels.mm"]


def test_kernels_are_looked_up_only_when_the_bisect_implicates_inductor():
    from graphprobe.diagnose.pipeline import kernels_skipped

    assert "'eager'" in kernels_skipped({"backend": "eager"}, None)
    assert "no backend" in kernels_skipped({"backend": None}, None)
    assert "--no-bisect" in kernels_skipped(None, "--no-bisect")


@pytest.mark.parametrize("backend, runs", [("eager", False), ("aot_eager", False), (None, False),
                                            ("inductor", True)])
def test_the_kernels_stage_runs_only_when_the_bisect_implicates_inductor(tmp_path, monkeypatch, backend, runs):
    # The stages stubbed with what they find; the pipeline's own decision is under test.
    from graphprobe.diagnose import attribute as attribute_mod, bisect as bisect_mod, pipeline, repro, screen as sc
    from graphprobe.diagnose.attribute import AttributeResult
    from graphprobe.diagnose.bisect import BisectResult
    from graphprobe.diagnose.screen import FirstDivergence, ScreenResult

    first = FirstDivergence(0, "Module.blk.B.forward.0", "blk", "B", ("output",), "")
    origin = _verdict("blk", "creates")
    monkeypatch.setattr(sc, "screen", lambda *a, **k: ScreenResult(tmp_path, tmp_path, tmp_path, [0], first, []))
    monkeypatch.setattr(attribute_mod, "attribute",
                        lambda *a, **k: AttributeResult("blk", tmp_path, [origin], origin, "blk creates"))
    monkeypatch.setattr(repro, "write_repro", lambda *a, **k: None)
    monkeypatch.setattr(bisect_mod, "bisect", lambda *a, **k: BisectResult(backend=backend, note="n"))
    looked: list[str] = []
    monkeypatch.setattr(pipeline, "find_kernels", lambda *a, **k: (looked.append("yes") or ["k0"], "found"))
    code, d = pipeline.diagnose(pipeline.DiagnoseOptions(command=[PY, "-c", "pass"], out=str(tmp_path / "o")),
                                lambda m: None)
    assert code == 1, d["error"]
    assert bool(looked) == runs and (d["kernels"] == ["k0"]) == runs
    if not runs:
        assert d["kernels_note"].startswith("not looked up") and "kernels" not in d["stages"]


# ----------------------------------------------------------------------------- issue #37 (a): does the repro reproduce

REPRO_CASES = textwrap.dedent('''
    import sys
    import torch
    import torch._functorch.config
    import torch.nn.functional as F
    from graphprobe.config_env import save_repro_module

    class LocalFault(torch.nn.Module):
        """The fault is the module's own code: a branch taken only while compiling."""
        def forward(self, x):
            y = torch.tanh(x)
            return y * 1.01 if torch.compiler.is_compiling() else y

    class UsesGelu(torch.nn.Module):
        def forward(self, x):
            return F.gelu(x)

    if sys.argv[1] == "local":
        model = LocalFault()
    else:
        # The fault lives in process state: the script patches F.gelu (as a custom lowering or a registry entry
        # would), and the repro, a new process, runs torch's own gelu.
        real = F.gelu
        F.gelu = lambda x: real(x) * 1.01 if torch.compiler.is_compiling() else real(x)
        model = UsesGelu()
    torch._functorch.config.donated_buffer = False  # an AOTAutograd option changed from its default
    save_repro_module(model)
''')


@pytest.mark.slow
def test_diagnose_runs_its_repro_and_says_whether_it_reproduces(tmp_path):
    import torch

    from graphprobe.diagnose.replay_files import ModuleVerdict
    from graphprobe.diagnose.repro import run_repro, write_repro

    script = tmp_path / "cases.py"
    script.write_text(REPRO_CASES)
    inputs = tmp_path / "inputs.pt"
    torch.save({"args": [torch.randn(4, 8)], "kwargs": {}}, inputs)
    results = {}
    for case in ("local", "state"):
        saved = tmp_path / f"saved_{case}"
        env = dict(os.environ, PYTHONPATH=str(REPO / "src"), GRAPHPROBE_REPRO_MODULE="",
                   GRAPHPROBE_REPRO_DIR=str(saved))
        subprocess.run([PY, str(script), case], env=env, check=True, timeout=300, cwd=tmp_path)
        repro = write_repro(tmp_path / f"o_{case}", ModuleVerdict("", "Module.M.forward.0", "creates", "", 0, "f", []),
                            inputs, saved, "")
        assert repro["reproduces"] is None
        assert "torch._functorch.config.donated_buffer = False" in Path(repro["script"]).read_text()
        bisect = {"backend": "inductor", "subsystem": "lowerings", "debug_info": "gelu"}
        results[case] = run_repro(Runner(tmp_path / f"logs_{case}"), repro, bisect)
    assert results["local"][0] is True, results["local"]
    reproduces, note = results["state"]
    assert reproduces is False, note
    assert "inductor's 'lowerings' (gelu)" in note and "does not carry" in note


def test_a_repro_that_cannot_run_is_not_taken_for_one_that_reproduces(tmp_path):
    from graphprobe.diagnose.repro import run_repro

    broken = tmp_path / "repro.py"
    broken.write_text("raise SystemExit(2)\n")
    reproduces, note = run_repro(Runner(tmp_path / "logs"), {"script": str(broken), "missing": []}, None)
    assert reproduces is None and "could not run" in note
    reproduces, note = run_repro(Runner(tmp_path / "logs"), {"script": str(broken), "missing": ["the inputs"]}, None)
    assert reproduces is None and "the inputs" in note
    # A repro that runs and shows nothing, of a module whose hooks were left out (the demo's fault is a hook).
    fine = tmp_path / "fine.py"
    fine.write_text("pass\n")
    reproduces, note = run_repro(Runner(tmp_path / "logs"), {"script": str(fine), "missing": [],
                                                              "hooks_dropped": True}, {"backend": "eager"})
    assert reproduces is False and note.startswith("the module's hooks could not be pickled")
    assert "backend 'eager'" in note


def test_claim_out_refuses_a_file_and_a_linked_marker(tmp_path):
    from graphprobe.diagnose.owned_files import OwnedFilesError, claim_out, record_out

    f = tmp_path / "f"
    f.write_text("x")
    with pytest.raises(OwnedFilesError, match="is not a folder"):
        claim_out(f, ("compare",), ".m")
    out = tmp_path / "o"
    claim_out(out, ("compare",), ".m")  # new: marked
    (out / "compare").mkdir()
    (out / "compare" / "r.csv").write_text("run")
    record_out(out, ("compare",), ".m")
    claim_out(out, ("compare",), ".m", remove=False)  # a check alone removes nothing
    assert (out / "compare" / "r.csv").exists()
    claim_out(out, ("compare",), ".m")
    assert sorted(os.listdir(out)) == [".m"]
    victim = tmp_path / "victim"
    victim.write_text(json.dumps({"files": []}))
    (out / ".m").unlink()
    (out / ".m").symlink_to(victim)
    (out / "compare").mkdir()
    (out / "compare" / "r.csv").write_text("run")
    with pytest.raises(OwnedFilesError):
        claim_out(out, ("compare",), ".m")
    assert json.loads(victim.read_text()) == {"files": []} and (out / "compare" / "r.csv").exists()


def test_a_file_system_without_flock_warns_and_goes_on(tmp_path, monkeypatch):
    import errno
    import fcntl

    from graphprobe.diagnose.out_folder import prepare_out

    def no_locks(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with pytest.warns(RuntimeWarning, match="cannot lock"):
        folder = prepare_out(tmp_path / "o")
    folder.finish()
    assert json.loads((tmp_path / "o" / ".graphprobe_diagnose").read_text())["files"] == []

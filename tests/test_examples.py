"""The example config.json files under examples/ load without warnings and
say what examples/README.md says they do."""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path

import pytest

from graphprobe.config import load_config

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
# (task, level, ranks, keywords) as examples/README.md describes them.
EXPECTED = {
    "statistics_L0.json": ("statistics", "L0", (), ()),
    "statistics_L1.json": ("statistics", "L1", (0,), ("linear", "softmax", "layer_norm")),
    "statistics_mix.json": ("statistics", "mix", (0, 1), ("layers.0", "linear")),
    "tensor_L0.json": ("tensor", "L0", (), ("mlp",)),
    "statistics_slice.json": ("statistics", "L0", (), ()),
    "tensor_aclgraph.json": ("tensor", "L0", (), ("attn",)),
}


def test_every_example_is_listed() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.json")) == sorted(EXPECTED)
    table = (EXAMPLES / "README.md").read_text()
    for name in EXPECTED:
        assert f"[{name}]({name})" in table


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_loads_cleanly(name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an unknown key would warn
        config = load_config(EXAMPLES / name)
    # ranks are kept as ranges (never expanded); compare the ranks they hold
    ranks = tuple(r for span in config.ranks for r in span)
    assert (config.task, config.level, ranks, config.keywords) == EXPECTED[name]
    assert json.loads((EXAMPLES / name).read_text())["dump_enable"] is True


def test_the_l0_example_is_the_builtin_default() -> None:
    example = dataclasses.replace(load_config(EXAMPLES / "statistics_L0.json"), source=None)
    assert example == dataclasses.replace(load_config(None), source=None)


# -- the runnable examples (issue 31 item 4): each runs as a user runs it, in an empty folder ---------------------

import os  # noqa: E402
import re  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

SCRIPTS = ("eager_vs_compile.py", "training_loop.py", "torchrun_two_ranks.py", "cuda_graph.py")


def _run(args: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join([str(EXAMPLES.parent / "src"), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{args}: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def test_every_script_is_listed() -> None:
    table = (EXAMPLES / "README.md").read_text()
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(SCRIPTS)
    for name in SCRIPTS:
        assert f"[{name}]({name})" in table


def test_eager_vs_compile_finds_the_injected_fault(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    fault = "model.layers.1.mlp"  # the injected fault: this module's output x1.5 in the compiled run only
    out = _run([str(EXAMPLES / "eager_vs_compile.py"), "--backend", "aot_eager", "--inject-fault", fault],
               tmp_path).stdout
    first = f"Module.{fault}.LlamaMLP.forward.0"
    assert re.search(rf"^step0/pid\d+ .* {re.escape(first)}$", out, re.M), out
    assert f"first divergence: {first} -- the first entry" in out
    report = re.search(r"^plot and sortable table: (.+)$", out, re.M).group(1)
    assert (tmp_path / report).is_file()


def test_eager_vs_compile_clean_has_no_divergence(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    out = _run([str(EXAMPLES / "eager_vs_compile.py"), "--backend", "aot_eager"], tmp_path).stdout
    assert "first divergence: none -- the compiled run agrees with eager" in out
    assert re.search(r"^step0/pid\d+ +\d+ +\d+ +0 +0 +-$", out, re.M), out  # no error, nothing unmatched


def test_training_loop_names_the_step_whose_weight_was_nudged(tmp_path: Path) -> None:
    # The fault: model[2].weight x1.01 in the compiled run before iteration 2.
    out = _run([str(EXAMPLES / "training_loop.py"), "--steps", "4", "--fault-step", "2"], tmp_path).stdout
    assert "4 steps compared; first step that diverges: step2 at Module.2.Linear.forward.0" in out
    assert "parameter `weight` differs" in out
    for step in (0, 1):
        assert re.search(rf"^step{step}/pid\d+ .* -$", out, re.M), out
    assert (tmp_path / "graphprobe_training" / "compare" / "index.html").is_file()
    (dump,) = (tmp_path / "graphprobe_training" / "compiled" / "step0").glob("pid*/dump.json")
    names = list(json.loads(dump.read_text())["data"])
    assert "Module.2.Linear.forward.0" in names  # forward records
    assert "Module.2.Linear.backward.0" in names and "Module.2.Linear.parameters_grad.0" in names  # and backward ones
    # A re-run removes only what this run wrote, unchanged (issue #36 item 2): a note saved in compare/ stops it.
    out = tmp_path / "graphprobe_training"
    (out / "compare" / "my_notes.txt").write_text("mine")
    path = os.pathsep.join([str(EXAMPLES.parent / "src"), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, str(EXAMPLES / "training_loop.py")], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": path})
    assert proc.returncode == 2 and "compare/my_notes.txt" in proc.stderr, proc.stderr[-2000:]
    assert (out / "compare" / "index.html").is_file() and (out / "compare" / "my_notes.txt").read_text() == "mine"
    # Without it, everything the run listed goes (checked in-process: a second training run is slow).
    from graphprobe.diagnose.owned_files import claim_out

    (out / "compare" / "my_notes.txt").unlink()
    claim_out(out, ("eager", "compiled", "compare", "eager.json", "compiled.json"), ".graphprobe_example")
    assert sorted(os.listdir(out)) == [".graphprobe_example"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_torchrun_two_ranks_names_the_faulty_rank(tmp_path: Path) -> None:
    out = _run(["-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(_free_port()),
                str(EXAMPLES / "torchrun_two_ranks.py"), "--fault-rank", "1"], tmp_path).stdout
    assert re.search(r"^step0/rank0 +8 +0 +0 +0 +-$", out, re.M), out
    assert "step0: 1 of 2 ranks diverge; first: rank1 at Module.down.Linear.forward.0" in out
    for rank in (0, 1):
        assert (tmp_path / "graphprobe_ranks" / "compiled" / "step0" / f"rank{rank}" / "dump.json").is_file()


def test_cuda_graph_example_says_it_needs_a_gpu(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("runs in tests/gpu/test_examples_gpu.py")
    env = {**os.environ, "PYTHONPATH": str(EXAMPLES.parent / "src")}
    proc = subprocess.run([sys.executable, str(EXAMPLES / "cuda_graph.py")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "needs a CUDA GPU" in proc.stderr


@pytest.mark.parametrize("script", ["eager_vs_compile.py", "training_loop.py", "torchrun_two_ranks.py",
                                    "cuda_graph.py"])
def test_an_out_holding_a_users_folders_is_refused_and_left_as_it_is(tmp_path: Path, script: str) -> None:
    # Each example clears its earlier run's eager/compiled/graph/compare folders; before, it removed those
    # folders whatever wrote them (`--out ~/work` would delete ~/work/compare).
    mine = tmp_path / "mine"
    for rel in ("eager/step0/pid1/dump.json", "compiled/notes.txt", "graph/notes.txt", "compare/results.csv"):
        (mine / rel).parent.mkdir(parents=True, exist_ok=True)
        (mine / rel).write_text(rel)
    before = {str(p.relative_to(mine)): p.read_text() for p in mine.rglob("*") if p.is_file()}
    path = os.pathsep.join([str(EXAMPLES.parent / "src"), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, str(EXAMPLES / script), "--out", str(mine)], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": path, "CUDA_VISIBLE_DEVICES": ""},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    if script != "cuda_graph.py":  # without a GPU it stops earlier, for that reason
        assert f"--out {mine}: the folder holds files this example did not write" in proc.stderr, proc.stderr
    assert {str(p.relative_to(mine)): p.read_text() for p in mine.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("script", ["eager_vs_compile.py", "training_loop.py", "torchrun_two_ranks.py",
                                    "cuda_graph.py"])
def test_a_marked_out_holding_a_users_file_is_refused_and_left_as_it_is(tmp_path: Path, script: str) -> None:
    # The marker of an earlier run (an older, empty one here: it lists nothing) no longer makes every file under
    # eager/, compiled/, graph/ and compare/ the example's to remove (issue #36 item 2).
    mine = tmp_path / "mine"
    (mine / "compare").mkdir(parents=True)
    (mine / "compare" / "results_i_annotated.csv").write_text("mine")
    (mine / ".graphprobe_example").write_text("")
    before = {str(p.relative_to(mine)): p.read_text() for p in mine.rglob("*") if p.is_file()}
    path = os.pathsep.join([str(EXAMPLES.parent / "src"), os.environ.get("PYTHONPATH", "")])
    args = [str(EXAMPLES / script), "--out", str(mine)]
    if script == "torchrun_two_ranks.py":
        args = ["-m", "torch.distributed.run", "--nproc-per-node", "1", "--master-port", str(_free_port()), *args]
    proc = subprocess.run([sys.executable, *args], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": path, "CUDA_VISIBLE_DEVICES": ""},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0, proc.stdout[-2000:]
    if script != "cuda_graph.py":  # without a GPU it stops earlier, for that reason
        assert "compare/results_i_annotated.csv" in proc.stderr + proc.stdout, proc.stderr[-3000:]
    assert {str(p.relative_to(mine)): p.read_text() for p in mine.rglob("*") if p.is_file()} == before

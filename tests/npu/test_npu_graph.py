"""The NPU path on real hardware: eager statistics, a torch.npu.NPUGraph
captured once and replayed (statistics and acl_save per replay), torchair's
npugraph_ex (reduce-overhead) mode, and the refusal of GE mode.

Skipped without torch_npu and an NPU (tests/npu/conftest.py); run by
scripts/npu_check.sh. NPU kernels (matmul, GELU) differ from CPU's by more
than float32 rounding, hence RTOL.
"""

from __future__ import annotations

import os
import traceback

import pytest
import torch
from reference import ReferenceRecorder, assert_dump_matches

import graphprobe

RTOL = 2e-3


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))


def _reference(x: torch.Tensor) -> dict:
    ref = _model()
    rec = ReferenceRecorder(ref)
    with torch.no_grad():
        ref(x)
    return rec.entries


def test_eager(write_config, read_step, tmp_path):
    model = _model().npu()
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    x = torch.randn(3, 8)
    with torch.no_grad():
        model(x.npu())
    dumper.step()
    dumper.stop()
    assert_dump_matches(read_step(str(tmp_path / "dump"), 0)["data"], _reference(x), RTOL, "eager")


def test_npugraph_replays_record_and_save(write_config, read_step, tmp_path):
    model = _model().npu()
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    static = torch.zeros(3, 8).npu()
    with torch.no_grad():
        model(static)  # warm-up, outside the capture
        dumper.step(dump=False)
        graph = torch.npu.NPUGraph()
        with torch.npu.graph(graph):
            out = model(static)
            graphprobe.acl_save(out, str(tmp_path / "out.pt"))
    dumper.step(dump=False)
    inputs = [torch.randn(3, 8, generator=torch.Generator().manual_seed(s)) for s in range(2)]
    for x in inputs:
        static.copy_(x.npu())
        graph.replay()
        dumper.step()
    dumper.stop()
    graphprobe.flush()
    for step, x in enumerate(inputs):
        assert_dump_matches(read_step(str(tmp_path / "dump"), step)["data"], _reference(x), RTOL, f"replay {step}")
        saved = torch.load(tmp_path / f"out_{step}.pt")
        with torch.no_grad():
            torch.testing.assert_close(saved, _model()(x), rtol=RTOL, atol=1e-4)
    assert not os.path.exists(tmp_path / "out_2.pt")


def _torchair_backend(mode: str):
    import torchair  # type: ignore

    config = torchair.CompilerConfig()
    config.mode = mode
    return torchair.get_npu_backend(compiler_config=config)


def test_npugraph_ex_reduce_overhead(write_config, read_step, tmp_path):
    model = _model().npu()
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    compiled = torch.compile(model, backend=_torchair_backend("reduce-overhead"), fullgraph=True)
    inputs = [torch.randn(3, 8, generator=torch.Generator().manual_seed(s)) for s in range(3)]
    with torch.no_grad():
        for x in inputs:
            compiled(x.npu())
            dumper.step()
    dumper.stop()
    for step, x in enumerate(inputs):
        assert_dump_matches(read_step(str(tmp_path / "dump"), step)["data"], _reference(x), RTOL, f"npugraph_ex step {step}")


def test_ge_mode_is_refused_with_a_clear_error(write_config):
    from graphprobe.npu import GE_MODE_MESSAGE

    model = _model().npu()
    dumper = graphprobe.AclGraphDumper(write_config())
    dumper.start(model)
    compiled = torch.compile(model, backend=_torchair_backend("max-autotune"), fullgraph=True)
    with pytest.raises(Exception) as info, torch.no_grad():
        compiled(torch.randn(3, 8).npu())
    dumper.stop()
    # torchair may wrap the converter's error; the message must reach the user.
    assert GE_MODE_MESSAGE in "".join(traceback.format_exception(info.value))

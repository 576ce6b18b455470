"""task "tensor": full tensors of the selected records, every step, under their record names."""

from __future__ import annotations

import copy
import json
import os

import torch
from models import make_transformer

import graphprobe


def _reference(model, tokens):
    """Eager float32 inputs/outputs and own parameters of every module whose
    name contains "mlp", by plain hooks on an unwired copy: {file name: tensor}."""
    files, calls, handles = {}, {}, []
    for path, mod in model.named_modules():
        cls = type(mod).__name__
        if not path or "mlp" not in f"{path}.{cls}".lower():
            continue
        base = f"Module.{path}.{cls}.forward"

        def pre(m, args, base=base):
            n = calls.get(base, 0)
            files[f"{base}.{n}.input.0.pt"] = args[0].detach().clone()
            for name, p in m.named_parameters(recurse=False):
                files[f"{base}.{n}.parameters.{name}.pt"] = p.detach().clone()

        def post(m, args, out, base=base):
            n = calls.get(base, 0)
            calls[base] = n + 1
            files[f"{base}.{n}.output.0.pt"] = out.detach().clone()

        handles += [mod.register_forward_pre_hook(pre), mod.register_forward_hook(post)]
    with torch.no_grad():
        model(tokens)
    for h in handles:
        h.remove()
    return files


def test_compiled_tensor_dump_is_bit_equal_to_eager(write_config, tmp_path):
    base = make_transformer()
    ref_model = copy.deepcopy(base)
    model = copy.deepcopy(base)
    dumper = graphprobe.AclGraphDumper(write_config(task="tensor", statistics={"list": ["mlp"]}))
    dumper.start(model)
    # aot_eager runs the same ATen kernels as eager, so bit equality is the bar.
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    for step in range(3):
        tokens = torch.randint(0, 64, (2, 5), generator=torch.Generator().manual_seed(step))
        with torch.no_grad():
            compiled(tokens)
        dumper.step()
        want = _reference(ref_model, tokens)
        graphprobe.flush()
        (proc,) = os.listdir(tmp_path / "dump" / f"step{step}")
        folder = tmp_path / "dump" / f"step{step}" / proc
        doc = json.loads((folder / "dump.json").read_text())
        assert doc["task"] == "tensor" and doc["dump_data_dir"] == str(folder / "dump_tensor_data")
        names = sorted(os.listdir(folder / "dump_tensor_data"))
        assert names == sorted(want), "exactly the MLP tensors"
        for name, tensor in want.items():
            got = torch.load(folder / "dump_tensor_data" / name)
            assert got.dtype == tensor.dtype and torch.equal(got, tensor), name
        data_names = {
            rec["data_name"]
            for entry in doc["data"].values()
            for part in ("input_args", "output", "parameters")
            for rec in (entry[part].values() if isinstance(entry[part], dict) else entry[part])
            if isinstance(rec, dict) and "data_name" in rec
        }
        assert data_names == set(want)
    dumper.stop()
    assert not any(p.name.startswith(".staging") for p in (tmp_path / "dump").iterdir())


def test_tensor_task_with_switch_and_discarded_steps(write_config, tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())
    dumper = graphprobe.AclGraphDumper(write_config(task="tensor"))
    dumper.start(model)
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    with torch._dynamo.config.patch(error_on_recompile=True), torch.no_grad():
        compiled(torch.ones(1, 3))
        dumper.step(dump=False)  # discarded: its staged tensors must not leak into step0
        for step in range(6):
            dumper.enable(step not in (2, 4))
            x = torch.full((1, 3), float(step))
            compiled(x)
            dumper.step()
    dumper.stop()
    root = tmp_path / "dump"
    assert sorted(p.name for p in root.iterdir()) == ["step0", "step1", "step3", "step5"]
    for step in (0, 1, 3, 5):
        (proc,) = os.listdir(root / f"step{step}")
        files = sorted(os.listdir(root / f"step{step}" / proc / "dump_tensor_data"))
        assert files == [
            "Module.0.Linear.forward.0.input.0.pt",
            "Module.0.Linear.forward.0.output.0.pt",
            "Module.0.Linear.forward.0.parameters.bias.pt",
            "Module.0.Linear.forward.0.parameters.weight.pt",
            "Module.1.ReLU.forward.0.input.0.pt",
            "Module.1.ReLU.forward.0.output.0.pt",
        ]
        x = torch.load(root / f"step{step}" / proc / "dump_tensor_data" / files[0])
        assert torch.equal(x, torch.full((1, 3), float(step)))


def test_inductor_saves_a_tensor_probed_twice_under_both_records(write_config, tmp_path):
    """In inductor's code the second probe of a value is a record_mirror
    (wiring/shared_probes.py); the tensor task still needs a file per record."""
    from torch._inductor.utils import run_and_get_code

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    x = torch.randn(3, 8)
    with torch.no_grad():
        hidden = torch.relu(model[0](x))
    dumper = graphprobe.AclGraphDumper(write_config(task="tensor"))
    dumper.start(model)
    with torch.no_grad():
        _, codes = run_and_get_code(torch.compile(model, backend="inductor", fullgraph=True), x)
    dumper.step()
    dumper.stop()
    assert "graphprobe.record_mirror.default(" in "\n".join(codes)
    (proc,) = os.listdir(tmp_path / "dump" / "step0")
    folder = tmp_path / "dump" / "step0" / proc / "dump_tensor_data"
    for name in ("Module.1.ReLU.forward.0.output.0.pt", "Module.2.Linear.forward.0.input.0.pt"):
        got = torch.load(folder / name)
        torch.testing.assert_close(got, hidden, rtol=1e-6, atol=1e-6, msg=name)


class _Pass(torch.nn.Module):
    def forward(self, x):
        return x


# Every dtype torch.save can hold (issue 28, D3: float8, uint16/32/64, fp4 and
# bits used to be staged as files torch.load refused).
TENSOR_TASK_DTYPES = [
    "float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
    "complex64", "complex128", "complex32", "uint16", "uint32", "uint64", "float8_e5m2", "float8_e4m3fn",
    "float8_e5m2fnuz", "float8_e4m3fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2", "bits8", "bits16",
    "bits1x8", "bits2x4", "bits4x2",
]


def test_tensor_task_files_of_every_dtype_load_bit_exact(write_config, tmp_path):
    model = torch.nn.ModuleDict({f"m_{n}": _Pass() for n in TENSOR_TASK_DTYPES})
    inputs = {}
    for n in TENSOR_TASK_DTYPES:
        dtype = getattr(torch, n)
        raw = ((torch.arange(6 * dtype.itemsize) * 37 + 11) % 251).to(torch.uint8)
        inputs[n] = (raw % 2).bool().reshape(2, 3) if n == "bool" else raw.view(dtype).reshape(2, 3)
    dumper = graphprobe.AclGraphDumper(write_config(task="tensor"))
    dumper.start(model)
    for n in TENSOR_TASK_DTYPES:
        model[f"m_{n}"](inputs[n])
    dumper.step()
    dumper.stop()
    (proc,) = os.listdir(tmp_path / "dump" / "step0")
    folder = tmp_path / "dump" / "step0" / proc / "dump_tensor_data"
    for n in TENSOR_TASK_DTYPES:
        for part in ("input", "output"):
            got = torch.load(folder / f"Module.m_{n}._Pass.forward.0.{part}.0.pt", weights_only=True)
            want = inputs[n]
            assert got.dtype == want.dtype and got.shape == want.shape, n
            assert got.reshape(-1).view(torch.uint8).tolist() == want.reshape(-1).view(torch.uint8).tolist(), n


def test_tensor_task_skips_dtypes_no_file_holds_without_raising_in_forward(write_config, tmp_path, read_step,
                                                                          capfd):
    """A quantized or sub-byte tensor met by a tensor-task probe used to raise
    TypeError inside the model's forward (acl_save's check at the call). Its
    record now keeps its statistics without data_name, is counted in
    lost_records, and a warning names the dtype once; other records still
    get their files."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # quantize_per_tensor is deprecated, still made
        unsaved = {"qint8": torch.quantize_per_tensor(torch.tensor([0.5, -1.0, 2.0]), 0.5, 0, torch.qint8)}
    if hasattr(torch, "uint4"):
        unsaved["uint4"] = torch.tensor([0x21, 0x43], dtype=torch.uint8).view(torch.uint4)
    model = torch.nn.ModuleDict({"plain": _Pass(), **{f"m_{n}": _Pass() for n in unsaved}})
    dumper = graphprobe.AclGraphDumper(write_config(task="tensor"))
    dumper.start(model)
    plain = torch.tensor([1.0, 2.0, 4.0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(2):
            model["plain"](plain)
            for n, x in unsaved.items():
                assert model[f"m_{n}"](x) is x
            dumper.step()
    data = read_step(str(tmp_path / "dump"), 0)["data"]
    assert dumper.lost_records == 2 * 2 * len(unsaved)  # input and output, two steps
    dumper.stop()
    # A C++ warning outside Python's warning handler goes to stderr.
    said = [str(w.message) for w in caught] + capfd.readouterr().err.splitlines()
    texts = [t for t in said if "cannot save tensors of dtype" in t]
    for n, x in unsaved.items():
        # Once per dtype, naming it (c10's name: QInt8, UInt4).
        assert sum(str(x.dtype).split(".")[1].lower() in t.lower() for t in texts) == 1, (n, texts)
        for part in ("input_args", "output"):
            (rec,) = data[f"Module.m_{n}._Pass.forward.0"][part]
            assert rec.get("data_name") is None, (n, rec)
            assert rec["dtype"] == str(x.dtype) and "Max" in rec, (n, rec)
    (proc,) = os.listdir(tmp_path / "dump" / "step0")
    folder = tmp_path / "dump" / "step0" / proc / "dump_tensor_data"
    assert sorted(os.listdir(folder)) == ["Module.plain._Pass.forward.0.input.0.pt",
                                          "Module.plain._Pass.forward.0.output.0.pt"]
    got = torch.load(folder / "Module.plain._Pass.forward.0.output.0.pt", weights_only=True)
    assert got.tolist() == plain.tolist()

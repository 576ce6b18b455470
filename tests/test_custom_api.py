"""The tensor section (issue 29 items 2 and 3): msprobe's config form
``"tensor": {"list", "custom_api"}``, its aclgraph file layout
(``tensor.layout: "aclgraph"``) and custom APIs, eager and compiled.

References: the tensors are computed here by calling the unwrapped functions
eagerly (``torch.equal``, bit for bit); file names are written out as
msprobe's aclgraph_dumper names them (``{api}.{call}.{input|input_kwargs|
output}[.{i}].pt``).
"""

from __future__ import annotations

import json
import os

import custom_api_target as target
from custom_api_target import Net
import pytest
import torch

import graphprobe
from graphprobe.config import ConfigValueError, parse_config
from graphprobe.wiring.custom_api import CustomApiError

APIS = ["custom_api_target.scale_add", "custom_api_target.split_pair"]
ORIGINALS = (target.scale_add, target.split_pair)




def _expected(model: Net, x: torch.Tensor, call: int) -> dict[str, torch.Tensor]:
    """Every file of one step, computed eagerly with the original functions."""
    with torch.no_grad():
        h = torch.nn.functional.linear(x, model.lin.weight, model.lin.bias)
        a, b = ORIGINALS[1](h)
        out = ORIGINALS[0](a, b, alpha=0.5, bias=h)
    lin = f"Module.lin.Linear.{call}"
    return {
        f"{lin}.input.0.pt": x, f"{lin}.output.pt": h,
        f"{lin}.parameters.weight.pt": model.lin.weight, f"{lin}.parameters.bias.pt": model.lin.bias,
        f"split_pair.{call}.input.0.pt": h, f"split_pair.{call}.output.0.pt": a, f"split_pair.{call}.output.1.pt": b,
        f"scale_add.{call}.input.0.pt": a, f"scale_add.{call}.input.1.pt": b,
        f"scale_add.{call}.input_kwargs.bias.pt": h, f"scale_add.{call}.output.pt": out,
    }


def _files(folder) -> dict[str, torch.Tensor]:
    return {n: torch.load(os.path.join(folder, n), weights_only=True) for n in sorted(os.listdir(folder))}


def _assert_bit_equal(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> None:
    assert sorted(got) == sorted(want)
    for name, tensor in want.items():
        assert got[name].dtype == tensor.dtype and torch.equal(got[name], tensor.detach()), name


def _config(write_config, layout: str = "aclgraph", **extra) -> str:
    return write_config(task="tensor", level="L0",
                        tensor={"list": ["lin"], "custom_api": APIS, "layout": layout, **extra})


@pytest.mark.parametrize("backend", [None, "aot_eager", "inductor"])
def test_aclgraph_layout_files_equal_eager_tensors(backend, write_config, tmp_path):
    model = Net()
    dumper = graphprobe.AclGraphDumper(_config(write_config))
    dumper.start(model)
    assert target.scale_add is not ORIGINALS[0]  # wrapped at start()
    run = model if backend is None else torch.compile(model, backend=backend, fullgraph=True)  # no graph break
    xs = [torch.randn(3, 8, generator=torch.Generator().manual_seed(s)) for s in range(2)]
    with torch.no_grad():
        for x in xs:
            run(x)
            dumper.step()
    dumper.stop()
    assert (target.scale_add, target.split_pair) == ORIGINALS  # restored at stop()
    root = tmp_path / "dump"
    for step, x in enumerate(xs):
        (proc,) = os.listdir(root / f"step{step}")
        folder = root / f"step{step}" / proc
        assert os.listdir(folder) == ["dump_tensor_data"]  # no dump.json
        got = _files(folder / "dump_tensor_data")
        want = _expected(model, x, call=step)  # msprobe counts calls from start(), across steps
        _assert_bit_equal(got, want)  # inductor too: the same linear, sin, cos, mul and add in float32


def test_dump_json_layout_keeps_the_records_and_names_the_custom_calls(write_config, tmp_path, read_step):
    model = Net()
    dumper = graphprobe.AclGraphDumper(_config(write_config, layout="dump_json"))
    dumper.start(model)
    x = torch.randn(3, 8)
    with torch.no_grad():
        model(x)
    dumper.step()
    dumper.stop()
    doc = read_step(str(tmp_path / "dump"), 0)
    assert list(doc["data"]) == ["Module.lin.Linear.forward.0", "split_pair.0.forward", "scale_add.0.forward"]
    entry = doc["data"]["scale_add.0.forward"]
    assert entry["input_kwargs"]["alpha"] == {"type": "float", "value": 0.5}
    folder = tmp_path / "dump" / "step0" / os.listdir(tmp_path / "dump" / "step0")[0] / "dump_tensor_data"
    want = _expected(model, x, 0)
    got = torch.load(folder / entry["input_kwargs"]["bias"]["data_name"], weights_only=True)
    assert torch.equal(got, want["scale_add.0.input_kwargs.bias.pt"])
    got = torch.load(folder / entry["output"][0]["data_name"], weights_only=True)
    assert torch.equal(got, want["scale_add.0.output.pt"])


def test_switch_and_discarded_steps_with_the_aclgraph_layout(tmp_path):
    cfg = tmp_path / "c.json"
    dump = tmp_path / "dump"

    def write(enable: bool) -> None:
        cfg.write_text(json.dumps({"dump_path": str(dump), "task": "tensor", "dump_enable": enable,
                                   "tensor": {"list": ["nothing"], "custom_api": APIS, "layout": "aclgraph"}}))
        os.utime(cfg, ns=(1, (2 if enable else 1) * 10**18))

    write(False)
    model = Net()
    dumper = graphprobe.AclGraphDumper(str(cfg))
    dumper.start(model)
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    xs = [torch.randn(2, 8, generator=torch.Generator().manual_seed(s)) for s in range(5)]
    with torch.no_grad(), torch._dynamo.config.patch(error_on_recompile=True):
        compiled(xs[0])
        dumper.step()  # off: step0 records nothing
        write(True)
        dumper.step(dump=False)  # re-reads dump_enable; nothing written
        compiled(xs[1])
        dumper.step(dump=False)  # discarded: no files, no call index used
        compiled(xs[2])
        dumper.step()  # step1: call index 0
        compiled(xs[3])
        dumper.enable(False)
        dumper.step()  # step2 was recorded before enable(False): call index 1
        compiled(xs[4])
        dumper.step()  # off: step3 records nothing
    dumper.stop()
    assert sorted(os.listdir(dump)) == ["step1", "step2"]
    for step, x, call in ((1, xs[2], 0), (2, xs[3], 1)):
        (proc,) = os.listdir(dump / f"step{step}")
        want = {k: v for k, v in _expected(model, x, call).items() if not k.startswith("Module.")}
        _assert_bit_equal(_files(dump / f"step{step}" / proc / "dump_tensor_data"), want)


def test_methods_keep_their_kind_and_are_restored(write_config, tmp_path):
    static, cls = target.Ops.__dict__["twice"], target.Ops.__dict__["thrice"]

    class UsesOps(torch.nn.Module):
        def forward(self, x):
            return target.Ops.twice(x) + target.Ops.thrice(x)

    dumper = graphprobe.AclGraphDumper(write_config(task="tensor", tensor={
        "custom_api": ["custom_api_target.Ops.twice", "custom_api_target.Ops.thrice"], "layout": "aclgraph"}))
    model = UsesOps()
    dumper.start(model)
    x = torch.arange(4.0)
    with torch.no_grad():
        assert torch.equal(model(x), 5 * x)
    dumper.step()
    dumper.stop()
    assert target.Ops.__dict__["twice"] is static and target.Ops.__dict__["thrice"] is cls
    (proc,) = os.listdir(tmp_path / "dump" / "step0")
    got = _files(tmp_path / "dump" / "step0" / proc / "dump_tensor_data")
    # a classmethod's cls is not a tensor: input.0 is the first tensor argument's position after it
    assert sorted(got) == ["thrice.0.input.1.pt", "thrice.0.output.pt", "twice.0.input.0.pt", "twice.0.output.pt"]
    assert torch.equal(got["twice.0.output.pt"], 2 * x) and torch.equal(got["thrice.0.output.pt"], 3 * x)


def test_a_reference_copied_before_start_is_not_wrapped(write_config, tmp_path):
    """msprobe's documented limit: only the attribute named by the path is replaced."""
    copied = target.scale_add

    class Copied(torch.nn.Module):
        def forward(self, x):
            return copied(x, x) + target.scale_add(x, x)

    dumper = graphprobe.AclGraphDumper(write_config(task="tensor", tensor={"custom_api": APIS[:1],
                                                                            "layout": "aclgraph"}))
    model = Copied()
    dumper.start(model)
    with torch.no_grad():
        model(torch.ones(2))
    dumper.step()
    dumper.stop()
    (proc,) = os.listdir(tmp_path / "dump" / "step0")
    names = sorted(os.listdir(tmp_path / "dump" / "step0" / proc / "dump_tensor_data"))
    assert names == ["scale_add.0.input.0.pt", "scale_add.0.input.1.pt", "scale_add.0.output.pt"]  # one call


@pytest.mark.parametrize("path,message", [
    ("no_such_package_xyz.ops.f", "'no_such_package_xyz.ops.f': no prefix of it imports"),
    ("custom_api_target.missing", "'custom_api_target' imports but has no attribute 'missing'"),
    ("custom_api_target.Ops.missing", "'custom_api_target.Ops' imports but has no attribute 'missing'"),
    ("custom_api_target.NOT_CALLABLE", "resolves to a int, which is not callable"),
])
def test_a_bad_path_is_an_error_at_start_naming_it(path, message, write_config):
    model = Net()
    dumper = graphprobe.AclGraphDumper(write_config(task="tensor", tensor={"custom_api": [APIS[0], path]}))
    with pytest.raises(CustomApiError) as info:
        dumper.start(model)
    assert "tensor.custom_api[1]" in str(info.value) and message in str(info.value)
    assert target.scale_add is ORIGINALS[0]  # nothing was wrapped
    assert not model.lin._forward_pre_hooks  # nor hooked
    again = graphprobe.AclGraphDumper(write_config(task="tensor"))
    again.start(model)  # a new dumper can start
    again.stop()


def test_msprobe_tensor_section_config_form():
    cfg = parse_config({"dump_path": "d", "task": "tensor", "level": "mix",
                        "tensor": {"list": ["Linear", "attention"], "custom_api": APIS}})
    assert cfg.keywords == ("linear", "attention") and cfg.custom_api == tuple(APIS)
    assert cfg.tensor_layout == "dump_json"  # the default, graphprobe's tensor task layout so far
    with pytest.raises(ConfigValueError, match="'tensor.layout': got 'flat'; allowed: one of"):
        parse_config({"dump_path": "d", "task": "tensor", "tensor": {"layout": "flat"}})
    with pytest.raises(ConfigValueError, match=r"'tensor.custom_api\[0\]': got 'reshape'"):
        parse_config({"dump_path": "d", "task": "tensor", "tensor": {"custom_api": ["reshape"]}})
    with pytest.raises(ConfigValueError, match="both select"):
        parse_config({"dump_path": "d", "task": "tensor", "statistics": {"list": ["a"]}, "tensor": {"list": ["b"]}})
    # The same keywords in another case select the same names (matching ignores case): not two selections.
    both = parse_config({"dump_path": "d", "task": "tensor", "statistics": {"list": ["Linear"]},
                         "tensor": {"list": ["linear"]}})
    assert both.keywords == ("linear",)
    with pytest.warns(UserWarning, match="ignored by the statistics task"):
        assert parse_config({"dump_path": "d", "tensor": {"custom_api": APIS}}).custom_api == ()


def test_the_aclgraph_example_config(tmp_path):
    """examples/tensor_aclgraph.json: F.scaled_dot_product_attention as a custom API."""
    from pathlib import Path

    example = json.loads((Path(__file__).resolve().parent.parent / "examples" / "tensor_aclgraph.json").read_text())
    example["dump_path"] = str(tmp_path / "dump")
    (tmp_path / "c.json").write_text(json.dumps(example))

    class Attn(torch.nn.Module):
        def forward(self, q, k, v):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    model = torch.nn.Sequential()
    model.add_module("attn", Attn())
    q, k, v = (torch.randn(1, 2, 4, 8, generator=torch.Generator().manual_seed(s)) for s in range(3))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    with torch.no_grad():
        want = sdpa(q, k, v, is_causal=True)
    dumper = graphprobe.AclGraphDumper(str(tmp_path / "c.json"))
    dumper.start(model)
    with torch.no_grad():
        torch.compile(model[0], backend="aot_eager", fullgraph=True)(q, k, v)
    dumper.step()
    dumper.stop()
    assert torch.nn.functional.scaled_dot_product_attention is sdpa
    (proc,) = os.listdir(tmp_path / "dump" / "step0")
    got = _files(tmp_path / "dump" / "step0" / proc / "dump_tensor_data")
    api = "scaled_dot_product_attention.0"
    _assert_bit_equal(got, {f"{api}.input.0.pt": q, f"{api}.input.1.pt": k, f"{api}.input.2.pt": v,
                            f"{api}.output.pt": want, "Module.attn.Attn.0.input.0.pt": q,
                            "Module.attn.Attn.0.input.1.pt": k, "Module.attn.Attn.0.input.2.pt": v,
                            "Module.attn.Attn.0.output.pt": want})


def test_an_inherited_method_is_wrapped_and_removed_again(write_config, tmp_path):
    """torch.Tensor.matmul lives on torch._C.TensorBase: the wrapper is set on
    torch.Tensor and deleted at stop(), so the base's method is found again."""
    assert "matmul" not in vars(torch.Tensor)

    class MatMul(torch.nn.Module):
        def forward(self, x, w):
            return x.matmul(w)

    dumper = graphprobe.AclGraphDumper(write_config(task="tensor", tensor={"custom_api": ["torch.Tensor.matmul"],
                                                                            "layout": "aclgraph"}))
    model = MatMul()
    dumper.start(model)
    x, w = torch.randn(2, 3), torch.randn(3, 4)
    with torch.no_grad():
        out = model(x, w)
    dumper.step()
    dumper.stop()
    assert "matmul" not in vars(torch.Tensor)
    (proc,) = os.listdir(tmp_path / "dump" / "step0")
    _assert_bit_equal(_files(tmp_path / "dump" / "step0" / proc / "dump_tensor_data"),
                      {"matmul.0.input.0.pt": x, "matmul.0.input.1.pt": w, "matmul.0.output.pt": out})


class _Fill(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.empty(3).fill_(2.0)


@pytest.mark.parametrize("path, model, x, backend", [
    # The probe of a part without tensors (torch.empty(3)'s inputs) makes its marker with torch.empty in a
    # traced graph: the wrapped torch.empty called itself until RecursionError, inside the user's compile.
    ("torch.empty", _Fill(), torch.ones(3), "aot_eager"),
    # The probe reads a nested tensor through values(): the wrapped values() recursed in eager mode.
    ("torch.Tensor.values", torch.nn.Identity(), None, None),
])
def test_an_api_the_probes_use_themselves_can_be_wrapped(path, model, x, backend, write_config, tmp_path,
                                                         read_step):
    if x is None:
        x = torch.nested.nested_tensor([torch.ones(2), torch.full((3,), 2.0)])
    dumper = graphprobe.AclGraphDumper(write_config(task="tensor", level="L0", tensor={"custom_api": [path],
                                                                                       "layout": "dump_json"}))
    dumper.start(model)
    try:
        run = model if backend is None else torch.compile(model, backend=backend, fullgraph=True)
        out = run(x) if path == "torch.empty" else x.values()
        dumper.step()
    finally:
        dumper.stop()
    api = path.rsplit(".", 1)[1]
    data = read_step(str(tmp_path / "dump"), 0)["data"]
    assert f"{api}.0.forward" in data, list(data)
    if path == "torch.empty":
        assert torch.equal(out, torch.full((3,), 3.0))
        assert data["empty.0.forward"]["input_args"][0] == {"type": "int", "value": 3}
        assert data["empty.0.forward"]["output"][0]["shape"] == [3]
    else:
        assert torch.equal(out, torch.tensor([1.0, 1.0, 2.0, 2.0, 2.0]))
        assert data["values.0.forward"]["output"][0]["shape"] == [5]

"""The public surface: exact exports, lean imports, a clear error for a broken install."""

from __future__ import annotations

import subprocess
import sys

import graphprobe


def test_public_api_is_pinned():
    assert sorted(graphprobe.__all__) == sorted(
        ["AclGraphDumper", "ConfigError", "DumpConfig", "DumpWriteError", "GraphDumper", "acl_save", "flush",
         "load_config", "reference_dump", "save"]
    )
    assert graphprobe.GraphDumper is graphprobe.AclGraphDumper
    for name in graphprobe.__all__:
        assert getattr(graphprobe, name).__doc__, f"{name} needs a docstring"


def test_cli_and_compare_do_not_import_torch():
    code = "import sys, graphprobe, graphprobe.cli, graphprobe.compare; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_ops_are_registered_with_schemas():
    import torch

    import graphprobe._ops  # noqa: F401

    schema = str(torch.ops.graphprobe.record_stats.default._schema)
    assert schema == "graphprobe::record_stats(Tensor x, int site, int index) -> ()"
    assert not torch.ops.graphprobe.record_stats.default._schema.is_mutable


def test_record_stats_passes_opcheck():
    import torch

    import graphprobe._ops  # noqa: F401

    x = torch.randn(3, 4, requires_grad=True)
    result = torch.library.opcheck(torch.ops.graphprobe.record_stats.default, (x, 7, 0))
    assert set(result.values()) == {"SUCCESS"}, result


def test_version_flag_prints_the_source_version():
    import re
    from pathlib import Path

    out = subprocess.run([sys.executable, "-m", "graphprobe", "--version"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    # Read from the source text, not from the imported attribute.
    want = re.search(r'^__version__ = "([^"]+)"$', Path(graphprobe.__file__).read_text(), re.M).group(1)
    assert out.stdout.startswith(f"graphprobe {want} ("), out.stdout

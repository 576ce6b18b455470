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

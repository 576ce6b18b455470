"""config.json validation: one clear error per invalid field."""

from __future__ import annotations

import json

import pytest

from graphprobe.config import ConfigTypeError, ConfigValueError, DumpConfig, load_config, parse_config

BASE = {"dump_path": "./out"}

# (fields overriding BASE, error class, substrings the message must contain)
INVALID = [
    ({"task": 3}, ConfigTypeError, ["'task'", "3", "statistics"]),
    ({"task": "tensors"}, ConfigValueError, ["'task'", "'tensors'", "statistics", "tensor"]),
    ({"dump_path": None}, ConfigTypeError, ["'dump_path'", "None", "path string"]),
    ({"dump_path": ""}, ConfigValueError, ["'dump_path'", "non-empty"]),
    ({"dump_path": "a/../b"}, ConfigValueError, ["'dump_path'", "'..'"]),
    ({"dump_path": "out\ndir"}, ConfigValueError, ["'dump_path'", "control or format characters", "U+000A"]),
    ({"dump_path": "x" * 300}, ConfigValueError, ["'dump_path'", "255 bytes"]),
    ({"level": "L3"}, ConfigValueError, ["'level'", "'L3'", "L0", "L1", "mix"]),
    ({"level": 0}, ConfigTypeError, ["'level'", "0", "L0"]),
    ({"rank": 0}, ConfigTypeError, ["'rank'", "list"]),
    ({"rank": [-1]}, ConfigValueError, ["'rank[0]'", "-1", ">= 0"]),
    ({"rank": [0, "3-1"]}, ConfigValueError, ["'rank[1]'", "'3-1'", "start (3)"]),
    ({"rank": ["a-b"]}, ConfigValueError, ["'rank[0]'", "'a-b'", "start-end"]),
    ({"rank": [1.5]}, ConfigTypeError, ["'rank[0]'", "1.5", "int"]),
    ({"rank": [True]}, ConfigTypeError, ["'rank[0]'", "True"]),
    ({"statistics": []}, ConfigTypeError, ["'statistics'", "object"]),
    ({"statistics": {"list": "linear"}}, ConfigTypeError, ["'statistics.list'", "'linear'", "list of strings"]),
    ({"statistics": {"list": ["ok", 2]}}, ConfigTypeError, ["'statistics.list[1]'", "2", "string"]),
    ({"statistics": {"list": [""]}}, ConfigValueError, ["'statistics.list[0]'", "non-empty"]),
    ({"dump_enable": "yes"}, ConfigTypeError, ["'dump_enable'", "'yes'", "true or false"]),
]


@pytest.mark.parametrize("fields,error,parts", INVALID, ids=[str(f) for f, _, _ in INVALID])
def test_invalid_field(fields, error, parts):
    with pytest.raises(error) as info:
        parse_config({**BASE, **fields})
    for part in parts:
        assert part in str(info.value), f"{part!r} missing from: {info.value}"


def test_missing_dump_path_and_non_object_root():
    with pytest.raises(ConfigValueError, match="'dump_path' is required"):
        parse_config({"level": "L0"})
    with pytest.raises(ConfigTypeError, match="JSON object"):
        parse_config([1, 2])


def test_valid_config_and_rank_ranges():
    cfg = parse_config({"dump_path": "d", "rank": [0, "2-3", "5"], "level": "L0", "statistics": {"list": ["Linear"]}})
    assert cfg == DumpConfig(dump_path="d", ranks=(range(0, 1), range(2, 4), range(5, 6)), keywords=("linear",))
    assert cfg.selects_rank(3) and not cfg.selects_rank(1)
    assert parse_config(BASE).selects_rank(7)


def test_duplicate_ranks_warn_and_unknown_keys_warn():
    with pytest.warns(UserWarning, match=r"ranks \[2\] are listed more than once"):
        assert parse_config({**BASE, "rank": [2, "1-2"]}).ranks == (range(1, 3),)
    with pytest.warns(UserWarning, match=r"unknown keys \['dump_pth'\]"):
        parse_config({**BASE, "dump_pth": "x"})
    with pytest.warns(UserWarning, match=r"statistics.lst"):
        parse_config({**BASE, "statistics": {"lst": []}})


def test_files(tmp_path):
    default = load_config(None)
    assert default.dump_path == "./graphprobe_dump" and default.level == "L0" and default.ranks == ()
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigValueError, match="bad.json.*not valid JSON"):
        load_config(bad)
    with pytest.raises(ConfigValueError, match="missing.json.*cannot be read"):
        load_config(tmp_path / "missing.json")
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"dump_path": "x", "level": "L9"}))
    with pytest.raises(ConfigValueError, match="wrong.json.*'level'"):
        load_config(wrong)
    with pytest.raises(ConfigTypeError, match="config_path"):
        load_config(3)

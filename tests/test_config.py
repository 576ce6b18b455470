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


def test_duplicate_ranks_warn_at_the_users_line():
    with pytest.warns(UserWarning, match=r"ranks \[2\] are listed more than once") as record:
        assert parse_config({**BASE, "rank": [2, "1-2"]}).ranks == (range(1, 3),)
    assert record.list[0].filename == __file__


@pytest.mark.parametrize("fields,name,nearest", [
    ({"levle": "L1"}, "levle", "level"),
    ({"dump_pth": "x"}, "dump_pth", "dump_path"),
    ({"statistics": {"lst": ["fc"]}}, "statistics.lst", "statistics.list"),
    ({"dump_enabled": False}, "dump_enabled", "dump_enable"),
])
def test_a_typod_key_is_refused_with_the_nearest_known_key(fields, name, nearest):
    # Before: only a warning, and the run went on at the default level.
    with pytest.raises(ConfigValueError) as info:
        parse_config({**BASE, **fields})
    assert f"unknown key '{name}'; did you mean '{nearest}'?" in str(info.value)


def test_an_unknown_key_far_from_every_known_key_lists_the_allowed_ones():
    with pytest.raises(ConfigValueError) as info:
        parse_config({**BASE, "colour": "red"})
    message = str(info.value)
    allowed = "['task', 'dump_path', 'rank', 'level', 'statistics', 'tensor', 'dump_enable', 'replay']"
    assert f"unknown key 'colour'; allowed: {allowed}" in message
    assert "did you mean" not in message and "'enable_dataloader'" in message and "graphprobe ignores" in message


# msprobe's own statistics example (its config README): every key loads.
MSPROBE_CONFIG = {
    "task": "statistics", "dump_path": "./dump", "rank": [], "step": [], "level": "L1", "seed": 1234,
    "is_deterministic": False, "enable_dataloader": False, "async_dump": False, "acl_config": "",
    "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"},
    "tensor": {"scope": [], "list": [], "data_mode": ["all"], "backward_input": [], "file_format": "npy"},
    "overflow_check": {"overflow_nums": 1, "check_mode": "all"},
    "run_ut": {"white_list": [], "black_list": [], "error_data_path": "./"},
}


def test_msprobe_configs_load_and_ignored_keys_that_matter_warn_at_the_users_line(tmp_path):
    import warnings

    import graphprobe

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert parse_config(MSPROBE_CONFIG).level == "L1"
    path = tmp_path / "msprobe.json"
    path.write_text(json.dumps({**MSPROBE_CONFIG, "step": [2], "statistics": {"scope": ["Module.fc"], "list": []},
                                "tensor": {"list": ["fc"]}}))
    with pytest.warns(UserWarning) as record:
        graphprobe.AclGraphDumper(path)
    messages = [str(w.message) for w in record.list]
    assert any("msprobe key 'step' = [2] is ignored" in m and "enable(False)" in m for m in messages), messages
    assert any("'statistics.scope'" in m for m in messages) and any("'tensor'" in m for m in messages), messages
    assert {w.filename for w in record.list} == {__file__}  # the user's line, not dumper.py


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
    typo = tmp_path / "typo.json"
    typo.write_text(json.dumps({"dump_path": "x", "levle": "L1"}))
    with pytest.raises(ConfigValueError, match="typo.json: config: unknown key 'levle'; did you mean 'level'"):
        load_config(typo)

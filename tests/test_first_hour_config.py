"""Issue 40 item 2: AclGraphDumper takes the config's keys as keyword
arguments or a dict, validated exactly like the file (the reference here:
the same keys written to a config.json and loaded by path)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from graphprobe import AclGraphDumper
from graphprobe.config import ConfigError, ConfigTypeError, ConfigValueError


def _file(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("keys", [
    {"dump_path": "runs/compiled", "level": "mix"},
    {"dump_path": "runs/eager", "task": "statistics", "level": "L1", "rank": [0, 2],
     "statistics": {"list": ["Linear", "attention"], "data_mode": ["forward"], "summary_mode": "md5"}},
    {"dump_path": "runs/t", "task": "tensor", "tensor": {"list": ["linear"]}, "dump_enable": False},
])
def test_keywords_and_a_dict_give_the_files_config(tmp_path: Path, keys: dict[str, Any]) -> None:
    from_file = AclGraphDumper(str(_file(tmp_path, keys))).config
    assert AclGraphDumper(**keys).config == from_file
    assert AclGraphDumper(keys).config == from_file
    assert AclGraphDumper(config_path=keys).config == from_file


def test_python_values_count_as_the_files(tmp_path: Path) -> None:
    # A tuple is a JSON list, a Path a JSON string.
    from_file = AclGraphDumper(str(_file(tmp_path, {"dump_path": "runs/c", "rank": [1, 3]}))).config
    assert AclGraphDumper(dump_path=Path("runs/c"), rank=(1, 3)).config == from_file


@pytest.mark.parametrize("bad", [
    {"dump_path": "runs/c", "level": "L9"},
    {"dump_path": "runs/c", "level": 3},
    {"dump_path": "runs/c", "levle": "mix"},
    {"level": "mix"},
    {"dump_path": "runs/c", "statistics": {"list": "linear"}},
    {"dump_path": "runs/c", "statistics": {"lst": ["linear"]}},
    {"dump_path": "runs/c", "rank": ["x"]},
    {"dump_path": "", "level": "mix"},
])
def test_bad_keys_get_the_files_error(tmp_path: Path, bad: dict[str, Any]) -> None:
    path = _file(tmp_path, bad)
    with pytest.raises(ConfigError) as from_file:
        AclGraphDumper(str(path))
    for given, where in ((lambda: AclGraphDumper(**bad), "AclGraphDumper keyword arguments"),
                         (lambda: AclGraphDumper(bad), "AclGraphDumper dict")):
        with pytest.raises(ConfigError) as caught:
            given()
        assert type(caught.value) is type(from_file.value)
        # The same message naming the field; only where it came from differs.
        assert str(from_file.value).startswith(f"{path}: ")
        assert str(caught.value) == f"{where}: " + str(from_file.value)[len(f"{path}: "):]


def test_an_unknown_keyword_suggests_the_key() -> None:
    with pytest.raises(ConfigValueError, match=r"unknown key 'levle'; did you mean 'level'\?"):
        AclGraphDumper(dump_path="runs/c", levle="mix")


def test_a_path_or_dict_and_keywords_together_are_refused(tmp_path: Path) -> None:
    path = _file(tmp_path, {"dump_path": "runs/c"})
    with pytest.raises(ConfigValueError) as e:
        AclGraphDumper(str(path), level="mix")
    assert "the config is given twice: as a path" in str(e.value) and "['level']" in str(e.value)
    with pytest.raises(ConfigValueError, match="the config is given twice: as a dict"):
        AclGraphDumper({"dump_path": "runs/c"}, dump_path="runs/d")


def test_other_config_objects_are_refused() -> None:
    with pytest.raises(ConfigTypeError, match="config_path.*a path to a JSON file, a dict of config keys, or None"):
        AclGraphDumper(42)  # type: ignore[arg-type]


def test_a_path_string_and_no_arguments_keep_working(tmp_path: Path) -> None:
    path = _file(tmp_path, {"dump_path": "runs/c", "level": "L1"})
    assert AclGraphDumper(str(path)).config.level == "L1"
    assert AclGraphDumper(path).config.source == str(path)
    assert AclGraphDumper().config.dump_path.endswith("graphprobe_dump")


def test_graphprobe_config_replaces_keywords_too(tmp_path: Path, monkeypatch: Any) -> None:
    path = _file(tmp_path, {"dump_path": "runs/from_env", "level": "L1"})
    monkeypatch.setenv("GRAPHPROBE_CONFIG", str(path))
    config = AclGraphDumper(dump_path="runs/mine", level="mix").config
    assert (config.dump_path, config.level) == ("runs/from_env", "L1")

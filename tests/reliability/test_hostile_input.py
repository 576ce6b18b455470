"""Property-based tests: config files and dump.json documents of any content
give a valid result or a documented error, never anything else."""

from __future__ import annotations

import json
import warnings

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphprobe import _compare
from graphprobe.config import ConfigError, DumpConfig, load_config, parse_config

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
json_values = st.recursive(scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                           max_leaves=20)
config_keys = st.sampled_from(["task", "dump_path", "rank", "level", "statistics", "dump_enable", "list", "x"])
config_like = st.dictionaries(config_keys, st.one_of(json_values, st.just("L1"), st.just(["0-3", 2])), max_size=6)


@SETTINGS
@given(st.one_of(json_values, config_like))
def test_config_documents(doc):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            cfg = parse_config(doc)
        except ConfigError as exc:
            assert str(exc).startswith("config field") or "required" in str(exc)
            return
    assert isinstance(cfg, DumpConfig)


@SETTINGS
@given(st.binary(max_size=200))
def test_config_files_of_any_bytes(tmp_path, data):
    path = tmp_path / "config.json"
    path.write_bytes(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            load_config(path)
        except ConfigError as exc:
            assert str(path) in str(exc)


tensor_like = st.fixed_dictionaries(
    {"type": st.sampled_from(["torch.Tensor", "int", 3]), "dtype": st.sampled_from(["torch.float32", 1, None])},
    optional={"shape": st.one_of(st.lists(st.integers(-2, 5), max_size=3), scalars),
              "Max": scalars, "Min": scalars, "Mean": scalars, "Norm": scalars, "requires_grad": scalars},
)
part = st.one_of(st.lists(st.one_of(tensor_like, json_values), max_size=3), json_values)
entry_like = st.fixed_dictionaries({}, optional={"input_args": part, "input_kwargs": part, "output": part})
dump_like = st.one_of(
    json_values,
    st.fixed_dictionaries({"data": st.dictionaries(st.text(max_size=30), st.one_of(entry_like, json_values), max_size=4)},
                          optional={"task": scalars, "level": scalars}),
)


@SETTINGS
@given(dump_like, st.binary(max_size=64))
def test_dump_documents(tmp_path, doc, junk):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"task": "statistics", "level": "L0", "data": {}}))
    for i, text in enumerate((json.dumps(doc), junk)):
        bad = tmp_path / f"doc{i}.json"
        bad.write_bytes(text.encode() if isinstance(text, str) else text)
        for t, b in ((bad, good), (good, bad), (bad, bad)):
            try:
                result = _compare.compare_files(str(t), str(b), _compare.CompareOptions())
            except _compare.DumpFormatError as exc:
                assert "doc" in str(exc), str(exc)  # names the file
            else:
                assert len(result.rows) >= 0

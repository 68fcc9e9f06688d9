"""The JSON reader without recursion (``ember.runtime.json_reader``): json.loads's values,
messages and error positions, at any depth."""
from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.runtime.json_reader import deep_loads, loads


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal types (NaN equals NaN); iterative, for deep values."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if type(x) is not type(y):
            return False
        if isinstance(x, list):
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y))
        elif isinstance(x, dict):
            if list(x) != list(y):
                return False
            stack.extend((x[k], y[k]) for k in x)
        elif isinstance(x, float) and math.isnan(x):
            if not math.isnan(y):
                return False
        elif x != y:
            return False
    return True


def _outcome(read: Any, text: str) -> tuple[Any, ...]:
    try:
        return ("value", read(text))
    except json.JSONDecodeError as err:
        return ("error", err.msg, err.pos, err.lineno, err.colno)
    except ValueError as err:  # json.loads: int() refuses a number of too many digits
        return ("int", str(err))


def _depth(value: Any) -> int:
    depth = 0
    while isinstance(value, (list, dict)) and value:
        value = value[0] if isinstance(value, list) else next(iter(value.values()))
        depth += 1
    return depth


# -- any depth ------------------------------------------------------------------------------------
def test_100_000_nested_lists() -> None:
    n = 100_000
    value = loads("[" * n + "1" + "]" * n)
    assert _depth(value) == n
    with pytest.raises(RecursionError):
        json.loads("[" * n + "1" + "]" * n)  # what the reader is for


def test_deep_objects_and_lists_mixed() -> None:
    n = 20_000
    text = '{"a": [' * n + "null" + "]}" * n
    value = loads(text)
    assert _depth(value) == 2 * n
    for _ in range(n):
        assert list(value) == ["a"]
        value = value["a"][0]
    assert value is None


def test_an_error_deep_inside_has_json_loads_position() -> None:
    n = 50_000
    text = "[" * n + "1" + "]" * (n - 1) + "}"
    with pytest.raises(json.JSONDecodeError, match="Expecting ',' delimiter") as info:
        loads(text)
    assert info.value.pos == len(text) - 1


def test_unclosed_deep_lists_expect_a_value_at_the_end() -> None:
    text = "[\n" * 30_000
    with pytest.raises(json.JSONDecodeError, match="Expecting value") as info:
        loads(text)
    assert (info.value.lineno, info.value.colno) == (30_001, 1)


# -- the same as json.loads -----------------------------------------------------------------------
CASES = [
    "", " ", "[", "]", "{", "}", "[1,]", "[1 2]", '{"a" 1}', '{"a": }', '{"a": 1,}', "{1: 2}",
    '{"a": 1 "b": 2}', "[1] x", '"unterminated', '"bad \\x escape"', '"\\u12"', '"ctrl \x01"',
    "01", "-", "1.", "1e", ".5", "nul", "tru", "NaN", "-Infinity", "Infinity", "[-0, 1E+2]",
    "\ufeff[]", '{"a": 1, "a": 2}', '{"": [{}]}', ' \n\t[ 1 , "x" , [ ] , { } ]\r\n ',
    '"\\ud834\\udd1e"', "1" * 5000,
]


@pytest.mark.parametrize("text", CASES, ids=range(len(CASES)))
def test_same_outcome_as_json_loads(text: str) -> None:
    want, got = _outcome(json.loads, text), _outcome(deep_loads, text)
    if want[0] == "value":
        assert got[0] == "value" and _same(got[1], want[1])
    elif want[0] == "int":  # json.loads lets int()'s ValueError out; loads names the place
        assert got[0] == "error" and got[1] == want[1] and got[2] == 0
    else:
        assert got == want


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=5),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=3), kids,
                                                               max_size=4),
    max_leaves=30)


@settings(max_examples=150, deadline=None)
@given(json_values, st.sampled_from([None, 0, 2]))
def test_valid_documents_read_as_json_loads_reads_them(value: Any, indent: int | None) -> None:
    text = json.dumps(value, indent=indent)
    assert _same(deep_loads(text), json.loads(text))


@settings(max_examples=250, deadline=None)
@given(json_values, st.data())
def test_damaged_documents_fail_where_json_loads_fails(value: Any, data: st.DataObject) -> None:
    text = json.dumps(value)
    i = data.draw(st.integers(0, len(text)))
    j = data.draw(st.integers(i, min(len(text), i + 3)))
    text = text[:i] + data.draw(st.sampled_from(["", ",", "]", "}", ":", '"', "[", "{", "x"])) \
        + text[j:]
    want, got = _outcome(json.loads, text), _outcome(deep_loads, text)
    if want[0] == "error" and "trailing comma" in want[1]:  # Python >= 3.13's own wording
        assert got[0] == "error" and got[1] == "Expecting value"
        return
    if want[0] == "value":
        assert got[0] == "value" and _same(got[1], want[1])
    else:
        assert got == want


# -- hostile artifacts ------------------------------------------------------------------------
DEEP = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"nodes": ' + DEEP + "}"


def _loaders() -> list[tuple[str, Any]]:
    import struct

    from ember.runtime.aot_format import parse_metadata
    from ember.runtime.executor_factory import FACTORY_MAGIC, FACTORY_FORMAT_VERSION, _load_factory
    from ember.runtime.graph_format import parse_graph
    from ember.runtime.model_record import ModelRecord
    from ember.runtime.serialization import load_json

    header = DEEP_OBJECT.encode()
    factory = struct.pack("<8sIIQ", FACTORY_MAGIC, FACTORY_FORMAT_VERSION, 0, len(header))
    return [("graph JSON", lambda: parse_graph(DEEP_OBJECT)),
            ("AOT metadata", lambda: parse_metadata(DEEP_OBJECT)),
            ("model record", lambda: ModelRecord.load_binary(DEEP_OBJECT.encode())),
            ("IR JSON", lambda: load_json(DEEP_OBJECT)),
            ("factory header", lambda: _load_factory(factory + header))]


@pytest.mark.parametrize("what", ["graph JSON", "AOT metadata", "model record", "IR JSON",
                                  "factory header"])
def test_deeply_nested_artifact_json_gives_the_loaders_error(what: str) -> None:
    """A hostile artifact nested 100,000 deep: the loader's own ArtifactError naming what is
    wrong, never a RecursionError."""
    from ember.runtime.errors import ArtifactError

    with pytest.raises(ArtifactError):
        dict(_loaders())[what]()

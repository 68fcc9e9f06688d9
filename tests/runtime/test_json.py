"""JSON save/load of object graphs: sharing, every field kind, random DAGs, and errors."""
import enum
import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember.runtime import Array, Map, Object, ShapeTuple, String, load_json, register_object
from ember.runtime import save_json


class Color(enum.Enum):
    RED = "r"
    GREEN = "g"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@register_object("test_json.Leaf")
@dataclass(frozen=True, slots=True, eq=False)
class Leaf(Object):
    payload: Any = None


@register_object("test_json.Pair")
@dataclass(frozen=True, slots=True, eq=False)
class Pair(Object):
    left: Object
    right: Object
    note: str = ""


@register_object("test_json.Many")
@dataclass(frozen=True, slots=True, eq=False)
class Many(Object):
    items: tuple
    payload: Any = None


@register_object("test_json.Mutable")
class Mutable(Object):
    __slots__ = ("next",)

    def __init__(self, next=None):
        self.next = next


class Unregistered(Leaf):  # inherits Leaf's type_key but is a different class
    __slots__ = ()


def _round_trip(obj):
    return load_json(save_json(obj))


def test_document_format():
    doc = json.loads(save_json(Pair(Leaf(1), Leaf(2))))
    assert set(doc) == {"root", "nodes", "b64ndarrays", "attrs"}
    assert doc["attrs"]["ember_version"] == ember.__version__
    assert doc["attrs"]["format"] == "ember.json" and doc["attrs"]["format_version"] == 1
    assert doc["nodes"][doc["root"]]["type_key"] == "test_json.Pair"
    assert doc["root"] == len(doc["nodes"]) - 1  # children are written before parents


def test_sharing_is_preserved():
    shared = Leaf("s")
    arr = ember.nd.array(np.arange(3.0))
    root = Many((Pair(shared, shared), Pair(shared, Leaf(arr)), Leaf(arr)))
    doc = json.loads(save_json(root))
    assert len(doc["nodes"]) == 6 and len(doc["b64ndarrays"]) == 1
    back = _round_trip(root)
    assert back.items[0].left is back.items[0].right is back.items[1].left
    assert back.items[0].left is not shared and back.items[0].left.payload == "s"
    assert back.items[1].right.payload is back.items[2].payload  # one NDArray, shared
    np.testing.assert_array_equal(back.items[2].payload.numpy(), [0.0, 1.0, 2.0])


FIELD_VALUES = [
    None, True, False, 0, -7, 2**80, 1.5, -0.0, float("inf"), float("-inf"), "", "ünï\n\"code\"",
    (1, (2, "x")), [1, [2, None]], {"a": 1, "b": [True]}, {Level.LOW: "low"},
    Color.GREEN, Level.HIGH, ember.DataType("float32x4"), ember.DataType("bool"),
    ember.cpu(0), ember.cuda(3), np.float32(1.25), np.int8(-3), np.bool_(True), np.uint64(2**63),
    b"\x00\xffbytes", String("s"), ShapeTuple([1, 2]), Array([1, "a"]), Map({"k": 1}),
]


@pytest.mark.parametrize("value", FIELD_VALUES, ids=lambda v: type(v).__name__)
def test_every_field_kind_round_trips(value):
    back = _round_trip(Leaf(value)).payload
    assert type(back) is type(value)
    if isinstance(value, float) and value == 0:
        assert math.copysign(1, back) == math.copysign(1, value)
    assert back == value


def test_nan_float_and_arrays():
    back = _round_trip(Leaf((float("nan"), np.float16(np.nan)))).payload
    assert math.isnan(back[0]) and np.isnan(back[1]) and type(back[1]) is np.float16
    np_arr = np.arange(6, dtype="int16").reshape(2, 3)
    nd_arr = ember.nd.array(np.ones((2, 4), "float32"), dtype="float32x4")
    back = _round_trip(Leaf((np_arr, nd_arr, np.array(True)))).payload
    assert type(back[0]) is np.ndarray and back[0].dtype == np.int16
    np.testing.assert_array_equal(back[0], np_arr)
    assert isinstance(back[1], ember.nd.NDArray) and back[1].dtype == "float32x4"
    assert back[2].shape == () and back[2].dtype == np.bool_


def test_root_conversion_and_deep_chains():
    back = _round_trip([Leaf(1), "two"])
    assert type(back) is Array and back[0].payload == 1 and back[1] == "two"
    assert _round_trip({"a": Leaf(2)})["a"].payload == 2
    node = Leaf(0)
    for i in range(5000):  # deeper than the recursion limit
        node = Pair(node, Leaf(i))
    back = _round_trip(node)
    depth = 0
    while isinstance(back, Pair):
        back, depth = back.left, depth + 1
    assert depth == 5000


def test_missing_fields_take_defaults():
    doc = json.loads(save_json(Pair(Leaf(1), Leaf(2), note="n")))
    del doc["nodes"][doc["root"]]["fields"]["note"]
    assert load_json(json.dumps(doc)).note == ""


# -- errors ---------------------------------------------------------------------------------------
def test_save_errors_name_the_problem():
    with pytest.raises(TypeError, match=r"test_json\.Leaf\.payload\[1\].*set"):
        save_json(Leaf((1, {2})))
    with pytest.raises(TypeError, match="Unregistered is not registered"):
        save_json(Pair(Leaf(), Unregistered()))
    with pytest.raises(TypeError, match="complex"):
        save_json(Leaf(np.complex64(1)))
    loop = Mutable()
    loop.next = Mutable(loop)
    with pytest.raises(ValueError, match="cycle"):
        save_json(loop)
    with pytest.raises(TypeError, match="float"):
        save_json(1.5)


def _doc(**changes):
    doc = json.loads(save_json(Pair(Leaf(1), Leaf(2))))
    doc.update(changes)
    return doc


@pytest.mark.parametrize("text, match", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "not an ember JSON document"),
    (json.dumps({"root": 0}), "not an ember JSON document"),
    (json.dumps(_doc(root=7)), "root 7 is not a node index"),
    (json.dumps(_doc(attrs={"format": "tvm"})), "not an ember JSON document"),
    (json.dumps(_doc(attrs={"format_version": 9, "ember_version": "9.9"})), "format_version 9"),
    (json.dumps({"root": 0, "nodes": [{"type_key": "test_json.Lef", "fields": {}}]}),
     "unknown type_key 'test_json.Lef'.*test_json.Leaf"),
    (json.dumps({"root": 0, "nodes": [{"type_key": "test_json.Pair",
                                       "fields": {"left": {"$node": 0}, "right": None}}]}),
     r"nodes\[0\].fields.left.*earlier node"),
    (json.dumps({"root": 0, "nodes": [{"type_key": "test_json.Leaf",
                                       "fields": {"payload": {"$what": 1}}}]}), "unknown tag"),
    (json.dumps({"root": 0, "nodes": [{"type_key": "test_json.Leaf",
                                       "fields": {"payload": {"a": 1, "b": 2}}}]}), "single-key"),
    (json.dumps({"root": 0, "nodes": [{"type_key": "test_json.Leaf",
                                       "fields": {"payload": {"$ndarray": 3}}}]}),
     r"no b64ndarrays\[3\]"),
    (json.dumps({"root": 0, "nodes": [{"type_key": "test_json.Leaf", "fields": {"payload": 1}}],
                 "b64ndarrays": ["AAAA"]}).replace('"payload": 1', '"payload": {"$ndarray": 0}'),
     "bad magic"),
    (json.dumps({"root": 0, "nodes": [{"type_key": "test_json.Leaf",
                                       "fields": {"payload": {"$enum": ["os:SEEK_SET", "X"]}}}]}),
     "not an Enum"),
    (json.dumps({"root": 0, "nodes": [{"type_key": "test_json.Leaf",
                                       "fields": {"payload": {"$enum": ["antigravity:X", "Y"]}}}]}),
     "not loaded"),
    (json.dumps({"root": 0, "nodes": [{"type_key": "test_json.Leaf",
                                       "fields": {"payload": 1, "extra": 2}}]}), "no field"),
    (json.dumps({"root": 0, "nodes": [{"fields": {}}]}), r"nodes\[0\] must be an object"),
])
def test_load_errors_are_clear_value_errors(text, match):
    with pytest.raises(ValueError, match=match):
        load_json(text)


# -- random DAGs ----------------------------------------------------------------------------------
_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8),
                     st.floats(allow_nan=False), st.sampled_from(list(Color) + list(Level)))
_payloads = st.recursive(_scalars, lambda inner: st.one_of(
    st.tuples(inner, inner), st.lists(inner, max_size=3),
    st.dictionaries(st.text(max_size=4), inner, max_size=3)), max_leaves=6)


@st.composite
def _dags(draw):
    nodes = [Leaf(draw(_payloads))]
    for _ in range(draw(st.integers(0, 25))):
        pick = st.sampled_from(nodes)
        kind = draw(st.sampled_from(["leaf", "pair", "many"]))
        if kind == "leaf":
            nodes.append(Leaf(draw(_payloads)))
        elif kind == "pair":
            nodes.append(Pair(draw(pick), draw(pick), draw(st.text(max_size=4))))
        else:
            nodes.append(Many(tuple(draw(st.lists(pick, max_size=4))), draw(_payloads)))
    return Many(tuple(nodes))


def _assert_isomorphic(a, b, seen):
    """Walk both graphs together: same shape, same payloads, same sharing."""
    if isinstance(a, Object):
        assert type(a) is type(b)
        if id(a) in seen:
            assert seen[id(a)] is b
            return
        assert b not in seen.values()
        seen[id(a)] = b
        for name in a.field_names():
            _assert_isomorphic(getattr(a, name), getattr(b, name), seen)
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _assert_isomorphic(x, y, seen)
    elif isinstance(a, dict):
        assert type(b) is dict and list(a) == list(b)
        for k in a:
            _assert_isomorphic(a[k], b[k], seen)
    else:
        assert type(a) is type(b) and a == b


@settings(max_examples=60, deadline=None)
@given(root=_dags())
def test_random_dags_round_trip(root):
    text = save_json(root)
    back = load_json(text)
    _assert_isomorphic(root, back, {})
    assert save_json(back) == text  # saving is deterministic

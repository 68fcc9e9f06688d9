"""Runtime containers: String, Array, Map, ShapeTuple, ADT."""
import pickle

import numpy as np
import pytest

import ember
from ember.runtime import ADT, Array, Map, Object, ShapeTuple, String, load_json, save_json
from ember.runtime.container import as_object, tuple_object
from ember.runtime.object import OBJECT_TYPES


def _json(x):
    return load_json(save_json(x))


def test_type_keys():
    for cls, key in [(String, "runtime.String"), (Array, "runtime.Array"), (Map, "runtime.Map"),
                     (ShapeTuple, "runtime.ShapeTuple"), (ADT, "runtime.ADT")]:
        assert cls.type_key == key and OBJECT_TYPES[key] is cls and issubclass(cls, Object)
    assert ember.runtime.container.ADT is ADT  # tvm.runtime.container.ADT


def test_string_is_a_str():
    s = String("héllo")
    assert isinstance(s, str) and isinstance(s, Object)
    assert s == "héllo" and hash(s) == hash("héllo") and s.upper() == "HÉLLO"
    back = pickle.loads(pickle.dumps(s))
    assert type(back) is String and back == s
    loaded = _json(s)
    assert type(loaded) is String and loaded == s


def test_array_sequence_behaviour():
    arr = Array([1, "a", 2.5])
    assert len(arr) == 3 and arr[0] == 1 and arr[-1] == 2.5
    assert list(arr) == [1, "a", 2.5] and "a" in arr and 7 not in arr
    assert arr == [1, "a", 2.5] and arr == (1, "a", 2.5) and arr == Array((1, "a", 2.5))
    assert arr != [1, "a"] and arr != "1a" and [1, "a", 2.5] == arr
    sub = arr[1:]
    assert isinstance(sub, Array) and sub == ["a", 2.5]
    assert repr(arr) == "[1, 'a', 2.5]"
    assert hash(arr) == hash(Array([1, "a", 2.5]))
    assert arr.index("a") == 1 and arr.count(1) == 1
    with pytest.raises(IndexError, match="out of range for length 3"):
        arr[3]
    with pytest.raises(AttributeError, match="immutable"):
        arr.x = 1
    with pytest.raises(TypeError):
        arr[0] = 5
    assert Array() == []


def test_array_pickle_and_json():
    arr = Array([1, Array([2, 3]), String("s")])
    assert pickle.loads(pickle.dumps(arr)) == arr
    back = _json(arr)
    assert type(back) is Array and back == [1, [2, 3], "s"] and type(back[1]) is Array


def test_map_mapping_behaviour():
    key = String("k")
    node = Array([1])
    m = Map({"a": 1, key: 2, node: 3})
    assert len(m) == 3 and m["a"] == 1 and m["k"] == 2 and m[node] == 3
    assert "a" in m and "zz" not in m and m.get("zz", 9) == 9
    assert next(iter(m.keys())) == "a"
    assert Map({"a": 1, "b": 2}) == {"a": 1, "b": 2} and Map(a=1) == Map([("a", 1)])
    assert Map({"a": 1}) != {"a": 2}
    assert repr(Map({"a": 1})) == "{'a': 1}"
    with pytest.raises(KeyError):
        m["missing"]
    with pytest.raises(TypeError, match="keys must be str or Objects"):
        Map({1: "x"})
    with pytest.raises(AttributeError, match="immutable"):
        m.y = 2
    with pytest.raises(TypeError):
        m["a"] = 2


def test_map_pickle_and_json_with_object_keys():
    gv = Array(["shared"])
    m = Map({"x": gv, gv: ember.nd.array([1, 2])})
    back = _json(m)
    assert type(back) is Map and back["x"] == ["shared"]
    (obj_key,) = [k for k in back if not isinstance(k, str)]
    assert obj_key is back["x"]  # the key and the value are the same object again
    np.testing.assert_array_equal(back[obj_key].numpy(), [1, 2])
    assert pickle.loads(pickle.dumps(Map({"a": 1}))) == {"a": 1}


def test_shape_tuple():
    shape = ShapeTuple([2, np.int64(3), 4])
    assert isinstance(shape, tuple) and isinstance(shape, Object)
    assert shape == (2, 3, 4) and shape == [2, 3, 4] and shape != [2, 3]
    assert not (shape != (2, 3, 4))
    assert all(type(d) is int for d in shape) and len(shape) == 3 and shape[1] == 3
    assert hash(shape) == hash((2, 3, 4))
    assert repr(shape) == "ShapeTuple((2, 3, 4))" and str(shape) == "(2, 3, 4)"
    assert ShapeTuple() == ()
    with pytest.raises(TypeError, match="must be ints"):
        ShapeTuple([1.5])
    back = pickle.loads(pickle.dumps(shape))
    assert type(back) is ShapeTuple and back == shape
    loaded = _json(shape)
    assert type(loaded) is ShapeTuple and loaded == shape


def test_adt_and_tuple_object():
    a, b = ember.nd.array([1.0]), ember.nd.array([2.0])
    adt = ADT(3, [a, b])
    assert adt.tag == 3 and len(adt) == 2 and adt[0] is a and adt[-1] is b
    assert list(adt) == [a, b] and adt.field_names() == ["tag", "fields"]
    assert repr(ADT(1, [5])) == "ADT(tag=1, fields=[5])"
    tup = tuple_object([a, b])
    assert isinstance(tup, ADT) and tup.tag == 0 and tup[1] is b
    assert len(tuple_object()) == 0
    with pytest.raises(IndexError, match="tag 3 has 2 fields"):
        adt[5]
    with pytest.raises(ValueError, match="non-negative"):
        ADT(-1)
    with pytest.raises(AttributeError, match="immutable"):
        adt.tag = 1
    back = pickle.loads(pickle.dumps(ADT(2, [1, "x"])))
    assert (back.tag, list(back)) == (2, [1, "x"])
    nested = _json(ADT(1, [tuple_object([a]), a]))
    assert nested.tag == 1 and nested[0].tag == 0 and nested[0][0] is nested[1]


def test_as_object():
    assert type(as_object([1])) is Array and type(as_object({"a": 1})) is Map
    assert type(as_object("s")) is String
    leaf = Array([])
    assert as_object(leaf) is leaf
    with pytest.raises(TypeError, match="float"):
        as_object(1.5)

"""PackedFunc and the global registry, from Python (no C compiler needed)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
import ember as tvm
from ember.runtime import PackedFunc, convert, list_global_func_names
from ember.runtime.container import Array, Map
from ember.runtime.registry import GlobalFuncExistsError, GlobalFuncNotFoundError


@pytest.fixture
def name(request):
    """A fresh global-function name, removed after the test."""
    fname = f"test_packed_func.{request.node.name}"
    yield fname
    if tvm.get_global_func(fname, allow_missing=True) is not None:
        tvm.remove_global_func(fname)


def test_register_and_call(name):
    tvm.register_func(name, lambda a, b: a + b)
    f = tvm.get_global_func(name)
    assert isinstance(f, PackedFunc)
    assert f(1, 2) == 3
    assert name in list_global_func_names()


def test_register_as_bare_decorator_uses_function_name():
    @tvm.register_func
    def test_packed_func_bare_decorated(x):
        return x * 2

    try:
        assert tvm.get_global_func("test_packed_func_bare_decorated")(4) == 8
        assert test_packed_func_bare_decorated(1) == 2  # the decorator returns f itself
    finally:
        tvm.remove_global_func("test_packed_func_bare_decorated")


def test_register_as_named_decorator(name):
    @tvm.register_func(name)
    def f(x):
        return -x

    assert tvm.get_global_func(name)(3) == -3


def test_duplicate_registration_needs_override(name):
    tvm.register_func(name, lambda: 1)
    with pytest.raises(GlobalFuncExistsError, match="already registered.*override=True"):
        tvm.register_func(name, lambda: 2)
    with pytest.raises(ValueError):  # also a ValueError, and a TVMError
        tvm.register_func(name, lambda: 2)
    tvm.register_func(name, lambda: 3, override=True)
    assert tvm.get_global_func(name)() == 3


def test_missing_function_names_close_matches(name):
    tvm.register_func(name, lambda: 1)
    with pytest.raises(GlobalFuncNotFoundError, match=rf"no global function named '{name}x'.*"
                       rf"did you mean '{name}'"):
        tvm.get_global_func(name + "x")
    with pytest.raises(tvm.TVMError):
        tvm.get_global_func("definitely.not.there")
    assert tvm.get_global_func("definitely.not.there", allow_missing=True) is None


def test_remove_global_func(name):
    tvm.register_func(name, lambda: 1)
    tvm.remove_global_func(name)
    assert tvm.get_global_func(name, allow_missing=True) is None
    with pytest.raises(ValueError, match="no global function"):
        tvm.remove_global_func(name)


def test_unconvertible_argument_names_position_and_type():
    echo = tvm.get_global_func("testing.echo")
    with pytest.raises(TypeError, match=r"argument 1 has type builtins.object"):
        tvm.get_global_func("testing.nop")(1, object())
    with pytest.raises(TypeError, match=r"argument 0 has type numpy.ndarray"):
        echo(np.zeros(3))
    with pytest.raises(TypeError, match="return value"):
        PackedFunc(lambda: object(), "bad_ret")()


def test_conversions():
    assert convert([1, [2, 3]]) == [1, [2, 3]] and isinstance(convert([1]), Array)
    assert isinstance(convert({"a": 1}), Map) and convert({"a": 1})["a"] == 1
    assert isinstance(convert(lambda: 1), PackedFunc) and convert(lambda: 1)() == 1
    assert type(convert(np.int32(4))) is int and type(convert(np.float32(0.5))) is float
    f = PackedFunc(lambda x: x)
    assert convert(f) is f
    assert f(bytearray(b"ab")) == b"ab"


def test_callable_arguments_become_packed_funcs():
    apply = PackedFunc(lambda g, x: (type(g).__name__, g(x)))
    assert apply(lambda v: v + 1, 1) == ["PackedFunc", 2]


def test_python_packed_func_passes_ffi_values_unchanged():
    echo = tvm.get_global_func("testing.echo")
    arr = tvm.nd.array(np.arange(3))
    for value in (arr, tvm.cpu(0), tvm.DataType("int8"), echo, None, True):
        assert echo(value) is value or echo(value) == value


def test_builtin_raise_error():
    with pytest.raises(tvm.TVMError, match="my message"):
        tvm.get_global_func("testing.raise_error")("my message")


values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False) | st.text() | st.binary(),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner),
    max_leaves=12)


def _plain(value):
    if isinstance(value, (list, tuple, Array)):
        return [_plain(v) for v in value]
    return value


@settings(max_examples=200, deadline=None)
@given(values)
def test_echo_round_trip(value):
    out = tvm.get_global_func("testing.echo")(value)
    assert _plain(out) == _plain(value)
    if isinstance(value, (list, tuple)):
        assert isinstance(out, Array)
    else:
        assert type(out) is type(value)


def test_top_level_names():
    assert ember.runtime.convert is convert
    assert tvm.register_func is ember.runtime.register_func
    assert callable(tvm.runtime.load_module)

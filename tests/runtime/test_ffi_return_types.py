"""Values crossing compiled C keep their Python type and identity: a PackedFunc returned from
C is callable, an Object passed through a callback comes back as the same object, a
``runtime.String`` is a ``str``, and a C error message naming an error kind raises it."""
from __future__ import annotations

import os
import pickle
import sys

import pytest

import ember as tvm
from ember import relay
from ember.runtime.module import CSourceModule

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ffi_testlib import C_SOURCE, requires_cc  # noqa: E402


@pytest.fixture(scope="module")
def lib():
    mod = CSourceModule(C_SOURCE)
    mod["nop"]
    return mod


@requires_cc
def test_packed_func_returned_from_c_is_callable(lib):
    add1 = tvm.runtime.convert(lambda v: v + 1)
    back = lib["echo"](add1)
    assert back is add1 and back(41) == 42
    c_func = lib["echo"](lib["type_code"])  # a compiled function through C and back
    assert isinstance(c_func, tvm.runtime.PackedFunc) and c_func(1.5) == 2  # kDLFloat


@requires_cc
def test_object_through_a_callback_is_the_same_object(lib):
    x = relay.var("x", shape=(2,))
    seen = []

    def callback(obj):
        seen.append(obj)
        return obj

    assert lib["call_cb"](callback, x) is x
    assert seen[0] is x and type(seen[0]) is relay.Var
    mod = tvm.IRModule.from_expr(relay.Function([x], x))
    assert lib["echo"](mod) is mod


@requires_cc
def test_registered_types_survive_c(lib):
    arr = tvm.runtime.convert([1, 2, 3])
    assert lib["echo"](arr) is arr
    shape = tvm.runtime.ShapeTuple([2, 3])
    assert lib["echo"](shape) is shape


@requires_cc
@pytest.mark.parametrize("message, cls", [
    ("OpNotImplemented: myop", tvm.error.OpNotImplemented),
    ("tvm.error.InternalError: bad", tvm.error.InternalError),
    ("ValueError: bad value", ValueError),
    ("TypeError: bad type", TypeError),
    ("DiagnosticError: parse", tvm.error.DiagnosticError),
])
def test_c_error_kind_is_translated(lib, message, cls):
    with pytest.raises(cls) as info:
        lib["raise_msg"](message)
    assert str(info.value) == message and isinstance(info.value, tvm.TVMError)


@requires_cc
@pytest.mark.parametrize("message", ["plain failure", "add: argument 1: expected ndim 2",
                                     "KeyError: not an ember kind", ": empty kind"])
def test_other_c_errors_stay_tvm_errors(lib, message):
    with pytest.raises(tvm.TVMError) as info:
        lib["raise_msg"](message)
    assert type(info.value) is tvm.TVMError and str(info.value) == message


def test_runtime_string_is_a_str():
    s = tvm.runtime.String("hello")
    assert isinstance(s, str) and s == "hello" and s + "!" == "hello!"
    assert pickle.loads(pickle.dumps(s)) == "hello"
    assert tvm.ir.load_json(tvm.ir.save_json(s)) == "hello"
    assert isinstance(tvm.testing.echo(s), str)

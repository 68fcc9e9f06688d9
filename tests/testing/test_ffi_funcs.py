"""The Relay-era ``testing.*`` global functions, called the way user test suites call them."""
from __future__ import annotations

import traceback

import pytest

import ember as tvm
from ember import relay


def test_echo_returns_values_and_the_same_objects():
    x = relay.var("x", shape=(2,))
    assert tvm.testing.echo(x) is x
    assert tvm.testing.echo(3) == 3 and tvm.testing.echo("s") == "s"
    assert tvm.testing.echo((1 << 63) - 1) == (1 << 63) - 1


def test_functions_are_global_functions_too():
    f = tvm.get_global_func("testing.device_test")
    assert f(tvm.cuda(7), 2, 7) == tvm.cuda(7)
    assert tvm.testing.nop is tvm.get_global_func("testing.nop")  # any testing.<name>
    with pytest.raises(AttributeError, match="no attribute 'no_such_function'"):
        tvm.testing.no_such_function  # noqa: B018


def test_op_translation():
    ferror = tvm.testing.test_raise_error_callback("OpNotImplemented: myop")
    with pytest.raises(tvm.error.OpNotImplemented, match="myop") as info:
        ferror()
    assert isinstance(info.value, NotImplementedError)

    fchk_eq = tvm.testing.test_check_eq_callback("InternalError: myop")
    fchk_eq(3, 3)
    with pytest.raises(tvm.error.InternalError, match=r"myop\nCheck failed: x == y \(0 vs. 1\)"):
        fchk_eq(0, 1)

    with pytest.raises(ValueError, match="expect x and y to be equal"):
        tvm.testing.ErrorTest(0, 1)
    tvm.testing.ErrorTest(2, 2)


def test_unknown_error_kind_is_a_tvm_error():
    with pytest.raises(tvm.TVMError, match="^NoSuchKind: x$") as info:
        tvm.testing.test_raise_error_callback("NoSuchKind: x")()
    assert type(info.value) is tvm.TVMError


def test_deep_callback():
    def error_callback():
        raise ValueError("callback error")

    wrap1 = tvm.testing.test_wrap_callback(error_callback)

    def flevel2():
        wrap1()

    wrap2 = tvm.testing.test_wrap_callback(flevel2)

    def flevel3():
        wrap2()

    wrap3 = tvm.testing.test_wrap_callback(flevel3)
    with pytest.raises(ValueError, match="callback error") as info:
        wrap3()
    names = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert names.index("error_callback") > names.index("flevel2") > names.index("flevel3")


def test_object_use_count_counts_references():
    x = relay.var("x", shape=(2,))
    assert tvm.testing.object_use_count(x) == 1
    y = x
    assert tvm.testing.object_use_count(x) == 2
    del y
    assert tvm.testing.object_use_count(x) == 1

    def callback(obj, expected):
        # the caller's variable and this parameter
        assert tvm.testing.object_use_count(obj) >= expected
        return obj

    assert tvm.runtime.convert(callback)(x, 2) is x


@pytest.mark.parametrize("call", [
    lambda: tvm.testing.test_wrap_callback(3),
    lambda: tvm.testing.test_raise_error_callback(3),
    lambda: tvm.testing.test_check_eq_callback(None),
    lambda: tvm.testing.device_test("cuda", 2, 0),
])
def test_bad_arguments_are_named(call):
    with pytest.raises(TypeError, match="testing.(test_|device_test)"):
        call()

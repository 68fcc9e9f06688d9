"""The packed wrapper checks its arguments and reports mismatches in-process, by name."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import te, tir, topi
from ember.contrib import cc

pytestmark = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")
NAME = "tvmgen_default_fused_add"


@pytest.fixture(scope="module")
def add_func():
    a = te.placeholder((2, 3), name="a")
    b = te.placeholder((2, 3), name="b")
    c = topi.add(a, b)
    return tir.build(topi.schedule_injective(c), [a, b, c], name=NAME)[NAME]


def _arr(shape, dtype="float32"):
    return ember.nd.array(np.ones(shape, dtype))


@pytest.mark.parametrize("args,message", [
    (lambda: (_arr((2, 3)), _arr((2, 3, 1)), _arr((2, 3))),
     f"{NAME}: argument 1 (b): expected ndim 2, got 3"),
    (lambda: (_arr((2, 3)), _arr((2, 4)), _arr((2, 3))),
     rf"{NAME}: argument 1 \(b\): expected shape \(2, 3\), got \(2, 4\)"),
    (lambda: (_arr((2, 3), "float64"), _arr((2, 3)), _arr((2, 3))),
     f"{NAME}: argument 0 (a): expected dtype float32, got float64"),
    (lambda: (_arr((2, 3)), _arr((2, 3))), f"{NAME}: expected 3 arguments, got 2"),
    (lambda: (_arr((2, 3)), 5, _arr((2, 3))),
     f"{NAME}: argument 1 (b): expected a tensor, got type code 0"),
    (lambda: (_arr((2, 3)), _arr((2, 3)), _arr((2, 3), "int32")),
     f"{NAME}: argument 2 (T_add): expected dtype float32, got int32"),
])
def test_wrong_arguments_raise_with_exact_message(add_func, args, message):
    with pytest.raises(ember.TVMError, match=message if "\\(" in message else _esc(message)):
        add_func(*args())
    out = ember.nd.empty((2, 3))
    add_func(_arr((2, 3)), _arr((2, 3)), out)  # the function still works afterwards
    np.testing.assert_array_equal(out.numpy(), np.full((2, 3), 2, "float32"))


def _esc(s: str) -> str:
    import re

    return re.escape(s)


@pytest.fixture(scope="module")
def sym_func():
    n, m = te.size_var("n"), te.size_var("m")
    a = te.placeholder((n, m), name="a")
    b = te.placeholder((m,), name="b")
    c = topi.multiply(a, b)
    return tir.build(topi.schedule_injective(c), [a, b, c], name="scale_rows")["scale_rows"]


@pytest.mark.parametrize("n,m", [(1, 1), (3, 17), (64, 5), (0, 4), (129, 33)])
def test_symbolic_dims_run_at_several_sizes(sym_func, n, m):
    a = np.arange(n * m, dtype="float32").reshape(n, m)
    b = np.linspace(-1, 1, m).astype("float32")
    out = ember.nd.empty((n, m))
    sym_func(ember.nd.array(a), ember.nd.array(b), out)
    np.testing.assert_allclose(out.numpy(), a * b)


def test_symbolic_dims_must_agree(sym_func):
    with pytest.raises(ember.TVMError, match=r"scale_rows: argument 1 \(b\): expected shape "
                                             r"\(5,\), got \(4,\)"):
        sym_func(_arr((3, 5)), _arr((4,)), ember.nd.empty((3, 5)))
    with pytest.raises(ember.TVMError, match=r"argument 2 \(T_multiply\): expected shape "
                                             r"\(3, 5\), got \(5, 3\)"):
        sym_func(_arr((3, 5)), _arr((5,)), ember.nd.empty((5, 3)))


def test_unpacked_function_is_exported():
    import ctypes

    a = te.placeholder((4,), name="a")
    b = topi.exp(a)
    mod = tir.build(topi.schedule_injective(b), [a, b], name="plain_exp")
    mod["plain_exp"]  # compile and load
    lib = ctypes.CDLL(str(mod._compiled().path))
    x = np.array([0, 1, 2, 3], "float32")
    y = np.zeros(4, "float32")
    fn = lib.plain_exp_unpacked
    fn.restype = ctypes.c_int32
    assert fn(x.ctypes.data_as(ctypes.c_void_p), y.ctypes.data_as(ctypes.c_void_p)) == 0
    np.testing.assert_allclose(y, np.exp(x), rtol=1e-6)

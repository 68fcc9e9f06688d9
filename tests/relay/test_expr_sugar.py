"""Relay expressions as Relay-era scripts build them: calling an expression builds a call,
and the arithmetic operators build the ops (numpy references for what they compute)."""
from __future__ import annotations

import numpy as np
import pytest

import ember as tvm
from ember import relay
from ember.relay.prelude import Prelude

RNG = np.random.default_rng(0)


def _run(mod, *args, kind="debug"):
    return relay.create_executor(kind, mod=mod, device=tvm.cpu(0), target="llvm").evaluate()(
        *args)


def test_calling_a_function_a_global_and_a_var_of_function_type():
    x = relay.var("x", shape=(2, 3))
    double = relay.Function([x], x + x)
    mod = tvm.IRModule()
    gv = relay.GlobalVar("double")
    mod[gv] = double
    fty = relay.FuncType([relay.TensorType((2, 3))], relay.TensorType((2, 3)))
    f = relay.var("f", fty)
    apply = relay.Function([f, x], f(x))  # a Var of function type, called
    y = relay.var("y", shape=(2, 3))
    mod["main"] = relay.Function([y], apply(gv, double(y)))  # a Function, a GlobalVar
    assert isinstance(double(y), relay.Call) and double(y).op is double
    v = RNG.standard_normal((2, 3)).astype("float32")
    for kind in ("debug", "vm"):
        np.testing.assert_allclose(_run(mod, v, kind=kind).numpy(), 4 * v, rtol=1e-6)


def test_calling_a_call_that_returns_a_function():
    x = relay.var("x", shape=(2,))
    add1 = relay.Function([x], x + relay.const(1.0))
    pick = relay.Function([], add1)
    y = relay.var("y", shape=(2,))
    mod = tvm.IRModule.from_expr(relay.Function([y], pick()(y)))
    np.testing.assert_allclose(_run(mod, np.array([1, 2], "float32")).numpy(), [2, 3])


def test_calling_a_constructor():
    mod = tvm.IRModule()
    p = Prelude(mod)
    _, cons, nil = mod.get_type("List")
    lst = cons(relay.const(1), cons(relay.const(2), nil()))
    assert isinstance(lst, relay.Call) and lst.op is cons
    mod["main"] = relay.Function([], p.length(lst))
    assert int(_run(mod).numpy()) == 2


def test_operator_overloads_compute_as_numpy():
    x, y = relay.var("x", shape=(3,)), relay.var("y", shape=(3,))
    a = np.array([1.0, -2.0, 3.0], "float32")
    b = np.array([2.0, 2.0, -1.0], "float32")
    cases = [(x + y, a + b), (x - y, a - b), (x * y, a * b), (x / y, a / b), (-x, -a),
             (x + 1.0, a + 1), (2.0 - x, 2 - a), (3.0 * x, 3 * a), (1.0 / y, 1 / b),
             (x < y, a < b), (x > y, a > b), (x <= y, a <= b), (x >= y, a >= b),
             (x.astype("int32"), a.astype("int32"))]
    for expr, want in cases:
        mod = tvm.IRModule.from_expr(relay.Function([x, y], expr))
        got = _run(mod, a, b).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6)
        assert got.dtype == want.dtype


def test_expressions_compare_by_identity():
    x = relay.var("x", shape=(3,))
    assert x == x and x != relay.var("x", shape=(3,))
    assert len({x, x}) == 1


def test_an_op_is_called_through_its_builder():
    with pytest.raises(TypeError, match=r"use relay.add\(...\)"):
        relay.op.get("add")(relay.const(1.0), relay.const(2.0))


def test_a_call_with_a_non_expression_names_it():
    x = relay.var("x", shape=(3,))
    with pytest.raises(TypeError, match="cannot use str 'a' as a Relay expression"):
        relay.Function([x], x)("a")

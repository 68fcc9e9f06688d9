"""Defunctionalization as Relay-era scripts call it (``mod["main"] =
Defunctionalization(mod["main"], mod)``): no function values left, same results on the
interpreter, global recursion, recursive data types, closures capturing values, gradients."""
from __future__ import annotations

import numpy as np
import pytest

import ember as tvm
from ember import relay
from ember.ir.op import Op
from ember.relay import transform
from ember.relay.analysis import check_well_formed


def defunctionalized(mod):
    mod = transform.InferType()(mod)
    mod["main"] = transform.Defunctionalization(mod["main"], mod)
    out = transform.InferType()(mod)
    check_well_formed(out)
    return out


def _no_function_values(mod, before=()):
    """No function literal and no value of function type in main and in the functions the
    conversion added (the original higher-order functions stay in the module, unused)."""
    for gv, func in mod.functions.items():
        if gv.name_hint in before and gv.name_hint != "main":
            continue
        for n in tvm.ir.post_order(func.body):
            assert not isinstance(n, relay.Function), f"@{gv.name_hint} keeps a closure"
            assert not isinstance(n.checked_type_, relay.FuncType) or isinstance(
                n, (relay.GlobalVar, Op, relay.Constructor)), f"@{gv.name_hint}: {n}"


def _run(mod, *args):
    return relay.create_executor(mod=mod).evaluate()(*args)


def _list(p, values):
    out = p.nil()
    for v in reversed(values):
        out = p.cons(relay.const(v), out)
    return out


def test_simple():
    code = """#[version = "0.0.5"]
def @simple[A, B](%f: fn (A) -> B, %xs: A) -> B { %f(%xs) }
def @main(%l: Tensor[(5, 5), float32]) -> Tensor[(5, 5), float32] {
  %0 = fn (%x) { %x };
  @simple(%0, %l)
}"""
    mod = tvm.parser.fromtext(code)
    out = defunctionalized(tvm.parser.fromtext(code))
    _no_function_values(out, ["simple"])
    x = np.random.default_rng(0).random((5, 5)).astype("float32")
    np.testing.assert_array_equal(_run(out, x).numpy(), _run(mod, x).numpy())


def _list_values(v):
    out = []
    while len(v.fields) == 2:
        out.append(float(v.fields[0].numpy()))
        v = v.fields[1]
    return out


def test_global_recursion_and_global_as_value():
    code = """#[version = "0.0.5"]
type List[A] { Cons(A, List[A]), Nil, }
def @id[A](%x: A) -> A { %x }
def @map[A, B](%f: fn (A) -> B, %xs: List[A]) -> List[B] {
  match (%xs) {
    Cons(%x, %rest) => Cons(%f(%x), @map(%f, %rest)),
    Nil => Nil,
  }
}
def @main(%l: List[float32]) -> List[float32] { @map(@id, %l) }"""
    out = defunctionalized(tvm.parser.fromtext(code))
    _no_function_values(out, ["id", "map"])
    cons, nil = out.get_constructor("Cons"), out.get_constructor("Nil")
    arg = relay.create_executor(mod=out).evaluate(
        cons(relay.const(1.0), cons(relay.const(2.0), nil())))
    assert _list_values(_run(out, arg)) == [1.0, 2.0]


def test_recursive_datatype_and_captured_values():
    code = """#[version = "0.0.5"]
type List[A] { Cons(A, List[A]), Nil, }
def @sum(%f: fn (int32) -> int32, %k: List[int32]) -> int32 {
  match (%k) {
    Cons(%x, %rest) => { %0 = fn (%n) { add(%x, %f(%n)) }; @sum(%0, %rest) },
    Nil => %f(0),
  }
}
def @id[A](%x: A) -> A { %x }
def @main(%l: List[int32]) -> int32 { @sum(@id, %l) }"""
    out = defunctionalized(tvm.parser.fromtext(code))
    _no_function_values(out, ["sum", "id"])
    cons, nil = out.get_constructor("Cons"), out.get_constructor("Nil")
    arg = relay.create_executor(mod=out).evaluate(
        cons(relay.const(1), cons(relay.const(2), cons(relay.const(3), nil()))))
    assert int(_run(out, arg).numpy()) == 6


def test_let_bound_recursive_closure():
    code = """#[version = "0.0.5"]
def @main(%n: int32, %y: float32) -> float32 {
  let %loop = fn (%i: int32, %acc: float32) -> float32 {
    if (less(%i, 1)) { %acc } else { %loop(subtract(%i, 1), add(%acc, %y)) }
  };
  %loop(%n, 0f)
}"""
    out = defunctionalized(tvm.parser.fromtext(code))
    _no_function_values(out)
    assert float(_run(out, np.array(4, "int32"), np.array(1.5, "float32")).numpy()) == 6.0


def test_gradient_program():
    x, y = relay.var("x", shape=(3,)), relay.var("y", shape=(3,))
    back = transform.gradient(relay.Function([x, y], relay.sum(relay.tanh(x) * y)))
    mod = tvm.IRModule()
    mod["main"] = back
    out = defunctionalized(mod)
    _no_function_values(out)
    a, b = np.array([0.1, 0.5, -1.0], "float32"), np.array([2.0, 1.0, 0.5], "float32")
    _, (ga, gb) = _run(out, a, b)
    np.testing.assert_allclose(ga.numpy(), (1 - np.tanh(a) ** 2) * b, rtol=1e-6)
    np.testing.assert_allclose(gb.numpy(), np.tanh(a), rtol=1e-6)


def test_errors():
    f = relay.var("f", relay.FuncType([relay.TensorType((), "float32")],
                                      relay.TensorType((), "float32")))
    mod = tvm.IRModule()
    higher = relay.Function([f], relay.Call(f, [relay.const(1.0)]))
    with pytest.raises(tvm.TVMError, match="must be first order, but parameter 0 has type fn"):
        transform.Defunctionalization(higher, mod)
    t = relay.TypeVar("t")
    x = relay.Var("x", t)
    with pytest.raises(tvm.TVMError, match="must not be polymorphic"):
        transform.Defunctionalization(relay.Function([x], x, None, [t]), mod)
    with pytest.raises(TypeError, match="expected an IRModule for mod, got NoneType"):
        transform.Defunctionalization(relay.Function([], relay.const(1.0)), None)

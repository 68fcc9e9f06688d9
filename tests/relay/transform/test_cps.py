"""to_cps / ToCPS and un_cps as Relay-era scripts call them: the CPS type, results through
un_cps, recursion through global functions, and PartialEvaluate removing the references that
CPS exposes (TVM's test_cps_pe)."""
from __future__ import annotations

import numpy as np
import pytest
from _pass_helpers import parse

import ember as tvm
from ember import relay
from ember.relay import transform
from ember.relay.analysis import check_well_formed


def _infer(func, mod=None):
    mod = tvm.IRModule() if mod is None else mod
    mod["main"] = func
    return transform.InferType()(mod)["main"]


def test_identity_type():
    x = relay.var("x", shape=())
    cps = _infer(transform.to_cps(relay.Function([x], x)))
    (answer,) = cps.type_params
    t = relay.TensorType((), "float32")
    assert cps.checked_type == relay.FuncType([t, relay.FuncType([t], answer)], answer,
                                              [answer])


def test_closures_if_and_un_cps():
    mod = parse("""def @main(%y: Tensor[(3), float32], %c: bool) {
      let %f = fn (%d: Tensor[(3), float32]) { add(%d, %d) };
      let %r = ref(%y);
      let %u = ref_write(%r, multiply(ref_read(%r), 2f));
      if (%c) { %f(ref_read(%r)) } else { %f(%f((%y, %y).1)) }
    }""")
    cps = transform.to_cps(mod["main"])
    check_well_formed(cps)
    direct = _infer(transform.un_cps(cps))
    ex = relay.create_executor()
    a = np.arange(3, dtype="float32")
    for c in (True, False):
        np.testing.assert_allclose(ex.evaluate(direct)(a, np.array(c)).numpy(),
                                   ex.evaluate(mod["main"])(a, np.array(c)).numpy())


def test_recursion_through_globals():
    mod = parse("""def @down(%n: int32, %acc: float32) -> float32 {
      if (less(%n, 1)) { %acc } else { @down(subtract(%n, 1), add(%acc, 2f)) }
    }
    def @main(%m: int32) { @down(%m, 0f) }""")
    mod["main"] = transform.to_cps(mod["main"], mod=mod)
    assert "down_cps" in mod
    mod["main"] = transform.un_cps(mod["main"])
    mod = transform.InferType()(mod)
    res = relay.create_executor(mod=mod).evaluate()(np.array(4, "int32"))
    assert float(res.numpy()) == 8.0


def _no_refs_after_pe(func):
    func = _infer(func)
    cps = _infer(transform.to_cps(func))
    direct = _infer(transform.un_cps(cps))
    seq = tvm.transform.Sequential([
        transform.PartialEvaluate(), transform.InferType(),
        transform.DeadCodeElimination(inline_once=True, ignore_impurity=True),
        transform.InferType()])
    out = seq(tvm.IRModule.from_expr(direct))
    kinds = {type(n).__name__ for n in tvm.ir.post_order(out["main"])}
    assert not kinds & {"RefCreate", "RefRead", "RefWrite"}, out["main"]
    return out


def test_cps_then_partial_evaluation_removes_references():
    unit = relay.Function([], relay.const(0.0, dtype="float32"))
    f_ref = relay.Var("f_ref")
    one, two = relay.const(1.0, dtype="float32"), relay.const(2.0, dtype="float32")
    cond = relay.var(shape=(), dtype="bool", name_hint="cond")
    branch = relay.If(cond, relay.RefWrite(f_ref, relay.Function([], one)),
                      relay.RefWrite(f_ref, relay.Function([], two)))
    stmt = relay.Let(f_ref, relay.RefCreate(unit),
                     relay.Let(relay.Var("x"), branch, relay.Call(relay.RefRead(f_ref), [])))
    out = _no_refs_after_pe(relay.Function([cond], stmt))
    ex = relay.create_executor(mod=out)
    assert float(ex.evaluate()(np.array(True)).numpy()) == 1.0
    assert float(ex.evaluate()(np.array(False)).numpy()) == 2.0
    g = relay.transform.gradient(_infer(relay.Function([cond], relay.If(cond, one, two))))
    _no_refs_after_pe(g)
    x, y, z = (relay.var(n, shape=(1, 16)) for n in "xyz")
    h = relay.Function([cond, x, y, z], relay.add(relay.If(cond, x, y), z))
    out = _no_refs_after_pe(relay.transform.gradient(_infer(h)))
    a = np.ones((1, 16), "float32")
    res = relay.create_executor(mod=out).evaluate()(np.array(True), a, a * 2, a * 3)
    np.testing.assert_array_equal(res[1][1].numpy(), a)  # d/dx when cond
    np.testing.assert_array_equal(res[1][2].numpy(), 0 * a)


def test_deep_let_chain():
    x = relay.var("x", shape=(2,))
    vs = [relay.Var(f"v{i}") for i in range(2000)]
    expr = vs[-1]
    for i in reversed(range(2000)):
        expr = relay.Let(vs[i], relay.add(x if i == 0 else vs[i - 1], relay.const(1.0)), expr)
    cps = transform.to_cps(relay.Function([x], expr))
    direct = _infer(transform.un_cps(cps))
    res = relay.create_executor().evaluate(direct)(np.zeros(2, "float32"))
    np.testing.assert_array_equal(res.numpy(), [2000.0, 2000.0])


def test_errors():
    with pytest.raises(TypeError, match="to_cps: expected a relay.Function, got Call"):
        transform.to_cps(relay.exp(relay.var("x")))
    x = relay.var("x", shape=())
    with pytest.raises(TypeError, match="un_cps: the last parameter %x must be the continuation"):
        transform.un_cps(relay.Function([x], x))
    assert transform.ToCPS is transform.to_cps

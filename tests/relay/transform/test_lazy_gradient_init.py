"""LazyGradientInit, called as Relay-era scripts call it: types kept, results kept, and zeros
and ones that nothing forces are never built."""
from __future__ import annotations

import numpy as np
import pytest
from _pass_helpers import parse

import ember as tvm
from ember import relay
from ember.relay import transform

T = relay.TensorType((10, 10), "float32")
RNG = np.random.default_rng(11)


def _rand(*shape):
    return RNG.uniform(-1, 1, shape).astype("float32")


def _lazy(func):
    mod = tvm.IRModule()
    mod["main"] = func
    mod = transform.LazyGradientInit()(transform.InferType()(mod))
    return mod


def _run(mod, *args):
    return relay.create_executor(mod=mod).evaluate(mod["main"])(*args)


@pytest.fixture
def count_calls(monkeypatch):
    """Count how many times the interpreter runs zeros_like and ones_like."""
    counts = {"zeros_like": 0, "ones_like": 0}
    for name in counts:
        op_def = relay.op.get(name).op_def
        ref = op_def.reference

        def counted(*args, _ref=ref, _name=name, **kw):
            counts[_name] += 1
            return _ref(*args, **kw)

        monkeypatch.setattr(op_def, "reference", counted)
    return counts


def test_add_and_multiply_keep_type_and_result():
    x = relay.var("x", T)
    for body, fn in ((x + x, lambda a: a + a), (x * x, lambda a: a * a)):
        mod = _lazy(relay.Function([x], body))
        assert mod["main"].checked_type == relay.FuncType([T], T)
        a = _rand(10, 10)
        np.testing.assert_allclose(_run(mod, a).numpy(), fn(a))


def test_tuple_parameter_tuple_result_and_broadcast():
    tt = relay.TupleType([T, T])
    x = relay.var("x", tt)
    mod = _lazy(relay.Function([x], relay.TupleGetItem(x, 0) + relay.TupleGetItem(x, 1)))
    a, b = _rand(10, 10), _rand(10, 10)
    np.testing.assert_allclose(_run(mod, (a, b)).numpy(), a + b)
    y = relay.var("y", T)
    mod = _lazy(relay.Function([y], relay.Tuple([y, relay.zeros_like(y)])))
    assert mod["main"].checked_type == relay.FuncType([T], relay.TupleType([T, T]))
    out = _run(mod, a)
    np.testing.assert_array_equal(out[1].numpy(), np.zeros((10, 10)))
    p, q = relay.var("p", shape=(10, 4)), relay.var("q", shape=(10, 1))
    mod = _lazy(relay.Function([p, q], p + q))
    c, d = _rand(10, 4), _rand(10, 1)
    np.testing.assert_allclose(_run(mod, c, d).numpy(), c + d)


def test_zeros_ones_never_built_when_not_needed(count_calls):
    x = relay.var("x", T)
    body = (x + relay.zeros_like(x)) * relay.ones_like(x) + relay.zeros(
        (10, 10), "float32") * relay.ones((10, 10), "float32")
    mod = _lazy(relay.Function([x], body))
    a = _rand(10, 10)
    np.testing.assert_allclose(_run(mod, a).numpy(), a)
    assert count_calls == {"zeros_like": 0, "ones_like": 0}


def test_reverse_ad_identity_and_multivar():
    x = relay.var("x", T)
    back = transform.gradient(relay.Function([x], x))
    mod = _lazy(back)
    want = relay.FuncType([T], relay.TupleType([T, relay.TupleType([T])]))
    assert mod["main"].checked_type == want
    a = _rand(10, 10)
    fwd, (g,) = _run(mod, a)
    np.testing.assert_allclose(fwd.numpy(), a)
    np.testing.assert_array_equal(g.numpy(), np.ones((10, 10)))
    y = relay.var("y", T)
    mod = _lazy(transform.gradient(relay.Function([x, y], relay.sum(x * y))))
    b = _rand(10, 10)
    fwd, (gx, gy) = _run(mod, a, b)
    np.testing.assert_allclose(fwd.numpy(), np.sum(a * b), rtol=1e-5)
    np.testing.assert_allclose(gx.numpy(), b)
    np.testing.assert_allclose(gy.numpy(), a)


def test_fewer_zeros_in_gradient_code(count_calls):
    x, y = relay.var("x", T), relay.var("y", T)
    back = transform.gradient(relay.Function([x, y], x * y))
    a, b = _rand(10, 10), _rand(10, 10)
    relay.create_executor().evaluate(back)(a, b)
    eager = dict(count_calls)
    count_calls.update(zeros_like=0, ones_like=0)
    _run(_lazy(back), a, b)
    assert count_calls["zeros_like"] < eager["zeros_like"]


def test_functions_with_adts_and_grad_cell_defs_are_left_alone():
    mod = tvm.IRModule()
    p = relay.prelude.Prelude(mod)
    x = relay.var("x", shape=(2,))
    mod["main"] = relay.Function([x], relay.Call(p.hd, [relay.Call(p.cons, [x, p.nil()])]))
    out = transform.LazyGradientInit()(mod)
    tvm.ir.assert_structural_equal(out["main"], transform.InferType()(mod)["main"])
    assert "GradCell" in out and "FromGradCell" in out
    again = transform.LazyGradientInit()(out)  # idempotent on the helper definitions
    tvm.ir.assert_structural_equal(again["AddGradCell"], out["AddGradCell"])


def test_errors():
    mod = parse("""def @main(%f: fn (Tensor[(2), float32]) -> Tensor[(2), float32],
                             %x: Tensor[(2), float32]) { %f(%x) }""")
    with pytest.raises(tvm.TVMError, match=r"LazyGradientInit: cannot pass a value of type "
                                           r"fn \(Tensor\[\(2\), float32\]\)"):
        transform.LazyGradientInit()(mod)
    clash = parse("def @FromGradCell(%x: Tensor[(2), float32]) { %x }")
    with pytest.raises(tvm.TVMError, match="GradCell: the module already defines FromGradCell"):
        transform.LazyGradientInit()(clash)

"""relay.transform.gradient (higher_order and first_order) and FirstOrderGradient: every
registered gradient rule checked against central finite differences (hypothesis over small
shapes), the contract of the output, higher-order programs (if, closures, references, second
order), the first-order output as text, and the errors."""
from __future__ import annotations

import numpy as np
import pytest
from _pass_helpers import parse
from hypothesis import given, settings
from hypothesis import strategies as st

import ember as tvm
from ember import relay
from ember.ir import assert_structural_equal
from ember.relay.transform import FirstOrderGradient, InferType, gradient

MODES = ("higher_order", "first_order")


def run_grad(func, args, mode):
    """(forward, [grads]) of gradient(func) on the interpreter, as numpy."""
    back = gradient(func, mode=mode)
    fwd, grads = relay.create_executor("debug", mod=tvm.IRModule()).evaluate(back)(*args)
    return fwd, [g.numpy() for g in grads]


def numeric_grads(f, args, eps=1e-6):
    """Central differences of the scalar f(*args) with respect to each array of args."""
    out = []
    for i, a in enumerate(args):
        g = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            hi, lo = [x.copy() for x in args], [x.copy() for x in args]
            hi[i][idx] += eps
            lo[i][idx] -= eps
            g[idx] = (f(*hi) - f(*lo)) / (2 * eps)
        out.append(g)
    return out


def check_op(name, args, attrs=None, mode="higher_order", rtol=1e-4, atol=1e-5):
    """gradient of sum(op(args) * W) against finite differences, in float64."""
    op = relay.op.get(name)
    rng = np.random.default_rng(len(args))
    params = [relay.var(f"a{i}", shape=a.shape, dtype="float64") for i, a in enumerate(args)]
    call = relay.Call(op, params, op.make_attrs(**attrs) if attrs else None)
    out_shape = op.op_def.reference(*args, attrs=call.attrs).shape
    weight = rng.uniform(0.5, 1.5, out_shape)
    func = relay.Function(params, relay.sum(call * relay.const(weight)))
    _, grads = run_grad(func, args, mode)
    ref = op.op_def.reference
    want = numeric_grads(lambda *xs: float(np.sum(ref(*xs, attrs=call.attrs) * weight)), args)
    for got, exp, a in zip(grads, want, args):
        assert got.shape == a.shape and got.dtype == a.dtype
        np.testing.assert_allclose(got, exp, rtol=rtol, atol=atol)


# -- every rule against finite differences -------------------------------------------------------
def _arr(draw, shape, lo=-2.0, hi=2.0, away=None):
    seed = draw(st.integers(0, 2**16))
    x = np.asarray(np.random.default_rng(seed).uniform(lo, hi, shape))
    if away is not None:  # keep clear of a kink or a pole, where differences are meaningless
        x = np.where(np.abs(x - away) < 0.1, away + 0.3 * np.sign(x - away + 1e-9), x)
    return x


SHAPES = st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple)
UNARY = {
    "negative": {}, "exp": {}, "fast_exp": {}, "log": {"lo": 0.2}, "log2": {"lo": 0.2},
    "log10": {"lo": 0.2}, "sqrt": {"lo": 0.2}, "rsqrt": {"lo": 0.2}, "sin": {}, "cos": {},
    "tan": {"lo": -1.0, "hi": 1.0}, "tanh": {}, "fast_tanh": {}, "sigmoid": {}, "erf": {},
    "fast_erf": {}, "abs": {"away": 0.0}, "nn.relu": {"away": 0.0}, "copy": {},
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(UNARY))
@settings(max_examples=2, deadline=None)
@given(data=st.data(), shape=SHAPES)
def test_unary_rules(name, mode, data, shape):
    check_op(name, [_arr(data.draw, shape, **UNARY[name])], mode=mode)


@settings(max_examples=4, deadline=None)
@given(data=st.data(), shape=SHAPES)
def test_leaky_relu_and_clip_rules(data, shape):
    check_op("nn.leaky_relu", [_arr(data.draw, shape, away=0.0)], {"alpha": 0.2})
    x = _arr(data.draw, shape)
    x = np.where(np.abs(np.abs(x) - 0.5) < 0.05, 0.3, x)
    check_op("clip", [x], {"a_min": -0.5, "a_max": 0.5}, mode="first_order")


def _broadcastable(draw, shape):
    """A shape that broadcasts against ``shape``: some leading axes dropped, some set to 1."""
    drop = draw(st.integers(0, len(shape)))
    return tuple(1 if draw(st.booleans()) else d for d in shape[drop:])


BINARY = {"add": {}, "subtract": {}, "multiply": {}, "divide": {"lo": 0.5},
          "power": {"lo": 0.5}, "maximum": {}, "minimum": {}}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(BINARY))
@settings(max_examples=3, deadline=None)
@given(data=st.data(), shape=SHAPES)
def test_broadcasting_binary_rules(name, mode, data, shape):
    other = _broadcastable(data.draw, shape)
    a, b = _arr(data.draw, shape, **BINARY[name]), _arr(data.draw, other, **BINARY[name])
    if data.draw(st.booleans()):
        a, b = b, a
    if name in ("maximum", "minimum"):  # equal seeds draw equal values: keep clear of ties
        b = np.asarray(b * 0.9 + 0.13)
    check_op(name, [a, b], mode=mode)


@settings(max_examples=5, deadline=None)
@given(data=st.data(), shape=st.lists(st.integers(1, 3), min_size=2, max_size=3).map(tuple),
       keepdims=st.booleans(), exclude=st.booleans())
def test_reduction_rules(data, shape, keepdims, exclude):
    axis = data.draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, unique=True))
    for name in ("sum", "mean"):
        for mode in MODES:
            check_op(name, [_arr(data.draw, shape)],
                     {"axis": tuple(axis), "keepdims": keepdims, "exclude": exclude}, mode=mode)


@settings(max_examples=4, deadline=None)
@given(data=st.data())
def test_shape_rules(data):
    x = _arr(data.draw, (2, 3, 1))
    for name, attrs in (("reshape", {"newshape": (3, 2)}), ("transpose", {"axes": (2, 0, 1)}),
                        ("transpose", {}), ("expand_dims", {"axis": 1, "num_newaxis": 2}),
                        ("squeeze", {"axis": (2,)}), ("nn.batch_flatten", {}),
                        ("broadcast_to", {"shape": (4, 2, 3, 5)})):
        check_op(name, [x], attrs, mode=data.draw(st.sampled_from(MODES)))
    check_op("collapse_sum_like", [_arr(data.draw, (2, 3, 4)), _arr(data.draw, (3, 1))])
    cond = np.random.default_rng(0).uniform(size=(2, 3)) > 0.5
    op = relay.op.get("where")
    c, x, y = relay.const(cond), relay.var("x", shape=(2, 3), dtype="float64"), relay.var(
        "y", shape=(3,), dtype="float64")
    func = relay.Function([x, y], relay.sum(relay.Call(op, [c, x, y])))
    _, (gx, gy) = run_grad(func, [np.ones((2, 3)), np.ones(3)], "first_order")
    np.testing.assert_array_equal(gx, cond.astype("float64"))
    np.testing.assert_array_equal(gy, (~cond).sum(axis=0))


@pytest.mark.parametrize("mode", MODES)
def test_nn_rules(mode):
    rng = np.random.default_rng(5)
    r = lambda *s: rng.uniform(-1, 1, s)  # noqa: E731
    check_op("nn.dense", [r(3, 4), r(5, 4)], mode=mode)
    check_op("nn.dense", [r(2, 3, 4), r(5, 4)], mode=mode)
    check_op("nn.bias_add", [r(2, 3, 2), r(3)], {"axis": 1}, mode=mode)
    check_op("nn.softmax", [r(2, 5)], {"axis": 1}, mode=mode)
    check_op("nn.log_softmax", [r(2, 5)], {"axis": -1}, mode=mode)
    check_op("nn.global_avg_pool2d", [r(1, 2, 3, 3)], mode=mode)
    for ta in (False, True):
        for tb in (False, True):
            a = r(2, 4, 3) if ta else r(2, 3, 4)
            b = r(2, 5, 4) if tb else r(2, 4, 5)
            check_op("nn.batch_matmul", [a, b], {"transpose_a": ta, "transpose_b": tb},
                     mode=mode)
            check_op("nn.matmul", [a[0], b[0]], {"transpose_a": ta, "transpose_b": tb},
                     mode=mode)
    check_op("nn.batch_matmul", [r(1, 3, 4), r(2, 5, 4)], mode=mode)


@pytest.mark.parametrize("attrs", [
    {}, {"padding": (1, 1, 1, 1)}, {"strides": (2, 2)},
    {"strides": (2, 2), "padding": (1, 0, 1, 0)},
    {"dilation": (2, 2), "padding": (2, 2, 2, 2)}, {"strides": (2, 1), "dilation": (1, 2)},
])
def test_conv2d_rule(attrs):
    rng = np.random.default_rng(6)
    check_op("nn.conv2d", [rng.uniform(-1, 1, (2, 3, 6, 7)), rng.uniform(-1, 1, (4, 3, 3, 2))],
             attrs, mode="first_order")


def test_zero_gradient_ops_and_integer_values():
    x = relay.var("x", shape=(4,), dtype="float64")
    body = relay.floor(x) + relay.sign(x) * relay.zeros_like(x) + relay.round(x)
    body = body + relay.cast(relay.less(x, relay.const(0.0, "float64")), "float64")
    for mode in MODES:
        _, (g,) = run_grad(relay.Function([x], relay.sum(body)), [np.arange(4.0) - 1.5], mode)
        np.testing.assert_array_equal(g, np.zeros(4))


# -- the contract -------------------------------------------------------------------------------
def test_output_type_and_tuple_result():
    t = relay.TensorType((3,), "float32")
    x, y = relay.var("x", t), relay.var("y", t)
    func = relay.Function([x, y], relay.Tuple([x * y, relay.exp(x)]))
    for mode in MODES:
        back = gradient(InferType()(tvm.IRModule.from_expr(func))["main"], mode=mode)
        assert back.checked_type == relay.FuncType(
            [t, t], relay.TupleType([relay.TupleType([t, t]), relay.TupleType([t, t])]))
        a, b = np.array([1, 2, 3], "float32"), np.array([4, 5, 6], "float32")
        (f0, f1), (ga, gb) = relay.create_executor().evaluate(back)(a, b)
        np.testing.assert_allclose(f0.numpy(), a * b)
        np.testing.assert_allclose(ga.numpy(), b + np.exp(a), rtol=1e-6)
        np.testing.assert_allclose(gb.numpy(), a)


def test_unused_parameter_gets_zeros():
    x, y = relay.var("x", shape=(2,)), relay.var("y", shape=(2,))
    for mode in MODES:
        _, (gx, gy) = run_grad(relay.Function([x, y], relay.sum(x)),
                               [np.ones(2, "float32")] * 2, mode)
        np.testing.assert_array_equal(gy, np.zeros(2))


def test_first_order_output_as_text():
    back = gradient(parse("def @main(%x: Tensor[(3), float32]) { multiply(%x, %x) }")["main"],
                    mode="first_order")
    expected = parse("""def @main(%x: Tensor[(3), float32]) {
      %0 = multiply(%x, %x);
      %1 = ones_like(%0);
      (%0, (add(multiply(%1, %x), multiply(%1, %x)),))
    }""")["main"]
    assert_structural_equal(back, expected, map_free_vars=True)


def test_first_order_gradient_pass_and_lets():
    mod = parse("""def @main(%x: Tensor[(3), float32], %w: Tensor[(3), float32]) {
      let %a = multiply(%x, %w);
      let %b = tanh(%a);
      sum(multiply(%b, %a))
    }""")
    out = FirstOrderGradient()(mod)
    x, w = np.array([0.1, 0.2, 0.3], "float32"), np.array([1.0, -2.0, 0.5], "float32")
    fwd, (gx, gw) = relay.create_executor(mod=out).evaluate()(x, w)
    a = x * w
    da = np.tanh(a) + a * (1 - np.tanh(a) ** 2)
    np.testing.assert_allclose(gx.numpy(), da * w, rtol=1e-5)
    np.testing.assert_allclose(gw.numpy(), da * x, rtol=1e-5)
    assert not any(isinstance(n, (relay.RefCreate, relay.Function))
                   for n in tvm.ir.post_order(out["main"].body))


# -- higher-order programs ----------------------------------------------------------------------
def test_if_closure_and_references():
    mod = parse("""def @main(%x: Tensor[(3), float32], %c: bool) {
      let %r = ref(%x);
      let %f = fn (%y: Tensor[(3), float32]) { multiply(%y, ref_read(%r)) };
      let %u = ref_write(%r, exp(%x));
      if (%c) { sum(%f(%x)) } else { sum(tanh(%x)) }
    }""")
    back = gradient(mod["main"])
    x = np.array([0.1, -0.4, 0.7], "float32")
    ex = relay.create_executor()
    _, (gx, gc) = ex.evaluate(back)(x, np.array(True))
    np.testing.assert_allclose(gx.numpy(), np.exp(x) + x * np.exp(x), rtol=1e-5)
    _, (gx, _) = ex.evaluate(back)(x, np.array(False))
    np.testing.assert_allclose(gx.numpy(), 1 - np.tanh(x) ** 2, rtol=1e-5)


def test_second_order():
    t = relay.TensorType((4, 4), "float32")
    x = relay.var("x", t)
    back = gradient(relay.Function([x], x * x))
    y = relay.var("y", t)
    adjusted = relay.Function([y], relay.TupleGetItem(relay.TupleGetItem(back(y), 1), 0))
    back_back = gradient(adjusted)
    x_nd = np.random.default_rng(0).uniform(-1, 1, (4, 4)).astype("float32")
    fwd, (gx,) = relay.create_executor().evaluate(back_back)(x_nd)
    np.testing.assert_allclose(fwd.numpy(), 2 * x_nd, rtol=1e-6)
    np.testing.assert_allclose(gx.numpy(), 2 * np.ones_like(x_nd))


# -- errors -------------------------------------------------------------------------------------
def test_errors():
    x = relay.var("x", shape=(1, 1, 4, 4))
    with pytest.raises(ValueError, match="mode must be 'higher_order' or 'first_order', got 'fo'"):
        gradient(relay.Function([x], x), mode="fo")
    pool = relay.Function([x], relay.nn.max_pool2d(x, pool_size=(2, 2)))
    for mode in MODES:
        with pytest.raises(tvm.TVMError, match="no gradient is registered for operator "
                                               "nn.max_pool2d"):
            gradient(pool, mode=mode)
    with pytest.raises(TypeError, match="expected a relay.Function, got Call"):
        gradient(relay.exp(x))
    mod = parse("""def @f(%y: Tensor[(2), float32]) { exp(%y) }
                   def @main(%x: Tensor[(2), float32], %c: bool) {
                     if (%c) { @f(%x) } else { %x }
                   }""")
    with pytest.raises(tvm.TVMError, match=r"calls of global functions \(@f\) are not supported"):
        gradient(mod["main"], mod)
    with pytest.raises(tvm.TVMError, match="first-order AD handles dataflow programs"):
        gradient(mod["main"], mod, mode="first_order")
    t = relay.var("t", relay.TupleType([relay.TensorType((2,), "float32")]))
    with pytest.raises(tvm.TVMError, match="parameter %t has type .*only tensor parameters"):
        gradient(relay.Function([t], relay.TupleGetItem(t, 0)))


def test_user_registered_gradient_overrides(monkeypatch):
    key = "FPrimalGradient"
    extra = relay.op.get("exp").op_def.extra
    monkeypatch.setitem(extra, key, extra[key])
    relay.op.register_gradient("exp", lambda orig, grad: [grad * relay.const(3.0)], level=11)
    x = relay.var("x", shape=(2,))
    _, (g,) = run_grad(relay.Function([x], relay.sum(relay.exp(x))), [np.zeros(2, "float32")],
                       "first_order")
    np.testing.assert_array_equal(g, [3.0, 3.0])
    with pytest.raises(ValueError, match="register_gradient: exp already has a rule at level 11"):
        relay.op.register_gradient("exp", lambda o, g: [g], level=11)

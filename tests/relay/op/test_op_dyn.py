"""The ``dyn.*`` ops: their sizes come from values at run time. Each is run on the VM at
several values (the same argument shapes, so a cached plan must not reuse stale sizes), with
the interpreter (numpy references), and against numpy; bad values fail with the op, the
``where`` label and what was wrong, before anything is read out of bounds."""
from __future__ import annotations

import numpy as np
import pytest
from _vm_util import interpret, vm_runner

from ember import relay
from ember.runtime.errors import TVMError

dyn = relay.op.dyn
RNG = np.random.default_rng(0)


def _f32(*shape):
    return RNG.standard_normal(shape).astype("float32")


def _i64(values):
    return np.array(values, "int64")


def _check(func, cases):
    """Run ``func`` on the VM and the interpreter for each (args, expected)."""
    run = vm_runner(func)
    for args, want in cases:
        got = run(*args)
        got_i = interpret(func, *args)
        for g in (got, got_i):
            if isinstance(want, list):
                for a, b in zip(g, want):
                    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
                    assert a.shape == b.shape
            else:
                assert g.shape == want.shape, (g.shape, want.shape)
                np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)
    return run


def test_reshape_zero_copies_and_minus_one_infers():
    x, s = relay.var("x", shape=(relay.Any(), 6)), relay.var("s", shape=(3,), dtype="int64")
    func = relay.Function([x, s], dyn.reshape(x, s, where="Reshape node 'r'"))
    a, b = _f32(4, 6), _f32(2, 6)
    run = _check(func, [((a, _i64([0, 2, 3])), a.reshape(4, 2, 3)),
                        ((a, _i64([2, -1, 4])), a.reshape(2, 3, 4)),
                        ((a, _i64([-1, 1, 1])), a.reshape(24, 1, 1)),
                        ((b, _i64([3, 2, 2])), b.reshape(3, 2, 2))])
    with pytest.raises(TVMError, match=r"dyn.reshape \(Reshape node 'r'\).*as many elements"):
        run(a, _i64([5, 5, 1]))
    with pytest.raises(TVMError, match="Reshape node 'r'.*more than one -1"):
        run(a, _i64([-1, -1, 6]))
    with pytest.raises(TVMError, match="Reshape node 'r'.*negative size"):
        run(a, _i64([-4, 3, -2]))
    with pytest.raises(TVMError, match="as many elements"):
        interpret(func, a, _i64([5, 5, 1]))


def test_reshape_allowzero_and_a_zero_past_the_rank():
    x, s = relay.var("x", shape=(0, 3)), relay.var("s", shape=(3,), dtype="int64")
    _check(relay.Function([x, s], dyn.reshape(x, s, allowzero=True)),
           [((np.zeros((0, 3), "float32"), _i64([3, 0, 5])), np.zeros((3, 0, 5), "float32"))])
    y = relay.var("y", shape=(2, 3))
    run = vm_runner(relay.Function([y, s], dyn.reshape(y, s)))
    with pytest.raises(TVMError, match="copies dimension 2"):
        run(_f32(2, 3), _i64([1, 6, 0]))


def test_broadcast_to_and_its_errors():
    x, s = relay.var("x", shape=(3, 1)), relay.var("s", shape=(3,), dtype="int64")
    func = relay.Function([x, s], dyn.broadcast_to(x, s, where="Expand node 'e'"))
    assert func.body.checked_type_ is None
    a = _f32(3, 1)
    run = _check(func, [((a, _i64([2, 3, 4])), np.broadcast_to(a, (2, 3, 4))),
                        ((a, _i64([1, 3, 0])), np.zeros((1, 3, 0), "float32"))])
    with pytest.raises(TVMError, match="Expand node 'e'.*cannot broadcast"):
        run(a, _i64([2, 4, 4]))
    with pytest.raises(TVMError, match="Expand node 'e'.*negative"):
        run(a, _i64([2, 3, -4]))


def test_broadcast_to_keeps_static_sizes_and_checks_them():
    x, s = relay.var("x", shape=(3, 1)), relay.var("s", shape=(3,), dtype="int64")
    func = relay.Function([x, s], dyn.broadcast_to(x, s))
    mod = relay.transform.InferType()(relay.IRModule.from_expr(func))
    assert str(mod["main"].body.checked_type) == "Tensor[(?, 3, ?), float32]"
    a = _f32(3, 1)
    run = _check(func, [((a, _i64([2, 3, 4])), np.broadcast_to(a, (2, 3, 4)))])
    with pytest.raises(TVMError, match="cannot broadcast"):
        run(a, _i64([2, 5, 4]))


def test_tile_numpy_rules():
    x, r = relay.var("x", shape=(2, 3)), relay.var("r", shape=(3,), dtype="int64")
    a = _f32(2, 3)
    run = _check(relay.Function([x, r], dyn.tile(x, r)),
                 [((a, _i64([2, 1, 3])), np.tile(a, (2, 1, 3))),
                  ((a, _i64([1, 0, 2])), np.tile(a, (1, 0, 2)))])
    with pytest.raises(TVMError, match="reps must not be negative"):
        run(a, _i64([1, -1, 1]))
    r1 = relay.var("r1", shape=(1,), dtype="int64")
    _check(relay.Function([x, r1], dyn.tile(x, r1)), [((a, _i64([3])), np.tile(a, 3))])


def _slice(x, b, e, s):
    out = x
    for axis, (bk, ek, sk) in enumerate(zip(b, e, s)):
        out = np.take(out, range(*slice(bk, ek, sk).indices(x.shape[axis])), axis=axis)
    return out


def test_strided_slice_from_values_follows_relay():
    x = relay.var("x", shape=(6, relay.Any()))
    b, e, s = (relay.var(n, shape=(2,), dtype="int64") for n in "bes")
    a = _f32(6, 5)
    cases = []
    for bv, ev, sv in [([1, 0], [4, 5], [1, 2]), ([5, -1], [-7, -6], [-2, -1]),
                       ([-100, 2], [100, 2], [3, 1]), ([0, 9], [2 ** 62, -2 ** 63 + 5], [1, -1])]:
        cases.append(((a, _i64(bv), _i64(ev), _i64(sv)), _slice(a, bv, ev, sv)))
    run = _check(relay.Function([x, b, e, s], dyn.strided_slice(x, b, e, s)), cases)
    with pytest.raises(TVMError, match="strides must not be 0"):
        run(a, _i64([0, 0]), _i64([1, 1]), _i64([1, 0]))


def test_strided_slice_axes_and_size_mode():
    x = relay.var("x", shape=(4, 5, 6))
    b, e = relay.var("b", shape=(1,), dtype="int64"), relay.var("e", shape=(1,), dtype="int64")
    one = relay.const(np.array([1], "int64"))
    a = _f32(4, 5, 6)
    _check(relay.Function([x, b, e], dyn.strided_slice(x, b, e, one, axes=[2],
                                                       slice_mode="size")),
           [((a, _i64([1]), _i64([3])), a[:, :, 1:4]), ((a, _i64([-2]), _i64([-1])),
                                                         a[:, :, 4:])])


def test_full_zeros_ones_and_negative_sizes():
    s = relay.var("s", shape=(2,), dtype="int64")
    v = relay.var("v", shape=(), dtype="int32")
    run = _check(relay.Function([v, s], dyn.full(v, s, where="ConstantOfShape node 'c'")),
                 [((np.array(7, "int32"), _i64([2, 3])), np.full((2, 3), 7, "int32")),
                  ((np.array(1, "int32"), _i64([0, 4])), np.zeros((0, 4), "int32"))])
    with pytest.raises(TVMError, match="ConstantOfShape node 'c'.*negative"):
        run(np.array(1, "int32"), _i64([-1, 4]))
    _check(relay.Function([s], dyn.zeros(s, "int8")), [((_i64([3, 1]),),
                                                        np.zeros((3, 1), "int8"))])
    _check(relay.Function([s], dyn.ones(s)), [((_i64([1, 2]),), np.ones((1, 2), "float32"))])


def test_one_hot_depth_from_a_value():
    i = relay.var("i", shape=(3,), dtype="int64")
    d = relay.var("d", shape=(), dtype="int64")
    func = relay.Function([i, d], dyn.one_hot(i, relay.const(5.0), relay.const(-1.0), d,
                                              axis=0))
    idx = _i64([0, 2, 7])
    want = lambda n: np.where(np.arange(n)[:, None] == idx[None, :], 5.0, -1.0)  # noqa: E731
    _check(func, [((idx, np.array(4, "int64")), want(4).astype("float32")),
                  ((idx, np.array(8, "int64")), want(8).astype("float32"))])


def test_topk_k_from_a_value():
    x, k = relay.var("x", shape=(2, 6)), relay.var("k", shape=(1,), dtype="int64")
    a = np.array([[3, 1, 4, 1, 5, 9], [2, 6, 5, 3, 5, 8]], "float32")
    out = dyn.topk(x, k, axis=1, dtype="int64").astuple()
    order = np.argsort(-a, axis=1, kind="stable")
    run = _check(relay.Function([x, k], out),
                 [((a, _i64([n])), [np.take_along_axis(a, order[:, :n], 1),
                                    order[:, :n].astype("int64")]) for n in (3, 0, 6)])
    with pytest.raises(TVMError, match="k is larger"):
        run(a, _i64([7]))


def _pad_by_index(a, widths, mode, value):
    """out[o] = a[o - before] per axis: the pad value outside (constant), the nearest edge
    element (edge) or the mirror image (reflect)."""
    out = a
    inside = np.ones((), bool)
    for axis, (b, e) in enumerate(widths):
        d = a.shape[axis]
        j = np.arange(d + b + e) - b
        src = {"edge": np.clip(j, 0, d - 1), "constant": np.clip(j, 0, d - 1),
               "reflect": np.where(np.abs(j) >= d, 2 * (d - 1) - np.abs(j), np.abs(j))}[mode]
        out = np.take(out, src, axis=axis)
        line = [1] * a.ndim
        line[axis] = len(j)
        inside = inside & ((j >= 0) & (j < d)).reshape(line)
    return np.where(inside, out, np.float32(value)) if mode == "constant" else out


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
def test_pad_widths_from_values_with_crops(mode):
    x = relay.var("x", shape=(3, 4))
    w = relay.var("w", shape=(2, 2), dtype="int64")
    a = _f32(3, 4)
    widths = ([[1, 2], [0, 1]], [[-1, 2], [2, -3]], [[0, 0], [0, 0]])
    for pads in widths[::2]:  # no crop: numpy's pad
        kw = {"constant_values": 0.5} if mode == "constant" else {}
        np.testing.assert_array_equal(_pad_by_index(a, pads, mode, 0.5),
                                      np.pad(a, pads, mode=mode, **kw))
    run = _check(relay.Function([x, w], dyn.nn.pad(x, w, 0.5, mode)),
                 [((a, _i64(p)), _pad_by_index(a, p, mode, 0.5)) for p in widths])
    with pytest.raises(TVMError, match="dyn.nn.pad"):
        run(a, _i64([[-2, -2], [0, 0]]) if mode != "reflect" else _i64([[3, 0], [0, 0]]))


def test_resize2d_size_and_scales_from_values():
    x = relay.var("x", shape=(1, 2, relay.Any(), relay.Any()))
    size = relay.var("size", shape=(2,), dtype="int64")
    scales = relay.var("scales", shape=(2,), dtype="float32")
    func = relay.Function([x, size, scales], dyn.image.resize2d(
        x, size, scales, method="nearest_neighbor",
        coordinate_transformation_mode="asymmetric", rounding_method="floor"))
    a = _f32(1, 2, 3, 4)
    want = a[:, :, [0, 0, 1, 1, 2, 2], :][:, :, :, [0, 0, 1, 1, 2, 2, 3, 3]]
    _check(func, [((a, _i64([6, 8]), np.array([2, 2], "float32")), want)])
    b = _f32(1, 2, 2, 2)
    _check(func, [((b, _i64([2, 6]), np.array([1, 3], "float32")), b[:, :, :, [0, 0, 0, 1, 1,
                                                                                1]])])


@pytest.mark.parametrize("build", [
    lambda x, s: dyn.reshape(x, s, allowzero=True, where="Reshape node '/a/\"b\"'"),
    lambda x, s: dyn.strided_slice(x, s, s, relay.const(np.array([1], "int64")), axes=[1],
                                   slice_mode="size"),
    lambda x, s: dyn.full(relay.const(1.5), s, "float64"),
    lambda x, s: dyn.topk(x, relay.const(np.array(1, "int64")), axis=0, ret_type="values"),
    lambda x, s: dyn.squeeze(x, s, where="node 'q'"),
    lambda x, s: dyn.expand_dims(x, relay.const(np.array(1, "int64")), 2),
])
def test_dyn_ops_round_trip_through_text(build):
    import ember

    x, s = relay.var("x", shape=(4, 6)), relay.var("s", shape=(1,), dtype="int64")
    mod = relay.transform.InferType()(ember.IRModule.from_expr(relay.Function([x, s],
                                                                              build(x, s))))
    parsed = relay.transform.InferType()(ember.parser.fromtext(mod.astext()))
    ember.ir.assert_structural_equal(parsed, mod)


def test_shape_tensors_of_the_wrong_kind_are_type_errors():
    x = relay.var("x", shape=(4, 6))
    f = relay.var("f", shape=(2,), dtype="float32")
    n = relay.var("n", shape=(relay.Any(),), dtype="int64")
    for expr, msg in [(dyn.reshape(x, f), "newshape must be a 1-D integer tensor"),
                      (dyn.reshape(x, n), "static length"),
                      (dyn.broadcast_to(x, relay.const(np.array([4], "int64"))), "rank 1"),
                      (dyn.topk(x, relay.const(np.array([1, 2], "int64")), ret_type="values"),
                       "integer scalar"),
                      (dyn.nn.pad(x, relay.const(np.zeros((3, 2), "int64"))), r"\(2, 2\)")]:
        with pytest.raises(TVMError, match=msg):
            relay.transform.InferType()(relay.IRModule.from_expr(
                relay.Function(relay.analysis.free_vars(expr), expr)))


def test_relay_builders_dispatch_on_expressions():
    x, y = relay.var("x", shape=(relay.Any(), 6)), relay.var("y", shape=(2, 3))
    s = relay.shape_of(y, "int64")
    k = relay.var("k", shape=(), dtype="int64")
    built = {
        "dyn.reshape": relay.reshape(x, s),
        "dyn.broadcast_to": relay.broadcast_to(y, s),
        "dyn.tile": relay.tile(y, s),
        "dyn.strided_slice": relay.strided_slice(x, s, [5, 5]),
        "dyn.zeros": relay.zeros(s),
        "dyn.ones": relay.ones(s, "int8"),
        "dyn.full": relay.full(relay.const(1.0), s),
        "dyn.topk": relay.topk(x, k).astuple(),
        "dyn.one_hot": relay.one_hot(relay.var("i", shape=(3,), dtype="int64"),
                                     relay.const(1.0), relay.const(0.0), k),
        "dyn.nn.pad": relay.nn.pad(x, relay.var("w", shape=(2, 2), dtype="int64")),
        "dyn.image.resize2d": relay.image.resize2d(
            relay.var("img", shape=(1, 3, 4, 4)), size=relay.var("hw", shape=(2,),
                                                                dtype="int64")),
    }
    for name, call in built.items():
        assert call.op.name == name
    # constants are numbers: the static ops
    c = relay.const(np.array([3, -1], "int64"))
    assert relay.reshape(x, c).op.name == "reshape"
    assert relay.reshape(x, c).attrs.newshape == (3, -1)
    assert relay.topk(x, relay.const(2)).astuple().attrs.k == 2
    assert relay.strided_slice(x, c, c).op.name == "strided_slice"


def test_resize2d_with_a_run_time_size_scales_by_size_over_input():
    img = relay.var("img", shape=(1, 1, relay.Any(), relay.Any()))
    hw = relay.var("hw", shape=(2,), dtype="int64")
    func = relay.Function([img, hw], relay.image.resize2d(img, size=hw, method="linear"))
    static = relay.Function([img], relay.image.resize2d(img, size=(5, 3), method="linear"))
    a = _f32(1, 1, 3, 4)
    _check(func, [((a, _i64([5, 3])), interpret(static, a))])


def test_squeeze_axes_from_values():
    x = relay.var("x", shape=(1, relay.Any(), 1, 2))
    a = relay.var("a", shape=(2,), dtype="int64")
    func = relay.Function([x, a], dyn.squeeze(x, a, where="Squeeze node 's'"))
    p, q = _f32(1, 3, 1, 2), _f32(1, 1, 1, 2)
    run = _check(func, [((p, _i64([0, 2])), p.reshape(3, 2)),
                        ((p, _i64([-2, -4])), p.reshape(3, 2)),
                        ((q, _i64([1, 0])), q.reshape(1, 2))])
    with pytest.raises(TVMError, match=r"dyn.squeeze \(Squeeze node 's'\).*size other than 1"):
        run(p, _i64([0, 1]))
    with pytest.raises(TVMError, match="Squeeze node 's'.*out of range for rank 4"):
        run(p, _i64([0, 4]))
    with pytest.raises(TVMError, match="Squeeze node 's'.*names an axis twice"):
        run(p, _i64([0, -4]))
    with pytest.raises(TVMError, match="size.* not 1|names an axis twice"):
        interpret(func, p, _i64([0, 0]))


@pytest.mark.parametrize("num_newaxis", [0, 1, 3])
def test_expand_dims_axis_from_a_value(num_newaxis):
    x = relay.var("x", shape=(2, relay.Any(), 4))
    a = relay.var("a", shape=(), dtype="int32")
    func = relay.Function([x, a], dyn.expand_dims(x, a, num_newaxis, where="Unsqueeze 'u'"))
    p = _f32(2, 3, 4)

    def want(axis):
        axis %= 4
        return p.reshape(p.shape[:axis] + (1,) * num_newaxis + p.shape[axis:])

    cases = [((p, np.array(v, "int32")), want(v)) for v in (0, 1, 3, -1, -4)]
    run = _check(func, cases)
    with pytest.raises(TVMError, match=r"dyn.expand_dims \(Unsqueeze 'u'\).*out of range"):
        run(p, np.array(4, "int32"))
    with pytest.raises(TVMError, match="out of range"):
        interpret(func, p, np.array(-5, "int32"))


def test_squeeze_and_expand_dims_dispatch_and_fold_back():
    x = relay.var("x", shape=(1, 3, 1))
    a = relay.var("a", shape=(1,), dtype="int64")
    assert relay.squeeze(x, axis=a).op.name == "dyn.squeeze"
    assert relay.expand_dims(x, axis=relay.var("k", shape=(), dtype="int64")).op.name == \
        "dyn.expand_dims"
    # constants are numbers: the static ops, as relay.squeeze(x, axis=relay.const([0]))
    const = relay.squeeze(x, axis=relay.const(np.array([0], "int64")))
    assert const.op.name == "squeeze" and const.attrs.axis == (0,)
    assert relay.expand_dims(x, relay.const(1)).attrs.axis == 1
    # DynamicToStatic turns the dynamic forms back once the axes are known
    two = relay.const(np.array([2], "int64"))
    body = relay.expand_dims(relay.squeeze(x, axis=two + relay.const(np.array([0], "int64"))),
                             relay.const(np.array(0, "int64")) + relay.const(np.array(0, "int64")))
    import ember

    mod = relay.transform.DynamicToStatic()(ember.IRModule.from_expr(relay.Function([x], body)))
    text = mod.astext()
    assert "dyn." not in text and "squeeze(%x, axis=[2])" in text
    assert str(mod["main"].checked_type.ret_type) == "Tensor[(1, 1, 3), float32]"


def test_squeeze_and_expand_dims_type_errors():
    x = relay.var("x", shape=(4, 6))
    for expr, msg in [(dyn.squeeze(x, relay.var("a", shape=(3,), dtype="int64")),
                       "axis has 3 values but data has rank 2"),
                      (dyn.expand_dims(x, relay.var("a", shape=(2,), dtype="int64")),
                       "axis must be an integer scalar"),
                      (dyn.squeeze(x, relay.var("a", shape=(1,), dtype="float32")),
                       "axis must be a 1-D integer tensor")]:
        with pytest.raises(TVMError, match=msg):
            relay.transform.InferType()(relay.IRModule.from_expr(
                relay.Function(relay.analysis.free_vars(expr), expr)))
    with pytest.raises(TVMError, match="num_newaxis must be an int >= 0"):
        dyn.expand_dims(x, relay.var("a", shape=(), dtype="int64"), -1)
    # a huge count would build a billion-entry shape in type inference: refused at once
    with pytest.raises(TVMError, match="num_newaxis must be an int >= 0 and <= 64"):
        dyn.expand_dims(x, relay.var("a", shape=(), dtype="int64"), 10**9)

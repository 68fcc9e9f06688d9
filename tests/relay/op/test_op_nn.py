"""dense/matmul/batch_matmul, bias_add, activations, softmax, pad, dropout, batch_flatten,
upsampling, batch_norm, layer_norm."""
from __future__ import annotations

import numpy as np
import pytest
from _op_helpers import check, infer, ref
from hypothesis import given
from hypothesis import strategies as st
from strategies import shapes

from ember import relay
from ember.ir.types import Any, ShapeVar, TensorType, TupleType
from ember.relay.op import TupleWrapper
from ember.runtime.errors import OpAttributeInvalid, TypeInferenceError

RNG = np.random.default_rng(11)


def _rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


@given(shapes(1, 3, max_side=5), st.integers(1, 5))
def test_dense_matches_matmul(lead, units):
    x, w = _rand(*lead), _rand(units, lead[-1])
    np.testing.assert_allclose(check("nn.dense", x, w), x @ w.T, rtol=1e-5, atol=1e-5)


def test_dense_errors_and_dynamic():
    with pytest.raises(TypeInferenceError, match=r"nn.dense: weight must have rank 2, got rank 3 "
                                                  r"\(shape \(16, 8, 4\)\)"):
        infer("nn.dense", TensorType((2, 8)), TensorType((16, 8, 4)))
    with pytest.raises(TypeInferenceError, match="data has 8 input features but weight expects 4"):
        infer("nn.dense", TensorType((2, 8)), TensorType((16, 4)))
    with pytest.raises(TypeInferenceError, match="units=3 but the weight has 16"):
        infer("nn.dense", TensorType((2, 4)), TensorType((16, 4)), units=3)
    n = ShapeVar("n")
    assert infer("nn.dense", TensorType((n, Any())), TensorType((16, 4))).shape[0] is n
    assert infer("nn.dense", TensorType((2, 4), "int8"), TensorType((3, 4), "int8"),
                 out_dtype="int32") == TensorType((2, 3), "int32")


@pytest.mark.parametrize("ta, tb", [(False, False), (False, True), (True, False), (True, True)])
def test_nn_matmul_transposes(ta, tb):
    a = _rand(4, 3) if ta else _rand(3, 4)
    b = _rand(5, 4) if tb else _rand(4, 5)
    out = check("nn.matmul", a, b, transpose_a=ta, transpose_b=tb)
    np.testing.assert_allclose(out, (a.T if ta else a) @ (b.T if tb else b), rtol=1e-5)


@pytest.mark.parametrize("bx, by", [(2, 2), (1, 3), (3, 1)])
def test_batch_matmul_broadcasts_batch(bx, by):
    x, y = _rand(bx, 2, 4), _rand(by, 5, 4)
    np.testing.assert_allclose(check("nn.batch_matmul", x, y), x @ y.transpose(0, 2, 1),
                               rtol=1e-5)
    np.testing.assert_allclose(check("nn.batch_matmul", x, y.transpose(0, 2, 1),
                                     transpose_b=False), x @ y.transpose(0, 2, 1), rtol=1e-5)
    with pytest.raises(TypeInferenceError, match="x has 4 reduction features but y has 5"):
        infer("nn.batch_matmul", TensorType((2, 2, 4)), TensorType((2, 4, 5)))


@given(shapes(1, 4, max_side=4), st.data())
def test_bias_add_and_prelu_along_axis(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x, vec = _rand(*shape), _rand(shape[axis])
    bshape = [1] * len(shape)
    bshape[axis] = shape[axis]
    np.testing.assert_allclose(check("nn.bias_add", x, vec, axis=axis), x + vec.reshape(bshape))
    want = np.where(x > 0, x, x * vec.reshape(bshape))
    np.testing.assert_allclose(check("nn.prelu", x, vec, axis=axis), want)


def test_bias_add_error():
    with pytest.raises(TypeInferenceError, match=r"bias must have shape \(3,\) to match axis 1"):
        infer("nn.bias_add", TensorType((2, 3)), TensorType((4,)))


def test_activations():
    x = np.array([-2, -0.5, 0, 1.5], "float32")
    np.testing.assert_array_equal(check("nn.relu", x), [0, 0, 0, 1.5])
    np.testing.assert_allclose(check("nn.leaky_relu", x, alpha=0.1), [-0.2, -0.05, 0, 1.5])
    assert check("nn.relu", np.array([-3, 4], "int8")).dtype == np.int8


@given(shapes(1, 3, max_side=5), st.data())
def test_softmax_and_log_softmax(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = _rand(*shape) * 10
    e = np.exp(x.astype("float64") - x.max(axis=axis, keepdims=True))
    want = e / e.sum(axis=axis, keepdims=True)
    np.testing.assert_allclose(check("nn.softmax", x, axis=axis), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(check("nn.log_softmax", x, axis=axis), np.log(want),
                               rtol=1e-4, atol=1e-5)
    with pytest.raises(TypeInferenceError, match="nn.softmax: requires a floating-point"):
        infer("nn.softmax", TensorType((2,), "int32"))


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
def test_pad_modes(mode):
    x = _rand(3, 4)
    widths = ((1, 2), (0, 3))
    out = check("nn.pad", x, np.array(7, "int32"), pad_width=widths, pad_mode=mode)
    kw = {"constant_values": 7} if mode == "constant" else {}
    np.testing.assert_array_equal(out, np.pad(x, widths, mode=mode, **kw))


def test_pad_errors_and_api():
    with pytest.raises(TypeInferenceError, match="pad_width has 1 .* pairs but data has rank 2"):
        infer("nn.pad", TensorType((2, 3)), TensorType(()), pad_width=((1, 1),))
    with pytest.raises(TypeInferenceError, match="reflect padding of 3 needs dimension 0"):
        infer("nn.pad", TensorType((2,)), TensorType(()), pad_width=((3, 0),), pad_mode="reflect")
    with pytest.raises(OpAttributeInvalid, match="nn.pad: attribute pad_mode"):
        relay.nn.pad(relay.var("x"), ((1, 1),), pad_mode="wrap")
    assert infer("nn.pad", TensorType((Any(), 2)), TensorType(()),
                 pad_width=((1, 1), (2, 0))) == TensorType((Any(), 4))


def test_dropout_is_identity_and_returns_the_first_field():
    x = _rand(2, 3)
    out, _ = check("nn.dropout", x, rate=0.3)
    np.testing.assert_array_equal(out, x)
    d = relay.nn.dropout(relay.var("x", shape=(2, 3)), rate=0.3)
    assert isinstance(d, relay.TupleGetItem) and d.index == 0
    assert d.tuple_value.op.name == "nn.dropout"


def test_batch_flatten():
    x = _rand(2, 3, 4)
    np.testing.assert_array_equal(check("nn.batch_flatten", x), x.reshape(2, 12))
    assert infer("nn.batch_flatten", TensorType((Any(), 3, 4))) == TensorType((Any(), 12))
    assert infer("nn.batch_flatten", TensorType((2, Any()))) == TensorType((2, Any()))


def test_upsampling_nearest_and_bilinear():
    x = np.arange(4, dtype="float32").reshape(1, 1, 2, 2)
    out = check("nn.upsampling", x, scale_h=2, scale_w=2)
    np.testing.assert_array_equal(out[0, 0], [[0, 0, 1, 1], [0, 0, 1, 1],
                                              [2, 2, 3, 3], [2, 2, 3, 3]])
    bil = check("nn.upsampling", x, scale_h=2, scale_w=1, method="bilinear", align_corners=True)
    np.testing.assert_allclose(bil[0, 0, :, 0], [0, 2 / 3, 4 / 3, 2], rtol=1e-6)
    nhwc = check("nn.upsampling", x.transpose(0, 2, 3, 1), scale_h=1.5, scale_w=3, layout="NHWC")
    assert nhwc.shape == (1, 3, 6, 1)


def _bn_inputs(c):
    return _rand(c), _rand(c), _rand(c), np.abs(_rand(c)) + 0.5


@pytest.mark.parametrize("axis", [1, -1, 0])
def test_batch_norm_hand_checked(axis):
    x = _rand(2, 3, 4)
    c = x.shape[axis]
    gamma, beta, mean, var = _bn_inputs(c)
    out, m, _ = check("nn.batch_norm", x, gamma, beta, mean, var, axis=axis, epsilon=1e-3)
    shape = [1] * 3
    shape[axis] = c
    r = lambda a: a.reshape(shape)
    want = (x - r(mean)) / np.sqrt(r(var) + 1e-3) * r(gamma) + r(beta)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(m, mean)
    plain = ref("nn.batch_norm", x, gamma, beta, mean, var, axis=axis, center=False, scale=False)
    np.testing.assert_allclose(plain[0], (x - r(mean)) / np.sqrt(r(var) + 1e-5), rtol=1e-5)


def test_batch_norm_type_and_tuple_wrapper():
    t = infer("nn.batch_norm", TensorType((1, 3, 4, 4)), *[TensorType((3,))] * 4)
    assert t == TupleType((TensorType((1, 3, 4, 4)), TensorType((3,)), TensorType((3,))))
    with pytest.raises(TypeInferenceError, match=r"moving_var must have shape \(3,\)"):
        infer("nn.batch_norm", TensorType((1, 3)), *[TensorType((3,))] * 3, TensorType((4,)))
    bn = relay.nn.batch_norm(*[relay.var(n) for n in "xgbmv"])
    assert isinstance(bn, TupleWrapper) and len(bn) == 3 and bn[0].index == 0
    assert bn.astuple().op.name == "nn.batch_norm"
    with pytest.raises(IndexError):
        bn[3]


def test_layer_norm_hand_checked():
    x = _rand(2, 5)
    gamma, beta = _rand(5), _rand(5)
    out = check("nn.layer_norm", x, gamma, beta, epsilon=1e-5)
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    np.testing.assert_allclose(out, (x - mu) / np.sqrt(var + 1e-5) * gamma + beta,
                               rtol=1e-4, atol=1e-5)
    with pytest.raises(TypeInferenceError, match="nn.layer_norm: gamma must have shape"):
        infer("nn.layer_norm", TensorType((2, 5)), TensorType((2,)), TensorType((5,)))


def _infer_args(name, types, **attrs):
    from ember.ir.op import Op

    return Op.get(name).op_def.extra["infer_args"](types, attrs)


def test_weights_are_deduced_from_channels_and_kernel_size():
    data = TensorType((1, 6, 8, 8))
    assert _infer_args("nn.conv2d", [data, None], channels=4, kernel_size=3, groups=2) == \
        [None, TensorType((4, 3, 3, 3))]
    nhwc = TensorType((1, 8, 8, 6))
    assert _infer_args("nn.conv2d", [nhwc, None], channels=4, kernel_size=(3, 1),
                       data_layout="NHWC", kernel_layout="HWIO")[1] == TensorType((3, 1, 6, 4))
    assert _infer_args("nn.conv2d", [data, None]) == [None, None]  # channels unknown
    assert _infer_args("nn.conv2d_transpose", [data, None], channels=4, kernel_size=3,
                       groups=2)[1] == TensorType((6, 2, 3, 3))
    assert _infer_args("nn.dense", [TensorType((2, 7)), None], units=3)[1] == TensorType((3, 7))


def test_channel_vectors_are_deduced_and_known_args_left_alone():
    data, vec = TensorType((2, 7, 3)), TensorType((7,))
    out = _infer_args("nn.batch_norm", [data, None, vec, None, None])
    assert out == [None, vec, None, vec, vec]
    assert _infer_args("nn.bias_add", [data, None], axis=-1)[1] == TensorType((3,))
    assert _infer_args("nn.layer_norm", [None, None, None]) == [None, None, None]
    assert _infer_args("nn.bias_add", [data, None], axis=5) == [None, None]

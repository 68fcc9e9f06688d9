"""The law for the ops not swept elsewhere: over hypothesis-drawn shapes and attributes, the
type relation's result equals the numpy reference's output shape and dtype."""
from __future__ import annotations

import numpy as np
from _op_helpers import check
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import broadcastable_pair, dtypes, shapes

RNG = np.random.default_rng(5)
LAW = settings(max_examples=40, deadline=None)


def _rand(shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


@LAW
@given(shapes(1, 4), st.data())
def test_pad(shape, data):
    mode = data.draw(st.sampled_from(["constant", "edge", "reflect"]))
    most = (lambda d: d - 1) if mode == "reflect" else (lambda d: 2)
    widths = [(data.draw(st.integers(0, most(d))), data.draw(st.integers(0, most(d))))
              for d in shape]
    check("nn.pad", _rand(shape), np.float32(1), pad_width=widths, pad_mode=mode)


@LAW
@given(shapes(4, 4, max_side=5), st.data())
def test_upsampling(shape, data):
    attrs = {"scale_h": data.draw(st.sampled_from([1, 1.5, 2, 3])),
             "scale_w": data.draw(st.sampled_from([1, 2, 2.5])),
             "layout": data.draw(st.sampled_from(["NCHW", "NHWC"])),
             "method": data.draw(st.sampled_from(["nearest_neighbor", "bilinear"])),
             "align_corners": data.draw(st.booleans())}
    check("nn.upsampling", _rand(shape), **attrs)


@LAW
@given(shapes(4, 4, max_side=6), st.sampled_from(["NCHW", "NHWC"]), st.data())
def test_global_and_adaptive_pools(shape, layout, data):
    x = _rand(shape)
    for kind in ("avg", "max"):
        check(f"nn.global_{kind}_pool2d", x, layout=layout)
        size = data.draw(st.one_of(st.none(), st.tuples(st.integers(1, 4), st.integers(1, 4))))
        check(f"nn.adaptive_{kind}_pool2d", x, output_size=size, layout=layout)


@LAW
@given(shapes(1, 4), st.data())
def test_norms_flatten_softmax(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = _rand(shape)
    vec = _rand((shape[axis],))
    check("nn.batch_norm", x, vec, vec, vec, np.abs(vec) + 1, axis=axis)
    check("nn.layer_norm", x, vec, vec, axis=axis)
    check("nn.batch_flatten", x)
    check("nn.dropout", x, rate=0.25)
    check("nn.log_softmax", x, axis=axis)


@LAW
@given(broadcastable_pair(), dtypes(), st.data())
def test_where_and_like_ops(pair, dtype, data):
    cond = data.draw(st.sampled_from([np.zeros(pair[0], bool), np.ones(pair[0], bool)]))
    x, y = np.zeros(pair[1], dtype), np.ones((), dtype)
    check("where", cond, x, y)
    check("broadcast_to_like", y, x)
    check("full", np.array(3, dtype), shape=pair[0])
    check("full_like", x, np.array(2, dtype))


@LAW
@given(shapes(0, 4), st.data())
def test_squeeze_expand_reshape_like(shape, data):
    x = _rand(shape)
    check("squeeze", x)
    check("expand_dims", x, axis=data.draw(st.integers(-len(shape) - 1, len(shape))),
          num_newaxis=data.draw(st.integers(0, 2)))
    check("reshape_like", x, np.zeros((int(np.prod(shape)),), "int8"))
    check("contrib_reverse_reshape", x, newshape=(-1,))
    check("shape_of", x, dtype=data.draw(st.sampled_from(["int32", "int64"])))
    check("copy", x)
    check("annotation.stop_fusion", x)


@LAW
@given(st.integers(1, 3), st.sampled_from([1, 2, 4]), st.integers(1, 3), st.integers(1, 3),
       st.sampled_from(["NHWC", "NCHW4c", "NCHW2c", "NHWC4c"]))
def test_layout_transform(n, c_blocks, h, w, dst):
    x = _rand((n, 4 * c_blocks, h, w))
    out = check("layout_transform", x, src_layout="NCHW", dst_layout=dst)
    back = check("layout_transform", out, src_layout=dst, dst_layout="NCHW")
    np.testing.assert_array_equal(back, x)

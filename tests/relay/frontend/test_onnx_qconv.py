"""QLinearConv through nn.contrib_qconv2d (the int8 kernel of qconv.h) against onnxruntime.

Tolerance: the int32 accumulators are exact and the requantization is onnxruntime's own float32
arithmetic (acc * (x_scale * w_scale / y_scale), round half to even, + y_zp, saturate), so the
outputs are expected equal; the tests allow 1 unit where float rounding of a product at a .5
boundary could differ, and require equality with the op's numpy reference.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import ember
from ember import relay
from ember.relay.frontend import from_onnx

ort = pytest.importorskip("onnxruntime")
ONNX_TYPE = {"uint8": TP.UINT8, "int8": TP.INT8}


def _model(x_shape, w, *, x_dtype, x_zp, w_zp, w_scale, y_zp, y_dtype, bias, strides, pads,
           groups, dilations=(1, 1)):
    inits = {"xs": np.array(0.02, "float32"), "xz": np.array(x_zp, x_dtype), "w": w,
             "ws": w_scale, "wz": w_zp, "ys": np.array(0.07, "float32"),
             "yz": np.array(y_zp, y_dtype)}
    names = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    if bias is not None:
        inits["bias"] = bias
        names.append("bias")
    node = helper.make_node("QLinearConv", names, ["y"], strides=list(strides), pads=list(pads),
                            group=groups, dilations=list(dilations))
    graph = helper.make_graph(
        [node], "q", [helper.make_tensor_value_info("x", ONNX_TYPE[x_dtype], list(x_shape))],
        [helper.make_tensor_value_info("y", ONNX_TYPE[y_dtype], None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _ort(model, x):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return s.run(None, {"x": x})[0]


def _case(rng, *, n, c, o, h, w, k, stride, pad, groups, x_dtype, w_dtype, zp_kind,
          per_channel, y_dtype, with_bias, dilation=1):
    lo, hi = (0, 256) if x_dtype == "uint8" else (-128, 128)
    x = rng.integers(lo, hi, (n, c, h, w)).astype(x_dtype)
    wlo, whi = (0, 256) if w_dtype == "uint8" else (-128, 128)
    weight = rng.integers(wlo, whi, (o, c // groups, k, k)).astype(w_dtype)
    x_zp = {"zero": 0, "mid": 128 if x_dtype == "uint8" else 0, "odd": 37}[zp_kind]
    if w_dtype == "uint8":
        w_zp = np.array(128 if zp_kind != "odd" else 100, "uint8")
    else:
        w_zp = np.array(0 if zp_kind != "odd" else 3, "int8")
    w_scale = (rng.uniform(0.001, 0.01, o).astype("float32") if per_channel
               else np.array(0.004, "float32"))
    if per_channel and zp_kind == "odd":
        w_zp = np.full(o, w_zp, w_zp.dtype)
    y_zp = 128 if y_dtype == "uint8" else -5
    bias = rng.integers(-5000, 5000, o).astype("int32") if with_bias else None
    model = _model(x.shape, weight, x_dtype=x_dtype, x_zp=x_zp, w_zp=w_zp, w_scale=w_scale,
                   y_zp=y_zp, y_dtype=y_dtype, bias=bias, strides=(stride, stride),
                   pads=(pad, pad, pad, pad), groups=groups, dilations=(dilation, dilation))
    return model, x


def _check(model, x, target="llvm"):
    mod, params = from_onnx(model)
    assert "nn.contrib_qconv2d" in str(mod), "QLinearConv did not take the int8 kernel"
    lib = relay.build(mod, target, params=params)
    m = lib["default"](ember.cpu())
    m.set_input(x=x)
    m.run()
    got = m.get_output(0).numpy()
    want = _ort(model, x)
    diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
    assert got.dtype == want.dtype and got.shape == want.shape
    assert diff.max(initial=0) <= 1, f"{int((diff > 0).sum())} values differ by up to " \
                                     f"{diff.max()}"
    # and the op's numpy reference equals the kernel exactly
    call = mod["main"].body
    ref = call.op.op_def.reference(x, *[params_or_const(a, params) for a in call.args[1:]],
                            attrs=call.attrs)
    np.testing.assert_array_equal(got, ref)


def params_or_const(arg, params):
    return arg.data.numpy() if hasattr(arg, "data") else params[arg.name_hint].numpy()


SHAPES = [  # n, c, o, h, w, k, stride, pad, groups
    (1, 64, 64, 9, 11, 3, 1, 1, 1),
    (1, 5, 7, 6, 5, 3, 2, 1, 1),      # channels not a multiple of 4
    (2, 8, 12, 1, 1, 1, 1, 0, 1),     # 1x1 map
    (1, 17, 33, 7, 7, 1, 1, 0, 1),    # 1x1 conv, odd channels
    (1, 16, 16, 13, 9, 3, 2, 1, 16),  # depthwise stride 2
    (1, 24, 24, 10, 10, 3, 1, 1, 24),  # depthwise stride 1
    (1, 12, 18, 8, 8, 3, 1, 1, 3),    # grouped
    (1, 3, 8, 5, 7, 5, 3, 2, 1),      # stride smaller than the 5x5 kernel, odd sizes
]


@pytest.mark.parametrize("shape", SHAPES, ids=[str(s) for s in SHAPES])
def test_qlinear_conv_shapes_against_onnxruntime(shape):
    n, c, o, h, w, k, stride, pad, groups = shape
    rng = np.random.default_rng(sum(shape))
    model, x = _case(rng, n=n, c=c, o=o, h=h, w=w, k=k, stride=stride, pad=pad, groups=groups,
                     x_dtype="uint8", w_dtype="int8", zp_kind="mid", per_channel=True,
                     y_dtype="uint8", with_bias=True)
    _check(model, x)


DEPTHWISE = [  # n, c, h, w, k, stride, pad, dilation: the direct path's phases and offsets
    (2, 5, 7, 9, 5, 1, 2, 1),     # 5x5 (EfficientNet, MobileNetV3), two images
    (1, 6, 14, 14, 3, 2, 1, 1),   # stride 2: four phase planes
    (1, 4, 11, 6, 3, 3, 1, 1),    # stride 3, rows and columns of different lengths
    (1, 3, 9, 10, 3, 1, 2, 2),    # dilated
    (1, 7, 1, 1, 3, 1, 1, 1),     # a 1x1 map: one output, padding all around
    (1, 9, 3, 40, 3, 2, 0, 1),    # wide rows, no padding, stride 2
    (1, 37, 7, 7, 3, 1, 1, 1),    # channels in lanes: two blocks of 16 and 5 more
    (2, 33, 14, 14, 3, 2, 1, 1),  # in lanes, stride 2, two images
    (1, 20, 2, 3, 3, 1, 1, 1),    # in lanes, the smallest map (6 pixels: the first reads)
    (1, 20, 2, 2, 3, 1, 1, 1),    # a 2x2 map: too small for the lanes' word reads
]


@pytest.mark.parametrize("shape", DEPTHWISE, ids=[str(s) for s in DEPTHWISE])
@pytest.mark.parametrize("zp_kind", ["zero", "odd"])
def test_qlinear_conv_depthwise_strides_dilations_and_kernels(shape, zp_kind):
    n, c, h, w, k, stride, pad, dilation = shape
    model, x = _case(np.random.default_rng(sum(shape)), n=n, c=c, o=c, h=h, w=w, k=k,
                     stride=stride, pad=pad, groups=c, x_dtype="uint8", w_dtype="int8",
                     zp_kind=zp_kind, per_channel=True, y_dtype="uint8", with_bias=True,
                     dilation=dilation)
    _check(model, x)


@pytest.mark.parametrize("k, pads", [((3, 3), (0, 0, 2, 2)), ((3, 3), (1, 0, 1, 2)),
                                     ((2, 2), (0, 0, 1, 1)), ((3, 5), (2, 2, 0, 2))],
                         ids=["3x3-bottom-right", "3x3-left0-right2", "2x2", "3x5-top2"])
def test_qlinear_conv_depthwise_asymmetric_pads(k, pads):
    """Widths kept by padding on one side only: not the symmetric "same" layout."""
    rng = np.random.default_rng(11)
    c = 6
    x = rng.integers(0, 256, (1, c, 8, 9)).astype("uint8")
    model = _model(x.shape, rng.integers(-128, 128, (c, 1, *k)).astype("int8"), x_dtype="uint8",
                   x_zp=37, w_zp=np.zeros(c, "int8"),
                   w_scale=rng.uniform(0.001, 0.01, c).astype("float32"), y_zp=128,
                   y_dtype="uint8", bias=rng.integers(-5000, 5000, c).astype("int32"),
                   strides=(1, 1), pads=pads, groups=c)
    _check(model, x)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(c=st.integers(1, 19), o=st.integers(1, 21), hw=st.tuples(st.integers(1, 12),
                                                                 st.integers(1, 12)),
       k=st.sampled_from([1, 3]), stride=st.sampled_from([1, 2]), pad=st.integers(0, 1),
       types=st.sampled_from([("uint8", "int8"), ("uint8", "uint8"), ("int8", "int8")]),
       zp_kind=st.sampled_from(["zero", "mid", "odd"]), per_channel=st.booleans(),
       with_bias=st.booleans(),
       depthwise=st.booleans(), seed=st.integers(0, 2**16))
def test_qlinear_conv_hypothesis(c, o, hw, k, stride, pad, types, zp_kind, per_channel,
                                 with_bias, depthwise, seed):
    h, w = hw
    if h + 2 * pad < k or w + 2 * pad < k:
        h, w = h + k, w + k
    groups, o = (c, c) if depthwise else (1, o)
    x_dtype, w_dtype = types
    y_dtype = x_dtype  # onnxruntime implements y of x's type only
    model, x = _case(np.random.default_rng(seed), n=1, c=c, o=o, h=h, w=w, k=k, stride=stride,
                     pad=pad, groups=groups, x_dtype=x_dtype, w_dtype=w_dtype, zp_kind=zp_kind,
                     per_channel=per_channel, y_dtype=y_dtype, with_bias=with_bias)
    _check(model, x)


@pytest.mark.parametrize("level", [pytest.param("haswell", id="avx2"),
                                   pytest.param("x86-64-v2", id="sse2"),
                                   pytest.param("c", id="portable")])
@pytest.mark.parametrize("depthwise", [False, True])
def test_qlinear_conv_forced_simd_levels(level, depthwise, monkeypatch):
    target = "c" if level == "c" else "llvm"
    if level != "c":
        monkeypatch.setenv("EMBER_MARCH", level)
    c = 20
    model, x = _case(np.random.default_rng(5), n=1, c=c, o=c if depthwise else 27, h=11, w=13,
                     k=3, stride=1, pad=1, groups=c if depthwise else 1, x_dtype="uint8",
                     w_dtype="uint8", zp_kind="odd", per_channel=True, y_dtype="uint8",
                     with_bias=True)
    _check(model, x, target)


# Depthwise geometries whose taps pair differently (qconv_dw.h): 3x3 stride 2 on a map too
# big for the lanes path (phase planes, taps kx 0 and 2 paired), "same" stride 1 (the
# widened channel), 5x5 (taps 25: a single per row), dilation 2 (no partners), a 3x3 map at
# stride 2 (pairs of taps one row apart), and a 7x7 map in lanes; with AVX-512 every map up
# to about 128x128 runs in lanes, so two larger ones keep the per-channel paths tested there;
# odd channel counts, two images, s8 inputs, weight zero points.
DEPTHWISE_PAIRS = [  # n, c, h, w, k, stride, pad, dilation, x_dtype, w_dtype
    (2, 19, 45, 41, 3, 2, 1, 1, "uint8", "int8"),
    (1, 5, 36, 33, 3, 1, 1, 1, "int8", "int8"),
    (1, 7, 34, 35, 5, 1, 2, 1, "uint8", "uint8"),
    (1, 3, 40, 37, 3, 1, 2, 2, "uint8", "int8"),
    (2, 17, 3, 3, 3, 2, 1, 1, "uint8", "uint8"),
    (1, 21, 7, 7, 3, 1, 1, 1, "int8", "int8"),
    (1, 2, 133, 131, 3, 2, 1, 1, "uint8", "int8"),  # past the lanes' plane with AVX-512
    (1, 3, 131, 135, 3, 1, 1, 1, "int8", "int8"),
]


@pytest.mark.parametrize("level", [pytest.param("native", id="host"),
                                   pytest.param("haswell", id="avx2"),
                                   pytest.param("x86-64-v2", id="sse2"),
                                   pytest.param("c", id="portable")])
@pytest.mark.parametrize("shape", DEPTHWISE_PAIRS, ids=[str(s[:8]) for s in DEPTHWISE_PAIRS])
def test_qlinear_conv_depthwise_pairs_at_every_level(level, shape, monkeypatch):
    """The paired taps equal the numpy reference exactly at every SIMD level."""
    n, c, h, w, k, stride, pad, dilation, x_dtype, w_dtype = shape
    if level not in ("c", "native"):
        monkeypatch.setenv("EMBER_MARCH", level)
    model, x = _case(np.random.default_rng(sum(shape[:8])), n=n, c=c, o=c, h=h, w=w, k=k,
                     stride=stride, pad=pad, groups=c, x_dtype=x_dtype, w_dtype=w_dtype,
                     zp_kind="odd", per_channel=True, y_dtype=x_dtype, with_bias=True,
                     dilation=dilation)
    _check(model, x, "c" if level == "c" else "llvm")


# Dense convs whose input interleave (channels in fours, 16 pixels at a time; 64 with VBMI)
# runs its vector loop and tail: a 1x1 conv over an unpadded plane (one flat run of 99 pixels,
# the last 64 overlapping) and a padded 3x3 with rows of 37 (the last 16 overlapping; with
# VBMI one masked round); channel counts not a multiple of 4, s8 and u8 inputs; with AVX-512
# also without VBMI (slow: its own kernel objects).
DENSE_INTERLEAVE = [  # n, c, o, h, w, k, pad, x_dtype
    (2, 19, 21, 9, 11, 1, 0, "int8"),
    (1, 7, 9, 5, 37, 3, 1, "uint8"),
]


@pytest.mark.parametrize("level", [pytest.param("native", id="host"),
                                   pytest.param("cascadelake", id="avx512-no-vbmi",
                                                marks=pytest.mark.slow),
                                   pytest.param("haswell", id="avx2"),
                                   pytest.param("x86-64-v2", id="sse2"),
                                   pytest.param("c", id="portable")])
@pytest.mark.parametrize("shape", DENSE_INTERLEAVE, ids=[str(s[:7]) for s in DENSE_INTERLEAVE])
def test_qlinear_conv_dense_interleave_at_every_level(level, shape, monkeypatch):
    n, c, o, h, w, k, pad, x_dtype = shape
    if level not in ("c", "native"):
        monkeypatch.setenv("EMBER_MARCH", level)
    model, x = _case(np.random.default_rng(c + o), n=n, c=c, o=o, h=h, w=w, k=k, stride=1,
                     pad=pad, groups=1, x_dtype=x_dtype, w_dtype="int8", zp_kind="odd",
                     per_channel=True, y_dtype=x_dtype, with_bias=True)
    _check(model, x, "c" if level == "c" else "llvm")


def test_non_constant_weight_keeps_the_decomposition():
    """A weight given at run time cannot be prepacked: the int32 decomposition stays."""
    rng = np.random.default_rng(0)
    model, x = _case(rng, n=1, c=4, o=4, h=5, w=5, k=3, stride=1, pad=1, groups=1,
                     x_dtype="uint8", w_dtype="int8", zp_kind="mid", per_channel=False,
                     y_dtype="uint8", with_bias=False)
    w = next(i for i in model.graph.initializer if i.name == "w")
    model.graph.initializer.remove(w)
    model.graph.input.append(helper.make_tensor_value_info("w", TP.INT8, [4, 4, 3, 3]))
    mod, _ = from_onnx(model)
    assert "nn.contrib_qconv2d" not in str(mod) and "nn.conv2d" in str(mod)


@settings(max_examples=16, deadline=None, suppress_health_check=list(HealthCheck))
@given(c=st.integers(1, 35), n=st.integers(1, 2), hw=st.tuples(st.integers(1, 21),
                                                                 st.integers(1, 21)),
       k=st.tuples(st.integers(1, 5), st.integers(1, 5)), sh=st.integers(1, 2),
       sw=st.integers(1, 2), dil=st.sampled_from([(1, 1), (1, 2), (2, 1)]),
       pads=st.tuples(*[st.integers(0, 2)] * 4), seed=st.integers(0, 2**16))
def test_qlinear_conv_depthwise_geometries_hypothesis(c, n, hw, k, sh, sw, dil, pads, seed):
    """Depthwise kernels of any size at stride 1 and 2 per axis (with AVX-512 these maps run
    with channels in lanes; at stride 2 along the width its words pair columns 2j, 2j + 1),
    dilation, asymmetric padding, batch 2."""
    rng = np.random.default_rng(seed)
    h, w = hw
    h = max(h, (k[0] - 1) * dil[0] + 1 - pads[0] - pads[2])
    w = max(w, (k[1] - 1) * dil[1] + 1 - pads[1] - pads[3])
    x = rng.integers(0, 256, (n, c, h, w)).astype("uint8")
    node_w = rng.integers(-128, 128, (c, 1, *k)).astype("int8")
    model = _model(x.shape, node_w, x_dtype="uint8", x_zp=37, w_zp=np.zeros(c, "int8"),
                   w_scale=rng.uniform(0.001, 0.01, c).astype("float32"), y_zp=128,
                   y_dtype="uint8", bias=rng.integers(-5000, 5000, c).astype("int32"),
                   strides=(sh, sw), pads=pads, groups=c, dilations=dil)
    _check(model, x)


# Dense convs at stride 2 and 3 whose output rows span several vectors and a tail (38 and 26
# columns: the panel takes a row's even words two vectors at a time with AVX-512, the last
# under a mask), output blocks shared evenly by the pixels (one block over 96 pixels).
DENSE_STRIDED = [  # n, c, o, h, w, k, stride, pad
    (2, 19, 21, 9, 75, 3, 2, 1),
    (1, 6, 9, 11, 77, 3, 3, 1),
    (1, 8, 5, 29, 31, 1, 2, 0),
]


@pytest.mark.parametrize("level", [pytest.param("native", id="host"),
                                   pytest.param("haswell", id="avx2"),
                                   pytest.param("c", id="portable")])
@pytest.mark.parametrize("shape", DENSE_STRIDED, ids=[str(s) for s in DENSE_STRIDED])
def test_qlinear_conv_dense_strided_rows_at_every_level(level, shape, monkeypatch):
    n, c, o, h, w, k, stride, pad = shape
    if level not in ("c", "native"):
        monkeypatch.setenv("EMBER_MARCH", level)
    model, x = _case(np.random.default_rng(c + o), n=n, c=c, o=o, h=h, w=w, k=k,
                     stride=stride, pad=pad, groups=1, x_dtype="uint8", w_dtype="int8",
                     zp_kind="odd", per_channel=True, y_dtype="uint8", with_bias=True)
    _check(model, x, "c" if level == "c" else "llvm")


# A 1x1 conv whose blocks of the plane (258 quads x 64 of its 100 pixels) pass 64 KiB: with
# AVX-512 VNNI its quads go in ranges (5 of at most 52), the tiles' sums kept between them;
# odd input channels (the last quad partial), a weight zero point (the pixel sums over every
# range), a partial last block of output channels and of pixels, two images, u8 and s8 input.
@pytest.mark.parametrize("level", [pytest.param("native", id="host"),
                                   pytest.param("cascadelake", id="avx512-no-vbmi",
                                                marks=pytest.mark.slow),
                                   pytest.param("c", id="portable")])
@pytest.mark.parametrize("x_dtype", ["uint8", "int8"])
def test_qlinear_conv_direct_quad_ranges(level, x_dtype, monkeypatch):
    if level not in ("c", "native"):
        monkeypatch.setenv("EMBER_MARCH", level)
    model, x = _case(np.random.default_rng(5), n=2, c=1030, o=9, h=10, w=10, k=1, stride=1,
                     pad=0, groups=1, x_dtype=x_dtype, w_dtype="int8", zp_kind="odd",
                     per_channel=True, y_dtype=x_dtype, with_bias=True)
    _check(model, x, "c" if level == "c" else "llvm")


# Depthwise convs on the u8 x s8 quads path (qconv_dwq.h, AVX-512 with VBMI; elsewhere the
# paths above): maps of at most 64 bytes in one register (7x7; 2x30, two vectors a row; 1x1;
# a 5x5 kernel), maps at most 8 outputs wide as two rows a vector (stride 3 over 22 and 23
# columns, an odd row count, s8 input), at most 16 wide with an output row's input rows in
# one load (14x14 at stride 2 and 1; 5x5 over s8; dilation 2), wider ones a row at a time
# (7x7 kernel: two quads a row; 56 and 50 wide: four vectors to a store, the last one
# masked; stride 3 and dilation 2 with asymmetric padding), and
# stride 5 (its window passes 64 bytes: another path). Weights without a zero point after
# folding (s8 with 0, u8 with 128); input zero point 37; every node in one model (one build).
DEPTHWISE_QUADS = [  # n, c, h, w, k, stride, pads, dilation, x_dtype, w_dtype
    (1, 7, 7, 7, 3, 1, (1, 1, 1, 1), 1, "uint8", "uint8"),
    (1, 6, 2, 30, 3, 1, (1, 1, 1, 1), 1, "int8", "int8"),
    (1, 3, 1, 1, 3, 1, (1, 1, 1, 1), 1, "uint8", "int8"),
    (1, 9, 8, 8, 5, 2, (2, 2, 2, 2), 1, "uint8", "int8"),
    (2, 7, 28, 22, 3, 3, (1, 1, 1, 1), 1, "uint8", "int8"),
    (1, 5, 31, 23, 3, 3, (1, 1, 1, 1), 1, "int8", "int8"),
    (2, 19, 14, 14, 3, 2, (1, 1, 1, 1), 1, "uint8", "int8"),
    (1, 13, 14, 14, 3, 1, (1, 1, 1, 1), 1, "uint8", "int8"),
    (1, 6, 12, 11, 5, 1, (2, 2, 2, 2), 1, "int8", "int8"),
    (1, 3, 15, 12, 3, 1, (2, 2, 2, 2), 2, "uint8", "uint8"),
    (1, 11, 37, 35, 7, 1, (3, 3, 3, 3), 1, "uint8", "int8"),
    (1, 5, 9, 56, 3, 1, (1, 1, 1, 1), 1, "uint8", "int8"),
    (1, 3, 12, 50, 3, 1, (1, 1, 1, 1), 1, "int8", "int8"),
    (1, 4, 33, 70, 3, 3, (0, 1, 2, 0), 1, "int8", "int8"),
    (1, 5, 40, 37, 3, 1, (2, 1, 2, 2), 2, "uint8", "uint8"),
    (1, 3, 20, 90, 3, 5, (1, 1, 1, 1), 1, "uint8", "int8"),
]


def _depthwise_quads_model(rng):
    nodes, inputs, outputs, inits, feeds = [], [], [], [], {}
    for i, (n, c, h, w, k, stride, pads, dil, x_dtype, w_dtype) in enumerate(DEPTHWISE_QUADS):
        lo, hi = (0, 256) if x_dtype == "uint8" else (-128, 128)
        feeds[f"x{i}"] = rng.integers(lo, hi, (n, c, h, w)).astype(x_dtype)
        wlo, whi, wzp = (0, 256, 128) if w_dtype == "uint8" else (-128, 128, 0)
        values = {"xs": np.array(0.02, "float32"), "xz": np.array(37, x_dtype),
                  "w": rng.integers(wlo, whi, (c, 1, k, k)).astype(w_dtype),
                  "ws": rng.uniform(0.001, 0.01, c).astype("float32"),
                  "wz": np.full(c, wzp, w_dtype), "ys": np.array(0.07, "float32"),
                  "yz": np.array(128 if x_dtype == "uint8" else -5, x_dtype),
                  "b": rng.integers(-5000, 5000, c).astype("int32")}
        inits += [numpy_helper.from_array(v, f"{name}{i}") for name, v in values.items()]
        nodes.append(helper.make_node("QLinearConv", [f"x{i}"] + [f"{m}{i}" for m in values],
                                      [f"y{i}"], strides=[stride] * 2, pads=list(pads),
                                      group=c, dilations=[dil] * 2))
        inputs.append(helper.make_tensor_value_info(f"x{i}", ONNX_TYPE[x_dtype], [n, c, h, w]))
        outputs.append(helper.make_tensor_value_info(f"y{i}", ONNX_TYPE[x_dtype], None))
    graph = helper.make_graph(nodes, "dwq", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model, feeds


@pytest.mark.parametrize("level", [pytest.param("native", id="host"),
                                   pytest.param("cascadelake", id="avx512-no-vbmi",
                                                marks=pytest.mark.slow)])
def test_qlinear_conv_depthwise_quads(level, monkeypatch):
    """Every geometry of the quads path equals onnxruntime (within 1); without VBMI the same
    convs take the channel-in-lanes path (slow: its own kernel objects)."""
    if level != "native":
        monkeypatch.setenv("EMBER_MARCH", level)
    model, feeds = _depthwise_quads_model(np.random.default_rng(21))
    mod, params = from_onnx(model)
    assert str(mod).count("nn.contrib_qconv2d(") == len(DEPTHWISE_QUADS)
    m = relay.build(mod, "llvm", params=params)["default"](ember.cpu())
    m.set_input(**feeds)
    m.run()
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    want = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"]).run(None, feeds)
    for i, (shape, expected) in enumerate(zip(DEPTHWISE_QUADS, want)):
        got = m.get_output(i).numpy()
        assert got.shape == expected.shape, shape
        diff = np.abs(got.astype(np.int64) - expected.astype(np.int64)).max(initial=0)
        assert diff <= 1, f"{shape}: differs by {diff}"


# Dense convs split over more tasks than they have pixel blocks (threads=3): a 1x1 conv on a
# 7x7 map (one block), a 3x3/2 on 28x28 (blocks of 80, 80 and 36 pixels), a grouped conv of
# two images; the tasks share the blocks' output channels by pixel count.
SPLIT = [  # n, c, o, h, k, stride, groups
    (1, 96, 72, 7, 1, 1, 1),
    (1, 32, 40, 28, 3, 2, 1),
    (2, 24, 36, 12, 3, 1, 3),
]


def test_qlinear_conv_dense_split_over_threads():
    rng = np.random.default_rng(8)
    nodes, inputs, outputs, inits, feeds = [], [], [], [], {}
    for i, (n, c, o, h, k, stride, groups) in enumerate(SPLIT):
        feeds[f"x{i}"] = rng.integers(0, 256, (n, c, h, h)).astype("uint8")
        values = {"xs": np.array(0.02, "float32"), "xz": np.array(37, "uint8"),
                  "w": rng.integers(-128, 128, (o, c // groups, k, k)).astype("int8"),
                  "ws": rng.uniform(0.0005, 0.002, o).astype("float32"),
                  "wz": np.zeros(o, "int8"), "ys": np.array(0.07, "float32"),
                  "yz": np.array(128, "uint8"), "b": rng.integers(-5000, 5000, o).astype("int32")}
        inits += [numpy_helper.from_array(v, f"{name}{i}") for name, v in values.items()]
        nodes.append(helper.make_node("QLinearConv", [f"x{i}"] + [f"{m}{i}" for m in values],
                                      [f"y{i}"], strides=[stride] * 2, pads=[k // 2] * 4,
                                      group=groups))
        inputs.append(helper.make_tensor_value_info(f"x{i}", TP.UINT8, [n, c, h, h]))
        outputs.append(helper.make_tensor_value_info(f"y{i}", TP.UINT8, None))
    model = helper.make_model(helper.make_graph(nodes, "split", inputs, outputs, inits),
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    got = ember.compile(model, threads=3)(*feeds.values())
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    want = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"]).run(None, feeds)
    for shape, g, w in zip(SPLIT, got, want):
        diff = np.abs(np.asarray(g).astype(np.int64) - w.astype(np.int64)).max(initial=0)
        assert diff <= 1, f"{shape}: differs by {diff}"

"""Convolution, pooling, dense and normalisation operators against onnxruntime.

Window attributes (strides, pads, dilations, groups, auto_pad, ceil_mode) are swept with
hypothesis; accumulations compare with rtol/atol 1e-4 (``SUMS``: the summation order
differs from onnxruntime's).
"""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import LOOSE, SUMS, check, node_case, rand
from hypothesis import given, settings
from hypothesis import strategies as st

DEFAULT_EXAMPLES = 3
WIDE_EXAMPLES = 40


@st.composite
def conv_cases(draw, transpose: bool = False):
    dims = draw(st.sampled_from([1, 2]))
    groups = draw(st.sampled_from([1, 1, 2]))
    cin, cout = 2 * draw(st.integers(1, 2)), 2 * draw(st.integers(1, 2))
    kernel = [draw(st.integers(1, 3)) for _ in range(dims)]
    strides = [draw(st.integers(1, 2)) for _ in range(dims)]
    auto = draw(st.sampled_from(["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]))
    # (onnxruntime refuses dilations with SAME padding)
    dil = [1 if auto.startswith("SAME") else draw(st.integers(1, 2)) for _ in range(dims)]
    size = [draw(st.integers(max(k * d, 3), 7)) for k, d in zip(kernel, dil)]
    attrs = {"strides": strides, "dilations": dil, "group": groups}
    if auto == "NOTSET":
        pads = [draw(st.integers(0, k - 1)) for k in kernel * 2]
        attrs["pads"] = pads
    else:
        attrs["auto_pad"] = auto
    if transpose:
        attrs["output_padding"] = [draw(st.integers(0, s - 1)) for s in strides]
        if auto != "NOTSET":
            attrs.pop("auto_pad")
            attrs["pads"] = [0] * (2 * dims)
        w_shape = (cin, cout // groups, *kernel)
    else:
        w_shape = (cout, cin // groups, *kernel)
    bias = draw(st.booleans())
    return dims, cin, cout, size, w_shape, attrs, bias, draw(st.integers(0, 2**16))


def _conv_check(params, op):
    _, cin, cout, size, w_shape, attrs, bias, seed = params
    rng = np.random.default_rng(seed)
    inits = {"w": rand(rng, *w_shape)}
    if bias:
        inits["b"] = rand(rng, cout)
    check([node_case("conv", op, {"x": rand(rng, 2, cin, *size)}, inits=inits, tol=SUMS,
                     **attrs)], opset=13)


@settings(max_examples=DEFAULT_EXAMPLES, deadline=None, derandomize=True)
@given(params=conv_cases())
def test_conv_attributes(params):
    _conv_check(params, "Conv")


@settings(max_examples=DEFAULT_EXAMPLES, deadline=None, derandomize=True)
@given(params=conv_cases(transpose=True))
def test_conv_transpose_attributes(params):
    _conv_check(params, "ConvTranspose")


@pytest.mark.slow
@settings(max_examples=WIDE_EXAMPLES, deadline=None)
@given(params=conv_cases())
def test_conv_attributes_wide(params):
    _conv_check(params, "Conv")


@pytest.mark.slow
@settings(max_examples=WIDE_EXAMPLES, deadline=None)
@given(params=conv_cases(transpose=True))
def test_conv_transpose_attributes_wide(params):
    _conv_check(params, "ConvTranspose")


def test_conv_fixed_cases():
    rng = np.random.default_rng(0)
    x = rand(rng, 1, 4, 9, 8)
    cases = [
        node_case("depthwise", "Conv", {"x": x}, inits={"w": rand(rng, 4, 1, 3, 3)}, group=4,
                  pads=[1, 1, 1, 1], tol=SUMS),
        node_case("strided_bias", "Conv", {"x": x}, inits={"w": rand(rng, 6, 4, 3, 2),
                                                           "b": rand(rng, 6)},
                  strides=[2, 3], pads=[0, 1, 2, 0], tol=SUMS),
        node_case("same_upper", "Conv", {"x": x}, inits={"w": rand(rng, 2, 4, 4, 4)},
                  auto_pad="SAME_UPPER", strides=[2, 2], tol=SUMS),
        node_case("conv1d", "Conv", {"x": rand(rng, 2, 3, 11)},
                  inits={"w": rand(rng, 5, 3, 3)}, pads=[2, 1], dilations=[2], tol=SUMS),
        node_case("weight_input", "Conv", {"x": x, "w": rand(rng, 3, 4, 1, 1)}, tol=SUMS),
        node_case("convT_out_shape", "ConvTranspose", {"x": rand(rng, 1, 2, 4, 5)},
                  inits={"w": rand(rng, 2, 3, 3, 3)}, strides=[2, 2], output_shape=[9, 10],
                  tol=SUMS),
        node_case("convT_same", "ConvTranspose", {"x": rand(rng, 1, 2, 4, 5)},
                  inits={"w": rand(rng, 2, 3, 3, 3)}, strides=[2, 2], auto_pad="SAME_UPPER",
                  tol=SUMS),
        node_case("convT_1d", "ConvTranspose", {"x": rand(rng, 1, 2, 6)},
                  inits={"w": rand(rng, 2, 4, 3), "b": rand(rng, 4)}, strides=[3],
                  pads=[1, 0], tol=SUMS),
    ]
    check(cases, opset=11)


@st.composite
def pool_cases(draw):
    dims = draw(st.sampled_from([1, 2]))
    kernel = [draw(st.integers(1, 3)) for _ in range(dims)]
    auto = draw(st.sampled_from(["NOTSET", "NOTSET", "SAME_UPPER", "VALID"]))
    # (onnxruntime refuses SAME pads that come out negative: stride > kernel)
    strides = [draw(st.integers(1, k if auto == "SAME_UPPER" else 3)) for k in kernel]
    size = [draw(st.integers(k + 1, 8)) for k in kernel]
    attrs = {"kernel_shape": kernel, "strides": strides,
             "ceil_mode": draw(st.sampled_from([0, 1]))}
    if auto == "NOTSET":
        attrs["pads"] = [draw(st.integers(0, k - 1)) for k in kernel * 2]
    else:
        attrs["auto_pad"] = auto
    op = draw(st.sampled_from(["MaxPool", "AveragePool"]))
    if op == "AveragePool":
        attrs["count_include_pad"] = draw(st.sampled_from([0, 1]))
    elif auto != "SAME_UPPER":  # (onnxruntime leaves dilations out of SAME pads: spec differs)
        attrs["dilations"] = [draw(st.integers(1, 2)) for _ in range(dims)]
        size = [max(s, (k - 1) * d + 2) for s, k, d in zip(size, kernel, attrs["dilations"])]
    else:
        attrs["dilations"] = [1] * dims
    return op, size, attrs, draw(st.integers(0, 2**16))


def _pool_check(params):
    op, size, attrs, seed = params
    rng = np.random.default_rng(seed)
    check([node_case("pool", op, {"x": rand(rng, 2, 3, *size)}, tol=SUMS, **attrs)], opset=13)


@settings(max_examples=DEFAULT_EXAMPLES, deadline=None, derandomize=True)
@given(params=pool_cases())
def test_pool_attributes(params):
    _pool_check(params)


@pytest.mark.slow
@settings(max_examples=WIDE_EXAMPLES, deadline=None)
@given(params=pool_cases())
def test_pool_attributes_wide(params):
    _pool_check(params)


def test_pool_fixed_cases():
    rng = np.random.default_rng(1)
    x = rand(rng, 2, 3, 7, 6)
    cases = [
        node_case("max_ceil", "MaxPool", {"x": x}, kernel_shape=[3, 3], strides=[2, 2],
                  ceil_mode=1),
        node_case("avg_pad", "AveragePool", {"x": x}, kernel_shape=[3, 2], pads=[1, 0, 1, 1],
                  tol=SUMS),
        node_case("avg_pad_incl", "AveragePool", {"x": x}, kernel_shape=[3, 3],
                  pads=[1, 1, 1, 1], count_include_pad=1, tol=SUMS),
        node_case("max1d", "MaxPool", {"x": rand(rng, 1, 2, 9)}, kernel_shape=[2],
                  strides=[2]),
        node_case("ceil_drops_window", "MaxPool", {"x": rand(rng, 1, 2, 2, 6)},
                  kernel_shape=[1, 2], strides=[2, 3], ceil_mode=1),
        node_case("avg_ceil_drops", "AveragePool", {"x": rand(rng, 1, 2, 5)}, kernel_shape=[2],
                  strides=[2], pads=[1, 1], ceil_mode=1, count_include_pad=1, tol=SUMS),
        node_case("gap", "GlobalAveragePool", {"x": x}, tol=SUMS),
        node_case("gmp", "GlobalMaxPool", {"x": x}),
        node_case("gap1d", "GlobalAveragePool", {"x": rand(rng, 2, 3, 5)}, tol=SUMS),
        node_case("gmp3d", "GlobalMaxPool", {"x": rand(rng, 1, 2, 3, 4, 2)}),
        node_case("lrn", "LRN", {"x": x}, size=3, alpha=0.01, beta=0.6, bias=1.5, tol=LOOSE),
    ]
    check(cases, opset=12)


def test_gemm_and_matmul():
    rng = np.random.default_rng(2)
    cases = [
        node_case("gemm", "Gemm", {"a": rand(rng, 3, 5)}, inits={"b": rand(rng, 5, 4),
                                                                 "c": rand(rng, 4)}, tol=SUMS),
        node_case("gemm_t", "Gemm", {"a": rand(rng, 5, 3), "b": rand(rng, 4, 5)},
                  inits={"c": rand(rng, 3, 4)}, transA=1, transB=1, alpha=0.5, beta=2.0,
                  tol=SUMS),
        node_case("gemm_noc", "Gemm", {"a": rand(rng, 3, 5)}, inits={"b": rand(rng, 5, 2)},
                  tol=SUMS),
        node_case("gemm_scalar_c", "Gemm", {"a": rand(rng, 3, 5)},
                  inits={"b": rand(rng, 5, 2), "c": rand(rng, 1)}, beta=0.5, tol=SUMS),
        node_case("mm2d", "MatMul", {"a": rand(rng, 3, 5)}, inits={"b": rand(rng, 5, 4)},
                  tol=SUMS),
        node_case("mm3d_2d", "MatMul", {"a": rand(rng, 2, 3, 5)}, inits={"b": rand(rng, 5, 4)},
                  tol=SUMS),
        node_case("mm_batch", "MatMul", {"a": rand(rng, 2, 3, 5), "b": rand(rng, 2, 5, 4)},
                  tol=SUMS),
        node_case("mm_bcast", "MatMul", {"a": rand(rng, 2, 1, 3, 5), "b": rand(rng, 4, 5, 2)},
                  tol=SUMS),
        node_case("mm_2d_3d", "MatMul", {"a": rand(rng, 3, 5), "b": rand(rng, 2, 5, 4)},
                  tol=SUMS),
        node_case("mm_vec_mat", "MatMul", {"a": rand(rng, 5), "b": rand(rng, 5, 4)}, tol=SUMS),
        node_case("mm_mat_vec", "MatMul", {"a": rand(rng, 2, 3, 5), "b": rand(rng, 5)},
                  tol=SUMS),
        node_case("mm_vec_vec", "MatMul", {"a": rand(rng, 5), "b": rand(rng, 5)}, tol=SUMS),
        node_case("mm_4d", "MatMul", {"a": rand(rng, 2, 3, 4, 5), "b": rand(rng, 2, 3, 5, 2)},
                  tol=SUMS),
    ]
    check(cases, opset=13)


def test_normalizations():
    rng = np.random.default_rng(3)
    x = rand(rng, 2, 3, 4, 5)
    var = rand(rng, 3, lo=0.5, hi=2)
    cases = [
        node_case("bn", "BatchNormalization", {"x": x},
                  inits={"s": rand(rng, 3), "b": rand(rng, 3), "m": rand(rng, 3), "v": var},
                  epsilon=1e-3, tol=SUMS),
        node_case("inorm", "InstanceNormalization", {"x": x},
                  inits={"s": rand(rng, 3), "b": rand(rng, 3)}, epsilon=1e-4, tol=SUMS),
        node_case("inorm1d", "InstanceNormalization", {"x": rand(rng, 2, 3, 7)},
                  inits={"s": rand(rng, 3), "b": rand(rng, 3)}, tol=SUMS),
        node_case("ln_last", "LayerNormalization", {"x": x},
                  inits={"s": rand(rng, 5), "b": rand(rng, 5)}, tol=SUMS),
        node_case("ln_nobias", "LayerNormalization", {"x": x}, inits={"s": rand(rng, 5)},
                  tol=SUMS),
        node_case("ln_axis1", "LayerNormalization", {"x": x},
                  inits={"s": rand(rng, 3, 4, 5), "b": rand(rng, 4, 5)}, axis=1, tol=SUMS),
        node_case("ln_stats", "LayerNormalization", {"x": x}, inits={"s": rand(rng, 4, 5)},
                  axis=-2, n_out=3, epsilon=1e-3, tol=SUMS),
    ]
    check(cases, opset=17)


@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_family_across_opsets(opset):
    """Opset < 13 coerces the input to 2-D at ``axis``; 13+ normalises along ``axis``."""
    rng = np.random.default_rng(4)
    x = rand(rng, 2, 3, 4)
    cases = []
    for op in ("Softmax", "LogSoftmax", "Hardmax"):
        cases += [node_case(f"{op.lower()}_default", op, {"x": x}),
                  node_case(f"{op.lower()}_axis0", op, {"x": x}, axis=0),
                  node_case(f"{op.lower()}_last", op, {"x": x}, axis=-1)]
    check(cases, opset=opset)


def test_dropout_inference():
    rng = np.random.default_rng(5)
    x = rand(rng, 3, 4)
    cases = [node_case("drop", "Dropout", {"x": x}),
             node_case("drop_mask", "Dropout", {"x": x}, n_out=2,
                       inits={"r": np.array(0.3, "float32"), "t": np.array(False)})]
    check(cases, opset=13)

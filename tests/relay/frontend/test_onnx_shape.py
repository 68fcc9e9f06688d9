"""Shape and data-movement operators against onnxruntime, including the forms that changed
across opsets (Split/Squeeze/Unsqueeze axes as attributes before 13 and inputs from 13, Split
num_outputs at 18, Pad axes at 18, Shape start/end at 15)."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import OnnxCase, check, make_model, node_case, rand
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper, numpy_helper

from ember import relay
from ember.runtime.errors import FrontendError

I64 = "int64"


def i64(*values: int) -> np.ndarray:
    return np.array(values, I64)


def test_reshape_flatten_transpose():
    rng = np.random.default_rng(0)
    x = rand(rng, 2, 3, 4)
    cases = [
        node_case("reshape", "Reshape", {"x": x}, inits={"s": i64(4, -1)}),
        node_case("reshape_zero", "Reshape", {"x": x}, inits={"s": i64(0, 12)}),
        node_case("reshape_copy", "Reshape", {"x": x}, inits={"s": i64(0, 0, -1, 1)}),
        node_case("reshape_scalar", "Reshape", {"x": rand(rng, 1, 1)}, inits={"s": i64()}),
        node_case("flatten0", "Flatten", {"x": x}, axis=0),
        node_case("flatten2", "Flatten", {"x": x}, axis=2),
        node_case("flatten_neg", "Flatten", {"x": x}, axis=-1),
        node_case("flatten3", "Flatten", {"x": x}, axis=3),
        node_case("transpose", "Transpose", {"x": x}, perm=[2, 0, 1]),
        node_case("transpose_default", "Transpose", {"x": x}),
        node_case("identity", "Identity", {"x": x}),
    ]
    check(cases, opset=14)


def test_concat_split_forms():
    rng = np.random.default_rng(1)
    x = rand(rng, 6, 4)
    cases = [
        node_case("concat", "Concat", {"a": x, "b": rand(rng, 2, 4)}, axis=0),
        node_case("concat_neg", "Concat", {"a": x, "b": rand(rng, 6, 1), "c": x}, axis=-1),
        node_case("split_equal", "Split", {"x": x}, n_out=3),
        node_case("split_attr", "Split", {"x": x}, n_out=2, axis=1, split=[1, 3]),
    ]
    check(cases, opset=11)
    cases13 = [node_case("split_input", "Split", {"x": x}, inits={"s": i64(2, 4)}, n_out=2),
               node_case("split_eq13", "Split", {"x": x}, n_out=2, axis=1)]
    check(cases13, opset=13)
    cases18 = [node_case("split_num", "Split", {"x": rand(rng, 7, 2)}, n_out=3, num_outputs=3),
               node_case("split_num_even", "Split", {"x": x}, n_out=2, num_outputs=2)]
    check(cases18, opset=18)


def test_slice_forms():
    rng = np.random.default_rng(2)
    x = rand(rng, 5, 6, 7)
    big, small = 2**63 - 1, -(2**63)
    cases = [
        node_case("basic", "Slice", {"x": x}, inits={"s": i64(1, 0), "e": i64(4, 5)}),
        node_case("axes_steps", "Slice", {"x": x}, inits={"s": i64(0, 1), "e": i64(7, 6),
                                                          "a": i64(2, 1), "t": i64(2, 2)}),
        node_case("negative", "Slice", {"x": x}, inits={"s": i64(-3), "e": i64(-1),
                                                        "a": i64(-1)}),
        node_case("reverse", "Slice", {"x": x}, inits={"s": i64(big), "e": i64(small),
                                                       "a": i64(0), "t": i64(-1)}),
        node_case("reverse_step", "Slice", {"x": x}, inits={"s": i64(-2), "e": i64(0),
                                                            "a": i64(1), "t": i64(-2)}),
        node_case("to_end", "Slice", {"x": x}, inits={"s": i64(2), "e": i64(big), "a": i64(1)}),
        node_case("clamped", "Slice", {"x": x}, inits={"s": i64(-100), "e": i64(100)}),
        node_case("empty", "Slice", {"x": x}, inits={"s": i64(3), "e": i64(3), "a": i64(2)}),
        node_case("back_from_before", "Slice", {"x": rand(rng, 1, 3)},
                  inits={"s": i64(-5), "e": i64(-9), "a": i64(1), "t": i64(-2)}),
    ]
    check(cases, opset=13)


@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze_unsqueeze_across_opsets(opset):
    rng = np.random.default_rng(3)
    x = rand(rng, 1, 3, 1, 2)

    def axes_case(name, op, axes, data):
        if opset < 13:
            return node_case(name, op, {"x": data}, axes=axes)
        return node_case(name, op, {"x": data}, inits={"a": i64(*axes)})

    cases = [axes_case("sq", "Squeeze", [0, 2], x),
             axes_case("sq_neg", "Squeeze", [-2], x),
             node_case("sq_all", "Squeeze", {"x": x}),
             axes_case("unsq", "Unsqueeze", [0, 3], rand(rng, 3, 2)),
             axes_case("unsq_neg", "Unsqueeze", [-1], rand(rng, 3, 2)),
             axes_case("unsq_scalar", "Unsqueeze", [0], np.array(2.5, "float32"))]
    check(cases, opset=opset)


def test_expand_tile_pad():
    rng = np.random.default_rng(4)
    x = rand(rng, 3, 1)
    cases = [
        node_case("expand", "Expand", {"x": x}, inits={"s": i64(2, 3, 4)}),
        node_case("expand_smaller", "Expand", {"x": x}, inits={"s": i64(1, 1)}),
        node_case("expand_bidir", "Expand", {"x": rand(rng, 2, 1, 3)}, inits={"s": i64(4, 1)}),
        node_case("expand_int", "Expand", {"x": rand(rng, 1, 2, dtype="int64")},
                  inits={"s": i64(3, 2)}),
        node_case("tile", "Tile", {"x": rand(rng, 2, 3)}, inits={"r": i64(2, 3)}),
        node_case("pad", "Pad", {"x": rand(rng, 2, 3)}, inits={"p": i64(0, 1, 2, 1)}),
        node_case("pad_value", "Pad", {"x": rand(rng, 2, 3)},
                  inits={"p": i64(1, 1, 0, 2), "v": np.array(1.5, "float32")}),
        node_case("pad_reflect", "Pad", {"x": rand(rng, 3, 4)}, inits={"p": i64(1, 2, 1, 1)},
                  mode="reflect"),
        node_case("pad_edge", "Pad", {"x": rand(rng, 3, 4)}, inits={"p": i64(2, 0, 0, 3)},
                  mode="edge"),
        node_case("pad_crop", "Pad", {"x": rand(rng, 4, 5)}, inits={"p": i64(-1, 2, 0, -2)}),
    ]
    check(cases, opset=13)
    cases18 = [node_case("pad_axes", "Pad", {"x": rand(rng, 2, 3, 4)},
                         inits={"p": i64(1, 2), "v": np.array(0, "float32"), "a": i64(-1)})]
    check(cases18, opset=18)


def test_shape_size_constant_range():
    rng = np.random.default_rng(5)
    x = rand(rng, 2, 3, 4)
    tensor = numpy_helper.from_array(rand(rng, 2, 2), "t")
    cases = [
        node_case("shape", "Shape", {"x": x}),
        node_case("shape_slice", "Shape", {"x": x}, start=1, end=-1),
        node_case("size", "Size", {"x": x}),
        OnnxCase("const", [helper.make_node("Constant", [], ["c"], value=tensor)], {}, ["c"]),
        OnnxCase("const_f", [helper.make_node("Constant", [], ["c"], value_floats=[1.5, 2])],
                 {}, ["c"]),
        OnnxCase("const_i", [helper.make_node("Constant", [], ["c"], value_int=7)], {}, ["c"]),
        node_case("cos", "ConstantOfShape", {}, inits={"s": i64(2, 3)}),
        node_case("cos_value", "ConstantOfShape", {}, inits={"s": i64(4)},
                  value=numpy_helper.from_array(np.array([7], "int32"))),
        node_case("range", "Range", {}, inits={"a": np.array(1, I64), "b": np.array(9, I64),
                                                "d": np.array(3, I64)}),
        node_case("range_f", "Range", {}, inits={"a": np.array(0.5, "float32"),
                                                  "b": np.array(-2, "float32"),
                                                  "d": np.array(-0.7, "float32")}),
    ]
    check(cases, opset=15)


@pytest.mark.parametrize("bounds, match", [
    ((np.array(0, I64), np.array(10**18, I64), np.array(1, I64)),
     r"Range node .*Range\(0, 1000000000000000000, 1\) would be a constant of shape "
     r"\[1000000000000000000\] .*more than the 67108864"),
    ((np.array(0, "float32"), np.array(np.inf, "float32"), np.array(1, "float32")),
     r"Range node .*Range\(0.0, inf, 1.0\) has no finite length"),
])
def test_range_too_long_is_refused_before_allocating(bounds, match):
    case = node_case("r", "Range", {}, inits=dict(zip("abd", bounds)))
    with pytest.raises(FrontendError, match=match):
        relay.frontend.from_onnx(make_model([case], opset=15))


def test_rearrange_trilu_onehot():
    rng = np.random.default_rng(6)
    x = rand(rng, 2, 8, 3, 2)
    cases = [
        node_case("d2s", "DepthToSpace", {"x": x}, blocksize=2),
        node_case("d2s_crd", "DepthToSpace", {"x": x}, blocksize=2, mode="CRD"),
        node_case("s2d", "SpaceToDepth", {"x": rand(rng, 1, 3, 4, 6)}, blocksize=2),
        node_case("triu", "Trilu", {"x": rand(rng, 2, 4, 5)}),
        node_case("tril_k", "Trilu", {"x": rand(rng, 4, 5)}, inits={"k": np.array(1, I64)},
                  upper=0),
        node_case("onehot", "OneHot", {"i": i64(0, 2, -1, 1)},
                  inits={"d": np.array(3, I64), "v": np.array([0, 5], "float32")}),
        node_case("onehot_axis", "OneHot", {"i": np.array([[1, 0], [2, 2]], I64)},
                  inits={"d": np.array(4, I64), "v": np.array([-1, 1], I64)}, axis=0),
    ]
    check(cases, opset=14)


def _slice_law(data):
    shape = data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=3))
    axes = data.draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape),
                              unique=True))
    starts = [data.draw(st.integers(-8, 8)) for _ in axes]
    ends = [data.draw(st.integers(-8, 8)) for _ in axes]
    steps = [data.draw(st.sampled_from([-2, -1, 1, 2, 3])) for _ in axes]
    rng = np.random.default_rng(0)
    check([node_case("slice", "Slice", {"x": rand(rng, *shape)},
                     inits={"s": i64(*starts), "e": i64(*ends), "a": i64(*axes),
                            "t": i64(*steps)})], opset=13)


@settings(max_examples=4, deadline=None, derandomize=True)
@given(data=st.data())
def test_slice_law(data):
    """Any starts/ends/steps (clamping, negatives, reverse) give onnxruntime's slice."""
    _slice_law(data)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_slice_law_wide(data):
    _slice_law(data)


def test_shape_subgraph_folds_to_constants():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape and Shape -> Slice ->
    ConstantOfShape fold at import time when shapes are static: main has no shape_of."""
    from _onnx_util import make_model, run_graph, run_ort

    from ember import relay

    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["b"], axis=0),
             helper.make_node("Unsqueeze", ["b", "ax"], ["b1"]),
             helper.make_node("Concat", ["b1", "m1"], ["t"], axis=0),
             helper.make_node("Reshape", ["x", "t"], ["flat"]),
             helper.make_node("Slice", ["s", "z", "two"], ["hw"]),
             helper.make_node("ConstantOfShape", ["hw"], ["ones"],
                              value=numpy_helper.from_array(np.array([1.0], "float32"))),
             helper.make_node("Add", ["ones", "x"], ["y"])]
    inits = {"i0": np.array(0, I64), "ax": i64(0), "m1": i64(-1), "z": i64(0), "two": i64(2)}
    rng = np.random.default_rng(7)
    x = rand(rng, 2, 3)
    case = OnnxCase("shapes", nodes, {"x": x}, ["flat", "y"], inits)
    model = make_model([case], 13)
    mod, _ = relay.frontend.from_onnx(model)
    ops = relay.analysis.list_op_freqs(mod)
    assert "shape_of" not in ops, ops
    feeds = {"shapes__x": x}
    got, want = run_graph(model, feeds), run_ort(model, feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)

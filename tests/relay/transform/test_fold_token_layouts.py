"""FoldTokenLayouts: both rewrites as before/expected pairs, the graphs each must leave alone,
results against the unrewritten graph (interpreter), and a built model whose token crossings
run the blocked channels-last copy."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _pass_helpers import (
    assert_built_onnx_matches_onnxruntime,
    assert_main_equal,
    assert_rewrites,
    run,
)

import ember
from ember import relay
from ember.relay.transform import FoldTokenLayouts
from ember.relay.transform.fold_token_layouts import RULES

MAP = "%x: Tensor[(2, 3, 5, 7, 8), float32]"  # N=2, C=24 in NCHW8c, 5x7
TOKENS = "%t: Tensor[(2, 35, 24), float32]"
TO_NCHW = 'layout_transform(%x, src_layout="NCHW8c", dst_layout="NCHW")'
FROM_NCHW = 'layout_transform({}, src_layout="NCHW", dst_layout="NCHW8c")'

CASES = {
    "blocked_to_tokens": (
        f"def @main({MAP}) {{ transpose(reshape({TO_NCHW}, newshape=[2, 24, 35]), "
        f"axes=[0, 2, 1]) }}",
        f"def @main({MAP}) {{ layout_transform(reshape(%x, newshape=[2, 3, 35, 8]), "
        f'src_layout="NCW8c", dst_layout="NWC") }}'),
    "tokens_to_blocked": (
        f"def @main({TOKENS}) {{ "
        + FROM_NCHW.format("reshape(transpose(%t, axes=[0, 2, 1]), newshape=[2, 24, 5, 7])")
        + " }",
        f"def @main({TOKENS}) {{ layout_transform(reshape(%t, newshape=[2, 5, 7, 24]), "
        f'src_layout="NHWC", dst_layout="NCHW8c") }}'),
    "round_trip_with_gelu": (  # Mix-FFN: tokens -> map (a conv would sit here) -> tokens
        f"def @main({TOKENS}) {{ %0 = "
        + FROM_NCHW.format("reshape(transpose(%t, axes=[0, 2, 1]), newshape=[2, 24, 5, 7])")
        + '; %1 = layout_transform(%0, src_layout="NCHW8c", dst_layout="NCHW"); '
        "nn.gelu(transpose(reshape(%1, newshape=[2, 24, 35]), axes=[0, 2, 1])) }",
        f"def @main({TOKENS}) {{ %0 = layout_transform(reshape(%t, newshape=[2, 5, 7, 24]), "
        'src_layout="NHWC", dst_layout="NCHW8c"); '
        "nn.gelu(layout_transform(reshape(%0, newshape=[2, 3, 35, 8]), "
        'src_layout="NCW8c", dst_layout="NWC")) }'),
    "blocked_to_channels_last": (  # a detector head's level: (N, H, W, C) of a blocked map
        f"def @main({MAP}) {{ transpose({TO_NCHW}, axes=[0, 2, 3, 1]) }}",
        f'def @main({MAP}) {{ layout_transform(%x, src_layout="NCHW8c", dst_layout="NHWC") }}'),
    "padded_blocked_to_channels_last": (  # 21 real channels of 24: the padded lanes dropped
        f"def @main({MAP}) {{ transpose(strided_slice({TO_NCHW}, begin=[0], end=[21], "
        "axes=[1]), axes=[0, 2, 3, 1]) }",
        f'def @main({MAP}) {{ strided_slice(layout_transform(%x, src_layout="NCHW8c", '
        'dst_layout="NHWC"), begin=[0], end=[21], axes=[3]) }'),
    "blocked_to_split_channels_last": (  # YOLOv5's head: 24 channels as 3 anchors x 8, 8 last
        f"def @main({MAP}) {{ transpose(reshape({TO_NCHW}, newshape=[2, 3, 8, 5, 7]), "
        "axes=[0, 1, 3, 4, 2]) }",
        f'def @main({MAP}) {{ transpose(reshape(layout_transform(%x, src_layout="NCHW8c", '
        'dst_layout="NHWC"), newshape=[2, 5, 7, 3, 8]), axes=[0, 3, 1, 2, 4]) }'),
    "padded_blocked_to_split_channels_last": (  # 21 real channels of 24: 3 anchors x 7
        f"def @main({MAP}) {{ transpose(reshape(strided_slice({TO_NCHW}, begin=[0], end=[21], "
        "axes=[1]), newshape=[2, 3, 7, 5, 7]), axes=[0, 1, 3, 4, 2]) }",
        f'def @main({MAP}) {{ transpose(reshape(strided_slice(layout_transform(%x, '
        'src_layout="NCHW8c", dst_layout="NHWC"), begin=[0], end=[21], axes=[3]), '
        "newshape=[2, 5, 7, 3, 7]), axes=[0, 3, 1, 2, 4]) }"),
}

LEFT_ALONE = [
    # the transpose is not the tokens' swap
    f"def @main({MAP}) {{ transpose(reshape({TO_NCHW}, newshape=[2, 24, 35]), "
    "axes=[1, 0, 2]) }",
    # the reshape does not merge H and W (it splits the channels)
    f"def @main({MAP}) {{ transpose(reshape({TO_NCHW}, newshape=[2, 120, 7]), "
    "axes=[0, 2, 1]) }",
    # a transform to another blocking, not to NCHW
    "def @main(%x: Tensor[(1, 2, 4, 4, 8), float32]) { transpose(reshape(layout_transform("
    '%x, src_layout="NCHW8c", dst_layout="NCHW16c"), newshape=[1, 16, 16]), axes=[0, 2, 1]) }',
    # a transform to NHWC already, not from NCHW
    "def @main(%t: Tensor[(1, 4, 8), float32]) { layout_transform(reshape(%t, newshape="
    '[1, 2, 2, 8]), src_layout="NHWC", dst_layout="NCHW8c") }',
    # the reshape to the map is not (N, C, H, W) of the tokens' (N, HW, C)
    f"def @main({TOKENS}) {{ "
    + FROM_NCHW.format("reshape(transpose(%t, axes=[0, 2, 1]), newshape=[1, 48, 5, 7])")
    + " }",
    # float16: the kernels copy float32
    "def @main(%t: Tensor[(1, 4, 8), float16]) { "
    + FROM_NCHW.format("reshape(transpose(%t, axes=[0, 2, 1]), newshape=[1, 8, 2, 2])") + " }",
    # a transpose to channels last of a slice that is not the first channels
    f"def @main({MAP}) {{ transpose(strided_slice({TO_NCHW}, begin=[3], end=[24], "
    "axes=[1]), axes=[0, 2, 3, 1]) }",
    # a slice of the image, not of the channels
    f"def @main({MAP}) {{ transpose(strided_slice({TO_NCHW}, begin=[0], end=[4], "
    "axes=[2]), axes=[0, 2, 3, 1]) }",
    # another transpose of the map (NWHC)
    f"def @main({MAP}) {{ transpose({TO_NCHW}, axes=[0, 3, 2, 1]) }}",
    # the split's groups not moved last together (K before H)
    f"def @main({MAP}) {{ transpose(reshape({TO_NCHW}, newshape=[2, 3, 8, 5, 7]), "
    "axes=[0, 1, 2, 4, 3]) }",
    # the reshape splits the channels with the rows (24 x 5 as 3 x 40), not the channels alone
    f"def @main({MAP}) {{ transpose(reshape({TO_NCHW}, newshape=[2, 3, 40, 1, 7]), "
    "axes=[0, 1, 3, 4, 2]) }",
    # a split of a slice that is not the first channels
    f"def @main({MAP}) {{ transpose(reshape(strided_slice({TO_NCHW}, begin=[3], end=[24], "
    "axes=[1]), newshape=[2, 3, 7, 5, 7]), axes=[0, 1, 3, 4, 2]) }",
    # a run-time batch
    "def @main(%t: Tensor[(?, 4, 8), float32]) { layout_transform(reshape(transpose(%t, "
    'axes=[0, 2, 1]), newshape=[-1, 8, 2, 2]), src_layout="NCHW", dst_layout="NCHW8c") }',
]


@pytest.mark.parametrize("case", sorted(CASES))
def test_rewrite(case):
    assert_rewrites(FoldTokenLayouts(), *CASES[case])


@pytest.mark.parametrize("before", LEFT_ALONE)
def test_left_alone(before):
    assert_main_equal(run(FoldTokenLayouts(), before), before)


def test_every_rule_is_a_named_function():
    assert {fn.__name__ for _, fn in RULES} == {"blocked_to_tokens", "tokens_to_blocked",
                                                "blocked_to_channels_last",
                                                "blocked_to_split_channels_last"}


def test_rewritten_transform_keeps_the_onnx_node_names():
    x = relay.var("x", shape=(1, 2, 3, 3, 8))
    back = relay.layout_transform(x, "NCHW8c", "NCHW")
    y = relay.transpose(relay.reshape(back, (1, 16, 9)), (0, 2, 1))
    span = ember.ir.Span(ember.ir.SourceName("node_Transpose_3"), 0, 0, 0, 0)
    y = relay.Call(y.op, y.args, y.attrs, span=span)
    out = run(FoldTokenLayouts(), ember.IRModule.from_expr(relay.Function([x], y)))
    assert out["main"].body.span is not None
    assert "node_Transpose_3" in str(out["main"].body.span)


def _mix_ffn(channels: int, h: int, w: int) -> tuple[ember.IRModule, dict]:
    """tokens -> map -> depthwise 3x3 -> tokens -> GELU: SegFormer's Mix-FFN core."""
    t = relay.var("t", shape=(1, h * w, channels))
    weight = relay.var("weight", shape=(channels, 1, 3, 3))
    image = relay.reshape(relay.transpose(t, (0, 2, 1)), (1, channels, h, w))
    conv = relay.nn.conv2d(image, weight, padding=(1, 1), groups=channels)
    tokens = relay.transpose(relay.reshape(conv, (1, channels, h * w)), (0, 2, 1))
    mod = ember.IRModule.from_expr(relay.Function([t, weight], relay.nn.gelu(tokens)))
    rng = np.random.default_rng(3)
    return mod, {"weight": rng.uniform(-1, 1, (channels, 1, 3, 3)).astype("float32")}


def test_built_mix_ffn_matches_the_interpreter_and_runs_the_channels_last_copy():
    mod, params = _mix_ffn(24, 5, 7)  # 24 channels: 3 blocks of 8 (or 6 of 4)
    with ember.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    source = "\n".join(m.get_source() for m in lib.get_lib()._walk())
    assert "ember_layout_nhwc(" in source
    t = np.random.default_rng(4).uniform(-2, 2, (1, 35, 24)).astype("float32")
    runner = ember.contrib.graph_executor.GraphModule(lib["default"](ember.cpu(0)))
    runner.set_input("t", t)
    runner.run()
    want = relay.create_executor("debug", mod=mod).evaluate()(t, params["weight"]).numpy()
    np.testing.assert_allclose(runner.get_output(0).numpy(), want, rtol=1e-5, atol=1e-5)


def _yolov5_head(channels: int, anchors: int, outputs: int, size: int) -> Any:
    """An ONNX YOLOv5 detect level: 1x1 conv, Reshape (1, A, K, H, W), Transpose to
    (1, A, H, W, K), Sigmoid, the xy decode on the first two outputs, Reshape (1, -1, K)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(5)
    inits = {"w": rng.standard_normal((anchors * outputs, channels, 1, 1)).astype("float32"),
             "b": rng.standard_normal(anchors * outputs).astype("float32"),
             "split": np.array([1, anchors, outputs, size, size], "int64"),
             "flat": np.array([1, -1, outputs], "int64"),
             "grid": rng.random((1, 1, size, size, 2)).astype("float32"),
             "s0": np.array([0], "int64"), "s2": np.array([2], "int64"),
             "sk": np.array([outputs], "int64"), "ax": np.array([4], "int64")}
    node = helper.make_node
    nodes = [node("Conv", ["x", "w", "b"], ["conv"]),
             node("Reshape", ["conv", "split"], ["groups"]),
             node("Transpose", ["groups"], ["last"], perm=[0, 1, 3, 4, 2]),
             node("Sigmoid", ["last"], ["y"]),
             node("Slice", ["y", "s0", "s2", "ax"], ["xy"]),
             node("Slice", ["y", "s2", "sk", "ax"], ["rest"]),
             node("Add", ["xy", "grid"], ["xy_grid"]),
             node("Concat", ["xy_grid", "rest"], ["decoded"], axis=4),
             node("Reshape", ["decoded", "flat"], ["out"])]
    graph = helper.make_graph(
        nodes, "head", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                      [1, channels, size, size])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    return model


@pytest.mark.parametrize("anchors,outputs,size", [(3, 85, 20), (3, 7, 13), (2, 16, 16)])
def test_built_yolov5_head_matches_onnxruntime_and_runs_the_channels_last_copy(
        anchors, outputs, size):
    x = np.random.default_rng(6).uniform(-2, 2, (1, 64, size, size)).astype("float32")
    assert_built_onnx_matches_onnxruntime(_yolov5_head(64, anchors, outputs, size), {"x": x},
                                          "ember_layout_nhwc", rtol=1e-5, atol=1e-5)

"""Detector heads as exporters write them (EfficientDet, RetinaNet, SSD, YOLO): per pyramid
level a conv to ``anchors * k`` channels, ``Transpose(0, 2, 3, 1)``, ``Reshape(1, -1, k)``,
then one ``Concat`` of the levels and maybe a ``Sigmoid``. Against onnxruntime (float32,
rtol 1e-4, atol 1e-4 of the output's scale), with levels of odd sizes, channel counts that
are not whole SIMD blocks, and k = 4 / 85 / 90; graph and AOT executors. The build copies each
level's blocked conv channels-last straight into its slice of the concatenation (no kernel
for the concatenation, none computing the sigmoid apart from the convs)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from _onnx_util import run_ort
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import ember
from ember import relay
from ember.contrib import cc

pytestmark = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")

IN_CHANNELS = 8  # a 3x3 conv of 8 channels sums 72 taps: the planner pads its output blocks


def head_model(sizes: list[tuple[int, int]], anchors: int, k: int, sigmoid: bool,
               seed: int = 0):
    """Inputs ``x0, x1, ...`` (1, 8, h, w) per level of ``sizes``; output ``y`` (1, boxes,
    k): each level's 3x3 conv (shared weights, as the heads share them across levels) to
    ``anchors * k`` channels, channels last, concatenated, maybe through a sigmoid."""
    rng = np.random.default_rng(seed)
    weight = (rng.standard_normal((anchors * k, IN_CHANNELS, 3, 3)) * 0.2).astype("float32")
    bias = (rng.standard_normal(anchors * k) * 0.1).astype("float32")
    inits = [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b"),
             numpy_helper.from_array(np.array([1, -1, k], "int64"), "shape")]
    nodes, levels = [], []
    for i in range(len(sizes)):
        nodes += [helper.make_node("Conv", [f"x{i}", "w", "b"], [f"c{i}"], kernel_shape=[3, 3],
                                   pads=[1, 1, 1, 1]),
                  helper.make_node("Transpose", [f"c{i}"], [f"t{i}"], perm=[0, 2, 3, 1]),
                  helper.make_node("Reshape", [f"t{i}", "shape"], [f"r{i}"])]
        levels.append(f"r{i}")
    nodes.append(helper.make_node("Concat", levels, ["cat" if sigmoid else "y"], axis=1))
    if sigmoid:
        nodes.append(helper.make_node("Sigmoid", ["cat"], ["y"]))
    inputs = [helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, [1, IN_CHANNELS, h, w])
              for i, (h, w) in enumerate(sizes)]
    graph = helper.make_graph(nodes, "head", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    return model


def _inputs(sizes: list[tuple[int, int]], seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {f"x{i}": rng.standard_normal((1, IN_CHANNELS, h, w)).astype("float32")
            for i, (h, w) in enumerate(sizes)}


def _check(model, inputs: dict[str, np.ndarray], executor: str) -> None:
    want = run_ort(model, inputs)[0]
    got = ember.compile(model, executor=executor, threads=1)(**inputs)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("executor", ["graph", "aot"])
@pytest.mark.parametrize("anchors, k, sigmoid", [(9, 90, True), (3, 85, True), (9, 4, False)])
def test_head_matches_onnxruntime(anchors, k, sigmoid, executor):
    sizes = [(7, 5), (4, 3), (1, 1)]
    _check(head_model(sizes, anchors, k, sigmoid), _inputs(sizes), executor)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes=st.lists(st.tuples(st.integers(1, 9), st.integers(1, 9)), min_size=2, max_size=4),
       anchors=st.integers(1, 9), k=st.sampled_from([1, 4, 7, 85, 90]), sigmoid=st.booleans())
def test_any_head_matches_onnxruntime(sizes, anchors, k, sigmoid):
    _check(head_model(sizes, anchors, k, sigmoid), _inputs(sizes), "graph")


def test_levels_are_copied_into_the_concatenation_and_the_sigmoid_joins_the_convs():
    sizes = [(6, 6), (3, 3)]
    model = head_model(sizes, 9, 90, True)
    mod, params = relay.frontend.from_onnx(model)
    with ember.transform.PassContext(opt_level=3):
        factory = relay.build(mod, "llvm", params=params)
    nodes = json.loads(factory.get_graph_json())["nodes"]
    kernels = [n["attrs"]["func_name"] for n in nodes if n["op"] == "tvm_op"]
    assert kernels.count("__nop") == 1  # the concatenation, in place
    assert all("sigmoid" not in name for name in kernels)  # in the convs' epilogues
    source = "\n".join(m.get_source() for m in factory.get_lib()._walk())
    assert source.count("ember_layout_nhwc(") >= 2  # one blocked copy per level

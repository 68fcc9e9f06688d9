"""ONNX files as older converters and other exporters write them
(``relay.testing.exported_onnx_legacy``): ONNX's experimental operators of opsets 1-9 (the
Model Zoo's tiny-yolov2 starts with ``ImageScaler``), opset-6..8 conventions (per-element
batch norm, per-channel PRelu slopes, Dropout masks), tf2onnx's SAME pads and
``tf_crop_and_resize`` over symbolic sizes, Paddle2ONNX's ceil-mode pools, and the
conventions that import as they are (slow). Each against onnxruntime (or ONNX's stored
outputs where onnxruntime no longer runs the opset), compiled with no shapes (the VM) and with
shapes; float32 rtol/atol 1e-4 (conv and matmul sums), 1e-5 for elementwise ops."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from _onnx_util import SUMS, check, compare, make_model, node_case, onnx, rand, run_ort

import ember
from ember.contrib import cc
from ember.relay.frontend.onnx._domains import EXPERIMENTAL
from ember.relay.testing import exported_onnx_legacy as legacy
from ember.runtime.errors import FrontendError

pytestmark = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def _both(model, feeds: dict[str, np.ndarray], tol=SUMS, reference=None, outputs=None) -> None:
    """No shapes given (VM) and the feeds' shapes given: both match onnxruntime (running
    ``reference``, default ``model``; the first ``outputs`` outputs, default all)."""
    want = run_ort(reference or model, feeds)[:outputs]
    shapes = {k: v.shape for k, v in feeds.items()}
    for label, kwargs in (("no shapes", {}), ("shapes", {"input_shapes": shapes})):
        got = ember.compile(model, threads=1, **kwargs)(*feeds.values())
        got = list(got) if isinstance(got, (list, tuple)) else [got]
        compare(f"{model.graph.name} ({label})", [np.asarray(g) for g in got][:outputs], want,
                tol)


def test_tiny_yolov2_head_with_image_scaler():
    x = np.random.default_rng(0).uniform(0, 255, (1, 3, 16, 16)).astype("float32")
    _both(legacy.tiny_yolov2_head(image=16), {"image": x})


def test_experimental_operators_match_onnxruntime():
    rng = np.random.default_rng(1)
    x = rand(rng, 2, 3, 5, 7)
    cases = [
        node_case("scaler", "ImageScaler", {"x": x}, scale=0.5, bias=[1.0, -2.0, 0.25]),
        node_case("scale", "Scale", {"x": x}, scale=-1.5),
        node_case("affine", "Affine", {"x": x}, alpha=2.0, beta=-0.5),
        node_case("tanh", "ScaledTanh", {"x": x}, alpha=1.5, beta=0.7),
        node_case("softplus", "ParametricSoftplus", {"x": x}, alpha=0.5, beta=1.7),
        node_case("crop", "Crop", {"x": x}, border=[1, 2, 3, 1]),
        node_case("crop_window", "Crop", {"x": x}, border=[2, 1, 0, 0], scale=[3, 4]),
        node_case("thresholded", "ThresholdedRelu", {"x": x}, alpha=0.4),  # ONNX's from 10
        node_case("mvn", "MeanVarianceNormalization", {"x": x}, tol=SUMS),  # ONNX's from 9
        node_case("mvn_across", "MeanVarianceNormalization", {"x": x}, tol=SUMS,
                  across_channels=1),
        node_case("mvn_centred", "MeanVarianceNormalization", {"x": x}, tol=SUMS,
                  normalize_variance=0),
    ]
    assert {c.op_types[0] for c in cases} == set(EXPERIMENTAL)
    check(cases, opset=8)


def test_batch_norm_with_per_element_statistics():
    """BatchNormalization-7 ``spatial=0``: statistics of a sample's shape (C, H, W)."""
    rng = np.random.default_rng(4)
    stats = {k: rand(rng, 3, 4, 5) for k in ("scale", "b", "mean")}
    stats["var"] = rand(rng, 3, 4, 5, lo=0.2, hi=2.0)
    check([node_case("bn", "BatchNormalization", {"x": rand(rng, 2, 3, 4, 5)}, inits=stats,
                     spatial=0, epsilon=1e-3)], opset=8)


@pytest.mark.parametrize("opset,dtype", [(7, "float32"), (12, "bool")])
def test_dropout_mask_has_the_type_of_its_version(opset, dtype):
    """Dropout before version 10 writes its mask in the input's type. The reference is ONNX's
    own evaluator (ones: every element kept); onnxruntime writes zeros before version 12."""
    from onnx.reference import ReferenceEvaluator

    x = rand(np.random.default_rng(5), 2, 3)
    ratio = {"ratio": 0.2} if opset < 12 else {}  # an input from version 12
    model = make_model([node_case("d", "Dropout", {"x": x}, n_out=2, **ratio)], opset)
    got = ember.compile(model, threads=1, input_shapes={"d__x": x.shape})(x)
    assert [np.asarray(g).dtype for g in got] == [np.dtype("float32"), np.dtype(dtype)]
    want = ReferenceEvaluator(model).run(None, {"d__x": x})
    np.testing.assert_array_equal(np.asarray(got[0]), want[0])
    np.testing.assert_array_equal(np.asarray(got[1]), np.ones_like(want[1], dtype))


def test_crop_that_does_not_fit_names_the_node():
    x = np.zeros((1, 1, 4, 4), "float32")
    model = make_model([node_case("c", "Crop", {"x": x}, border=[0, 0, 0, 0], scale=[5, 2])], 9)
    with pytest.raises(FrontendError, match="c__Crop.*do not fit"):
        ember.relay.frontend.from_onnx(model)


def _symbolic(model, axes):
    """``model`` with its first input's ``axes`` made symbolic (tf2onnx's ``unk__``)."""
    for axis in axes:
        dim = model.graph.input[0].type.tensor_type.shape.dim[axis]
        dim.Clear()
        dim.dim_param = f"unk__{axis}"
    return model


def test_tf_mobilenet_with_symbolic_height_and_width():
    """SAME_UPPER / SAME_LOWER strided convs over sizes known only at run time: the pads
    depend on the size modulo the stride (computed at run time); odd and even sizes."""
    model = _symbolic(legacy.tf_mobilenet_block(pads=("SAME_UPPER", "SAME_LOWER")), (0, 1, 2))
    compiled = ember.compile(model, threads=1)
    rng = np.random.default_rng(6)
    for shape in [(2, 11, 13, 3), (1, 12, 8, 3), (1, 5, 6, 3)]:
        x = (rng.standard_normal(shape) * 2).astype("float32")
        got = [np.asarray(g) for g in compiled(x)]
        compare(f"tf_mobilenet {shape}", got, run_ort(model, {"input": x}), SUMS)


def _check_run_time_sizes(nodes, x_shape, shapes, opset=13, inits=()):
    """One model of ``nodes`` over input ``x`` of ``x_shape`` (symbolic names), compiled with
    no shapes once, against onnxruntime at each of ``shapes``."""
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        nodes, "sizes", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for n in nodes
         for o in n.output], [numpy_helper.from_array(v, k) for k, v in dict(inits).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    compiled = ember.compile(model, threads=1)
    for k, shape in enumerate(shapes):
        x = rand(np.random.default_rng(k), *shape)
        compare(f"{[n.op_type for n in nodes]} {shape}", [np.asarray(g) for g in compiled(x)],
                run_ort(model, {"x": x}), SUMS)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_pools_with_same_pads_over_run_time_sizes(auto_pad):
    """MaxPool (with storage_order=1: it only orders the Indices, not asked for here) and
    AveragePool with and without the pads counted, stride 2, height and width symbolic."""
    from onnx import helper

    window = dict(kernel_shape=[3, 2], strides=[2, 2], auto_pad=auto_pad)
    nodes = [helper.make_node("MaxPool", ["x"], ["max"], storage_order=1, **window),
             helper.make_node("AveragePool", ["x"], ["avg"], **window),
             helper.make_node("AveragePool", ["x"], ["avg_in"], count_include_pad=1, **window)]
    _check_run_time_sizes(nodes, [1, 2, "h", "w"], [(1, 2, 7, 6), (1, 2, 6, 5)], opset=11)


def test_integer_max_pool_pads_with_its_lowest_value():
    """An int8 MaxPool with SAME pads over run-time sizes: the pads hold -128 (were 0, so an
    edge window of negative values gave 0)."""
    from onnx import TensorProto, helper

    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                            auto_pad="SAME_UPPER")
    graph = helper.make_graph([node], "int8_pool",
                              [helper.make_tensor_value_info("x", TensorProto.INT8,
                                                             [1, 2, "h", "w"])],
                              [helper.make_tensor_value_info("y", TensorProto.INT8, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    x = np.random.default_rng(0).integers(-120, -1, (1, 2, 7, 8)).astype(np.int8)
    np.testing.assert_array_equal(ember.compile(model, threads=1)(x), run_ort(model, {"x": x})[0])


def test_conv_transpose_with_same_pads_over_run_time_sizes():
    """tf2onnx's Conv2DTranspose (SAME, stride 2): size x stride out, pads that do not depend
    on the size."""
    from onnx import helper

    w = rand(np.random.default_rng(9), 3, 4, 3, 3, lo=-0.5, hi=0.5)
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], [f"y_{pad}"], kernel_shape=[3, 3],
                              strides=[2, 2], auto_pad=pad)
             for pad in ("SAME_UPPER", "SAME_LOWER")]
    _check_run_time_sizes(nodes, ["n", 3, "h", "w"], [(1, 3, 5, 6), (2, 3, 4, 4)],
                          inits={"w": w})


def test_ceil_mode_pools_over_run_time_sizes_drop_windows_in_the_padding():
    """Paddle2ONNX's ceil_mode pools with pads on a symbolic height and width: a last window
    that would start in the end padding is not computed (size 5: 3 windows, not 4)."""
    from onnx import helper

    window = dict(kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)
    nodes = [helper.make_node("MaxPool", ["x"], ["max"], **window),
             helper.make_node("AveragePool", ["x"], ["avg"], **window)]
    _check_run_time_sizes(nodes, [1, 2, "h", "w"], [(1, 2, 5, 5), (1, 2, 6, 7)])


def test_tf_crop_and_resize_with_a_symbolic_batch():
    x = np.random.default_rng(2).standard_normal((2, 3, 5, 5)).astype("float32")
    model = legacy.tf_resize(opset=11, mode="tf_crop_and_resize", image=5)
    want = run_ort(model, {"input": x})
    compiled = ember.compile(model, threads=1)
    compare("crop_and_resize", [np.asarray(compiled(x))], want, SUMS)
    x3 = np.concatenate([x, x[:1]])
    compare("crop_and_resize batch 3", [np.asarray(compiled(x3))], run_ort(model, {"input": x3}),
            SUMS)


_PROBES = {
    "squeezenet10_opset7": (lambda: legacy.squeezenet10_block(opset=7), "data", (2, 3, 12, 12)),
    "squeezenet10_opset9": (lambda: legacy.squeezenet10_block(opset=9), "data", (2, 3, 12, 12)),
    "squeezenet10_opset10": (lambda: legacy.squeezenet10_block(opset=10), "data",
                             (2, 3, 12, 12)),
    "tf_mobilenet_opset10": (lambda: legacy.tf_mobilenet_block(opset=10), "input", (3, 11, 11, 3)),
    "tf_mobilenet_opset11": (lambda: legacy.tf_mobilenet_block(opset=11), "input", (3, 11, 11, 3)),
    "tf_mobilenet_same_lower": (lambda: legacy.tf_mobilenet_block(
        pads=("SAME_LOWER", "SAME_LOWER")), "input", (2, 11, 11, 3)),
    "tf_resize_opset10": (lambda: legacy.tf_resize(opset=10), "input", (2, 3, 7, 7)),
    "tf_resize_half_pixel_for_nn": (lambda: legacy.tf_resize(opset=11), "input", (2, 3, 7, 7)),
    "paddle_head": (lambda: legacy.paddle_head(), "x", (2, 3, 9, 9)),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(_PROBES))
def test_converter_conventions_match_onnxruntime(name):
    build, input_name, shape = _PROBES[name]
    x = (np.random.default_rng(3).standard_normal(shape) * 2).astype("float32")
    _both(build(), {input_name: x})


def test_squeezenet10_at_opset6():
    """BatchNormalization-6 and Dropout-6 with ``is_test``, ``Gemm``/``Mul`` with
    ``broadcast=1``: onnxruntime no longer runs BatchNormalization-6, so the reference is the
    same network written at opset 7 (same weights; the upsampled output differs)."""
    x = (np.random.default_rng(3).standard_normal((2, 3, 12, 12)) * 2).astype("float32")
    _both(legacy.squeezenet10_block(opset=6), {"data": x},
          reference=legacy.squeezenet10_block(opset=7), outputs=2)


_ONNX_DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
_CONVERTED = sorted(p.name for p in (_ONNX_DATA / "pytorch-converted").glob("test_*")
                    if not re.search(r"(Conv|Pool)3d", p.name))  # 3-D: not imported


def _stored_model_test(kind: str, name: str) -> None:
    """An ONNX package model test (``model.onnx`` and its stored data sets) through the
    backend, against the stored outputs (rtol 1e-3, atol 1e-7 as ONNX's runner)."""
    from onnx import numpy_helper

    from ember.testing.onnx_backend import EmberBackend
    from ember.testing.onnx_node_tests import NodeTest, run_node_test

    where = _ONNX_DATA / kind / name
    sets = []
    for data in sorted(where.glob("test_data_set_*")):
        read = [[numpy_helper.to_array(onnx.load_tensor(str(f)))
                 for f in sorted(data.glob(f"{io}_*.pb"))] for io in ("input", "output")]
        sets.append((read[0], read[1]))
    test = NodeTest(name, onnx.load(str(where / "model.onnx")), tuple(sets), 1e-3, 1e-7)
    outcome = run_node_test(EmberBackend, test)
    assert outcome.status == "pass", f"{kind}/{name}: {outcome.message}"


@pytest.mark.parametrize("name", [n for n in _CONVERTED if n.startswith("test_PReLU")])
def test_prelu_before_version_7_has_one_slope_per_channel(name):
    _stored_model_test("pytorch-converted", name)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in _CONVERTED if not n.startswith("test_PReLU")])
def test_onnx_pytorch_converted_models(name):
    """ONNX's opset-6 models converted from PyTorch modules (every one but the 3-D ones)."""
    _stored_model_test("pytorch-converted", name)

"""Models of old opsets: every node is judged by its operator's own version (``Relu-6`` in an
opset-9 model), never the model by its opset. Models of opsets 7, 9, 10 and 11 built with
``onnx.helper`` match onnxruntime (float32: rtol 1e-5, atol 1e-5; convolutions and GEMMs
rtol/atol 1e-4 for summation order); the old attribute forms onnxruntime still runs are
compared with it, and the versions it no longer runs (before 7) with numpy."""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from _onnx_util import F32, SUMS, compare, run_graph, run_ort
from onnx import helper, numpy_helper

from ember import relay
from ember.relay.frontend.onnx import _table
from ember.runtime.errors import FrontendError, OpNotImplemented

RNG = np.random.default_rng(0)
IR_OF_OPSET = {1: 3, 4: 3, 5: 3, 6: 3, 7: 3, 8: 3, 9: 4, 10: 5, 11: 6}


def _model(opset: int, nodes: list[Any], inputs: dict[str, np.ndarray],
           inits: dict[str, np.ndarray] | None = None, outputs: tuple[str, ...] = ("y",)
           ) -> Any:
    """A model of ``nodes`` at ``opset`` with the IR version of that opset's release
    (initializers are listed as graph inputs too before IR 4, as that IR requires)."""
    inits = inits or {}
    ir = IR_OF_OPSET.get(opset, 7)
    vis = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype),
                                         list(a.shape))
           for n, a in [*inputs.items(), *(inits.items() if ir < 4 else ())]]
    graph = helper.make_graph(nodes, "g", vis, [onnx.ValueInfoProto(name=o) for o in outputs],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir
    return model


def _check(model: Any, inputs: dict[str, np.ndarray], tol: tuple[float, float] = F32) -> None:
    opset = model.opset_import[0].version
    compare(f"opset {opset}", run_graph(model, inputs), run_ort(model, inputs), tol)


def _init(*shape: int) -> np.ndarray:
    return RNG.uniform(-1, 1, shape).astype("float32")


# ---------------------------------------------------------------- whole models vs onnxruntime
def test_opset9_cnn_matches_onnxruntime() -> None:
    """Conv-1, BatchNormalization-9, Relu-6, MaxPool-8, Upsample-9, Add-7, Flatten-9,
    Gemm-9, Softmax-1 (2-D coercion) in an opset-9 model."""
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("BatchNormalization", ["c1", "g", "beta", "mu", "var"], ["bn"]),
        helper.make_node("Relu", ["bn"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Upsample", ["p", "scales"], ["u"], mode="nearest"),
        helper.make_node("Conv", ["u", "w2"], ["c2"], name="conv2"),
        helper.make_node("Add", ["c2", "bias2"], ["a"]),
        helper.make_node("Flatten", ["a"], ["f"]),
        helper.make_node("Gemm", ["f", "wfc", "bfc"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["y"]),
    ]
    inits = {"w1": _init(4, 3, 3, 3), "b1": _init(4), "g": _init(4) + 2, "beta": _init(4),
             "mu": _init(4), "var": np.abs(_init(4)) + 0.5,
             "scales": np.array([1, 1, 2, 2], "float32"), "w2": _init(2, 4, 3, 3),
             "bias2": _init(2, 1, 1), "wfc": _init(5, 2 * 6 * 6), "bfc": _init(5)}
    model = _model(9, nodes, {"x": _init(1, 3, 8, 8)}, inits)
    _check(model, {"x": _init(1, 3, 8, 8)}, SUMS)


def test_opset7_logic_and_comparisons_match_onnxruntime() -> None:
    """And/Or/Xor/Not-1 and -7, Equal/Greater/Less-7 with numpy broadcasting."""
    nodes = [helper.make_node("Greater", ["a", "b"], ["gt"]),
             helper.make_node("Less", ["a", "b"], ["lt"]),
             helper.make_node("Equal", ["i", "j"], ["eq"]),
             helper.make_node("And", ["gt", "eq"], ["and_"]),
             helper.make_node("Or", ["lt", "eq"], ["or_"]),
             helper.make_node("Xor", ["and_", "or_"], ["xor"]),
             helper.make_node("Not", ["xor"], ["y"])]
    inputs = {"a": _init(2, 3, 4), "b": _init(3, 1), "i": RNG.integers(0, 2, (2, 3, 4)),
              "j": RNG.integers(0, 2, (4,))}
    model = _model(7, nodes, inputs, outputs=("and_", "or_", "xor", "y"))
    _check(model, inputs)


def test_opset10_operators_match_onnxruntime() -> None:
    """Resize-10 (nearest and linear, enlarging and shrinking), Slice-10 with steps, TopK-10,
    Dropout-10, Mod-10, ThresholdedRelu-10 and IsInf-10."""
    nodes = [helper.make_node("Resize", ["x", "up"], ["near"], mode="nearest"),
             helper.make_node("Resize", ["x", "down"], ["lin"], mode="linear"),
             helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["sl"]),
             helper.make_node("TopK", ["x", "k"], ["tv", "ti"], axis=-1),
             helper.make_node("Dropout", ["x"], ["dr"], ratio=0.3),
             helper.make_node("Mod", ["x", "m"], ["md"], fmod=1),
             helper.make_node("ThresholdedRelu", ["x"], ["th"], alpha=0.2),
             helper.make_node("IsInf", ["x"], ["inf"])]
    inits = {"up": np.array([1, 1, 1.5, 2], "float32"),
             "down": np.array([1, 1, 0.6, 0.5], "float32"),
             "st": np.array([0, 5], "int64"), "en": np.array([2, 0], "int64"),
             "ax": np.array([2, 3], "int64"), "sp": np.array([1, -2], "int64"),
             "k": np.array([3], "int64"), "m": np.array(0.7, "float32")}
    x = _init(1, 2, 4, 6)
    outputs = ("near", "lin", "sl", "tv", "ti", "dr", "md", "th", "inf")
    _check(_model(10, nodes, {"x": x}, inits, outputs), {"x": x})


def test_opset11_operators_match_onnxruntime() -> None:
    """Clip-11 and Pad-11 (inputs), Resize-11 (half_pixel), Concat-11, Gather-11 with
    negative indices, ReduceMean-11, Range-11."""
    nodes = [helper.make_node("Clip", ["x", "lo", "hi"], ["cl"]),
             helper.make_node("Pad", ["x", "pads", "val"], ["pd"], mode="constant"),
             helper.make_node("Resize", ["x", "roi", "scales"], ["rs"], mode="linear"),
             helper.make_node("Concat", ["x", "x"], ["cc"], axis=-1),
             helper.make_node("Gather", ["x", "idx"], ["ga"], axis=3),
             helper.make_node("ReduceMean", ["x"], ["rm"], axes=[-1], keepdims=0),
             helper.make_node("Range", ["r0", "r1", "r2"], ["rg"])]
    inits = {"lo": np.array(-0.3, "float32"), "hi": np.array(0.4, "float32"),
             "pads": np.array([0, 0, 1, 0, 0, 0, 0, 2], "int64"), "val": np.array(9, "float32"),
             "roi": np.zeros(0, "float32"), "scales": np.array([1, 1, 2, 1.5], "float32"),
             "idx": np.array([-1, 0], "int64"), "r0": np.array(1, "int64"),
             "r1": np.array(9, "int64"), "r2": np.array(3, "int64")}
    x = _init(1, 2, 4, 6)
    outputs = ("cl", "pd", "rs", "cc", "ga", "rm", "rg")
    _check(_model(11, nodes, {"x": x}, inits, outputs), {"x": x})


# ---------------------------------------------------------------- attributes that became inputs
OLD_FORMS = [
    ("Reshape-1", 4, helper.make_node("Reshape", ["x"], ["y"], shape=[6, -1])),
    ("Slice-1", 9, helper.make_node("Slice", ["x"], ["y"], starts=[0, 1], ends=[1, 3],
                                    axes=[0, 2])),
    ("Clip-6", 9, helper.make_node("Clip", ["x"], ["y"], min=-0.2, max=0.6)),
    ("Pad-2", 9, helper.make_node("Pad", ["x"], ["y"], pads=[0, 0, 1, 1, 0, 0, 1, 2],
                                  value=1.5)),
    ("Pad-2 reflect", 9, helper.make_node("Pad", ["x"], ["y"], pads=[0, 0, 1, 2, 0, 0, 2, 1],
                                          mode="reflect")),
    ("Upsample-7", 8, helper.make_node("Upsample", ["x"], ["y"], scales=[1.0, 1.0, 2.0, 3.0])),
    ("Upsample-7 linear", 8, helper.make_node("Upsample", ["x"], ["y"], mode="linear",
                                              scales=[1.0, 1.0, 1.5, 2.0])),
]


@pytest.mark.parametrize("label, opset, node", OLD_FORMS, ids=[c[0] for c in OLD_FORMS])
def test_old_attribute_forms_match_onnxruntime(label: str, opset: int, node: Any) -> None:
    x = _init(2, 3, 4, 5)
    _check(_model(opset, [node], {"x": x}), {"x": x})


def test_topk1_split2_and_batchnorm7_match_onnxruntime() -> None:
    nodes = [helper.make_node("TopK", ["x"], ["v", "i"], k=2),
             helper.make_node("Split", ["x"], ["s0", "s1"], axis=1, split=[1, 2]),
             helper.make_node("BatchNormalization", ["x", "g", "b", "m", "v2"], ["bn"],
                              epsilon=1e-3)]
    inits = {"g": _init(3), "b": _init(3), "m": _init(3), "v2": np.abs(_init(3)) + 0.5}
    x = _init(2, 3, 4, 5)
    _check(_model(8, nodes, {"x": x}, inits, ("v", "i", "s0", "s1", "bn")), {"x": x})


# ---------------------------------------------------------------- before version 7, vs numpy
def test_legacy_broadcast_with_axis() -> None:
    """Add-6/Mul-1/Pow-1 with broadcast=1, axis=1: B's axes sit at A's axis 1."""
    a, b = _init(2, 3, 4, 5), _init(3, 4)
    nodes = [helper.make_node("Add", ["a", "b"], ["add"], broadcast=1, axis=1),
             helper.make_node("Mul", ["a", "b"], ["mul"], broadcast=1, axis=-3),
             helper.make_node("Sub", ["a", "c"], ["sub"], broadcast=1),
             helper.make_node("Pow", ["pa", "b"], ["pow"], broadcast=1, axis=1)]
    c = _init(5)
    pa = np.abs(a) + 0.5
    got = run_graph(_model(6, nodes, {"a": a, "b": b, "c": c, "pa": pa},
                      outputs=("add", "mul", "sub", "pow")), {"a": a, "b": b, "c": c, "pa": pa})
    bb = b[None, :, :, None]
    for g, w in zip(got, (a + bb, a * bb, a - c, pa ** bb)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    bad = helper.make_node("Add", ["a", "b"], ["y"], broadcast=1, axis=3, name="off")
    with pytest.raises(FrontendError, match="Add node 'off': axis 3 does not place B"):
        relay.frontend.from_onnx(_model(6, [bad], {"a": a, "b": b}))


def test_version_1_forms_onnxruntime_no_longer_runs() -> None:
    """Concat-1 (axis 1 by default), Cast-1 (the type by name), Split-1 (sizes as an input),
    Pad-1 (paddings), Relu-1 (consumed_inputs, ignored)."""
    x = _init(2, 3, 4)
    nodes = [helper.make_node("Concat", ["x", "x"], ["cat"]),
             helper.make_node("Cast", ["x"], ["cast"], to="INT32"),
             helper.make_node("Split", ["x", "sizes"], ["s0", "s1"], axis=2),
             helper.make_node("Pad", ["x"], ["pad"], paddings=[0, 1, 0, 0, 0, 2], value=0.5),
             helper.make_node("Relu", ["x"], ["relu"], consumed_inputs=[0])]
    inits = {"sizes": np.array([1, 3], "int64")}
    got = run_graph(_model(1, nodes, {"x": x}, inits, ("cat", "cast", "s0", "s1", "pad", "relu")),
               {"x": x})
    want = [np.concatenate([x, x], 1), x.astype("int32"), x[:, :, :1], x[:, :, 1:],
            np.pad(x, [(0, 0), (1, 0), (0, 2)], constant_values=0.5), np.maximum(x, 0)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)


# ---------------------------------------------------------------- versions ember refuses
def test_refused_versions_are_listed_with_node_version_and_reason() -> None:
    x = _init(2, 3)
    nodes = [helper.make_node("Tile", ["x", "t", "a"], ["t1"], name="tile_old"),
             helper.make_node("NonZero", ["x"], ["nz"], name="nz"),
             helper.make_node("Relu", ["x"], ["y"], name="fine")]
    inits = {"t": np.array(2, "int64"), "a": np.array(1, "int64")}
    with pytest.raises(OpNotImplemented) as info:
        relay.frontend.from_onnx(_model(5, nodes, {"x": x}, inits))
    msg = str(info.value)
    assert "2 node(s) use operators that ember cannot import (model opset 5;" in msg
    assert "Tile-1 (ember imports Tile from version 6: Tile-1 takes a tile count and an axis " \
        "as inputs): node 'tile_old'" in msg
    assert "NonZero (not defined at opset 5 (ONNX defines it from opset 9)): node 'nz'" in msg
    assert "Relu" not in msg


def test_bad_attribute_values_of_old_versions_are_named() -> None:
    x = _init(2, 3, 4, 4)
    node = helper.make_node("BatchNormalization", ["x", "g", "b", "m", "v"], ["y"], spatial=0,
                            name="bn_old")
    inits = {k: _init(3) for k in "gbm"} | {"v": np.ones(3, "float32")}
    with pytest.raises(FrontendError, match=r"BatchNormalization node 'bn_old': spatial=0: "
                                            r"scale has shape \(3,\), not the shape of a sample"):
        relay.frontend.from_onnx(_model(8, [node], {"x": x}, inits))
    node = helper.make_node("Upsample", ["x"], ["y"], scales=[1.0, 1.0, 0.5, 0.5], name="up")
    with pytest.raises(FrontendError, match=r"Upsample node 'up': scales .* must be >= 1"):
        relay.frontend.from_onnx(_model(8, [node], {"x": x}))


def test_versions_newer_than_the_reviewed_opset_import_only_when_unchanged(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With the table reviewed only up to opset 13, Relu-14 (new element types only) still
    imports and Reshape-14 (a new attribute, allowzero) is refused."""
    monkeypatch.setattr(_table, "REVIEWED_OPSET", 13)
    x = _init(2, 3)
    relu = _model(14, [helper.make_node("Relu", ["x"], ["y"])], {"x": x})
    assert "nn.relu" in relay.analysis.list_op_freqs(relay.frontend.from_onnx(relu)[0])
    reshape = _model(14, [helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")], {"x": x},
                     {"s": np.array([3, 2], "int64")})
    with pytest.raises(OpNotImplemented, match=r"Reshape-14 \(version 14 changed the "
                                               r"operator's inputs or attributes, and ember's "
                                               r"table was checked against opsets up to 13\): "
                                               "node 'rs'"):
        relay.frontend.from_onnx(reshape)

"""Operators added for ONNX's node tests (issue 19, item 6) against onnxruntime, and the
errors their converters give for models that are wrong."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import check, graph_model, node_case, rand, run_graph
from onnx import TensorProto as TP
from onnx import helper

from ember.runtime.errors import FrontendError

RNG = np.random.default_rng(19)


def test_bitwise_operators_on_every_integer_type():
    cases = []
    for dtype in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"):
        a = rand(RNG, 3, 4, dtype=dtype, lo=0, hi=120)
        b = rand(RNG, 4, dtype=dtype, lo=0, hi=120)  # broadcast
        for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor"):
            cases.append(node_case(f"{op}_{dtype}", op, {"a": a, "b": b}))
        cases.append(node_case(f"not_{dtype}", "BitwiseNot", {"a": a}))
    check(cases, opset=18)


def test_scatter_nd_and_scatter():
    data = rand(RNG, 4, 3, 2)
    idx = np.array([[[0, 1], [3, 2]], [[-1, 0], [1, 1]]], "int64")  # (2, 2, 2): tuples of 2
    upd = rand(RNG, 2, 2, 2)
    idx1 = np.array([[2], [0], [-1]], "int64")  # whole rows
    cases = [node_case("nd_pairs", "ScatterND", {"data": data, "i": idx, "u": upd}),
             node_case("nd_rows", "ScatterND", {"data": data, "i": idx1,
                                                "u": rand(RNG, 3, 3, 2)})]
    for reduction in ("add", "mul", "max", "min"):
        cases.append(node_case(f"nd_{reduction}", "ScatterND",
                               {"data": data, "i": np.array([[1], [1], [2]], "int64"),
                                "u": rand(RNG, 3, 3, 2)}, reduction=reduction))
    check(cases, opset=18)
    elems = np.array([[1, 0, 2], [0, 2, 1]], "int64")
    check([node_case("scatter9", "Scatter", {"data": rand(RNG, 3, 3), "i": elems,
                                             "u": rand(RNG, 2, 3)}, axis=1)], opset=9)


def test_scatter_nd_refuses_scalar_indices():
    model = graph_model([helper.make_node("ScatterND", ["x", "i", "x"], ["y"], name="s")],
                        inputs=[helper.make_tensor_value_info("x", TP.FLOAT, [2]),
                                helper.make_tensor_value_info("i", TP.INT64, [])], opset=18)
    with pytest.raises(FrontendError, match="ScatterND node 's': indices must have rank >= 1"):
        run_graph(model, {})

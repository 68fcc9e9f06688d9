"""Elementwise ONNX operators against onnxruntime: math, comparison and logic, activations,
Clip (attribute-free opset-11+ forms, constant and tensor bounds), Cast, Where, variadic ops.

Each test builds one model for all its cases (see ``_onnx_util``); tolerances are float32
rtol/atol 1e-5 unless a case says otherwise.
"""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import OnnxCase, check, node_case, rand
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper
from strategies import broadcastable_pair

UNARY = {  # op -> input range
    "Abs": (-3, 3), "Neg": (-3, 3), "Floor": (-3, 3), "Ceil": (-3, 3), "Sqrt": (0.1, 5),
    "Exp": (-3, 3), "Log": (0.1, 5), "Erf": (-3, 3), "Tanh": (-3, 3), "Sigmoid": (-5, 5),
    "Relu": (-3, 3), "Reciprocal": (0.5, 4), "Sign": (-3, 3), "Sin": (-3, 3), "Cos": (-3, 3),
    "Tan": (-1.2, 1.2), "Softplus": (-30, 30), "Softsign": (-3, 3), "HardSwish": (-5, 5),
    "Identity": (-3, 3),
}
ACTIVATIONS = {  # op -> attributes (beyond the defaults)
    "LeakyRelu": {"alpha": 0.3}, "Elu": {"alpha": 0.7}, "Selu": {}, "HardSigmoid":
        {"alpha": 0.3, "beta": 0.4}, "Celu": {"alpha": 1.5}, "ThresholdedRelu": {"alpha": 0.5},
    "Shrink": {"lambd": 0.7, "bias": 0.2}, "Mish": {},
}
BINARY = ["Add", "Sub", "Mul", "Div", "Equal", "Less", "Greater", "LessOrEqual",
          "GreaterOrEqual", "Max", "Min", "Sum", "Mean"]


def test_unary_ops():
    rng = np.random.default_rng(0)
    cases = [node_case(op.lower(), op, {"x": rand(rng, 3, 5, lo=lo, hi=hi)})
             for op, (lo, hi) in UNARY.items()]
    check(cases, opset=18)


def test_activations_with_attributes():
    rng = np.random.default_rng(1)
    cases = [node_case(op.lower(), op, {"x": rand(rng, 2, 7)}, **attrs)
             for op, attrs in ACTIVATIONS.items()]
    cases += [node_case("lrelu_default", "LeakyRelu", {"x": rand(rng, 4)}),
              node_case("hsig_default", "HardSigmoid", {"x": rand(rng, 4, 2)})]
    check(cases, opset=18)


def test_gelu_exact_and_tanh():
    rng = np.random.default_rng(2)
    cases = [node_case("gelu", "Gelu", {"x": rand(rng, 3, 6)}),
             node_case("gelu_tanh", "Gelu", {"x": rand(rng, 3, 6)}, approximate="tanh")]
    check(cases, opset=20)


def test_prelu_slopes_broadcast():
    rng = np.random.default_rng(3)
    x = rand(rng, 2, 3, 4, 5)
    cases = [node_case("per_channel", "PRelu", {"x": x}, inits={"s": rand(rng, 3, 1, 1)}),
             node_case("scalar", "PRelu", {"x": x}, inits={"s": rand(rng, 1)}),
             node_case("last_axis", "PRelu", {"x": x}, inits={"s": rand(rng, 5)}),
             node_case("tensor_slope", "PRelu", {"x": x, "s": rand(rng, 4, 5)})]
    check(cases, opset=16)


def test_binary_broadcasting_and_variadic():
    rng = np.random.default_rng(4)
    cases = []
    for op in BINARY:
        a, b = rand(rng, 2, 3, 4), rand(rng, 3, 1, lo=0.5)
        cases.append(node_case(op.lower(), op, {"a": a, "b": b}))
    for op in ("Max", "Min", "Sum", "Mean"):
        cases.append(node_case(f"{op.lower()}3", op, {"a": rand(rng, 4, 1), "b": rand(rng, 5),
                                                      "c": rand(rng, 1, 5)}))
        cases.append(node_case(f"{op.lower()}1", op, {"a": rand(rng, 3)}))
    check(cases, opset=13)


def test_integer_and_logic_ops():
    rng = np.random.default_rng(5)
    a, b = rand(rng, 3, 4, dtype="int32", lo=-9, hi=9), rand(rng, 4, dtype="int32", lo=1, hi=5)
    p, q = rand(rng, 3, 4, dtype="bool"), rand(rng, 4, dtype="bool")
    cases = [node_case("idiv", "Div", {"a": a, "b": b}),
             node_case("iadd", "Add", {"a": a, "b": b}),
             node_case("imod", "Mod", {"a": a, "b": b}),
             node_case("fmod", "Mod", {"a": rand(rng, 3, 4), "b": rand(rng, 4, lo=0.5)}, fmod=1),
             node_case("ifmod", "Mod", {"a": a, "b": b}, fmod=1),
             node_case("and", "And", {"p": p, "q": q}),
             node_case("or", "Or", {"p": p, "q": q}),
             node_case("xor", "Xor", {"p": p, "q": q}),
             node_case("not", "Not", {"p": p}),
             node_case("ieq", "Equal", {"a": a, "b": b}),
             node_case("iabs", "Abs", {"a": a}),
             node_case("ineg", "Neg", {"a": a}),
             node_case("isign", "Sign", {"a": a}),
             node_case("imax", "Max", {"a": a, "b": b}),
             node_case("irelu", "Relu", {"a": a})]
    check(cases, opset=14)


def test_pow_round_isinf_isnan():
    rng = np.random.default_rng(6)
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -3.2, 7.5], "float32")
    special = np.array([1.0, np.inf, -np.inf, np.nan, -2.0], "float32")
    cases = [node_case("pow", "Pow", {"a": rand(rng, 3, 4, lo=0.5), "b": rand(rng, 4)}),
             node_case("pow_int_exp", "Pow", {"a": rand(rng, 3, 4)},
                       inits={"e": np.array(3, "int64")}),
             node_case("round", "Round", {"x": x}),
             node_case("isinf", "IsInf", {"x": special}),
             node_case("isinf_pos", "IsInf", {"x": special}, detect_negative=0),
             node_case("isinf_neg", "IsInf", {"x": special}, detect_positive=0),
             node_case("isnan", "IsNaN", {"x": special})]
    check(cases, opset=13)


def test_clip_forms():
    rng = np.random.default_rng(7)
    x = rand(rng, 3, 5)
    f = np.float32
    cases = [node_case("both", "Clip", {"x": x}, inits={"lo": f(-1), "hi": f(1.5)}),
             node_case("min_only", "Clip", {"x": x}, inits={"lo": f(-0.5)}),
             node_case("max_only", "Clip", {"x": x}, inits={"hi": f(0.5)}, order=["x", "", "hi"]),
             node_case("none", "Clip", {"x": x}),
             node_case("tensor_bounds", "Clip", {"x": x, "lo": np.array(-1, "float32"),
                                                 "hi": np.array(2, "float32")}),
             node_case("min_above_max", "Clip", {"x": x}, inits={"lo": f(1), "hi": f(-1)})]
    check(cases, opset=11)
    check([node_case("clip13", "Clip", {"x": x}, inits={"lo": f(0), "hi": f(1)}),
           node_case("int", "Clip", {"x": rand(rng, 6, dtype="int32", lo=-9, hi=9)},
                     inits={"lo": np.array(-2, "int32"), "hi": np.array(3, "int32")})], opset=13)


def test_cast_castlike_where():
    rng = np.random.default_rng(8)
    x = rand(rng, 3, 4, lo=-5, hi=5)
    cases = [node_case(f"cast_{to}", "Cast", {"x": x}, to=code)
             for to, code in (("int32", 6), ("int64", 7), ("uint8", 2), ("bool", 9),
                              ("float64", 11), ("int8", 3))]
    cases += [node_case("cast_from_int", "Cast", {"x": rand(rng, 5, dtype="int64")}, to=1),
              node_case("castlike", "CastLike", {"x": x, "like": np.zeros(1, "int32")}),
              node_case("where", "Where", {"c": rand(rng, 3, 1, dtype="bool"), "a": x,
                                           "b": rand(rng, 4)})]
    check(cases, opset=15)


@settings(max_examples=4, deadline=None, derandomize=True)
@given(pair=broadcastable_pair(max_rank=3), op=st.sampled_from(["Add", "Mul", "Sub", "Div",
                                                                 "Greater", "Max"]),
       seed=st.integers(0, 2**16))
def test_binary_broadcasting_law(pair, op, seed):
    """Any numpy-broadcastable pair of shapes gives onnxruntime's result."""
    rng = np.random.default_rng(seed)
    a, b = rand(rng, *pair[0], lo=0.5), rand(rng, *pair[1], lo=0.5)
    check([node_case("bin", op, {"a": a, "b": b})], opset=13)


def test_elementwise_chain_in_one_graph():
    """Several nodes in one case: the names inside a case chain them."""
    rng = np.random.default_rng(9)
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"]),
             helper.make_node("Add", ["sq", "one"], ["p1"]),
             helper.make_node("Sqrt", ["p1"], ["r"]),
             helper.make_node("Div", ["x", "r"], ["y"])]
    case = OnnxCase("chain", nodes, {"x": rand(rng, 4, 4)}, ["y"],
                    {"one": np.array(1, "float32")})
    check([case], opset=13)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(pair=broadcastable_pair(max_rank=4), op=st.sampled_from(BINARY), seed=st.integers(0, 99))
def test_binary_broadcasting_law_wide(pair, op, seed):
    rng = np.random.default_rng(seed)
    a, b = rand(rng, *pair[0], lo=0.5), rand(rng, *pair[1], lo=0.5)
    check([node_case("bin", op, {"a": a, "b": b})], opset=13)

"""SimplifyExpr: each named rewrite as a before/expected pair, the cases each must leave
alone, and the law that simplification keeps results."""
from __future__ import annotations

import numpy as np
import pytest
from _pass_helpers import assert_main_equal, assert_same_result, dataflow_programs, law, run
from hypothesis import given, settings
from hypothesis import strategies as st

from ember import relay
from ember.ir import IRModule
from ember.relay.transform import InferType, SimplifyExpr
from ember.relay.transform.simplify_expr import RULES

X = "%x: Tensor[(2, 3, 4), float32]"
XQ = "%x: Tensor[(?, 3, 4), float32]"

CASES = {
    "reshape_of_reshape": (
        f"def @main({X}) {{ squeeze(reshape(expand_dims(%x, axis=0), newshape=[1, 6, 4])) }}",
        f"def @main({X}) {{ reshape(%x, newshape=[6, 4]) }}"),
    "noop_reshape": (
        f"def @main({X}) {{ exp(reshape(%x, newshape=[2, 3, 4])) }}",
        f"def @main({X}) {{ exp(%x) }}"),
    "transpose_of_transpose": (
        f"def @main({X}) {{ transpose(transpose(%x, axes=[1, 2, 0]), axes=[1, 0, 2]) }}",
        f"def @main({X}) {{ transpose(%x, axes=[2, 1, 0]) }}"),
    "inverse_transposes": (
        f"def @main({X}) {{ transpose(transpose(%x, axes=[1, 2, 0]), axes=[2, 0, 1]) }}",
        f"def @main({X}) {{ %x }}"),
    "noop_transpose": (
        f"def @main({X}) {{ transpose(%x, axes=[0, 1, -1]) }}",
        f"def @main({X}) {{ %x }}"),
    "cast_to_same_dtype": (
        f"def @main({X}) {{ cast(%x, dtype=\"float32\") }}",
        f"def @main({X}) {{ %x }}"),
    "cast_of_widening_cast": (
        "def @main(%i: Tensor[(3), int8]) { cast(cast(%i, dtype=\"int32\"), dtype=\"float32\") }",
        "def @main(%i: Tensor[(3), int8]) { cast(%i, dtype=\"float32\") }"),
    "identity_arith": (
        f"def @main({X}) {{ divide(subtract(add(0f, multiply(1f, %x)), 0f), 1f) }}",
        f"def @main({X}) {{ %x }}"),
    "identity_with_zeros_call": (
        f"def @main({X}) {{ add(%x, zeros_like(%x)) }}",
        f"def @main({X}) {{ %x }}"),
    # a ? batch: -1 stands for it (the element count fixes it)
    "reshape_of_reshape_symbolic": (
        f"def @main({XQ}) {{ reshape(reshape(%x, newshape=[-1, 12]), newshape=[-1, 2, 6]) }}",
        f"def @main({XQ}) {{ reshape(%x, newshape=[-1, 2, 6]) }}"),
    "noop_reshape_symbolic": (
        f"def @main({XQ}) {{ exp(reshape(%x, newshape=[-1, 3, 4])) }}",
        f"def @main({XQ}) {{ exp(%x) }}"),
    # one attention head: moving the unit axis moves no element
    "transpose_of_unit_axes": (
        "def @main(%x: Tensor[(?, 5, 1, 4), float32]) { transpose(%x, axes=[0, 2, 1, 3]) }",
        "def @main(%x: Tensor[(?, 5, 1, 4), float32]) { reshape(%x, newshape=[-1, 1, 5, 4]) }"),
    "consecutive_add": (
        f"def @main({X}) {{ add(add(%x, 1f), 2f) }}",
        f"def @main({X}) {{ add(%x, 3f) }}"),
    # torch.stft's magnitude as exported: transpose, square, sum over (re, im), sqrt, back
    "reduce_of_transpose_and_back": (
        "def @main(%s: Tensor[(1, 5, 7, 2), float32]) { transpose(sqrt(sum(power("
        "transpose(%s, axes=[0, 2, 1, 3]), 2f), axis=[-1])), axes=[0, 2, 1]) }",
        "def @main(%s: Tensor[(1, 5, 7, 2), float32]) { sqrt(sum(power(%s, 2f), axis=[3])) }"),
    "reduce_of_transpose_keepdims": (
        f"def @main({X}) {{ mean(abs(transpose(%x, axes=[2, 0, 1])), axis=[1], keepdims=True) }}",
        f"def @main({X}) {{ transpose(mean(abs(%x), axis=[0], keepdims=True), axes=[2, 0, 1]) }}"),
    "reduce_of_transpose_kept_axes_reordered": (
        f"def @main({X}) {{ max(multiply(transpose(%x, axes=[2, 1, 0]), 3f), axis=[1]) }}",
        f"def @main({X}) {{ transpose(max(multiply(%x, 3f), axis=[1]), axes=[1, 0]) }}"),
    "transpose_of_elementwise_of_transpose": (
        f"def @main({X}) {{ transpose(nn.relu(transpose(%x, axes=[1, 2, 0])), axes=[2, 0, 1]) }}",
        f"def @main({X}) {{ nn.relu(%x) }}"),
}


def test_shape_of_transpose_is_a_take_of_the_shape():
    # A transpose read only for its sizes is not computed; the sizes are right at odd
    # sizes and 1.
    x = relay.var("x", shape=(relay.Any(), relay.Any(), 2, 4))
    mod = IRModule.from_expr(relay.Function([x], relay.shape_of(
        relay.transpose(x, axes=[0, 2, 3, 1]), dtype="int32")))
    out = SimplifyExpr()(InferType()(mod))
    text = str(out["main"])
    assert "transpose" not in text and "take" in text, text
    for shape in ((1, 1, 2, 4), (3, 5, 2, 4)):
        assert_same_result(mod, out, np.zeros(shape, "float32"))


@pytest.mark.parametrize("strides,padding,kernel", [
    ((1, 1), (1, 1, 1, 1), 3), ((2, 2), (1, 1, 1, 1), 3), ((1, 2), (0, 1, 2, 0), 3),
    ((1, 1), (0, 0, 0, 0), 1), ((3, 1), (2, 0, 1, 1), 5)])
def test_shape_of_conv_is_arithmetic_on_the_input_shape(strides, padding, kernel):
    # A conv read for its sizes (an FPN's Resize to its shape) is then read only by its
    # real readers; the sizes are right at odd sizes and 1, also through a relu.
    x = relay.var("x", shape=(relay.Any(), 3, relay.Any(), relay.Any()))
    w = relay.const(np.ones((5, 3, kernel, kernel), "float32"))
    conv = relay.nn.relu(relay.nn.conv2d(x, w, strides=strides, padding=padding))
    mod = IRModule.from_expr(relay.Function([x], relay.shape_of(conv)))
    out = SimplifyExpr()(InferType()(mod))
    text = str(out["main"])
    assert "conv2d" not in text and "relu" not in text, text
    for shape in ((1, 3, 5, 5), (2, 3, 6, 9), (1, 3, 7, 5)):
        assert_same_result(mod, out, np.zeros(shape, "float32"))


@pytest.mark.parametrize("case", sorted(CASES))
def test_rewrite(case):
    before, expected = CASES[case]
    assert_main_equal(run(SimplifyExpr(), before), expected)


LEFT_ALONE = [
    # narrowing casts lose information
    "def @main(%x: Tensor[(3), float32]) { cast(cast(%x, dtype=\"int8\"), dtype=\"float32\") }",
    # x + 0 that broadcasts x to a bigger shape
    "def @main(%x: Tensor[(4), float32]) { add(%x, zeros(shape=[2, 4], dtype=\"float32\")) }",
    # subtracting from zero is a negation, not an identity
    "def @main(%x: Tensor[(4), float32]) { subtract(0f, %x) }",
    # a reshape that changes the shape
    "def @main(%x: Tensor[(4), float32]) { reshape(%x, newshape=[2, 2]) }",
    # two ? dimensions: the element count does not fix them
    "def @main(%x: Tensor[(?, ?, 4), float32]) { reshape(reshape(%x, newshape=[0, 0, 2, 2]), "
    "newshape=[0, 0, 4]) }",
    # a ? that moves to another place is not a no-op
    "def @main(%x: Tensor[(?, 4), float32]) { reshape(%x, newshape=[4, -1]) }",
    # a transpose that swaps two axes of more than one element
    "def @main(%x: Tensor[(?, 5, 2, 4), float32]) { transpose(%x, axes=[0, 2, 1, 3]) }",
    # a reduction of the transpose itself (a decomposed norm's mean(t) beside t - mean(t))
    "def @main(%x: Tensor[(2, 3, 4), float32]) { mean(transpose(%x, axes=[0, 2, 1]), axis=[-1]) }",
    # a reduction over the axes it does not name
    "def @main(%x: Tensor[(2, 3, 4), float32]) { sum(exp(transpose(%x, axes=[2, 0, 1])), "
    "axis=[0], exclude=True) }",
    # an elementwise op of a transpose and a tensor (not a scalar) stays where it is
    "def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(3, 2), float32]) { "
    "sum(add(transpose(%x, axes=[1, 0]), %y), axis=[0]) }",
]


@pytest.mark.parametrize("before", LEFT_ALONE)
def test_left_alone(before):
    assert_main_equal(run(SimplifyExpr(), before), before)


def test_every_rule_is_a_named_function():
    names = {fn.__name__ for _, fn in RULES}
    assert names == {"reshape_of_reshape", "noop_reshape", "transpose_of_transpose",
                     "noop_transpose", "transpose_of_unit_axes", "cast_to_same_dtype", "cast_of_widening_cast",
                     "identity_arith", "consecutive_add", "shape_of_transpose",
                     "shape_of_conv", "slice_of_slice", "reduce_of_transpose",
                     "transpose_of_elementwise_of_transpose"}


@settings(max_examples=30, deadline=None)
@given(dataflow_programs())
def test_law_preserves_result(program):
    mod, args = program
    law(SimplifyExpr, mod, args)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.sampled_from(["t01", "t10", "r", "f", "one", "zero"]), min_size=1,
                max_size=6), st.integers(0, 100))
def test_law_reshape_transpose_chains(steps, seed):
    x = relay.var("x", shape=(2, 3))
    y = x
    for s in steps:
        if s in ("t01", "t10"):
            y = relay.transpose(y, (1, 0) if s == "t10" else (0, 1))
        elif s == "r":
            y = relay.reshape(y, (-1,))
            y = relay.reshape(y, (2, 3) if len(steps) % 2 else (3, 2))
        elif s == "f":
            y = relay.nn.batch_flatten(relay.expand_dims(y, 0))
        else:
            y = relay.add(y, relay.const(0.0)) if s == "zero" else relay.multiply(y, relay.const(1.0))
    mod = InferType()(IRModule.from_expr(relay.Function([x], y)))
    out = run(SimplifyExpr(), mod)
    xv = np.random.default_rng(seed).normal(size=(2, 3)).astype("float32")
    assert_same_result(mod, out, xv)


def _slice(data, begin, end, axes):
    vec = lambda v: relay.const(np.array(v, "int64"))  # noqa: E731
    return relay.dyn.strided_slice(data, begin, end, vec([1] * len(axes)), axes=axes)


@pytest.mark.parametrize("rows", [(0, 1), (2, 5), (-3, 7)])
def test_slice_of_slice_on_other_axes_is_one_slice(rows):
    # GPT-2's causal mask: bias[:, :, k - q:k, :k] with run-time bounds, one slice.
    bias = relay.const(np.arange(2 * 8 * 8, dtype="float32").reshape(1, 2, 8, 8))
    lo, hi = relay.var("lo", shape=(1,), dtype="int64"), relay.var("hi", shape=(1,),
                                                                       dtype="int64")
    zero = relay.const(np.array([0], "int64"))
    y = _slice(_slice(bias, lo, hi, [2]), zero, hi, [-1])
    mod = IRModule.from_expr(relay.Function([lo, hi], y))
    out = SimplifyExpr()(InferType()(mod))
    text = str(out["main"])
    assert text.count("dyn.strided_slice") == 1 and "axes=[2, 3]" in text, text
    args = np.array([rows[0]], "int64"), np.array([rows[1]], "int64")
    assert_same_result(mod, out, *args)


def test_slice_of_slice_on_the_same_axis_is_left_alone():
    x = relay.var("x", shape=(8, 8))
    lo = relay.var("lo", shape=(1,), dtype="int64")
    mod = InferType()(IRModule.from_expr(relay.Function([x, lo], _slice(
        _slice(x, lo, relay.const(np.array([7], "int64")), [1]), lo,
        relay.const(np.array([4], "int64")), [1]))))
    assert str(SimplifyExpr()(mod)["main"]).count("dyn.strided_slice") == 2


@settings(max_examples=25, deadline=None)
@given(st.permutations([0, 1, 2]), st.sampled_from(["sum", "mean", "max", "min"]),
       st.lists(st.integers(0, 2), min_size=0, max_size=3, unique=True), st.booleans(),
       st.sampled_from([None, "square", "relu"]), st.booleans(), st.integers(0, 100))
def test_law_reductions_of_transposes(perm, reduce, axes, keepdims, lift, back, seed):
    """A reduction of a transpose (through an elementwise op or not), then maybe a transpose
    of the result: simplified or not, the same values (axes [] reduce every axis)."""
    x = relay.var("x", shape=(2, 3, 4))
    t = relay.transpose(x, perm)
    if lift == "square":
        t = relay.power(t, relay.const(2.0))
    elif lift == "relu":
        t = relay.nn.relu(t)
    y = getattr(relay, reduce)(t, axis=axes or None, keepdims=keepdims)
    rank = 3 if keepdims else 3 - len(axes or [0, 1, 2])
    if back and rank > 1:
        y = relay.transpose(relay.exp(y), list(range(rank))[::-1])
    mod = InferType()(IRModule.from_expr(relay.Function([x], y)))
    out = run(SimplifyExpr(), mod)
    xv = np.random.default_rng(seed).normal(size=(2, 3, 4)).astype("float32")
    assert_same_result(mod, out, xv)

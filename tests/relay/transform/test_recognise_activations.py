"""RecogniseActivations: exporters' spelled-out activations and softmax become ops.

Each rewrite is checked as before/expected text (every operand order and association an
exporter writes), with the cases it must leave alone (an inner node read elsewhere, a wrong
constant, an integer tensor, a constant that broadcasts the input to a higher rank), and with
numbers: the interpreter on the rewritten module equals it on the original, and the compiled
pipeline (which fuses the activations into conv and GEMM epilogues) equals the build with the
pass disabled.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import relay
from ember.relay.transform import RecogniseActivations
from ember.testing import find_c_compiler

from _pass_helpers import assert_main_equal, assert_same_result, parse, run

needs_cc = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")
X = "%x: Tensor[(2, 8), float32]"


def _fn(body: str, params: str = X) -> str:
    return f"def @main({params}) {{ {body} }}"


def check(before: str, expected: str, params: str = X) -> ember.IRModule:
    """The pass turns ``before`` into ``expected`` and keeps its values."""
    mod = parse(_fn(before, params))
    out = run(RecogniseActivations(), mod)
    assert_main_equal(out, _fn(expected, params))
    x = np.random.default_rng(0).uniform(-6, 6, (2, 8)).astype("float32")
    if params == X:
        assert_same_result(mod, out, x, rtol=1e-5, atol=1e-5)
    return out


def unchanged(before: str, params: str = X) -> None:
    mod = parse(_fn(before, params))
    assert_main_equal(run(RecogniseActivations(), mod), _fn(before, params))


# -- hardswish and hardsigmoid ---------------------------------------------------------------
HARDSWISH_FORMS = {
    "torch-divide": "divide(multiply(%x, clip(add(%x, 3f), a_min=0f, a_max=6f)), 6f)",
    "times-sixth": "multiply(multiply(%x, clip(add(3f, %x), a_min=0f, a_max=6f)), 0.166666672f)",
    "gate-first": "divide(multiply(clip(add(%x, 3f), a_min=0f, a_max=6f), %x), 6f)",
    "inner-divide": "multiply(%x, divide(clip(add(%x, 3f), a_min=0f, a_max=6f), 6f))",
    "min-max": "divide(multiply(%x, minimum(maximum(add(%x, 3f), 0f), 6f)), 6f)",
    "onnx-import": "multiply(%x, clip(add(multiply(%x, 0.166666672f), 0.5f), a_min=0f, "
                   "a_max=1f))",
    "paddle-scale": "multiply(multiply(%x, clip(add(%x, 3f), a_min=0f, a_max=6f)), "
                    "0.16666667f)",
}


@pytest.mark.parametrize("form", HARDSWISH_FORMS)
def test_hardswish(form):
    check(HARDSWISH_FORMS[form], "nn.hardswish(%x)")


def test_relu6_of_plus_three_over_six_is_hardsigmoid():
    check("divide(clip(add(%x, 3f), a_min=0f, a_max=6f), 6f)", "nn.hardsigmoid(%x)")


@pytest.mark.parametrize("body,expected", [
    ("clip(add(multiply(%x, 0.2f), 0.5f), a_min=0f, a_max=1f)", "alpha=0.2f, beta=0.5f"),
    ("clip(add(0.5f, multiply(0.2f, %x)), a_min=0f, a_max=1f)", "alpha=0.2f, beta=0.5f"),
    ("clip(add(divide(%x, 6f), 0.5f), a_min=0f, a_max=1f)", "beta=0.5f"),  # alpha 1/6
    ("clip(add(%x, 0.25f), a_min=0f, a_max=1f)", "alpha=1f, beta=0.25f"),
])
def test_hardsigmoid(body, expected):
    check(body, f"nn.hardsigmoid(%x, {expected})")


def test_hardswish_of_a_scaled_product_keeps_the_scale():
    # FoldScaleAxis may have moved the 1/6 into the next layer: the rest stays a multiply
    check("multiply(%x, clip(add(%x, 3f), a_min=0f, a_max=6f))",
          "multiply(nn.hardswish(%x), 6f)")


# -- SiLU, GELU, mish ------------------------------------------------------------------------
def test_silu_either_order():
    check("multiply(%x, sigmoid(%x))", "nn.silu(%x)")
    check("multiply(sigmoid(%x), %x)", "nn.silu(%x)")


def test_swish_with_beta_one_is_silu():
    check("multiply(%x, sigmoid(multiply(%x, 1f)))", "nn.silu(%x)")


GELU_FORMS = {
    "torch": "multiply(multiply(%x, add(erf(divide(%x, 1.41421354f)), 1f)), 0.5f)",
    "hf": "multiply(multiply(%x, 0.5f), add(1f, erf(multiply(%x, 0.707106769f))))",
    "half-inside": "multiply(%x, multiply(0.5f, add(erf(divide(%x, 1.41421354f)), 1f)))",
    "divided-by-two": "divide(multiply(%x, add(1f, erf(multiply(0.707106769f, %x)))), 2f)",
}


@pytest.mark.parametrize("form", GELU_FORMS)
def test_gelu_erf(form):
    check(GELU_FORMS[form], "nn.gelu(%x)")


@pytest.mark.parametrize("cube", ["power(%x, 3f)", "multiply(multiply(%x, %x), %x)",
                                  "multiply(%x, multiply(%x, %x))"])
def test_gelu_tanh(cube):
    body = (f"multiply(multiply(0.5f, %x), add(1f, tanh(multiply(0.797884583f, "
            f"add(%x, multiply(0.044715f, {cube}))))))")
    check(body, 'nn.gelu(%x, approximate="tanh")')


def test_gelu_whose_half_was_folded_away():
    check("multiply(%x, add(erf(divide(%x, 1.41421354f)), 1f))", "multiply(nn.gelu(%x), 2f)")


@pytest.mark.parametrize("softplus", [
    "log(add(1f, exp(%x)))",
    "log(add(exp(%x), 1f))",
    "add(nn.relu(%x), log(add(1f, exp(negative(abs(%x))))))",  # ONNX Softplus, imported
])
def test_mish(softplus):
    check(f"multiply(%x, tanh({softplus}))", "nn.mish(%x)")


# -- min/max, softmax --------------------------------------------------------------------------
@pytest.mark.parametrize("body,lo,hi", [
    ("minimum(maximum(%x, 0f), 6f)", "0f", "6f"),
    ("maximum(minimum(%x, 6f), -1f)", "-1f", "6f"),
    ("minimum(6f, maximum(-2f, %x))", "-2f", "6f"),
])
def test_min_max_is_clip(body, lo, hi):
    check(body, f"clip(%x, a_min={lo}, a_max={hi})")


def test_max_with_zero_is_relu():
    check("maximum(%x, 0f)", "nn.relu(%x)")


def test_softmax_stable_and_plain():
    stable = ("%0 = exp(subtract(%x, max(%x, axis=[1], keepdims=True))); "
              "divide(%0, sum(%0, axis=[1], keepdims=True))")
    check(stable, "nn.softmax(%x, axis=1)")
    check("%0 = exp(%x); divide(%0, sum(%0, axis=[-1], keepdims=True))",
          "nn.softmax(%x, axis=1)")


# -- what must stay ----------------------------------------------------------------------------
@pytest.mark.parametrize("body", [
    # the gate is read elsewhere: rewriting would compute it twice
    "%0 = sigmoid(%x); add(multiply(%x, %0), %0)",
    # a wrong constant inside the gate
    "divide(multiply(%x, clip(add(%x, 2f), a_min=0f, a_max=6f)), 6f)",
    "multiply(multiply(%x, add(erf(divide(%x, 1.3f)), 1f)), 0.5f)",
    "multiply(multiply(0.5f, %x), add(1f, tanh(multiply(0.797884583f, add(%x, "
    "multiply(0.05f, power(%x, 3f)))))))",
    # the gate reads another tensor
    "multiply(%x, sigmoid(add(%x, 1f)))",
    # hardsigmoid's clip bounds must be 0 and 1
    "clip(add(multiply(%x, 0.2f), 0.5f), a_min=0f, a_max=2f)",
    # the sum does not keep its dimension: not a softmax's denominator
    "%0 = exp(%x); divide(%0, sum(%0, axis=[0]))",
    # minimum(maximum(x, 6), 0): bounds the wrong way round
    "minimum(maximum(%x, 6f), 0f)",
])
def test_left_alone(body):
    unchanged(body)


def test_a_product_read_elsewhere_keeps_its_scale():
    check("%0 = multiply(%x, clip(add(%x, 3f), a_min=0f, a_max=6f)); (divide(%0, 6f), %0)",
          "%0 = multiply(nn.hardswish(%x), 6f); (divide(%0, 6f), %0)")


def test_softmax_of_a_shifted_input_is_still_a_softmax():
    # the max over another axis is not the usual shift, but exp(y) / sum(exp(y)) is softmax(y)
    check("%0 = exp(subtract(%x, max(%x, axis=[0], keepdims=True))); "
          "divide(%0, sum(%0, axis=[1], keepdims=True))",
          "nn.softmax(subtract(%x, max(%x, axis=[0], keepdims=True)), axis=1)")


def test_integer_tensors_are_left_alone():
    unchanged("multiply(%x, maximum(%x, 0))", "%x: Tensor[(2, 8), int32]")
    unchanged("minimum(maximum(%x, 0), 6)", "%x: Tensor[(2, 8), int32]")


def test_a_constant_that_broadcasts_the_input_stays_outside():
    # the (1, 1, 1) constants make the (2, 8) input a (1, 2, 8) result: an activation of x has
    # x's shape, so a broadcasting constant is never taken into one
    x = relay.var("x", shape=(2, 8))
    one = relay.const(np.ones((1, 1, 1), "float32"))
    six = relay.const(np.full((1, 1, 1), 6.0, "float32"))
    gate = relay.clip(relay.add(x, relay.const(3.0)), 0.0, 6.0)
    hardswish = relay.divide(relay.multiply(x, gate), six)
    expected = relay.divide(relay.multiply(relay.nn.hardswish(x), relay.const(6.0)), six)
    for body, want in ((relay.multiply(relay.sigmoid(x), relay.multiply(x, one)), None),
                       (relay.maximum(x, relay.const(np.zeros((1, 1, 1), "float32"))), None),
                       (hardswish, expected)):
        mod = relay.transform.InferType()(ember.IRModule.from_expr(relay.Function([x], body)))
        out = run(RecogniseActivations(), mod)
        want_mod = mod if want is None else relay.transform.InferType()(
            ember.IRModule.from_expr(relay.Function([x], want)))
        assert_main_equal(out, want_mod)


def test_float16_and_float64():
    for dtype in ("float16", "float64"):
        params = f"%x: Tensor[(2, 8), {dtype}]"
        mod = parse(_fn("multiply(%x, sigmoid(%x))", params))
        out = run(RecogniseActivations(), mod)
        assert_main_equal(out, _fn("nn.silu(%x)", params))


def test_below_opt_level_2_the_pipeline_skips_it():
    mod = parse(_fn(HARDSWISH_FORMS["torch-divide"]))
    seq = ember.transform.Sequential([RecogniseActivations()])
    with ember.transform.PassContext(opt_level=1):
        out = seq(mod)
    assert_main_equal(out, _fn(HARDSWISH_FORMS["torch-divide"]))


def test_a_shared_input_feeds_two_activations():
    check("(multiply(%x, sigmoid(%x)), divide(multiply(%x, clip(add(%x, 3f), a_min=0f, "
          "a_max=6f)), 6f))", "(nn.silu(%x), nn.hardswish(%x))")


# -- the pipeline: numbers against the build without the pass ----------------------------------
def _c(shape: tuple[int, ...], seed: int) -> relay.Constant:
    return relay.const(np.random.default_rng(seed).uniform(-1, 1, shape).astype("float32"))


def _build_run(func: relay.Function, x: np.ndarray, recognise: bool) -> np.ndarray:
    from ember.contrib import graph_executor

    disabled = [] if recognise else ["RecogniseActivations"]
    with ember.transform.PassContext(opt_level=3, disabled_pass=disabled):
        lib = relay.build(ember.IRModule.from_expr(func), "llvm")
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    m.set_input("x", x)
    m.run()
    return m.get_output(0).numpy()


def _spelled(kind: str, y: relay.Expr) -> relay.Expr:
    from ember.relay.testing import exported

    table = {"hardswish": exported.hardswish, "hardsigmoid": exported.hardsigmoid,
             "silu": exported.silu, "gelu": exported.gelu, "gelu_tanh": exported.gelu_tanh,
             "mish": lambda v: relay.multiply(v, relay.tanh(relay.log(relay.add(
                 relay.const(1.0), relay.exp(v)))))}
    return table[kind](y)


@needs_cc
@pytest.mark.parametrize("kind", [
    "hardswish", *(pytest.param(k, marks=pytest.mark.slow)
                   for k in ("hardsigmoid", "silu", "gelu", "gelu_tanh", "mish"))])
def test_conv_and_dense_epilogues_match_the_unfused_build(kind):
    """conv -> act -> conv (+ residual) and dense -> act -> dense: the activations go into the
    kernels' epilogues (no elementwise kernel is left) and the numbers agree."""
    x = relay.var("x", shape=(1, 8, 6, 6))
    y = relay.nn.bias_add(relay.nn.conv2d(x, _c((16, 8, 3, 3), 1), padding=(1, 1)),
                          _c((16,), 2))
    y = _spelled(kind, y)
    y = relay.add(_spelled(kind, relay.nn.conv2d(y, _c((8, 16, 1, 1), 3))), x)
    d = relay.nn.batch_flatten(relay.nn.global_avg_pool2d(y))
    d = _spelled(kind, relay.nn.bias_add(relay.nn.dense(d, _c((12, 8), 4)), _c((12,), 5)))
    out = relay.nn.dense(d, _c((4, 12), 6))
    func = relay.Function([x], out)
    with ember.transform.PassContext(opt_level=3):
        opt, _ = relay.optimize(ember.IRModule.from_expr(func), "llvm")
    text = str(opt)
    for spelled in ("clip(", "sigmoid(", "erf(", "tanh(", "exp("):
        assert spelled not in text, f"{spelled} left after fusion:\n{text}"
    xv = np.random.default_rng(7).uniform(-3, 3, (1, 8, 6, 6)).astype("float32")
    np.testing.assert_allclose(_build_run(func, xv, True), _build_run(func, xv, False),
                               rtol=1e-4, atol=1e-5)


def test_gelu_half_is_recognised_before_fold_scale_axis_moves_it():
    """dense -> GELU -> dense: the 0.5 would fold into the second dense's weight."""
    x = relay.var("x", shape=(4, 8))
    h = relay.nn.dense(x, _c((16, 8), 1))
    out = relay.nn.dense(_spelled("gelu", h), _c((8, 16), 2))
    with ember.transform.PassContext(opt_level=3):
        opt, _ = relay.optimize(ember.IRModule.from_expr(relay.Function([x], out)), "llvm")
    assert 'act1="gelu_erf"' in str(opt)

"""nn.hardswish, nn.hardsigmoid, nn.silu, nn.gelu, nn.mish: references, lowering (float32 and
float64, saturating inputs), text round trip, and the errors a careless caller meets."""
from __future__ import annotations

import math

import numpy as np
import pytest

import ember
from ember import relay
from ember.runtime.errors import OpAttributeInvalid
from ember.testing import find_c_compiler

needs_cc = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")
_erf = np.vectorize(math.erf)

# op -> (builder, numpy formula in float64)
ACTIVATIONS = {
    "hardswish": (relay.nn.hardswish, lambda v: v * np.clip(v + 3, 0, 6) / 6),
    "hardsigmoid": (lambda x: relay.nn.hardsigmoid(x, 0.2, 0.4),
                    lambda v: np.clip(0.2 * v + 0.4, 0, 1)),
    "silu": (relay.nn.silu, lambda v: v / (1 + np.exp(-v))),
    "gelu": (relay.nn.gelu, lambda v: 0.5 * v * (1 + _erf(v / math.sqrt(2)))),
    "gelu_tanh": (lambda x: relay.nn.gelu(x, "tanh"), lambda v: 0.5 * v * (1 + np.tanh(
        math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))),
    "mish": (relay.nn.mish, lambda v: v * np.tanh(np.log1p(np.exp(v)))),
}
# saturating ends, zero, and values around the kinks
VALUES = np.array([-90.0, -20.0, -3.5, -3.0, -1.0, -0.25, 0.0, 0.5, 2.9, 3.0, 3.1, 6.0, 19.0,
                   40.0, 88.0], "float64")


def _module(build, dtype: str) -> ember.IRModule:
    x = relay.var("x", shape=VALUES.shape, dtype=dtype)
    return ember.IRModule.from_expr(relay.Function([x], build(x)))


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_reference_is_the_formula(name):
    build, formula = ACTIVATIONS[name]
    out = relay.create_executor("debug", mod=_module(build, "float32")).evaluate()(
        VALUES.astype("float32")).numpy()
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, formula(VALUES), rtol=1e-6, atol=1e-6)


@needs_cc
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_lowered_matches_the_formula(name, dtype):
    from ember.contrib import graph_executor

    build, formula = ACTIVATIONS[name]
    with ember.transform.PassContext(opt_level=3):
        lib = relay.build(_module(build, dtype), "llvm")
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    m.set_input("x", VALUES.astype(dtype))
    m.run()
    out = m.get_output(0).numpy()
    tol = 1e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(out, formula(VALUES), rtol=tol, atol=tol)


def test_text_round_trip_keeps_attributes():
    x = relay.var("x", shape=(2, 3))
    body = relay.nn.gelu(relay.nn.hardsigmoid(relay.nn.mish(relay.nn.silu(
        relay.nn.hardswish(x))), alpha=0.25, beta=0.125), approximate="tanh")
    mod = ember.IRModule.from_expr(relay.Function([x], body))
    again = ember.parser.fromtext(str(mod))
    ember.ir.assert_structural_equal(again["main"], mod["main"])


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_integer_input_is_refused(name):
    build, _ = ACTIVATIONS[name]
    mod = _module(build, "int32")
    op = "nn.gelu" if name.startswith("gelu") else f"nn.{name}"
    with pytest.raises(Exception, match=f"{op}: requires a floating-point tensor, got int32"):
        relay.transform.InferType()(mod)


def test_bad_attributes_are_refused():
    x = relay.var("x", shape=(2,))
    with pytest.raises(OpAttributeInvalid, match="nn.gelu: attribute approximate must be one "
                                                 "of 'none', 'tanh', got 'erf'"):
        relay.nn.gelu(x, approximate="erf")
    with pytest.raises(OpAttributeInvalid, match="nn.hardsigmoid: attribute alpha must be a "
                                                 "number"):
        relay.nn.hardsigmoid(x, alpha="0.2")  # type: ignore[arg-type]
    with pytest.raises(OpAttributeInvalid, match="nn.hardsigmoid: attribute beta must be a "
                                                 "finite number"):
        relay.nn.hardsigmoid(x, beta=float("nan"))
    with pytest.raises(OpAttributeInvalid, match="attribute alpha must be a number, got True"):
        relay.nn.hardsigmoid(x, alpha=True)  # type: ignore[arg-type]

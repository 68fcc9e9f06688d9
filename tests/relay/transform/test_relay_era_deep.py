"""The Relay-era passes on deep chains of calls: none of them recurses in Python with the size
of the program. Chains are 3,000 deep (the default recursion limit is 1,000), or 500 deep under
a recursion limit of 300 where the output is a large higher-order program, slow to type and
run."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import ember as tvm
from ember import relay
from ember.relay import transform
from ember.relay.analysis import check_well_formed

DEPTH = 3000
HIGHER_ORDER_DEPTH = 500


@pytest.fixture
def low_recursion_limit():
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(300)
    yield
    sys.setrecursionlimit(old)


def _chain(depth: int = DEPTH) -> relay.Function:
    x = relay.var("x", shape=(2,))
    y = x
    for i in range(depth):
        y = relay.tanh(y) if i % 3 == 0 else relay.multiply(y, relay.const(0.999))
    return relay.Function([x], relay.sum(y))


@pytest.mark.parametrize("make", [
    transform.FastMath, transform.ToMixedPrecision, transform.CombineParallelConv2D,
    transform.BatchingOps, transform.LazyGradientInit, transform.PartialEvaluate,
    transform.Inline, transform.RemoveUnusedFunctions, transform.FirstOrderGradient,
], ids=lambda m: m.__name__)
def test_module_passes(make):
    out = make()(tvm.IRModule.from_expr(_chain()))
    check_well_formed(out)


@pytest.mark.parametrize("mode", ["first_order", "higher_order"])
def test_gradient_of_a_deep_chain(mode, low_recursion_limit):
    back = transform.gradient(_chain(HIGHER_ORDER_DEPTH), mode=mode)
    x = np.array([0.5, -0.25], "float32")
    _, (g,) = relay.create_executor().evaluate(back)(x)
    assert g.numpy().shape == (2,) and np.all(np.isfinite(g.numpy()))


def test_cps_and_defunctionalization_of_a_deep_chain(low_recursion_limit):
    cps = transform.to_cps(_chain(HIGHER_ORDER_DEPTH))
    check_well_formed(cps)
    mod = tvm.IRModule()
    mod["main"] = transform.gradient(_chain(HIGHER_ORDER_DEPTH))
    mod["main"] = transform.Defunctionalization(mod["main"], mod)
    check_well_formed(mod)

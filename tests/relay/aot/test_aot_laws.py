"""Law: for random programs (elementwise and dense ops, reshapes, shared values, tuple outputs
that repeat values or return the input), AOT gives the interpreter's result and the graph
executor's, whatever the interface and the operator calling convention."""
from __future__ import annotations

import numpy as np
from _aot_util import assert_outputs, build, graph_outputs, needs_cc, reference, run
from hypothesis import given, settings
from hypothesis import strategies as st

import ember as tvm
from ember import relay

pytestmark = needs_cc
_UNARY = (relay.nn.relu, relay.negative, relay.tanh, relay.exp)
_BINARY = (relay.add, relay.multiply, relay.maximum)
W = np.random.default_rng(9).standard_normal((4, 4)).astype("float32") * 0.5


@st.composite
def programs(draw):
    """A random DAG over a (3, 4) input; dense ops split fusion groups, so the arena holds
    several intermediates whose lifetimes overlap in different ways."""
    x = relay.var("x", shape=(3, 4))
    values = [x]
    for _ in range(draw(st.integers(2, 8))):
        kind = draw(st.sampled_from(["unary", "binary", "reshape", "dense"]))
        a = draw(st.sampled_from(values))
        if kind == "unary":
            values.append(draw(st.sampled_from(_UNARY))(a))
        elif kind == "binary":
            values.append(draw(st.sampled_from(_BINARY))(a, draw(st.sampled_from(values))))
        elif kind == "dense":
            values.append(relay.nn.dense(a, relay.const(W)))
        else:
            values.append(relay.reshape(relay.reshape(a, (12,)), (3, 4)))
    outs = draw(st.lists(st.sampled_from(values), min_size=1, max_size=4))
    body = outs[0] if len(outs) == 1 else relay.Tuple(outs)
    return tvm.IRModule.from_expr(relay.Function([x], body))


@settings(max_examples=8, deadline=None)
@given(programs(), st.sampled_from(["cpp-cpacked", "cpp-packed", "crt-c", "crt-c-linked"]))
def test_random_programs_match_interpreter_and_graph(mod, config):
    inputs = {"x": np.random.default_rng(8).standard_normal((3, 4)).astype("float32")}
    factory = build(mod, config)
    out = run(factory, inputs)
    # The interpreter sums dense products in numpy's order, the GEMM kernel in its own, and
    # chains of exp amplify those 1e-7 differences: 1e-4 against the interpreter; the graph
    # executor runs the same kernels, so it must agree to the usual tolerance.
    for got, want in zip(out, reference(mod, inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert_outputs(out, graph_outputs(mod, inputs))
    memory = factory.get_model_metadata().memory
    assert memory["lower_bound"] <= memory["planned_bytes"] <= memory["total_bytes"]

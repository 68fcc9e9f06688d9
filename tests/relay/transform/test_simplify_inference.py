"""SimplifyInference: batch_norm, dropout and layer_norm become primitive ops with the same
results (axis, center and scale respected)."""
from __future__ import annotations

import numpy as np
import pytest
from _pass_helpers import assert_main_equal, assert_same_result, run
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember import relay
from ember.ir import IRModule
from ember.relay.transform import FoldConstant, InferType, SimplifyInference


def _ops(mod):
    return [e.op.name for e in ember.ir.post_order(mod["main"])
            if isinstance(e, relay.Call) and isinstance(e.op, relay.op.Op)]


def test_batch_norm_expected_form():
    before = """def @main(%x: Tensor[(1, 2, 3, 3), float32], %g: Tensor[(2), float32],
                         %b: Tensor[(2), float32], %m: Tensor[(2), float32],
                         %v: Tensor[(2), float32]) {
      %0 = nn.batch_norm(%x, %g, %b, %m, %v, epsilon=0.001f);
      %0.0
    }"""
    expected = """def @main(%x: Tensor[(1, 2, 3, 3), float32], %g: Tensor[(2), float32],
                         %b: Tensor[(2), float32], %m: Tensor[(2), float32],
                         %v: Tensor[(2), float32]) {
      %0 = divide(1f, sqrt(add(%v, 0.001f)));
      %1 = multiply(%0, %g);
      %2 = multiply(%x, expand_dims(%1, axis=1, num_newaxis=2));
      %3 = add(multiply(negative(%m), %1), %b);
      add(%2, expand_dims(%3, axis=1, num_newaxis=2))
    }"""
    assert_main_equal(run(SimplifyInference(), before), expected)


def test_dropout_is_identity_and_stats_pass_through():
    before = """def @main(%x: Tensor[(4, 3), float32], %m: Tensor[(3), float32],
                         %v: Tensor[(3), float32]) {
      %0 = nn.dropout(%x, rate=0.3f);
      %1 = nn.batch_norm(%0.0, %m, %m, %m, %v, axis=-1, center=False, scale=False);
      (%1.1, %1.2)
    }"""
    expected = """def @main(%x: Tensor[(4, 3), float32], %m: Tensor[(3), float32],
                         %v: Tensor[(3), float32]) {
      (%m, %v)
    }"""
    assert_main_equal(run(SimplifyInference(), before), expected)


@settings(max_examples=25, deadline=None)
@given(axis=st.integers(-3, 2), center=st.booleans(), scale=st.booleans(),
       seed=st.integers(0, 1000), layer=st.booleans())
def test_norms_keep_results(axis, center, scale, seed, layer):
    rng = np.random.default_rng(seed)
    shape = (2, 3, 5)
    c = shape[axis]
    x = relay.var("x", shape=shape)
    vecs = [relay.const(rng.uniform(0.5, 2.0, (c,)).astype("float32")) for _ in range(4)]
    if layer:
        y = relay.nn.layer_norm(x, vecs[0], vecs[1], axis=axis, epsilon=1e-3, center=center,
                                scale=scale)
    else:
        y = relay.nn.batch_norm(x, *vecs, axis=axis, center=center, scale=scale)[0]
    mod = InferType()(IRModule.from_expr(relay.Function([x], relay.nn.relu(y))))
    out = run(SimplifyInference(), mod)
    assert not {"nn.batch_norm", "nn.layer_norm"} & set(_ops(out))
    xv = rng.normal(size=shape).astype("float32")
    assert_same_result(mod, out, xv, rtol=1e-4, atol=1e-5)


def test_batch_norm_folds_to_one_scale_and_shift():
    rng = np.random.default_rng(0)
    x = relay.var("x", shape=(1, 4, 5, 5))
    w = relay.const(rng.normal(size=(4, 4, 3, 3)).astype("float32"))
    stats = [relay.const(rng.uniform(0.5, 2, 4).astype("float32")) for _ in range(4)]
    y = relay.nn.relu(relay.nn.batch_norm(relay.nn.conv2d(x, w, padding=(1, 1)), *stats)[0])
    mod = InferType()(IRModule.from_expr(relay.Function([x], y)))
    out = run(FoldConstant(), run(SimplifyInference(), mod))
    assert _ops(out) == ["nn.conv2d", "multiply", "add", "nn.relu"]
    assert_same_result(mod, out, rng.normal(size=(1, 4, 5, 5)).astype("float32"), rtol=1e-4,
                       atol=1e-4)


def test_untouched_program_and_opt_level():
    before = "def @main(%x: Tensor[(3), float32]) { nn.relu(%x) }"
    assert_main_equal(run(SimplifyInference(), before), before)
    assert SimplifyInference().opt_level == 0


def test_wrong_input_type():
    with pytest.raises(TypeError, match="SimplifyInference: expected an IRModule"):
        SimplifyInference()(relay.const(1.0))


def test_batch_norm_parts_keep_the_onnx_node_name():
    # the multiply and the add each name the batch norm: either may be folded away (a zero
    # shift) or fused into a kernel alone, and a profile must still name the node
    x, g, b, m, v = (relay.var(n, shape=s) for n, s in (("x", (1, 2, 3, 3)), ("g", (2,)),
                                                         ("b", (2,)), ("m", (2,)), ("v", (2,))))
    bn = relay.nn.batch_norm(x, g, b, m, v)[0].tuple_value
    span = ember.ir.Span(ember.ir.SourceName("node_BatchNormalization_3"), 0, 0, 0, 0)
    bn = relay.Call(bn.op, bn.args, bn.attrs, span=span)
    out = run(SimplifyInference(), IRModule.from_expr(relay.Function([x, g, b, m, v],
                                                                     relay.TupleGetItem(bn, 0))))
    named = [e.op.name for e in ember.ir.post_order(out["main"]) if isinstance(e, relay.Call)
             and e.span is not None and "node_BatchNormalization_3" in str(e.span)]
    assert sorted(named) == ["add", "multiply"]

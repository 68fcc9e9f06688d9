"""FoldConstant: before/expected pairs, dtype exactness, shape_of, tuples, lets, and the law
that folding keeps the interpreter's result."""
from __future__ import annotations

import numpy as np
import pytest
from _pass_helpers import assert_main_equal, dataflow_programs, law, parse, run
from hypothesis import given, settings

import ember
from ember import relay
from ember.ir import IRModule
from ember.relay.transform import FoldConstant, FoldConstantExpr
from ember.runtime.errors import TypeInferenceError


def test_fold_nested_constant_add():
    out = run(FoldConstant(), "def @main(%x: Tensor[(3), float32]) { add(%x, add(1f, 2f)) }")
    assert_main_equal(out, "def @main(%x: Tensor[(3), float32]) { add(%x, 3f) }")


def test_fold_chain_through_let_and_tuple():
    before = """def @main(%x: Tensor[(3), float32]) {
      let %c = multiply(2f, 3f);
      %0 = (%c, %x);
      %1 = %0.0;
      add(%x, subtract(%1, 1f))
    }"""
    out = run(FoldConstant(), before)
    assert_main_equal(out, "def @main(%x: Tensor[(3), float32]) { add(%x, 5f) }")


def test_keeps_dtype_exactly():
    # numpy would promote int8 * int8 to int8 but int8 + python int may widen: the type wins.
    out = run(FoldConstant(), "def @main() { add(100i8, 100i8) }")
    body = out["main"].body
    assert isinstance(body, relay.Constant)
    assert str(body.data.dtype) == "int8" and int(body.data.numpy()) == -56
    out = run(FoldConstant(), "def @main() { cast(3.7f, dtype=\"float16\") }")
    assert str(out["main"].body.data.dtype) == "float16"


def test_fold_tensor_constants_and_tuple_results():
    c = relay.const(np.arange(6, dtype="float32").reshape(2, 3))
    parts = relay.split(c, 3, axis=1)
    x = relay.var("x", shape=(2, 2))
    mod = IRModule.from_expr(relay.Function([x], x + relay.concatenate([parts[0], parts[2]], 1)))
    out = run(FoldConstant(), mod)
    body = out["main"].body
    assert body.op.name == "add" and isinstance(body.args[1], relay.Constant)
    np.testing.assert_array_equal(body.args[1].data.numpy(), [[0, 2], [3, 5]])


def test_shape_of_static_input_folds_dynamic_does_not():
    out = run(FoldConstant(), "def @main(%x: Tensor[(2, 5), float32]) { shape_of(%x) }")
    body = out["main"].body
    assert isinstance(body, relay.Constant)
    assert body.data.numpy().tolist() == [2, 5] and str(body.data.dtype) == "int32"
    dyn = "def @main(%x: Tensor[(?, 5), float32]) { shape_of(%x, dtype=\"int64\") }"
    assert isinstance(run(FoldConstant(), dyn)["main"].body, relay.Call)


def test_zero_argument_calls_are_not_folded():
    before = "def @main(%x: Tensor[(2, 3), float32]) { add(%x, zeros(shape=[2, 3], dtype=\"float32\")) }"
    out = run(FoldConstant(), before)
    assert_main_equal(out, before)


def test_primitive_functions_are_left_alone():
    before = """def @main(%x: Tensor[(3), float32]) {
      %0 = fn (%p0: Tensor[(3), float32], Primitive=1) { add(%p0, add(1f, 1f)) };
      %0(%x)
    }"""
    assert_main_equal(run(FoldConstant(), before), before)


def test_inside_closures_and_branches():
    before = """def @main(%x: Tensor[(3), float32], %c: bool) {
      %0 = fn (%y: Tensor[(3), float32]) { multiply(%y, add(1f, 1f)) };
      if (%c) { %0(%x) } else { subtract(%x, negative(2f)) }
    }"""
    expected = """def @main(%x: Tensor[(3), float32], %c: bool) {
      %0 = fn (%y: Tensor[(3), float32]) { multiply(%y, 2f) };
      if (%c) { %0(%x) } else { subtract(%x, -2f) }
    }"""
    assert_main_equal(run(FoldConstant(), before), expected)


def test_fold_constant_expr_and_opt_level():
    e = relay.add(relay.const(1.0), relay.const(2.0))
    folded = FoldConstantExpr(e)
    assert isinstance(folded, relay.Constant) and float(folded.data.numpy()) == 3.0
    assert FoldConstant().opt_level == 2
    mod = parse("def @main() { add(1f, 2f) }")
    with ember.transform.PassContext(opt_level=1):
        skipped = ember.transform.Sequential([FoldConstant()])(mod)
    assert isinstance(skipped["main"].body, relay.Call)


def test_bad_input_is_a_clear_error():
    x = relay.var("x", shape=(3,))
    with pytest.raises(TypeError, match="FoldConstant: expected an IRModule.*from_expr"):
        FoldConstant()(relay.Function([x], x))
    with pytest.raises(TypeInferenceError, match="add"):
        FoldConstant()(ember.parser.fromtext(
            '#[version = "0.0.5"]\ndef @main(%x: Tensor[(3), float32]) { add(%x, ones(shape=[4], dtype="float32")) }'))


@settings(max_examples=30, deadline=None)
@given(dataflow_programs())
def test_law_preserves_result(program):
    mod, args = program
    out = law(FoldConstant, mod, args)
    folded_ops = [e for e in ember.ir.post_order(out["main"])
                  if isinstance(e, relay.Call) and all(isinstance(a, relay.Constant)
                                                       for a in e.args) and e.args]
    assert not folded_ops, "a call on constants only survived"

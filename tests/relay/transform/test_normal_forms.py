"""ToANormalForm / ToGraphNormalForm: bindings placed in the innermost scope of all uses,
existing lets keep their variables, primitive functions stay in call position, the round trip
gives the graph back, and both keep results (also on long chains)."""
from __future__ import annotations

import numpy as np
from _pass_helpers import assert_main_equal, assert_same_result, dataflow_programs, law, parse, run
from hypothesis import given, settings

import ember
from ember import relay
from ember.ir import IRModule, structural_equal
from ember.relay.transform import (DeadCodeElimination, FuseOps, InferType, ToANormalForm,
                                   ToGraphNormalForm)


def test_anf_binds_every_value_and_scopes_branches():
    before = """def @main(%x: Tensor[(3), float32], %c: bool) {
      %0 = add(%x, %x);
      %1 = exp(%0);
      if (%c) { multiply(%0, %1) } else { %1 }
    }"""
    expected = """def @main(%x: Tensor[(3), float32], %c: bool) {
      let %a = add(%x, %x);
      let %b = exp(%a);
      let %r = if (%c) {
        let %m = multiply(%a, %b);
        %m
      } else {
        %b
      };
      %r
    }"""
    assert_main_equal(run(ToANormalForm(), before), expected)


def test_anf_keeps_let_vars_constants_bound_and_closures_scoped():
    before = """def @main(%x: Tensor[(3), float32]) {
      let %f = fn (%y: Tensor[(3), float32]) { add(%y, exp(%y)) };
      %f(%x)
    }"""
    expected = """def @main(%x: Tensor[(3), float32]) {
      let %f = fn (%y: Tensor[(3), float32]) {
        let %e = exp(%y);
        let %s = add(%y, %e);
        %s
      };
      let %r = %f(%x);
      %r
    }"""
    assert_main_equal(run(ToANormalForm(), before), expected)
    const = run(ToANormalForm(), "def @main(%x: Tensor[(3), float32]) { add(%x, 1f) }")
    assert_main_equal(const, """def @main(%x: Tensor[(3), float32]) {
      let %c = 1f;
      let %a = add(%x, %c);
      %a
    }""")


def test_anf_after_fusion_keeps_primitive_calls_direct():
    mod = run(FuseOps(), """def @main(%x: Tensor[(3), float32]) {
      %0 = nn.softmax(%x);
      exp(%0)
    }""")
    out = run(ToANormalForm(), mod)
    calls = [e for e in ember.ir.post_order(out["main"]) if isinstance(e, relay.Call)
             and not isinstance(e.op, relay.op.Op)]
    assert len(calls) == 2 and all(c.op.get_attr("Primitive") == 1 for c in calls)
    assert isinstance(out["main"].body, relay.Let)


def test_round_trip_gives_the_graph_back():
    before = parse("""def @main(%x: Tensor[(3), float32], %c: bool) {
      %0 = add(%x, %x);
      %1 = (%0, exp(%0));
      %2 = if (%c) { %1.0 } else { %1.1 };
      multiply(%2, %0)
    }""")
    back = run(ToGraphNormalForm(), run(ToANormalForm(), before))
    assert_main_equal(back, before)


def test_graph_form_keeps_recursive_and_impure_lets():
    before = """def @main(%x: int32) {
      let %r = ref(%x);
      let %w = ref_write(%r, add(%x, 1));
      let %f = fn (%i: int32) -> int32 {
        if (less(%i, 3)) { %f(add(%i, 1)) } else { %i }
      };
      let %y = %f(%x);
      add(%y, ref_read(%r))
    }"""
    out = run(ToGraphNormalForm(), before)
    assert not structural_equal(out["main"], parse(before)["main"])
    assert out.astext().count("let ") == 2
    assert_same_result(parse(before), out, np.int32(1))


def test_long_chain_no_recursion_limit():
    x = relay.var("x", shape=(2,))
    y = x
    for _ in range(3000):
        y = relay.negative(y)
    mod = InferType()(IRModule.from_expr(relay.Function([x], y)))
    anf = ToANormalForm()(mod)
    back = ToGraphNormalForm()(anf)
    assert structural_equal(back["main"], mod["main"])
    inlined = DeadCodeElimination(inline_once=True)(anf)  # a chain: every value used once
    assert structural_equal(inlined["main"], mod["main"])


@settings(max_examples=30, deadline=None)
@given(dataflow_programs())
def test_law_preserves_result(program):
    mod, args = program
    anf = law(ToANormalForm, mod, args)
    assert isinstance(anf["main"].body, (relay.Let, relay.Var))
    law(ToGraphNormalForm, anf, args)


def test_anf_match_clauses_are_scopes():
    before = """type Opt { Some(Tensor[(3), float32]), Nothing }
    def @main(%x: Tensor[(3), float32]) {
      %0 = exp(%x);
      match (Some(%0)) {
        Some(%y) => multiply(%y, %0),
        Nothing => negative(%0),
      }
    }"""
    expected = """type Opt { Some(Tensor[(3), float32]), Nothing }
    def @main(%x: Tensor[(3), float32]) {
      let %e = exp(%x);
      let %s = Some(%e);
      let %m = match (%s) {
        Some(%y) => { let %a = multiply(%y, %e); %a },
        Nothing => { let %b = negative(%e); %b },
      };
      %m
    }"""
    mod = parse(before)
    out = run(ToANormalForm(), mod)
    assert_main_equal(out, parse(expected))
    assert_same_result(mod, out, np.ones(3, "float32"))

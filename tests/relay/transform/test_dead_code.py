"""DeadCodeElimination: unused pure lets go (chains in one pass), impure ones stay,
inline_once inlines single uses outside closures; results are kept."""
from __future__ import annotations

import numpy as np
from _pass_helpers import assert_main_equal, assert_same_result, run
from hypothesis import given, settings
from hypothesis import strategies as st

from ember import relay
from ember.ir import IRModule
from ember.relay.transform import DeadCodeElimination, InferType

BEFORE = """def @main(%x: Tensor[(3), float32]) {
  let %a = add(%x, 1f);
  let %b = multiply(%a, 2f);
  let %c = exp(%x);
  let %f = fn (%y: Tensor[(3), float32]) { add(%y, %c) };
  let %e = %f(%x);
  nn.relu(%c)
}"""


def test_dead_chain_and_unused_closure_call_go():
    expected = """def @main(%x: Tensor[(3), float32]) {
      let %c = exp(%x);
      nn.relu(%c)
    }"""
    assert_main_equal(run(DeadCodeElimination(), BEFORE), expected)


def test_inline_once():
    expected = "def @main(%x: Tensor[(3), float32]) { nn.relu(exp(%x)) }"
    assert_main_equal(run(DeadCodeElimination(inline_once=True), BEFORE), expected)


def test_uses_twice_or_inside_closure_are_not_inlined():
    before = """def @main(%x: Tensor[(3), float32]) {
      let %a = exp(%x);
      let %b = sqrt(%x);
      let %f = fn (%y: Tensor[(3), float32]) { add(%y, %b) };
      %0 = add(%a, %a);
      %f(%0)
    }"""
    expected = """def @main(%x: Tensor[(3), float32]) {
      let %a = exp(%x);
      let %b = sqrt(%x);
      let %f = fn (%y: Tensor[(3), float32]) { add(%y, %b) };
      %f(add(%a, %a))
    }"""
    out = run(DeadCodeElimination(inline_once=True), before)
    assert_main_equal(out, expected)


def test_impure_bindings_stay():
    before = """def @main(%x: Tensor[(3), float32]) {
      let %r = ref(%x);
      let %w = ref_write(%r, exp(%x));
      let %g = fn (%y: Tensor[(3), float32]) { ref_write(%r, %y) };
      let %u = %g(%x);
      ref_read(%r)
    }"""
    out = run(DeadCodeElimination(), before)
    assert_main_equal(out, before)
    dropped = run(DeadCodeElimination(ignore_impurity=True), before)
    assert_main_equal(dropped, """def @main(%x: Tensor[(3), float32]) {
      let %r = ref(%x);
      ref_read(%r)
    }""")


def test_recursive_global_calls_are_pure_when_their_bodies_are():
    before = """
    def @loop(%i: int32) -> int32 {
      if (less(%i, 10)) { @loop(add(%i, 1)) } else { %i }
    }
    def @main(%x: int32) {
      let %unused = @loop(%x);
      %x
    }"""
    assert_main_equal(run(DeadCodeElimination(), before), "def @main(%x: int32) { %x }")


def test_let_chain_ending_in_a_variable():
    before = """def @main(%x: Tensor[(3), float32]) {
      let %a = exp(%x);
      let %b = %a;
      let %dead = negative(%b);
      %b
    }"""
    assert_main_equal(run(DeadCodeElimination(), before), """def @main(%x: Tensor[(3), float32]) {
      let %a = exp(%x);
      let %b = %a;
      %b
    }""")
    assert_main_equal(run(DeadCodeElimination(inline_once=True), before),
                      "def @main(%x: Tensor[(3), float32]) { exp(%x) }")


def test_graph_form_untouched_and_opt_level():
    before = "def @main(%x: Tensor[(3), float32]) { nn.relu(exp(%x)) }"
    assert_main_equal(run(DeadCodeElimination(), before), before)
    assert DeadCodeElimination().opt_level == 1


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 8), st.sampled_from(["exp", "negative", "add"])),
                min_size=1, max_size=8), st.booleans())
def test_law_random_let_chains(steps, inline_once):
    x = relay.var("x", shape=(3,))
    bound = [x]
    lets = []
    for pick, op in steps:
        arg = bound[pick % len(bound)]
        v = relay.var(f"v{len(lets)}")
        value = relay.add(arg, arg) if op == "add" else relay.Call(relay.op.get(op), [arg])
        lets.append((v, value))
        bound.append(v)
    body = relay.Tuple([bound[len(bound) // 2], bound[-1]])
    for v, value in reversed(lets):
        body = relay.Let(v, value, body)
    mod = InferType()(IRModule.from_expr(relay.Function([x], body)))
    out = run(DeadCodeElimination(inline_once=inline_once), mod)
    assert_same_result(mod, out, np.linspace(-1, 1, 3).astype("float32"))
    assert len(out.astext().split("let ")) <= len(lets) + 1

"""PartialEvaluate, called as Relay-era scripts call it (with DeadCodeElimination after, as
TVM's tests do): known values computed, closures and references resolved, gradients made
first order, loops over run-time data left alone, results kept."""
from __future__ import annotations

import numpy as np
import pytest
from _pass_helpers import assert_same_result, dataflow_programs, parse
from hypothesis import given, settings
from hypothesis import strategies as st

import ember as tvm
from ember import relay
from ember.ir import assert_structural_equal
from ember.relay import transform
from ember.relay.analysis import check_well_formed
from ember.relay.transform import partial_evaluate as pe_module
from ember.relay.transform.remove_unused_functions import is_recursive, recursive_functions

SCALAR = relay.TensorType([], "float32")


def dcpe(expr, mod=None):
    """PartialEvaluate then DeadCodeElimination(inline_once=True) on ``expr`` (as main)."""
    mod = tvm.IRModule() if mod is None else mod
    mod["main"] = expr if isinstance(expr, relay.Function) else relay.Function([], expr)
    seq = tvm.transform.Sequential([transform.PartialEvaluate(), transform.InferType(),
                                    transform.DeadCodeElimination(inline_once=True),
                                    transform.InferType()])
    out = seq(mod)
    check_well_formed(out)
    return out["main"]


def _typed(func):
    return transform.InferType()(tvm.IRModule.from_expr(func))["main"]


def _features(expr):
    return {type(n).__name__ for n in tvm.ir.post_order(expr)}


def test_projection_of_a_known_tuple():
    t = relay.TypeVar("t")
    x = relay.Var("x", t)
    f = relay.Function([x], relay.TupleGetItem(relay.Tuple([relay.const(4.0), x]), 1), None, [t])
    assert_structural_equal(dcpe(f), _typed(relay.Function([x], x, None, [t])))


def test_constant_call_inlined_and_folded():
    d = relay.Var("d", SCALAR)
    double = relay.Function([d], d + d)
    assert_structural_equal(dcpe(double(relay.const(4.0))).body, relay.const(8.0))


def test_reference_resolved():
    d, r, x = relay.Var("d", SCALAR), relay.Var("r", relay.RefType(SCALAR)), relay.Var("x")
    body = relay.Let(x, relay.RefWrite(r, relay.RefRead(r) * relay.RefRead(r)), relay.RefRead(r))
    square = relay.Function([d], relay.Let(r, relay.RefCreate(d), body))
    assert_structural_equal(dcpe(square), _typed(relay.Function([d], d * d)))


def test_known_if_and_let_bound_closure():
    before = parse("""def @main(%x: Tensor[(3), float32]) {
      let %f = fn (%y: Tensor[(3), float32], %k: float32) { multiply(%y, %k) };
      let %c = less(1f, 2f);
      if (%c) { %f(%x, add(1f, 2f)) } else { %f(%x, 0f) }
    }""")
    want = parse("def @main(%x: Tensor[(3), float32]) { multiply(%x, 3f) }")
    assert_structural_equal(dcpe(before["main"]), want["main"])


def test_head_of_a_cons_and_map_over_a_known_list():
    mod = tvm.IRModule()
    p = relay.prelude.Prelude(mod)
    x = relay.var("x", shape=(2,))
    got = dcpe(relay.Function([x], p.hd(p.cons(x, p.nil()))), mod)
    assert_structural_equal(got, _typed(relay.Function([x], x)))
    t = relay.TypeVar("t")
    a = relay.Var("a", t)
    f = relay.GlobalVar("f")
    mod[f] = relay.Function([a], a, t, [t])
    c = relay.const
    orig = p.map(f, p.cons(c(1), p.cons(c(2), p.cons(c(3), p.nil()))))
    got = dcpe(orig, mod)
    assert_structural_equal(got.body, p.cons(c(1), p.cons(c(2), p.cons(c(3), p.nil()))))


def test_loop_over_runtime_data_stays_a_call():
    mod = tvm.IRModule()
    t = relay.TypeVar("t")
    x = relay.Var("x", t)
    loop = relay.GlobalVar("loop")
    mod[loop] = relay.Function([x], loop(x), t, [t])
    got = dcpe(loop(relay.const(1)), mod)
    assert_structural_equal(got.body, relay.Call(loop, [relay.const(1)]))
    counted = parse("""def @count(%n: int32, %acc: float32) -> float32 {
      if (less(%n, 1)) { %acc } else { @count(subtract(%n, 1), add(%acc, 1f)) }
    }
    def @main(%m: int32) { (@count(%m, 0f), @count(3, 0f)) }""")
    out = transform.PartialEvaluate()(counted)
    calls = [n for n in tvm.ir.post_order(out["main"]) if isinstance(n, relay.Call)
             and isinstance(n.op, relay.GlobalVar)]
    assert len(calls) == 1  # the loop over %m stays; the one over 3 is unrolled to 3f
    res = relay.create_executor(mod=out).evaluate()(np.array(5, "int32"))
    assert float(res[0].numpy()) == 5.0 and float(res[1].numpy()) == 3.0


def test_gradient_becomes_first_order():
    x, y = relay.var("x", shape=(3,)), relay.var("y", shape=(3,))
    back = transform.gradient(relay.Function([x, y], relay.sum(relay.tanh(x * y))))
    got = dcpe(back)
    assert not _features(got.body) & {"RefCreate", "RefRead", "RefWrite", "Function"}
    a = np.array([0.1, -0.5, 2.0], "float32")
    b = np.array([1.0, 0.3, -0.2], "float32")
    ex = relay.create_executor()
    want, got_res = ex.evaluate(back)(a, b), ex.evaluate(got)(a, b)
    np.testing.assert_allclose(got_res[1][0].numpy(), want[1][0].numpy(), rtol=1e-6)
    np.testing.assert_allclose(got_res[1][1].numpy(), want[1][1].numpy(), rtol=1e-6)


def test_if_with_references_in_both_branches():
    t = relay.TensorType((), "bool")
    d, r, u, eff = relay.Var("d", t), relay.Var("r"), relay.Var("u"), relay.Var("eff")
    update = relay.Function([], relay.RefWrite(r, relay.RefRead(r) + relay.RefRead(r)))
    body = relay.Let(eff, relay.If(d, relay.Call(u, []), relay.Call(u, [])), relay.RefRead(r))
    body = relay.Let(r, relay.RefCreate(relay.const(1)), relay.Let(u, update, body))
    f = relay.Function([d], body)
    pe = transform.PartialEvaluate()(tvm.IRModule.from_expr(f))["main"]
    ex = relay.create_executor()
    for cond in (True, False):
        assert int(ex.evaluate(pe)(np.array(cond)).numpy()) == 2


def test_function_reading_a_reference_is_invalidated():
    t = relay.TensorType((), "bool")
    d, r = relay.Var("d", t), relay.Var("r")
    fet, obscured, u = relay.Var("fetch"), relay.Var("fetch_obscured"), relay.Var("u")
    body = relay.If(d, relay.Call(obscured, []), relay.Call(obscured, []))
    body = relay.Let(u, relay.RefWrite(r, relay.const(1)), body)
    body = relay.Let(obscured, relay.If(d, fet, fet), body)
    body = relay.Let(fet, relay.Function([], relay.RefRead(r)), body)
    f = relay.Function([d], relay.Let(r, relay.RefCreate(relay.const(0)), body))
    pe = transform.PartialEvaluate()(tvm.IRModule.from_expr(f))["main"]
    assert int(relay.create_executor().evaluate(pe)(np.array(True)).numpy()) == 1


def test_dynamic_match_keeps_clauses():
    mod = tvm.IRModule()
    p = relay.prelude.Prelude(mod)
    xs = relay.var("xs", p.l(SCALAR))
    mod["main"] = relay.Function([xs], p.length(xs))
    out = transform.PartialEvaluate()(mod)
    lst = p.cons(relay.const(1.0), p.cons(relay.const(2.0), p.nil()))
    ex = relay.create_executor(mod=out)
    val = ex.evaluate(relay.Call(out.get_global_var("main"), [lst]))
    assert int(val.numpy()) == 2


@settings(max_examples=15, deadline=None)
@given(dataflow_programs())
def test_law_keeps_results(case):
    mod, args = case
    out = transform.PartialEvaluate()(mod)
    check_well_formed(out)
    assert_same_result(mod, out, *args)


def test_deep_let_chain_and_deep_static_recursion():
    x = relay.var("x", shape=(2,))
    vars_ = [relay.Var(f"v{i}") for i in range(3000)]
    expr = vars_[-1]
    for i in reversed(range(3000)):
        prev = x if i == 0 else vars_[i - 1]
        expr = relay.Let(vars_[i], relay.add(prev, relay.const(1.0)), expr)
    out = transform.PartialEvaluate()(tvm.IRModule.from_expr(relay.Function([x], expr)))
    res = relay.create_executor(mod=out).evaluate()(np.zeros(2, "float32"))
    np.testing.assert_array_equal(res.numpy(), [3000.0, 3000.0])
    count = parse("""def @down(%n: int32) -> int32 {
      if (less(%n, 1)) { %n } else { @down(subtract(%n, 1)) }
    }
    def @main() { @down(1500) }""")
    out = transform.PartialEvaluate(max_depth=2000)(count)
    assert_structural_equal(out["main"].body, relay.const(0))


def test_bad_max_depth():
    with pytest.raises(ValueError, match="PartialEvaluate: max_depth must be an integer >= 0, "
                                         "got -1"):
        transform.PartialEvaluate(max_depth=-1)


def _brute_recursive(graph):
    return {n for n in graph if is_recursive(graph, n)}


@given(st.dictionaries(st.integers(0, 7), st.lists(st.integers(0, 9), max_size=4), max_size=8))
@settings(max_examples=60, deadline=None)
def test_recursive_functions_equals_is_recursive_per_name(edges):
    # callees 8 and 9 are never keys: references to names the graph does not define
    graph = {f"f{k}": [f"f{c}" for c in v] for k, v in edges.items()}
    assert recursive_functions(graph) == _brute_recursive(graph)


def test_recursive_functions_is_linear_in_the_call_graph():
    # 200,000 functions: the former is_recursive per name (O(n^2): 2e10 steps) never finished
    n = 200_000
    chain = {f"f{i}": [f"f{i + 1}"] if i + 1 < n else [] for i in range(n)}
    assert recursive_functions(chain) == set()
    cycle = {**chain, f"f{n - 1}": ["f0"], "g": ["f7", "g"], "h": ["g"]}
    assert recursive_functions(cycle) == set(chain) | {"g"}


def test_pass_builds_the_call_graph_once(monkeypatch):
    """Each global was partially evaluated with its own call graph and recursion check:
    O(globals^2) and worse. Now one per pass, shared by every function."""
    calls = []
    real = pe_module.call_graph
    monkeypatch.setattr(pe_module, "call_graph", lambda mod: calls.append(1) or real(mod))
    mod = tvm.IRModule()
    x = relay.var("x", SCALAR)
    for i in range(30):
        mod[f"f{i}"] = relay.Function([x], relay.add(x, relay.const(float(i))))
    loop = relay.GlobalVar("loop")
    y = relay.var("y", SCALAR)
    mod[loop] = relay.Function([y], relay.Call(loop, [y]), SCALAR)
    mod["main"] = relay.Function([x], relay.Call(mod.get_global_var("f3"), [x]))
    out = transform.PartialEvaluate()(mod)
    assert len(calls) == 1
    assert any(isinstance(n, relay.Call) and getattr(n.op, "name_hint", "") == "loop"
               for n in tvm.ir.post_order(out["loop"]))  # recursive: still calls itself
    # f3 inlined (not recursive): let %v = add(%x, 3f); %v
    assert "GlobalVar" not in _features(out["main"]) and "Constant" in _features(out["main"])

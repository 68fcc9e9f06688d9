"""relay.analysis: variables, type variables, well-formedness, post-order visits, op counts."""
from __future__ import annotations

import pytest

from ember.ir import (Call, Clause, Constructor, FuncType, Function, GlobalTypeVar, GlobalVar,
                      IRModule, Let, Match, Op, PatternConstructor, PatternTuple, PatternVar,
                      SourceName, Span, TensorType, Tuple, TypeCall, TypeData, TypeVar, Var,
                      const, var)
from ember.relay import analysis
from ember.runtime.errors import DiagnosticError


def call(name: str, *args) -> Call:
    return Call(Op(name), args)


def names(vs) -> list[str]:
    return [v.name_hint for v in vs]


# -- variables --------------------------------------------------------------------------------
def test_free_bound_and_all_vars_in_order():
    x, y, z, v = var("x"), var("y"), var("z"), var("v")
    f = Function([x], Let(v, call("add", x, y), call("add", v, z)))
    assert names(analysis.free_vars(f)) == ["y", "z"]
    assert names(analysis.bound_vars(f)) == ["x", "v"]
    assert names(analysis.all_vars(f)) == ["x", "v", "y", "z"]


def test_pattern_vars_are_bound():
    a = TypeVar("a")
    lst = GlobalTypeVar("List")
    cons = Constructor("Cons", [a, TypeCall(lst, [a])], lst)
    TypeData(lst, [a], [cons])
    xs, h, t = var("xs"), var("h"), var("t")
    m = Match(xs, [Clause(PatternConstructor(cons, [PatternVar(h), PatternVar(t)]), h)])
    assert names(analysis.free_vars(m)) == ["xs"]
    assert names(analysis.bound_vars(m)) == ["h", "t"]


def test_var_functions_reject_non_expressions():
    with pytest.raises(TypeError, match="free_vars: expected a Relay expression, got IRModule"):
        analysis.free_vars(IRModule())


def test_free_vars_of_a_deep_let_chain():
    x = var("x")
    body, vs = None, [var(f"v{i}") for i in range(5000)]
    body = vs[-1]
    for i in reversed(range(5000)):
        body = Let(vs[i], call("negative", vs[i - 1] if i else x), body)
    assert names(analysis.free_vars(body)) == ["x"]
    assert len(analysis.bound_vars(body)) == 5000
    analysis.check_well_formed(Function([x], body))


# -- type variables ---------------------------------------------------------------------------
def test_type_vars_of_a_polymorphic_function():
    a, b = TypeVar("A"), TypeVar("B")
    x, y = var("x", a), var("y", b)
    f = Function([x, y], x, a, [a])
    assert analysis.free_type_vars(f) == [b]
    assert analysis.bound_type_vars(f) == [a]
    assert set(analysis.all_type_vars(f)) == {a, b}


def test_type_vars_of_types():
    a, b = TypeVar("A"), TypeVar("B")
    fn_ty = FuncType([a, TensorType((2,))], b, [a])
    assert analysis.free_type_vars(fn_ty) == [b]
    assert analysis.bound_type_vars(fn_ty) == [a]
    assert analysis.all_type_vars(fn_ty) == [a, b]


def test_constructor_type_vars_are_bound_by_their_definition():
    a = TypeVar("a")
    lst = GlobalTypeVar("List")
    nil = Constructor("Nil", [], lst)
    cons = Constructor("Cons", [a, TypeCall(lst, [a])], lst)
    mod = IRModule({}, {lst: TypeData(lst, [a], [nil, cons])})
    assert analysis.free_type_vars(Call(nil, ()), mod) == []
    assert analysis.bound_type_vars(Call(nil, ()), mod) == [a]
    assert analysis.free_type_vars(Call(cons, (const(1), Call(nil, ())))) == []


def test_type_var_functions_reject_other_things():
    with pytest.raises(TypeError, match="expected a Relay expression or type, got int"):
        analysis.free_type_vars(3)


# -- well-formedness --------------------------------------------------------------------------
def wf_error(node, mod=None) -> str:
    assert not analysis.well_formed(node, mod)
    with pytest.raises(DiagnosticError) as info:
        analysis.check_well_formed(node, mod)
    return str(info.value)


def test_well_formed_programs():
    x, y, v = var("x"), var("y"), var("v")
    assert analysis.well_formed(Function([x], Let(v, call("add", x, y), v)))
    assert analysis.well_formed(call("add", x, y))  # free vars are fine in a bare expression
    shared = call("exp", x)
    assert analysis.well_formed(Function([x], Tuple([shared, shared])))


def test_variable_bound_twice():
    x = var("x")
    assert wf_error(Tuple([Function([x], x), Function([x], x)])) == "%x is bound twice"
    v = var("v")
    assert "%v is bound twice" in wf_error(Let(v, const(1), Let(v, const(2), v)))


def test_pattern_binding_the_same_var_twice():
    h = var("h")
    pair = PatternTuple([PatternVar(h), PatternVar(h)])
    m = Match(Tuple([const(1), const(2)]), [Clause(pair, h)])
    assert wf_error(m) == "%h is bound twice"


def test_variable_used_outside_its_scope():
    x, v = var("x"), var("v")
    assert wf_error(Tuple([Let(v, x, v), v])) == "%v is used outside its scope"
    assert wf_error(Tuple([Function([x], x), x])) == "%x is used outside its scope"
    assert wf_error(Tuple([x, Function([x], x)])) == "%x is used outside its scope"


def test_let_value_cannot_use_its_own_variable():
    v = var("v")
    assert "%v is used in its own definition" in wf_error(Let(v, call("add", v, v), v))


def test_recursive_function_let_is_allowed():
    f, n = var("f"), var("n")
    rec = Let(f, Function([n], Call(f, (call("subtract", n, const(1)),))), Call(f, (const(3),)))
    assert analysis.well_formed(rec)


def test_free_variable_in_a_global_function():
    x, y = var("x"), var("y")
    mod = IRModule.from_expr(Function([x], call("add", x, y)))
    assert wf_error(mod) == "free variable %y in @main"


def test_undefined_global_function():
    x = var("x")
    mod = IRModule({"main": Function([x], GlobalVar("helper")(x))})
    assert wf_error(mod) == "undefined global function @helper in @main"
    mod["helper"] = Function([var("a")], const(0))
    assert analysis.well_formed(mod)


def test_error_starts_with_the_source_location_when_known():
    x = Var("x", None, span=Span(SourceName("m.relay"), 3, 5))
    assert wf_error(Let(x, const(1), Let(x, const(2), x))) == "m.relay:3:5: %x is bound twice"


def test_check_well_formed_rejects_non_ir():
    with pytest.raises(TypeError, match="check_well_formed: expected a Relay expression"):
        analysis.check_well_formed("fn () {}")


# -- visiting, counting -----------------------------------------------------------------------
def test_post_order_visit_goes_children_first_once_each():
    x = var("x")
    e = call("exp", x)
    seen: list = []
    analysis.post_order_visit(Tuple([e, e]), seen.append)
    assert [type(n).__name__ for n in seen] == ["Op", "Var", "Call", "Tuple"]


def test_list_op_freqs():
    x = var("x")
    e = call("exp", x)
    mod = IRModule({"main": Function([x], call("add", e, call("exp", e)))})
    assert analysis.list_op_freqs(mod) == {"exp": 2, "add": 1}

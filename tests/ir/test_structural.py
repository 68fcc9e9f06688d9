"""Structural equality and hashing: alpha-equivalence, free vars, sharing, messages, stability."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import ember
from ember.ir import (
    Any,
    Attrs,
    Call,
    Clause,
    Constructor,
    ExprMutator,
    Function,
    FuncType,
    GlobalTypeVar,
    GlobalVar,
    If,
    IRModule,
    Let,
    Match,
    Op,
    PatternConstructor,
    PatternVar,
    PatternWildcard,
    ShapeVar,
    Span,
    TensorType,
    Tuple,
    TupleGetItem,
    TupleType,
    TypeCall,
    TypeData,
    TypeVar,
    Var,
    assert_structural_equal,
    bound_vars,
    const,
    post_order,
    structural_equal,
    structural_hash,
    var,
)
from ember.ir.types import scalar_type


@dataclass(frozen=True)
class ConvAttrs(Attrs):
    padding: tuple[int, ...] = (0, 0)
    strides: tuple[int, ...] = (1, 1)
    data_layout: str = "NCHW"


def call(name: str, *args, attrs=None) -> Call:
    return Call(Op(name), args, attrs)


def t(*shape: int) -> TensorType:
    return TensorType(shape, "float32")


def same(a, b, map_free_vars: bool = False) -> bool:
    """Equal, and (as equality promises) hashed alike."""
    eq = structural_equal(a, b, map_free_vars)
    if eq:
        assert structural_hash(a, map_free_vars) == structural_hash(b, map_free_vars)
    return eq


def diff_message(a, b, map_free_vars: bool = False) -> str:
    with pytest.raises(ValueError) as info:
        assert_structural_equal(a, b, map_free_vars)
    return str(info.value)


def add_fn(swap: bool = False) -> Function:
    x, y = var("x", t(2)), var("y", t(2))
    return Function([x, y], call("add", *((y, x) if swap else (x, y))))


# -- bound variables --------------------------------------------------------------------------
def test_alpha_equivalent_functions_are_equal_and_hash_alike():
    assert same(add_fn(), add_fn())


def test_swapped_params_differ_and_the_message_names_the_place():
    assert not structural_equal(add_fn(), add_fn(swap=True))
    msg = diff_message(add_fn(), add_fn(swap=True))
    assert "<root>.body.args[0]" in msg and "lhs %x corresponds to rhs %x, not %y" in msg


def test_param_annotations_are_compared():
    x, y = var("x", t(2)), var("x", t(3))
    assert "params[0].type_annotation.shape[0]" in diff_message(Function([x], x),
                                                                Function([y], y))


def test_bound_variables_map_one_to_one():
    a, b, c = var("a"), var("b"), var("c")
    assert not structural_equal(Function([a, b], Tuple([a, b])), Function([c, c], Tuple([c, c])))


def test_let_alpha_equivalence():
    def prog(n1: str, n2: str) -> Function:
        x, v, w = var("x", t(2)), var(n1, t(2)), var(n2, t(2))
        return Function([x], Let(v, call("add", x, x), Let(w, call("multiply", v, v), w)))

    assert same(prog("a", "b"), prog("p", "q"))


def test_polymorphic_functions_map_type_params():
    def ident(name: str) -> Function:
        a = TypeVar(name)
        x = var("x", a)
        return Function([x], x, a, [a])

    assert same(ident("A"), ident("B"))
    a, b = TypeVar("A"), TypeVar("B")
    assert same(FuncType([a], a, [a]), FuncType([b], b, [b]))
    assert not structural_equal(FuncType([a, b], a, [a, b]), FuncType([a, b], b, [a, b]))


def list_adt() -> tuple[GlobalTypeVar, TypeData]:
    a = TypeVar("a")
    lst = GlobalTypeVar("List")
    cons, nil = Constructor("Cons", [a, TypeCall(lst, [a])], lst), Constructor("Nil", [], lst)
    return lst, TypeData(lst, [a], [cons, nil])


def head_module(hname: str) -> IRModule:
    lst, td = list_adt()
    cons, nil = td.constructors
    xs, h = var("xs", TypeCall(lst, [scalar_type("int32")])), var(hname)
    body = Match(xs, [Clause(PatternConstructor(cons, [PatternVar(h), PatternWildcard()]), h),
                      Clause(PatternConstructor(nil), const(0))])
    return IRModule({"head": Function([xs], body)}, {lst: td})


def test_match_and_type_definitions_from_separate_builds_are_equal():
    assert same(head_module("h"), head_module("first"))


def test_constructor_difference_is_reported_inside_the_type_definition():
    lst, td = list_adt()
    lst2, td2 = list_adt()
    td2 = TypeData(lst2, td2.type_vars, [td2.constructors[0], Constructor("Empty", [], lst2)])
    msg = diff_message(IRModule({}, {lst: td}), IRModule({}, {lst2: td2}))
    assert "type List.constructors[1].name_hint" in msg and "'Empty'" in msg


# -- free variables ---------------------------------------------------------------------------
def test_free_vars_are_equal_only_to_themselves_unless_mapped():
    x, y = var("x", t(2)), var("x", t(2))
    assert same(call("negative", x), call("negative", x))
    assert not structural_equal(call("negative", x), call("negative", y))
    assert same(call("negative", x), call("negative", y), map_free_vars=True)
    assert "map_free_vars=True" in diff_message(call("negative", x), call("negative", y))


def test_mapped_free_vars_stay_one_to_one():
    x, y, a = var("x"), var("y"), var("a")
    assert not structural_equal(call("add", x, y), call("add", a, a), map_free_vars=True)
    assert not structural_equal(call("add", a, a), call("add", x, y), map_free_vars=True)


def test_shape_vars_are_free_variables():
    n, m = ShapeVar("n"), ShapeVar("n")
    assert same(TensorType((n, 3)), TensorType((n, 3)))
    assert not structural_equal(TensorType((n, 3)), TensorType((m, 3)))
    assert same(TensorType((n, n)), TensorType((m, m)), map_free_vars=True)
    assert not structural_equal(TensorType((n, n)), TensorType((n, m)), map_free_vars=True)


# -- sharing ----------------------------------------------------------------------------------
def test_shared_call_differs_from_two_equal_calls():
    x, y = var("x"), var("y")
    shared = call("add", x, y)
    assert same(Tuple([shared, shared]), Tuple([shared, shared]))
    assert not structural_equal(Tuple([shared, shared]), Tuple([call("add", x, y), shared]))
    msg = diff_message(Tuple([shared, shared]), Tuple([shared, call("add", x, y)]))
    assert "<root>.fields[1]" in msg and "shared" in msg


def test_shared_constant_equals_two_equal_constants():
    c = const(np.ones((2, 2), "float32"))
    assert same(Tuple([c, c]), Tuple([const(np.ones((2, 2), "float32")), c]))


def test_let_bound_value_differs_from_inlined_copies():
    x = var("x")
    a = var("a")
    dag = Let(a, call("exp", x), Tuple([a, a]))
    assert not structural_equal(dag, Tuple([call("exp", x), call("exp", x)]))


# -- constants, attrs, values -----------------------------------------------------------------
def test_constants_compare_dtype_shape_and_bytes():
    base = np.arange(6, dtype="float32").reshape(2, 3)
    other = base.copy()
    other[1, 2] += 1
    assert same(const(base), const(base.copy()))
    msg = diff_message(const(base), const(other))
    assert "<root>.data: tensor contents differ" in msg and "5.0" in msg and "6.0" in msg
    assert not structural_equal(const(base), const(base.astype("float64")))
    assert not structural_equal(const(1.0), const([1.0]))


def test_attrs_difference_names_the_field():
    def mod(pad: tuple[int, int]) -> IRModule:
        x, w = var("x", t(1, 3, 8, 8)), var("w", t(4, 3, 3, 3))
        conv = call("nn.conv2d", x, w, attrs=ConvAttrs(padding=pad))
        return IRModule.from_expr(Function([x, w], call("add", x, conv)))

    assert same(mod((1, 1)), mod((1, 1)))
    msg = diff_message(mod((1, 1)), mod((0, 0)))
    assert "at main.body.args[1].attrs.padding[0]: values differ" in msg
    assert "in lhs:" in msg and "conv2d" in msg


def test_function_attrs_compare_by_value():
    x = var("x")
    plain = Function([x], x)
    assert same(plain, Function([x], x, attrs={}))
    assert same(plain.with_attr("Primitive", 1), Function([x], x).with_attr("Primitive", 1))
    msg = diff_message(plain.with_attr("Primitive", 1), plain.with_attr("Primitive", 2))
    assert "<root>.attrs.Primitive" in msg


def test_plain_values():
    assert same(1, 1.0) and same(True, 1) and same((1, 2), [1, 2])
    assert same({"a": (1, "x")}, {"a": [1, "x"]})
    assert not structural_equal((1, 2), (1, 2, 3)) and not structural_equal("a", "b")
    assert not structural_equal(1, "1") and not structural_equal(None, 0)
    assert "lengths differ: 2 vs 3" in diff_message((1, 2), (1, 2, 3))


def test_types_compare_by_value():
    assert same(TupleType([t(2), TensorType((Any(), 3))]), TupleType([t(2), TensorType((-1, 3))]))
    assert not structural_equal(t(2), TensorType((2,), "int32"))
    assert "<root>.fields[1]: lhs is a TensorType, rhs is a TupleType" in diff_message(
        TupleType([t(2), t(3)]), TupleType([t(2), TupleType([])]))


# -- what is ignored, modules -----------------------------------------------------------------
def test_spans_checked_types_and_op_type_args_are_ignored():
    x = var("x", t(2))
    a = Call(Op("negative"), (x,), type_args=(t(2),), span=Span(None, 3, 4))
    b = Call(Op("negative"), (x,), checked_type_=t(2))
    assert same(a, b)


def test_modules_match_functions_by_name():
    def build(order: list[str]) -> IRModule:
        mod = IRModule()
        for name in order:
            x = var("x", t(2))
            body = GlobalVar("f")(x) if name == "main" else call("negative", x)
            mod[name] = Function([x], body)
        return mod

    assert same(build(["main", "f"]), build(["f", "main"]))
    msg = diff_message(build(["main", "f"]), build(["main", "g"]))
    assert "lhs has ['f', 'main'], rhs has ['g', 'main']" in msg


def test_json_round_trip_is_structurally_equal():
    mod = head_module("h")
    assert same(ember.ir.load_json(ember.ir.save_json(mod)), mod, map_free_vars=True)


# -- scale and stability ----------------------------------------------------------------------
def let_chain(n: int, last: float = 1.0) -> Function:
    x = var("x", t(2))
    names = [var(f"v{i}", t(2)) for i in range(n)]
    body = names[-1]
    for i in reversed(range(n)):
        prev = names[i - 1] if i else x
        body = Let(names[i], call("add", prev, const(last if i == n - 1 else 1.0)), body)
    return Function([x], body)


def test_deep_let_chain_of_5000():
    a, b = let_chain(5000), let_chain(5000)
    assert same(a, b)
    msg = diff_message(a, let_chain(5000, last=2.0))
    assert "<root>(.body)*5000.value.args[1].data: tensor contents differ" in msg


def test_deep_call_nesting_needs_no_recursion():
    def nest(n: int, leaf):
        e = leaf
        for _ in range(n):
            e = call("negative", e)
        return e

    x = var("x")
    assert same(nest(3000, x), nest(3000, x))
    assert not structural_equal(nest(3000, x), nest(2999, x))


def test_hash_tells_apart_what_equality_does():
    assert structural_hash(add_fn()) != structural_hash(add_fn(swap=True))
    assert structural_hash(const(1.0)) != structural_hash(const(1.0, "float64"))
    assert structural_hash(t(2, 3)) != structural_hash(t(3, 2))


_STABLE_PROGRAM = """
from ember.ir import Function, IRModule, Let, const, structural_hash, var
from ember.ir.expr import Call
from ember.ir.op import Op
x, v = var("x", shape=(1, 3)), var("v", shape=(1, 3))
f = Function([x], Let(v, Call(Op("add"), (x, const([[1.0, 2.0, 3.0]]))), v), attrs={"k": "s"})
result = structural_hash(IRModule.from_expr(f))
"""


def test_hash_is_stable_across_processes():
    ns: dict = {}
    exec(_STABLE_PROGRAM, ns)  # noqa: S102 - the same program runs in a subprocess
    root = str(Path(ember.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": root, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", _STABLE_PROGRAM + "print(result)"], env=env,
                         capture_output=True, text=True, check=True)
    assert int(out.stdout.strip()) == ns["result"]
    assert 0 <= ns["result"] < 2**63


# -- laws over random programs ----------------------------------------------------------------
_leaf = st.one_of(st.tuples(st.just("var"), st.integers(0, 7)),
                  st.tuples(st.just("const"), st.integers(-3, 3)))


def _extend(kids: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.tuples(st.just("call"), st.sampled_from(["add", "multiply"]), kids, kids),
        st.tuples(st.just("tuple"), st.lists(kids, max_size=3)),
        st.tuples(st.just("let"), kids, kids),
        st.tuples(st.just("fn"), kids),
        st.tuples(st.just("if"), kids, kids, kids),
        st.tuples(st.just("get"), kids, st.integers(0, 2)))


programs = st.recursive(_leaf, _extend, max_leaves=16)
FREE = [var("x", t(2)), var("y", t(2))]


def build(spec: tuple, scope: list[Var]):
    """A Relay expression from a random spec; vars refer to the innermost scopes."""
    kind, rest = spec[0], spec[1:]
    if kind == "var":
        return scope[-1 - rest[0] % len(scope)]
    if kind == "const":
        return const(float(rest[0]))
    if kind in ("let", "fn"):
        v = var(f"v{len(scope)}", t(2))
        if kind == "fn":
            return Function([v], build(rest[0], scope + [v]))
        return Let(v, build(rest[0], scope), build(rest[1], scope + [v]))
    if kind == "call":
        return call(rest[0], build(rest[1], scope), build(rest[2], scope))
    if kind == "tuple":
        return Tuple([build(s, scope) for s in rest[0]])
    if kind == "if":
        return If(*(build(s, scope) for s in rest))
    return TupleGetItem(build(rest[0], scope), rest[1])


class Replace(ExprMutator):
    def __init__(self, mapping: dict) -> None:
        super().__init__()
        self.mapping = mapping

    def visit_var(self, v: Var):
        return self.mapping.get(v, v)

    def visit_constant(self, c):
        return self.mapping.get(c, c)


def alpha_rename(expr):
    return Replace({v: Var(v.name_hint + "_r", v.type_annotation) for v in bound_vars(expr)}
                   ).visit(expr)


def resolve(root, path: str):
    """Follow a message path such as ``<root>(.body)*4.args[1].data`` from ``root``."""
    path = re.sub(r"\((\.\w+)\)\*(\d+)", lambda m: m.group(1) * int(m.group(2)), path)
    obj = root
    for name, index in re.findall(r"\.(\w+)|\[(\d+)\]", path[len("<root>"):]):
        obj = getattr(obj, name) if name else obj[int(index)]
    return obj


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs)
def test_alpha_renamed_copies_are_equal_and_hash_alike(spec):
    expr = build(spec, list(FREE))
    assert same(expr, alpha_rename(expr))
    assert same(expr, build(spec, list(FREE)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs, st.data())
def test_changing_one_constant_is_found_at_its_path(spec, data):
    expr = build(spec, list(FREE))
    consts = [e for e in post_order(expr) if type(e).__name__ == "Constant"]
    assume(consts)
    old = data.draw(st.sampled_from(consts))
    new = const(old.data.numpy() + 1)
    changed = Replace({old: new}).visit(alpha_rename(expr))
    assert not structural_equal(expr, changed)
    assert structural_hash(expr) != structural_hash(changed)
    path = re.search(r"at (\S+): ", diff_message(expr, changed)).group(1)
    assert path.endswith(".data")
    assert resolve(expr, path) is old.data and resolve(changed, path) is new.data

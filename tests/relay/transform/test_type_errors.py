"""InferType on ill-typed programs: each error names what is wrong and where."""
from __future__ import annotations

import re

import pytest

import ember
from ember import relay
from ember.ir import IRModule, Op
from ember.ir.op import OP_REGISTRY, OpDef, register_op
from ember.ir.types import TensorType
from ember.relay.transform import InferType, infer_type
from ember.runtime.errors import DiagnosticError, TypeInferenceError


def call(name, *args, **attrs):
    op = Op.get(name)
    return relay.Call(op, args, op.make_attrs(**attrs) if attrs else None)


def infer_main(*params, body, mod=None):
    mod = mod if mod is not None else IRModule()
    mod["main"] = relay.Function(list(params), body)
    return InferType()(mod)


def raises(match):
    return pytest.raises(TypeInferenceError, match=match)


def list_adt(mod):
    lst, a = relay.GlobalTypeVar("List"), relay.TypeVar("A")
    cons = relay.Constructor("Cons", [a, lst(a)], lst)
    nil = relay.Constructor("Nil", [], lst)
    mod[lst] = relay.TypeData(lst, [a], [cons, nil])
    return lst, cons, nil


def test_error_classes():
    assert issubclass(TypeInferenceError, DiagnosticError)
    assert issubclass(TypeInferenceError, TypeError)


# -- functions ------------------------------------------------------------------------------------
def test_wrong_argument_type_to_a_function():
    mod = IRModule()
    x = relay.var("x", shape=(3,))
    mod["f"] = relay.Function([x], x)
    y = relay.var("y", shape=(3,), dtype="int32")
    msg = (r"@f: argument 0 \(%x\): expected Tensor\[\(3\), float32\], got "
           r"Tensor\[\(3\), int32\] \(dtype float32 vs int32\)\n  in @main")
    with raises(msg):
        infer_main(y, body=mod.get_global_var("f")(y), mod=mod)


def test_wrong_number_of_arguments():
    mod = IRModule()
    x = relay.var("x", "int32")
    mod["f"] = relay.Function([x], x)
    n = relay.var("n", "int32")
    with raises(r"@f: expected 1 argument\(s\), got 2"):
        infer_main(n, body=mod.get_global_var("f")(n, n), mod=mod)
    with raises(r"add: expected 2 argument\(s\) \(lhs, rhs\), got 3"):
        infer_main(n, body=relay.Call(Op.get("add"), [n, n, n]))


def test_result_annotation_mismatch():
    x = relay.var("x", shape=(2,))
    mod = IRModule({"main": relay.Function([x], x, TensorType((3,)))})
    with raises(r"@main: the result type is Tensor\[\(3\), float32\], but the body has type "
                r"Tensor\[\(2\), float32\] \(dimension 0 is 3 vs 2\)"):
        InferType()(mod)


def test_let_annotation_mismatch():
    x = relay.var("x", shape=(2,))
    v = relay.var("v", shape=(2,), dtype="int32")
    with raises(r"let %v: the value has type Tensor\[\(2\), float32\], but the variable is "
                r"annotated Tensor\[\(2\), int32\]"):
        infer_main(x, body=relay.Let(v, x, v))


def test_calling_a_tensor():
    x, y = relay.var("x", shape=(2,)), relay.var("y", shape=(2,))
    with raises(r"%x is not a function: it has type Tensor\[\(2\), float32\]"):
        infer_main(x, y, body=relay.Call(x, [y]))


def test_free_variable():
    x, free = relay.var("x", "int32"), relay.var("free", "int32")
    with raises(r"free variable %free in @main"):
        infer_main(x, body=call("add", x, free))


def test_unknown_global():
    n = relay.var("n", "int32")
    with raises(r"unknown global function @nowhere; the module defines @main"):
        infer_main(n, body=relay.GlobalVar("nowhere")(n))


def test_op_used_as_a_value():
    x = relay.var("x", "int32")
    with raises(r"operator add can only be called"):
        infer_main(x, body=relay.Tuple([Op.get("add"), x]))


# -- operators ------------------------------------------------------------------------------------
def test_dtype_mismatch_in_add_names_op_and_place():
    x, y = relay.var("x", shape=(3,)), relay.var("y", shape=(3,), dtype="int32")
    with raises(r"add: .*float32.*int32") as info:
        infer_main(x, y, body=call("negative", call("add", x, y)))
    text = str(info.value)
    assert "\n  in @main\n" in text
    assert re.search(r"^  > .*add\(%x, %y\)", text, re.MULTILINE)  # the failing line is marked


def test_relation_errors_get_the_source_location():
    src = """#[version = "0.0.5"]
def @main(%x: Tensor[(3), float32], %y: Tensor[(4), float32]) {
  %0 = negative(%x);
  add(%0, %y)
}"""
    mod = ember.parser.fromtext(src, source_name="model.relay")
    with raises(r"^model\.relay:4:3: add: cannot broadcast"):
        InferType()(mod)


def test_unresolved_relation_asks_for_an_annotation():
    p = relay.Var("p")
    with raises(r"add: cannot infer the type of argument 0 \(lhs, %p\); add a type annotation"):
        infer_main(p, body=call("add", p, p))


def test_crashing_type_relation_is_reported_at_the_call():
    if "test.crash" not in OP_REGISTRY:
        register_op(OpDef("test.crash", 1, type_rel=lambda args, attrs: {}["boom"]))
    x = relay.var("x", shape=(1,))
    with raises(r"test\.crash: type relation failed with KeyError: 'boom'\n  in @main"):
        infer_main(x, body=call("test.crash", x))


def test_relation_result_conflicting_with_its_use():
    p, f = relay.Var("p"), relay.Var("f")
    x = relay.var("x", "int32")
    g = relay.Function([p], call("add", p, p), TensorType((), "float32"))
    with raises(r"add: the result has type int32, but it is used as float32"):
        infer_main(x, body=relay.Let(f, g, relay.Call(f, [x])))


# -- control flow, tuples, references -------------------------------------------------------------
def test_if_condition_must_be_a_bool_scalar():
    x = relay.var("x", shape=(3,))
    with raises(r"if: the condition must be a 0-d bool tensor \(bool\), got "
                r"Tensor\[\(3\), float32\]"):
        infer_main(x, body=relay.If(x, x, x))
    b = relay.var("b", shape=(1,), dtype="bool")
    with raises(r"got Tensor\[\(1\), bool\]"):
        infer_main(b, x, body=relay.If(b, x, x))


def test_if_branches_must_agree():
    c, x, n = relay.var("c", "bool"), relay.var("x", shape=(3,)), relay.var("n", "int32")
    with raises(r"if: the branches have different types: the then-branch has "
                r"Tensor\[\(3\), float32\], the else-branch has int32 \(dtype float32 vs int32\)"):
        infer_main(c, x, n, body=relay.If(c, x, n))


def test_projection_out_of_range():
    x = relay.var("x", shape=(2,))
    with raises(r"projection \.2: index out of range for a tuple of 2 field\(s\) "
                r"\(\(Tensor\[\(2\), float32\], Tensor\[\(2\), float32\]\)\)"):
        infer_main(x, body=relay.TupleGetItem(relay.Tuple([x, x]), 2))
    with raises(r"projection \.0: expected a tuple, got Tensor\[\(2\), float32\]"):
        infer_main(x, body=relay.TupleGetItem(x, 0))


def test_ref_write_of_wrong_type():
    x, n = relay.var("x", shape=(2,)), relay.var("n", "int32")
    with raises(r"RefWrite: cannot store a value of type Ref\[int32\] in a reference of type "
                r"Ref\[Tensor\[\(2\), float32\]\]"):
        infer_main(x, n, body=relay.RefWrite(relay.RefCreate(x), n))


def test_infinite_type_is_rejected():
    p, f = relay.Var("p"), relay.Var("f")
    # f(p) = f: the result type would contain itself
    with raises(r"a type cannot contain itself"):
        infer_type(relay.Let(f, relay.Function([p], relay.Call(f, [f])), f))


# -- ADTs and match -------------------------------------------------------------------------------
def _match_list(mod, cons, nil, clauses, complete=True):
    a = relay.TypeVar("B")
    xs = relay.Var("xs", relay.TypeCall(cons.belong_to, [a]))
    mod["f"] = relay.Function([xs], relay.Match(xs, clauses, complete), None, [a])
    return mod


def test_non_exhaustive_match():
    mod = IRModule()
    _, cons, nil = list_adt(mod)
    only_cons = [relay.Clause(relay.PatternConstructor(
        cons, [relay.PatternWildcard(), relay.PatternWildcard()]), relay.const(1))]
    with raises(r"match is not exhaustive: missing Nil .*\n  in @f"):
        InferType()(_match_list(mod, cons, nil, only_cons))
    InferType()(_match_list(mod, cons, nil, only_cons, complete=False))  # match? is fine


def test_nested_non_exhaustive_match_names_the_missing_case():
    mod = IRModule()
    _, cons, nil = list_adt(mod)
    two = relay.PatternConstructor(cons, [relay.PatternWildcard(), relay.PatternConstructor(
        cons, [relay.PatternWildcard(), relay.PatternWildcard()])])
    clauses = [relay.Clause(two, relay.const(2)),
               relay.Clause(relay.PatternConstructor(nil), relay.const(0))]
    with raises(r"missing Cons\(_, Nil\)"):
        InferType()(_match_list(mod, cons, nil, clauses))


def test_pattern_of_another_type():
    mod = IRModule()
    _, cons, nil = list_adt(mod)
    opt, a = relay.GlobalTypeVar("Option"), relay.TypeVar("A")
    some, none = relay.Constructor("Some", [a], opt), relay.Constructor("None", [], opt)
    mod[opt] = relay.TypeData(opt, [a], [some, none])
    clauses = [relay.Clause(relay.PatternConstructor(some, [relay.PatternWildcard()]),
                            relay.const(1)), relay.Clause(relay.PatternWildcard(), relay.const(0))]
    with raises(r"match: pattern Some\(_\) matches values of type Option\[_\], but the "
                r"matched value has type List\[B\]"):
        InferType()(_match_list(mod, cons, nil, clauses))


def test_pattern_arity():
    mod = IRModule()
    _, cons, nil = list_adt(mod)
    clauses = [relay.Clause(relay.PatternConstructor(cons, [relay.PatternWildcard()]),
                            relay.const(1)), relay.Clause(relay.PatternWildcard(), relay.const(0))]
    with raises(r"pattern Cons\(_\) has 1 sub-pattern\(s\), but Cons has 2 field\(s\)"):
        InferType()(_match_list(mod, cons, nil, clauses))


def test_clauses_must_agree():
    mod = IRModule()
    _, cons, nil = list_adt(mod)
    clauses = [relay.Clause(relay.PatternConstructor(nil), relay.const(1)),
               relay.Clause(relay.PatternWildcard(), relay.const(1.0))]
    with raises(r"match: clause 1 \(_\) has type float32, but the clauses before it have "
                r"type int32"):
        InferType()(_match_list(mod, cons, nil, clauses))


def test_constructor_argument_type():
    mod = IRModule()
    _, cons, _ = list_adt(mod)
    n = relay.var("n", "int32")
    with raises(r"Cons: argument 1: expected List\[int32\], got int32"):
        infer_main(n, body=cons(n, n), mod=mod)


def test_constructor_without_type_definition():
    lst, a = relay.GlobalTypeVar("List"), relay.TypeVar("A")
    nil = relay.Constructor("Nil", [], lst)
    relay.TypeData(lst, [a], [nil])  # defined, but not added to the module
    with raises(r"constructor Nil belongs to List, which this module does not define"):
        infer_main(body=nil())


def test_infer_type_rejects_non_expressions():
    with pytest.raises(TypeError, match="infer_type: expected a relay expression, got int"):
        infer_type(3)


def test_match_errors_in_text_point_at_the_match():
    src = """#[version = "0.0.5"]
type List[A] {
  Cons(A, List[A]),
  Nil,
}
def @head[B](%xs: List[B]) -> B {
  match (%xs) {
    Cons(%h, _) => %h,
  }
}"""
    with raises(r"^prog\.relay:7:3: match is not exhaustive: missing Nil .*\n  in @head\n  > "):
        InferType()(ember.parser.fromtext(src, source_name="prog.relay"))
    ok = InferType()(ember.parser.fromtext(src.replace("match (", "match? (")))
    b = ok["head"].type_params[0]
    assert ok["head"].checked_type.ret_type is b

"""The text printer: TVM's 0.0.5 layout, literals, metadata, names, determinism, short_text."""
from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

import ember as tvm
from ember import relay
from ember.ir import (Clause, Constructor, DictAttrs, FuncType, GlobalTypeVar, IncompleteType,
                      Match, PatternConstructor, PatternTuple, PatternVar, PatternWildcard,
                      ShapeVar, TensorType, TupleType, TypeCall, TypeData, TypeVar)
from ember.ir.printer import astext, short_text

HEADER = '#[version = "0.0.5"]\n'


def _text(body: str) -> str:
    return HEADER + textwrap.dedent(body).strip("\n")


def _main(body: relay.Expr, params: list[relay.Var]) -> tvm.IRModule:
    return tvm.IRModule.from_expr(relay.Function(params, body))


def test_spec_example_prints_like_tvm():
    a = relay.var("a", shape=(1, 2), dtype="uint8")
    b = relay.var("b", shape=(1, 2), dtype="uint8")
    mod = _main(relay.add(a, b), [a, b])
    assert mod.astext() == _text("""
        def @main(%a: Tensor[(1, 2), uint8], %b: Tensor[(1, 2), uint8]) {
          add(%a, %b)
        }
    """)


def test_each_call_is_bound_and_the_last_expression_is_inline():
    x = relay.var("x", shape=(3,))
    body = relay.multiply(relay.nn.relu(relay.add(x, x)), x)
    assert astext(relay.Function([x], body)) == _text("""
        fn (%x: Tensor[(3), float32]) {
          %0 = add(%x, %x);
          %1 = nn.relu(%0);
          multiply(%1, %x)
        }
    """)


def test_a_shared_subexpression_is_bound_once():
    x = relay.var("x", shape=(3,))
    shared = relay.nn.relu(x)
    text = astext(relay.Function([x], relay.add(shared, shared)))
    assert text.count("nn.relu") == 1
    assert "add(%0, %0)" in text


def test_shared_node_used_in_both_branches_is_bound_before_the_if():
    x = relay.var("x", shape=(3,))
    c = relay.var("c", "bool")
    shared = relay.nn.relu(x)
    body = relay.If(c, relay.add(shared, x), relay.multiply(shared, x))
    text = astext(relay.Function([c, x], body))
    assert text.count("nn.relu") == 1
    assert text.index("nn.relu") < text.index("if (%c)")


def test_let_if_and_nested_function():
    x = relay.var("x", shape=(2,))
    y = relay.var("y")
    f = relay.var("f")
    inner = relay.Function([y], relay.nn.relu(y)).with_attr("Primitive", 1)
    cond = relay.var("c", "bool")
    body = relay.Let(f, inner, relay.If(cond, relay.Call(f, [x]), x))
    assert astext(relay.Function([cond, x], body)) == _text("""
        fn (%c: bool, %x: Tensor[(2), float32]) {
          let %f = fn (%y, Primitive=1) {
            nn.relu(%y)
          };
          if (%c) {
            %f(%x)
          } else {
            %x
          }
        }
    """)


def _list_adt() -> tuple[GlobalTypeVar, Constructor, Constructor, TypeData]:
    lst = GlobalTypeVar("List")
    a = TypeVar("A")
    cons = Constructor("Cons", [a, TypeCall(lst, [a])], lst)
    nil = Constructor("Nil", [], lst)
    return lst, cons, nil, TypeData(lst, [a], [cons, nil])


def test_type_definition_and_match():
    lst, cons, nil, td = _list_adt()
    mod = tvm.IRModule()
    mod.add_type_def(lst, td)
    xs = relay.var("xs", TypeCall(lst, [relay.scalar_type("int32")]))
    h, t = relay.var("h"), relay.var("t")
    clauses = [Clause(PatternConstructor(cons, [PatternVar(h), PatternVar(t)]), h),
               Clause(PatternConstructor(nil), relay.const(0))]
    mod["main"] = relay.Function([xs], Match(xs, clauses))
    assert mod.astext() == _text("""
        type List[A] {
          Cons(A, List[A]),
          Nil,
        }

        def @main(%xs: List[int32]) {
          match (%xs) {
            Cons(%h, %t) => %h,
            Nil => 0,
          }
        }
    """)


def test_incomplete_match_and_wildcard_tuple_patterns():
    t = relay.var("t")
    a = relay.var("a")
    m = Match(t, [Clause(PatternTuple([PatternVar(a), PatternWildcard()]), a)], complete=False)
    assert "match? (%t) {\n    (%a, _) => %a,\n  }" in astext(relay.Function([t], m))


def test_nullary_constructor_call_prints_as_its_name():
    lst, cons, nil, td = _list_adt()
    x = relay.var("x")
    text = astext(relay.Function([x], cons(x, nil())))
    assert text.endswith("Cons(%x, Nil)\n}")


def test_op_attributes_print_as_keywords():
    x = relay.var("x", shape=(1, 3, 8, 8))
    w = relay.var("w", shape=(4, 3, 3, 3))
    conv = relay.nn.conv2d(x, w, padding=(1, 1), channels=4, kernel_size=(3, 3),
                           data_layout="NCHW", out_dtype="float32")
    text = astext(relay.Function([x, w], conv))
    assert ("nn.conv2d(%x, %w, padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3], "
            'out_dtype="float32")') in text


def test_attr_values_bools_floats_and_strings():
    x = relay.var("x", shape=(2, 3))
    text = astext(relay.nn.leaky_relu(x, alpha=0.5))
    assert "nn.leaky_relu(%x, alpha=0.5)" in text
    text = astext(relay.sum(x, axis=[1], keepdims=True))
    assert "sum(%x, axis=[1], keepdims=True)" in text


def test_tuples_one_tuples_and_projections():
    x = relay.var("x")
    one = relay.Tuple([x])
    empty = relay.Tuple([])
    body = relay.Tuple([relay.TupleGetItem(one, 0), empty])
    assert astext(relay.Function([x], body)) == _text("""
        fn (%x) {
          %0 = (%x,);
          %1 = %0.0;
          %2 = ();
          (%1, %2)
        }
    """)


@pytest.mark.parametrize("value, dtype, text", [
    (1.0, "float32", "1f"), (1.5, "float32", "1.5f"), (2, "int64", "2i64"), (3, "int32", "3"),
    (True, "bool", "True"), (False, "bool", "False"), (1.0, "float16", "1f16"),
    (-1.5, "float64", "-1.5f64"), (1, "uint8", "1u8"), (-7, "int8", "-7i8"),
    (1e-7, "float32", "1e-07f"), (65535, "uint16", "65535u16"), (-0.0, "float32", "-0f"),
])
def test_scalar_literals(value, dtype, text):
    assert astext(relay.const(value, dtype)) == HEADER + text


def test_tensor_constants_go_to_the_metadata_section():
    data = np.arange(6, dtype="int16").reshape(2, 3)
    c = relay.const(data)
    x = relay.var("x", shape=(2, 3), dtype="int16")
    text = astext(relay.Function([x], relay.add(relay.add(x, c), c)))
    body, meta = text.split("#[metadata]\n")
    assert body.count("meta[relay.Constant][0]") == 2 and "[1]" not in body
    record = json.loads(meta)["relay.Constant"][0]
    assert record["dtype"] == "int16" and record["shape"] == [2, 3]


def test_non_finite_scalars_go_to_the_metadata_section():
    assert "meta[relay.Constant][0]" in astext(relay.const(np.float32("inf")))


def test_show_meta_data_false_leaves_the_section_out():
    c = relay.const(np.ones((2, 2), "float32"))
    text = astext(c, show_meta_data=False)
    assert "#[metadata]" not in text and "meta[relay.Constant][0]" in text
    assert str(c) == text


@pytest.mark.parametrize("ty, text", [
    (TensorType((1, 3, relay.Any()), "float32"), "Tensor[(1, 3, ?), float32]"),
    (TensorType((3,), "int8"), "Tensor[(3), int8]"),
    (relay.scalar_type("float32"), "float32"),
    (TupleType([relay.scalar_type("int32"), TensorType((2,), "bool")]),
     "(int32, Tensor[(2), bool])"),
    (TupleType([relay.scalar_type("int32")]), "(int32,)"),
    (TupleType([]), "()"),
    (FuncType([relay.scalar_type("int32")], relay.scalar_type("bool")), "fn (int32) -> bool"),
    (IncompleteType(), "_"),
    (TensorType((ShapeVar("n"), 4), "float32"), "Tensor[(n, 4), float32]"),
])
def test_types(ty, text):
    assert astext(ty) == text


def test_polymorphic_function_type_and_type_call():
    a = TypeVar("A")
    lst = GlobalTypeVar("List")
    ty = FuncType([a, TypeCall(lst, [a])], TypeCall(lst, [a]), [a])
    assert astext(ty) == "fn [A](A, List[A]) -> List[A]"


def test_patterns_print_standalone():
    _, cons, _, _ = _list_adt()
    pat = PatternConstructor(cons, [PatternWildcard(), PatternVar(relay.var("t"))])
    assert astext(pat) == "Cons(_, %t)"


def test_distinct_variables_with_the_same_name_are_disambiguated():
    x1, x2 = relay.var("x"), relay.var("x")
    text = astext(relay.Function([x1, x2], relay.add(x1, x2)))
    assert "fn (%x, %x1) {" in text and "add(%x, %x1)" in text


def test_clashing_names_take_the_first_free_suffix():
    hints = ["x", "x", "x1", "x", "x2", "x", "x11"]
    vs = [relay.var(h) for h in hints]
    text = astext(relay.Function(vs, relay.Tuple(vs)))
    assert "fn (%x, %x1, %x11, %x2, %x21, %x3, %x111)" in text


def test_10_000_variables_of_one_name():
    vs = [relay.var("x") for _ in range(10_000)]
    text = astext(relay.Function(vs, relay.Tuple(vs)), show_types=False)
    assert text.count("%x9999") == 2 and "%x10000" not in text


def test_unprintable_names_are_sanitized():
    v0, v1 = relay.var("0"), relay.var("input.1")
    text = astext(relay.Function([v0, v1], relay.Tuple([v0, v1])))
    assert "fn (%v0, %input_1)" in text


def test_free_variables_are_declared():
    x = relay.var("x", shape=(2,))
    assert astext(relay.nn.relu(x)) == _text("""
        free_var %x: Tensor[(2), float32];
        nn.relu(%x)
    """)


def test_function_attributes_are_sorted_and_typed():
    x = relay.var("x")
    f = relay.Function([x], x, attrs=DictAttrs({"Primitive": 1, "Compiler": "ccompiler"}))
    assert 'fn (%x, Compiler="ccompiler", Primitive=1) {' in astext(f)


def test_inferred_types_are_shown_as_comments():
    x = relay.var("x", shape=(2,))
    mod = relay.transform.InferType()(_main(relay.nn.relu(x), [x]))
    text = mod.astext()
    assert "nn.relu(%x) /* ty=Tensor[(2), float32] */" in text
    assert "/* ty=" not in astext(mod, show_types=False)


def test_defs_print_sorted_by_name_with_temporaries_restarting():
    mod = tvm.IRModule()
    for name in ("zeta", "alpha"):
        x = relay.var("x", shape=(2,))
        mod[name] = relay.Function([x], relay.nn.relu(relay.nn.relu(x)))
    text = mod.astext()
    assert text.index("@alpha") < text.index("@zeta")
    assert text.count("%0 = nn.relu(%x);") == 2


def test_output_is_deterministic():
    def build() -> tvm.IRModule:
        x = relay.var("x", shape=(2,))
        c = relay.const(np.ones(2, "float32"))
        return _main(relay.add(relay.nn.relu(x), c), [x])

    assert build().astext() == build().astext()


def test_str_of_module_is_astext_without_metadata():
    x = relay.var("x", shape=(2,))
    mod = _main(relay.nn.relu(x), [x])
    assert str(mod) == mod.astext(show_meta_data=False)


def test_long_dataflow_chain_and_long_let_chain_print_without_recursion():
    x = relay.var("x", shape=(2,))
    e = x
    for _ in range(5000):
        e = relay.nn.relu(e)
    assert astext(relay.Function([x], e)).count("nn.relu") == 5000
    body: relay.Expr = x
    for i in reversed(range(5000)):
        v = relay.var(f"v{i}")
        body = relay.Let(v, x, body)
    assert astext(body).count("let %v") == 5000


def test_short_text_numbers_temporaries_as_the_full_printout():
    x, y = relay.var("x", shape=(2,)), relay.var("y", shape=(2,))
    a = relay.nn.relu(x)
    b = relay.add(a, y)
    f = relay.Function([x, y], relay.multiply(b, b))
    assert short_text(b, f) == "%1 = add(%0, %y)"
    assert "%1 = add(%0, %y);" in astext(f)
    assert short_text(x) == "%x"
    assert short_text(b) == "add(%0, %y)"


def test_short_text_is_one_line_and_bounded():
    x = relay.var("x", shape=(2,))
    body = relay.If(relay.var("c", "bool"), relay.nn.relu(x), x)
    text = short_text(body, limit=40)
    assert "\n" not in text and len(text) <= 40


def test_checked_type_error_uses_short_text():
    x = relay.var("x", shape=(2,))
    with pytest.raises(ValueError, match=r"no type yet for nn.relu\(%x\)"):
        _ = relay.nn.relu(x).checked_type

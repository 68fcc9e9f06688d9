"""The text parser: every construct of format 0.0.5 builds the expected IR, with spans."""
from __future__ import annotations

import numpy as np
import pytest

import ember as tvm
from ember import relay
from ember.ir import (Call, Constant, Constructor, Function, GlobalTypeVar, GlobalVar, If,
                      IncompleteType, Let, Match, Op, PatternConstructor, PatternTuple,
                      PatternVar, PatternWildcard, RefCreate, RefRead, RefWrite, ShapeVar,
                      TensorType, Tuple, TupleGetItem, TupleType, TypeCall, TypeVar, Var)
from ember.ir.parser import fromtext, parse, parse_expr

SPEC_EXAMPLE = """#[version = "0.0.5"]
def @main(%a : Tensor[(1, 2), uint8], %b : Tensor[(1, 2), uint8]) {
    %0 = add(%a, %b);
    %0
}
"""


def test_spec_example():
    mod = fromtext(SPEC_EXAMPLE)
    main = mod["main"]
    a, b = main.params
    assert a.name_hint == "a" and a.type_annotation == TensorType((1, 2), "uint8")
    assert isinstance(main.body, Call) and main.body.op is Op.get("add")
    assert main.body.args[0] is a and main.body.args[1] is b


def test_entry_points_are_reexported():
    assert tvm.parser.fromtext is fromtext and tvm.parser.parse is parse
    assert tvm.parser.parse_expr is parse_expr
    assert issubclass(tvm.error.DiagnosticError, tvm.TVMError)


def test_header_is_optional_and_a_lone_expression_becomes_main():
    mod = fromtext("free_var %x: float32; add(%x, 1f)")
    main = mod["main"]
    assert [p.name_hint for p in main.params] == ["x"]
    assert main.body.args[1].data.numpy() == np.float32(1)


def test_a_lone_function_becomes_main_itself():
    mod = parse("fn (%x) { %x }")
    assert mod["main"].params[0].name_hint == "x" and mod["main"].body is mod["main"].params[0]


def test_parse_expr_returns_the_expression():
    e = parse_expr("(1, 2i64, True)")
    assert isinstance(e, Tuple)
    assert [f.data.dtype for f in e.fields] == ["int32", "int64", "bool"]


def test_graph_bindings_share_one_node():
    e = parse_expr("free_var %x; %0 = nn.relu(%x); add(%0, %0)")
    assert e.args[0] is e.args[1]


def test_let_binds_a_var_and_recursive_let_functions():
    e = parse_expr("let %x: int32 = 1; let %f = fn (%y) { %f(%y) }; %f(%x)")
    assert isinstance(e, Let) and e.var.type_annotation == relay.scalar_type("int32")
    inner = e.body
    assert isinstance(inner.value, Function) and inner.value.body.op is inner.var
    assert inner.body.args[0] is e.var


def test_let_does_not_see_itself_in_a_non_function_value():
    e = parse_expr("free_var %x; let %x = add(%x, 1); %x")
    assert e.value.args[0] is not e.var and e.body is e.var


def test_if_and_blocks():
    e = parse_expr("free_var %c: bool; if (%c) { %0 = 1; %0 } else { 2 }")
    assert isinstance(e, If) and e.true_branch.data.numpy() == 1


def test_functions_with_type_params_ret_type_and_attrs():
    mod = fromtext("def @id[A](%x: A, Primitive=1) -> A { %x }")
    f = mod["id"]
    (a,) = f.type_params
    assert isinstance(a, TypeVar) and f.params[0].type_annotation is a and f.ret_type is a
    assert f.attrs["Primitive"] == 1


def test_recursion_and_mutual_recursion_with_forward_references():
    mod = fromtext("""
        def @even(%n: int32) -> bool { if (equal(%n, 0)) { True } else { @odd(subtract(%n, 1)) } }
        def @odd(%n: int32) -> bool { if (equal(%n, 0)) { False } else { @even(subtract(%n, 1)) } }
    """)
    even, odd = mod.get_global_var("even"), mod.get_global_var("odd")
    assert mod["even"].body.false_branch.op is odd
    assert mod["odd"].body.false_branch.op is even


LIST = """
type List[A] {
  Cons(A, List[A]),
  Nil,
}
"""


def test_type_definitions_and_constructors():
    mod = fromtext(LIST + "def @main() { Cons(1, Nil) }")
    lst, cons, nil = mod.get_type("List")
    assert isinstance(lst, GlobalTypeVar) and cons.tag == 0 and nil.tag == 1
    assert cons.inputs[1] == TypeCall(lst, [mod.type_definitions[lst].type_vars[0]])
    body = mod["main"].body
    assert body.op is cons and isinstance(body.args[1], Call) and body.args[1].op is nil


def test_bare_constructor_with_fields_is_the_constructor_itself():
    mod = fromtext(LIST + "def @main() { Cons }")
    assert isinstance(mod["main"].body, Constructor)


def test_types_may_refer_to_later_types():
    mod = fromtext("type A { MkA(B) }\ntype B { MkB }\ndef @main(%x: A) { %x }")
    (b_ref,) = mod.get_constructor("MkA").inputs
    assert b_ref is mod.get_global_type_var("B")


def test_match_with_every_kind_of_pattern():
    mod = fromtext(LIST + """
        def @main(%l: List[(int32, int32)]) -> int32 {
          match? (%l) {
            Cons((%a, _), %t) => %a,
            %other => { 0 },
          }
        }
    """)
    m = mod["main"].body
    assert isinstance(m, Match) and not m.complete
    first, second = m.clauses
    assert isinstance(first.lhs, PatternConstructor)
    tup, t = first.lhs.patterns
    assert isinstance(tup, PatternTuple) and isinstance(tup.patterns[1], PatternWildcard)
    assert isinstance(t, PatternVar) and first.rhs is tup.patterns[0].var
    assert isinstance(second.lhs, PatternVar)


def test_op_call_with_attributes():
    e = parse_expr("free_var %x; free_var %w; "
                   "nn.conv2d(%x, %w, padding=[1, 1], channels=4, data_layout=\"NCHW\")")
    assert e.attrs.padding == (1, 1, 1, 1) and e.attrs.channels == 4
    assert e.attrs.data_layout == "NCHW"


def test_op_without_keywords_gets_default_attrs():
    e = parse_expr("free_var %x; nn.softmax(%x)")
    assert e.attrs == Op.get("nn.softmax").make_attrs()


def test_calls_of_globals_vars_and_function_literals():
    mod = fromtext("""
        def @f(%x) { %x }
        def @main(%g, %y) {
          %0 = @f(%y);
          %1 = %g(%0);
          %2 = fn (%z) { %z };
          %2(%1)
        }
    """)
    body = mod["main"].body
    assert isinstance(body.op, Function)
    assert body.args[0].op is mod["main"].params[0]
    assert body.args[0].args[0].op is mod.get_global_var("f")


def test_tuples_and_projections():
    e = parse_expr("free_var %t; ((%t.0.1,), (), (%t))")
    one, empty, group = e.fields
    assert isinstance(one, Tuple) and len(one.fields) == 1
    item = one.fields[0]
    assert isinstance(item, TupleGetItem) and item.index == 1 and item.tuple_value.index == 0
    assert isinstance(empty, Tuple) and not empty.fields
    assert isinstance(group, Var)


def test_references():
    e = parse_expr("let %r = ref(1); %0 = ref_write(%r, 2); (ref_read(%r), %0)")
    assert isinstance(e.value, RefCreate)
    read, write = e.body.fields
    assert isinstance(read, RefRead) and isinstance(write, RefWrite)


@pytest.mark.parametrize("text, dtype, value", [
    ("3", "int32", 3), ("-3", "int32", -3), ("2i64", "int64", 2), ("7u8", "uint8", 7),
    ("1.5", "float32", 1.5), ("1f", "float32", 1.0), ("-1.5f64", "float64", -1.5),
    ("1e-3", "float32", np.float32(1e-3)), ("2.5E+2f16", "float16", 250.0),
    ("True", "bool", True), ("65504f16", "float16", 65504), ("-128i8", "int8", -128),
    ("3i32", "int32", 3), ("4f32", "float32", 4.0),
])
def test_scalar_literals(text, dtype, value):
    c = parse_expr(text)
    assert isinstance(c, Constant) and c.data.dtype == dtype and c.data.numpy() == value


def test_types():
    e = parse_expr("""
        free_var %a: Tensor[(1, ?, n), float32];
        free_var %b: (int8, Tensor[(n,), bool]);
        free_var %c: fn (float32) -> _;
        free_var %d: ();
        (%a, %b, %c, %d)
    """)
    a, b, c, d = (f.type_annotation for f in e.fields)
    assert isinstance(a.shape[1], relay.Any) and isinstance(a.shape[2], ShapeVar)
    assert b.fields[1].shape[0] is a.shape[2]  # one name, one symbolic dimension
    assert isinstance(b, TupleType) and b.fields[0] == relay.scalar_type("int8")
    assert isinstance(c.ret_type, IncompleteType)
    assert d == TupleType([])


def test_comments_are_ignored():
    mod = fromtext("""#[version = "0.0.5"]
        // a line comment
        def @main(%x /* a parameter */: float32) -> float32 {
          %x /* ty=float32 */ // trailing
        }
    """)
    assert mod["main"].body is mod["main"].params[0]


def test_metadata_section():
    data = np.arange(4, dtype="float32").reshape(2, 2)
    text = relay.Function([], relay.Tuple([relay.const(data)] * 2)).astext()
    e = parse_expr(text)
    first, second = e.body.fields
    assert first is second
    np.testing.assert_array_equal(first.data.numpy(), data)


def test_init_meta_table():
    data = np.ones((2, 2), "int8")
    e = parse_expr("meta[relay.Constant][0]", init_meta_table={"relay.Constant": [data]})
    np.testing.assert_array_equal(e.data.numpy(), data)


def test_init_module_globals_types_and_constructors_are_visible():
    base = fromtext(LIST + "def @f(%x) { %x }")
    mod = fromtext("def @main() { @f(Nil) }", init_module=base)
    assert mod["main"].body.op is base.get_global_var("f")
    assert set(g.name_hint for g in mod.get_global_vars()) == {"f", "main"}
    assert "main" not in base


def test_spans_point_at_the_source():
    mod = fromtext(SPEC_EXAMPLE, source_name="model.relay")
    call = mod["main"].body
    assert (call.span.line, call.span.column) == (3, 10)
    assert call.span.source_name.name == "model.relay"
    assert str(mod["main"].params[1].span) == "model.relay:2:39"


def test_graph_bindings_are_scoped_to_their_block():
    with pytest.raises(tvm.error.DiagnosticError, match="unbound variable %0"):
        parse_expr("if (True) { %0 = 1; %0 } else { %0 }")


def test_long_let_chain_parses_without_recursion():
    text = "".join(f"let %v{i} = {i};\n" for i in range(5000)) + "%v0"
    e = parse_expr(text)
    depth = 0
    while isinstance(e, Let):
        e, depth = e.body, depth + 1
    assert depth == 5000 and isinstance(e, Var)


def test_version_0_0_4_is_accepted():
    assert isinstance(parse_expr('#[version = "0.0.4"]\n1'), Constant)


def test_global_var_objects_are_the_module_keys():
    mod = fromtext("def @f() { @f() }")
    gv = mod.get_global_var("f")
    assert isinstance(gv, GlobalVar) and mod["f"].body.op is gv

"""Corners of the text format: nested comments wherever whitespace may go, names with '/',
``match`` over an unparenthesised tuple, ``extern type``, literal suffixes and their range
errors, spans, and ``astext(annotate=...)``."""
from __future__ import annotations

import re

import numpy as np
import pytest

import ember as tvm
from ember import relay
from ember.ir import assert_structural_equal
from ember.ir.parser import fromtext, parse_expr
from ember.ir.printer import astext

H = '#[version = "0.0.5"]\n'
PLAIN = H + "def @main(%x: float32, %y: float32) -> float32 {\n  %0 = add(%x, %y);\n  %0\n}"


def _commented(text: str, comment: str) -> str:
    """``text`` with ``comment`` between every two tokens (and at both ends)."""
    body = text[len(H):]
    tokens = re.findall(r"%[0-9A-Za-z_]+|@[A-Za-z_]+|->|[A-Za-z_][A-Za-z0-9_]*|[^\sA-Za-z_]",
                        body)
    return H + comment + comment.join(tokens) + comment


@pytest.mark.parametrize("comment", [
    " /* c */ ", "/**/", " /* a /* nested */ b */ ", " /* /* /* three */ */ */ ",
    " // line\n", "\n// one\n// two\n", " /* // not a line comment */ ",
    " /* a // b\n c */ ",
])
def test_comments_go_wherever_whitespace_goes(comment):
    assert_structural_equal(fromtext(_commented(PLAIN, comment)), fromtext(PLAIN))


def test_nested_comment_can_comment_out_commented_code():
    text = H + "def @main(%x: float32) {\n  /* %0 = negative(%x) /* ty=float32 */;\n  */ %x\n}"
    body = fromtext(text)["main"].body
    assert isinstance(body, relay.Var) and body.name_hint == "x"


@pytest.mark.parametrize("text, col, detail", [
    ("1 /* open /* nested */", 3, "1 still open"),
    ("1 /* /* /*", 3, "3 still open"),
    ("/* a */ 1 /* b", 11, "1 still open"),
])
def test_unterminated_nested_comment_names_where_it_opened(text, col, detail):
    with pytest.raises(tvm.error.DiagnosticError, match="unterminated comment") as info:
        parse_expr(text)
    assert (info.value.line, info.value.column) == (1, col)
    assert detail in str(info.value)


def test_multiply_then_comment_is_not_a_stray_close():
    f = parse_expr("fn (%a: float32, %b: float32) { %a*/* times */%b }")
    assert f.body.op.name == "multiply"


def test_close_comment_without_open_is_an_error():
    with pytest.raises(tvm.error.DiagnosticError, match=r"'\*/' closes no comment") as info:
        parse_expr("1 */")
    assert info.value.column == 3


# -- names ------------------------------------------------------------------------------------
def test_names_with_slashes_parse_and_print_back():
    text = H + ("def @model/main(%conv1/weight: float32, %a/b/c: float32) {\n"
                "  %0 = add(%conv1/weight, %a/b/c);\n  @model/helper(%0)\n}\n\n"
                "def @model/helper(%x/y: float32) {\n  %x/y\n}")
    mod = fromtext(text)
    assert [p.name_hint for p in mod["model/main"].params] == ["conv1/weight", "a/b/c"]
    assert mod.astext().count("%conv1/weight") == 2
    assert_structural_equal(fromtext(mod.astext()), mod)


def test_slash_between_locals_is_still_division():
    f = parse_expr("fn (%a: float32, %b: float32) { %a/%b }")
    assert f.body.op.name == "divide"
    assert [a.name_hint for a in f.body.args] == ["a", "b"]


@pytest.mark.parametrize("hint, printed", [
    ("conv1/weight", "%conv1/weight"), ("/lead", "%_lead"), ("trail/", "%trail_"),
    ("a//b", "%a__b"), ("input.1", "%input_1"), ("0/x", "%v0/x"),
])
def test_variable_names_print_as_one_token(hint, printed):
    x = relay.var(hint, "float32")
    text = astext(relay.Function([x], x))
    assert f"fn ({printed}: float32)" in text
    assert parse_expr(text).params[0].name_hint == printed[1:]


def test_dotted_operator_names_and_slashed_globals_coexist():
    mod = fromtext(H + "def @a/b(%x: Tensor[(1, 4), float32]) { nn.relu(%x) }")
    assert mod["a/b"].body.op.name == "nn.relu"


# -- match over a tuple, extern types ---------------------------------------------------------
LIST = H + "type List[A] {\n  Cons(A, List[A]),\n  Nil,\n}\n"


def test_match_over_unparenthesised_tuple():
    text = LIST + """
def @both[A, B](%xs: List[A], %ys: List[B]) -> bool {
  match (%xs, %ys) {
    (Cons(_, _), Cons(_, _)) => True,
    _ => False,
  }
}"""
    doubled = text.replace("match (%xs, %ys)", "match ((%xs, %ys))")
    assert_structural_equal(fromtext(text), fromtext(doubled))
    assert isinstance(fromtext(text)["both"].body.data, relay.Tuple)


def test_extern_type_parses_prints_and_type_checks():
    text = H + "extern type Storage\n\nextern type Box[A]\n\n" \
               "def @main(%s: Storage, %b: Box[int32]) {\n  (%s, %b)\n}"
    mod = fromtext(text)
    td = mod[mod.get_global_type_var("Box")]
    assert td.constructors == () and [v.name_hint for v in td.type_vars] == ["A"]
    assert mod.astext() == H + "extern type Box[A]\n\nextern type Storage\n\n" \
                               "def @main(%s: Storage, %b: Box[int32]) {\n  (%s, %b)\n}"
    relay.transform.InferType()(mod)


@pytest.mark.parametrize("text, message", [
    ("extern Storage", "expected 'type' after 'extern', got 'Storage'"),
    ("extern type", "expected a type name, got end of input"),
    ("extern type S {}", "expected 'def', 'type' or 'extern type' at top level, got '{'"),
])
def test_extern_type_errors(text, message):
    with pytest.raises(tvm.error.DiagnosticError, match=re.escape(message)):
        fromtext(H + text)


# -- literals -----------------------------------------------------------------------------------
@pytest.mark.parametrize("text, dtype, value", [
    ("7", "int32", 7), ("7i32", "int32", 7), ("-7i8", "int8", -7), ("127i8", "int8", 127),
    ("-128i8", "int8", -128), ("65535u16", "uint16", 65535), ("0u64", "uint64", 0),
    ("18446744073709551615u64", "uint64", 2**64 - 1), ("-9223372036854775808i64", "int64",
                                                       -2**63),
    ("1.5", "float32", 1.5), ("1e3", "float32", 1000.0), ("2f", "float32", 2.0),
    ("2f32", "float32", 2.0), ("0.5f16", "float16", 0.5), ("-1.25f64", "float64", -1.25),
    ("65504f16", "float16", 65504.0),
])
def test_literal_suffixes(text, dtype, value):
    c = parse_expr(text)
    arr = c.data.numpy()
    assert arr.dtype == dtype and arr.shape == () and arr[()] == np.array(value, dtype)


@pytest.mark.parametrize("text, message", [
    ("128i8", "128 is out of range for int8 (it holds -128 to 127)"),
    ("-129i8", "-129 is out of range for int8"),
    ("-1u8", "-1 is out of range for uint8 (it holds 0 to 255)"),
    ("2147483648", "2147483648 is out of range for int32"),
    ("18446744073709551616u64", "out of range for uint64"),
    ("9223372036854775808i64", "out of range for int64"),
    ("65520f16", "65520 is out of range for float16"),
    ("1e309f64", "out of range for float64"),
    ("3.5u8", "3.5 is not an integer"),
    ("1i7", "unknown literal suffix 'i7'"),
    ("1f8", "unknown literal suffix 'f8'"),
])
def test_out_of_range_literals_are_errors_at_the_literal(text, message):
    with pytest.raises(tvm.error.DiagnosticError, match=re.escape(message)) as info:
        parse_expr("fn () {\n  (1, " + text + ")\n}")
    assert (info.value.line, info.value.column) == (2, 7)


# -- spans and annotate ---------------------------------------------------------------------------
SPANNED = H + """def @main(%c: bool, %x: float32) {
  let %y = negative(%x);
  %0 = (%y, %x);
  if (%c) {
    %0.1
  } else {
    %1 = fn (%z: float32) { %z };
    %1(%y)
  }
}"""


def test_spans_of_each_construct():
    main = fromtext(SPANNED, source_name="s.rly")["main"]
    let = main.body
    where = {"let": let, "negative": let.value, "if": let.body,
             "projection": let.body.true_branch, "tuple": let.body.true_branch.tuple_value,
             "call of fn": let.body.false_branch, "fn": let.body.false_branch.op}
    expected = {"let": (3, 3), "negative": (3, 12), "if": (5, 3), "projection": (6, 5),
                "tuple": (4, 8), "call of fn": (9, 5), "fn": (8, 10)}
    for name, node in where.items():
        span = node.span
        assert span is not None and span.source_name.name == "s.rly", name
        assert (span.line, span.column) == expected[name], name


def test_annotate_replaces_type_comments_and_reparses():
    mod = relay.transform.InferType()(fromtext(SPANNED, source_name="s.rly"))
    assert "/* ty=" in mod.astext()
    text = mod.astext(annotate=lambda e: str(e.span) if e.span else "")
    assert "/* ty=" not in text
    assert "negative(%x) /* s.rly:3:12 */" in text
    assert_structural_equal(fromtext(text), fromtext(SPANNED))


@pytest.mark.parametrize("note, printed", [
    ("plain", " /* plain */"), ("/* own comment */", " /* own comment */"),
    ("a */ b", " /* a * / b */"), ("/* x */ y /* z */", " /* / * x * / y / * z * / */"),
    ("", ""), ("/* a /* b */", " /* / * a / * b * / */"), ("/*/", " /* / * / */"),
])
def test_annotate_text_is_always_one_comment(note, printed):
    x = relay.var("x", "float32")
    text = astext(relay.Function([x], relay.negative(x)), annotate=lambda e: note)
    assert f"negative(%x){printed}\n" in text
    assert_structural_equal(parse_expr(text), relay.Function([x], relay.negative(x)))


def test_annotate_must_return_a_string():
    x = relay.var("x", "float32")
    with pytest.raises(TypeError, match="annotate must return a str, got int for a Call"):
        astext(relay.negative(x), annotate=lambda e: 3)


def test_annotate_sees_every_non_atomic_expression():
    seen = []
    x = relay.var("x", "float32")
    body = relay.Tuple([relay.negative(x), relay.const(np.ones(2, "float32"))])
    astext(relay.Function([x], relay.TupleGetItem(body, 0)),
           annotate=lambda e: seen.append(type(e).__name__) or "")
    assert sorted(seen) == ["Call", "Constant", "Tuple", "TupleGetItem"]


# -- line endings ---------------------------------------------------------------------------------
def test_crlf_text_with_metadata_parses_the_same():
    x = relay.var("x", shape=(2,))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.add(x, relay.const(np.ones(2,
                                                                                    "float32")))))
    crlf = mod.astext().replace("\n", "\r\n")
    assert_structural_equal(fromtext(crlf), mod)
    with pytest.raises(tvm.error.DiagnosticError, match="unbound variable %y") as info:
        fromtext(crlf.replace("add(%x", "add(%y"))
    assert (info.value.line, info.value.column) == (3, 7)
    assert "\r" not in str(info.value)


def test_comments_before_the_header():
    assert_structural_equal(fromtext("// a model\n/* v */\n" + PLAIN), fromtext(PLAIN))

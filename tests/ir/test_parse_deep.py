"""The text format at any depth: the parser gives a program or a DiagnosticError (never a
RecursionError), and deep programs round-trip through the printer."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ember
from ember import relay
from ember.ir import DiagnosticError, assert_structural_equal, post_order
from ember.ir._parse_types import MAX_ATTR_NESTING
from ember.ir._text_common import encode_array
from ember.ir.parser import _split_metadata

T = "Tensor[(2), float32]"


def _fn(body: str) -> str:
    return f"fn (%x: {T}) {{ {body} }}"


# What each kind of nesting looks like, n levels deep.
DEEP = {
    "parens": lambda n: _fn("(" * n + "%x" + ")" * n),
    "calls": lambda n: _fn("negative(" * n + "%x" + ")" * n),
    "tuples": lambda n: _fn("(" * n + "%x" + ",)" * n),
    "types": lambda n: "fn (%x: " + "(" * n + "float32" + ",)" * n + ") { %x }",
    "fns": lambda n: _fn("fn () { " * n + "%x" + " }" * n),
    "lets": lambda n: _fn("".join(f"let %v{i} = negative(%x); " for i in range(n)) + "%x"),
    "nested_lets": lambda n: _fn("let %v = " * n + "%x" + "; %v" * n),
    "ifs": lambda n: "fn (%x: Tensor[(2), float32], %c: bool) { "
                     + "if (%c) { " * n + "%x" + " } else { %x }" * n + " }",
}


def _count(expr: relay.Expr, cls: type) -> int:
    return sum(isinstance(e, cls) for e in post_order(expr))


def _tuple_depth(ty: relay.Type) -> int:
    depth = 0
    while isinstance(ty, relay.TupleType):
        ty, depth = ty.fields[0], depth + 1
    return depth


def _check_shape(kind: str, mod: ember.IRModule, n: int) -> None:
    """The parsed program really is ``n`` deep."""
    main = mod["main"]
    counts = {"calls": (relay.Call, n), "tuples": (relay.Tuple, n), "fns": (relay.Function, n + 1),
              "lets": (relay.Let, n), "nested_lets": (relay.Let, n), "ifs": (relay.If, n)}
    if kind in counts:
        cls, want = counts[kind]
        assert _count(main, cls) == want
    elif kind == "types":
        assert _tuple_depth(main.params[0].type_annotation) == n
    else:
        assert main.body is main.params[0]


def _parse_deep(kind: str, n: int) -> None:
    mod = ember.parser.fromtext(DEEP[kind](n))
    _check_shape(kind, mod, n)


@pytest.mark.parametrize("kind", sorted(DEEP))
def test_nesting_2000_deep_parses(kind: str) -> None:
    _parse_deep(kind, 2000)


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(DEEP))
def test_nesting_100_000_deep_parses(kind: str) -> None:
    _parse_deep(kind, 100_000)


def test_an_error_deep_inside_names_its_place() -> None:
    text = _fn("(" * 5000 + "%x")  # never closed
    with pytest.raises(DiagnosticError, match=r"<string>:1:\d+: expected ',' or '\)'") as info:
        ember.parser.fromtext(text)
    assert (info.value.line, info.value.column) == (1, len(text))


def test_attribute_lists_nest_at_most_the_documented_depth() -> None:
    ok = _fn("sum(%x, axis=" + "[" * 1 + "0" + "]" * 1 + ")")
    ember.parser.fromtext(ok)
    text = _fn("sum(%x, axis=" + "[" * 1000 + "0" + "]" * 1000 + ")")
    col = text.index("[" * (MAX_ATTR_NESTING + 1)) + MAX_ATTR_NESTING + 1
    with pytest.raises(DiagnosticError, match=f"attribute lists nest at most "
                                              f"{MAX_ATTR_NESTING} deep") as info:
        ember.parser.fromtext(text)
    assert (info.value.line, info.value.column) == (1, col)


# -- print / parse round trips ---------------------------------------------------------------
def _let_chain(n: int) -> relay.Function:
    x = relay.var("x", shape=(2,), dtype="float32")
    vs = [relay.var(f"a{i}", shape=(2,), dtype="float32") for i in range(n)]
    body: relay.Expr = vs[-1]
    for i in reversed(range(n)):
        body = relay.Let(vs[i], relay.negative(x if i == 0 else vs[i - 1]), body)
    return relay.Function([x], body)


def _call_nest(n: int) -> relay.Function:
    x = relay.var("x", shape=(2,), dtype="float32")
    e: relay.Expr = x
    for i in range(n):
        e = relay.tanh(e) if i % 2 else relay.negative(e)
    return relay.Function([x], e)


def _nested_ifs(n: int) -> relay.Function:
    x = relay.var("x", shape=(2,), dtype="float32")
    c = relay.var("c", shape=(), dtype="bool")
    e: relay.Expr = x
    for _ in range(n):
        e = relay.If(c, relay.negative(e), x)
    return relay.Function([x, c], e)


def _round_trip(func: relay.Function) -> None:
    mod = relay.transform.InferType()(ember.IRModule.from_expr(func))
    back = relay.transform.InferType()(ember.parser.fromtext(mod.astext()))
    assert_structural_equal(back, mod, map_free_vars=True)


@pytest.mark.parametrize("make", [_let_chain, _call_nest, _nested_ifs],
                         ids=["let_chain", "call_nest", "nested_ifs"])
def test_deep_programs_round_trip(make) -> None:
    _round_trip(make(200 if make is _nested_ifs else 1000))


@pytest.mark.slow
@pytest.mark.parametrize("make", [_let_chain, _call_nest, _nested_ifs],
                         ids=["let_chain", "call_nest", "nested_ifs"])
def test_10_000_deep_programs_round_trip(make) -> None:
    _round_trip(make(1000 if make is _nested_ifs else 10_000))


# -- fuzzing: nothing but a program or a DiagnosticError comes out ----------------------------
SEEDS = [
    ('#[version = "0.0.5"]\ndef @main(%a: Tensor[(1, 2), float32], %b: float32) {\n'
     "  %0 = add(%a, %b);\n  %1 = (%0, %a);\n  let %t = %1.0;\n  nn.relu(%t)\n}"),
    "def @f[A](%x: A) -> A { %x }\ndef @main(%y: int32) { @f(%y) }",
    ("type List[A] { Cons(A, List[A]), Nil }\n"
     "def @len[A](%l: List[A]) -> int32 { match (%l) { Cons(_, %t) => add(@len(%t), 1), "
     "Nil => 0 } }"),
    ("fn (%x: Tensor[(3), float32], %c: bool) { if (%c) { let %f = fn (%y) { %y }; %f(%x) } "
     "else { sum(%x, axis=[0], keepdims=True) } }"),
    "fn (%r: ref(int32)) { let %u = ref_write(%r, 1); ref_read(%r) }",
    "fn (%x: (Tensor[(2), float32], float32)) -> float32 { %x.1 + 2f * 3f16 }",
]
TOKENS = ["(", ")", "[", "]", "{", "}", ",", ";", ":", "=", "->", "=>", ".", "?", "#", "%x",
          "%0", "@main", "fn", "let", "if", "else", "match", "def", "type", "Tensor",
          "float32", "int32", "1", "2.5f", "-1i64", "add", "negative", "nn.conv2d", "axis",
          '"s"', "meta", "ref", "_", "Cons", "/*", "*/", "//", "\n", " ", "%", "@", "\"",
          "True", "free_var"]


@st.composite
def fuzzed_text(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["tokens", "mutated", "deep"]))
    if kind == "tokens":
        return "".join(draw(st.lists(st.sampled_from(TOKENS), max_size=60)))
    seed = draw(st.sampled_from(SEEDS))
    if kind == "deep":
        n = draw(st.integers(1, 3000))
        opener, closer = draw(st.sampled_from([("(", ")"), ("(", ",)"), ("[", "]"),
                                               ("{", "}"), ("fn () { ", " }"),
                                               ("negative(", ")"), ("(", "")]))
        cut = draw(st.integers(0, len(seed)))
        return seed[:cut] + opener * n + seed[cut:] + closer * draw(st.integers(0, n))
    text = seed
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 12)))
        edit = draw(st.sampled_from(["delete", "insert", "duplicate"]))
        if edit == "delete":
            text = text[:i] + text[j:]
        elif edit == "insert":
            text = text[:i] + draw(st.sampled_from(TOKENS)) + text[i:]
        else:
            text = text[:j] + text[i:j] + text[j:]
    return text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fuzzed_text())
def test_fuzzed_text_gives_a_program_or_a_diagnostic(text: str) -> None:
    try:
        ember.parser.fromtext(text)
    except DiagnosticError as err:
        assert err.line >= 1 and err.column >= 1  # type: ignore[attr-defined]


# -- the metadata section at any depth ----------------------------------------------------------
def _with_metadata(program: str, entry: str) -> str:
    """``program`` with one constant (``meta[relay.Constant][0]``) and a ``deep`` entry."""
    const = json.dumps(encode_array(np.arange(3, dtype="float32")))
    return f'{program}\n#[metadata]\n{{"relay.Constant": [{const}],\n "deep": [{entry}]}}'


def _deep_entry(n: int) -> str:
    return '{"a": [' * n + "1" + "]}" * n


@pytest.mark.parametrize("read", [ember.parser.fromtext, ember.parser.parse_expr],
                         ids=["fromtext", "parse_expr"])
def test_5000_deep_metadata_parses_and_round_trips(read) -> None:
    text = _with_metadata("fn (%x: Tensor[(3), float32]) { add(%x, meta[relay.Constant][0]) }",
                          _deep_entry(5000))
    parsed = read(text)
    mod = parsed if isinstance(parsed, ember.IRModule) else ember.IRModule.from_expr(parsed)
    const = mod["main"].body.args[1]
    np.testing.assert_array_equal(const.data.numpy(), np.arange(3, dtype="float32"))
    again = ember.parser.fromtext(mod.astext())
    assert_structural_equal(again, mod, map_free_vars=True)


def test_deep_metadata_entries_are_read_whole() -> None:
    body, table = _split_metadata(_with_metadata("fn () { () }", _deep_entry(20_000)), "m")
    value, depth = table["deep"][0], 0
    while isinstance(value, dict):
        value, depth = value["a"][0], depth + 1
    assert (value, depth) == (1, 20_000)


_UNCLOSED_DICT = '{"a": [' * 5000 + "1" + "]}" * 4999 + "]"  # the outermost {} stays open


@pytest.mark.parametrize("entry, message, offset", [
    (_UNCLOSED_DICT, "Expecting ',' delimiter", len(_UNCLOSED_DICT)),  # at the "]" after it
    (_UNCLOSED_DICT + ":", "Expecting ',' delimiter", len(_UNCLOSED_DICT)),
    ("[" * 5000 + "1," + "]" * 5000, "Expecting value", 5002),
    ("[" * 5000 + "1 1" + "]" * 5000, "Expecting ',' delimiter", 5002),
    ('{"a" ' * 3000, "Expecting ':' delimiter", 5),
], ids=["unclosed_object", "colon", "trailing_comma", "missing_comma", "missing_colon"])
def test_malformed_deep_metadata_names_its_place(entry: str, message: str, offset: int) -> None:
    text = _with_metadata("fn () { () }", entry)
    with pytest.raises(DiagnosticError, match=f"bad metadata section: {message}") as info:
        ember.parser.fromtext(text, source_name="m.relay")
    column = len(' "deep": [') + offset + 1
    assert (info.value.line, info.value.column) == (4, column)
    assert str(info.value).startswith(f"m.relay:4:{column}: ")


def test_deep_metadata_cut_short_expects_a_value_at_the_end() -> None:
    text = 'fn () { () }\n#[metadata]\n{"deep": [' + "[\n" * 5000
    with pytest.raises(DiagnosticError, match="bad metadata section: Expecting value") as info:
        ember.parser.fromtext(text)
    assert (info.value.line, info.value.column) == (3 + 5000, 1)

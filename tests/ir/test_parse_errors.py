"""Parse errors: DiagnosticError with source:line:column, what was expected, what was found,
and the offending source line with a caret under the token."""
from __future__ import annotations

import re

import pytest

import ember as tvm
from ember.ir.parser import fromtext, parse_expr

DiagnosticError = tvm.error.DiagnosticError  # TVM's spelling: tvm.error.DiagnosticError

# (name, text, message regex, line, column)
CASES = [
    ("unclosed paren", "def @main(%x) {\n  %1 = nn.relu(%x;\n  %1\n}",
     r"expected '\)' after call arguments, got ';'", 2, 18),
    ("unknown op", "def @main(%x) {\n  nn.relu2(%x)\n}",
     r"unknown operator 'nn.relu2'; did you mean nn.relu", 2, 3),
    ("unknown attribute", "def @main(%x, %w) {\n  nn.conv2d(%x, %w, paddin=[1, 1])\n}",
     r"unknown attribute 'paddin' of nn.conv2d; did you mean padding\?", 2, 21),
    ("attribute of an op without attrs", "fn (%x) { add(%x, %x, axis=1) }",
     r"unknown attribute 'axis' of add; it takes none", 1, 23),
    ("invalid attribute value", "fn (%x, %w) {\n  nn.conv2d(%x, %w, padding=[1, 2, 3])\n}",
     r"nn.conv2d: attribute padding must be", 2, 21),
    ("unbound variable", "def @main(%x) {\n  nn.relu(%y)\n}", r"unbound variable %y", 2, 11),
    ("duplicate def", "def @f(%x) { %x }\ndef @f(%y) { %y }",
     r"duplicate definition of @f \(first defined at line 1\)", 2, 5),
    ("duplicate type", "type T { A }\ntype T { B }", r"duplicate definition of type T", 2, 6),
    ("bad dtype", "def @main(%x: Tensor[(1, 2), floot32]) { %x }",
     r"unknown dtype 'floot32'", 1, 30),
    ("bad type name", "def @main(%x: Tensr[(1, 2), float32]) { %x }",
     r"unknown type 'Tensr'; did you mean Tensor\?", 1, 15),
    ("bad dimension", "fn (%x: Tensor[(1, -2), float32]) { %x }", r"expected a dimension", 1, 20),
    ("unrepresentable literal", "def @main() {\n  300u8\n}",
     r"bad literal 300u8: 300 is out of range for uint8", 2, 3),
    ("float with int suffix", "1.5i32", r"1.5 is not an integer", 1, 1),
    ("float overflow", "1e40f", r"out of range for float32", 1, 1),
    ("unknown suffix", "1x", r"unknown literal suffix 'x'", 1, 1),
    ("garbage character", "def @main() { 1 } $", r"unexpected character '\$'", 1, 19),
    ("garbage word at top level", "def @main() { 1 } garbage",
     r"expected 'def', 'type' or 'extern type' at top level, got 'garbage'", 1, 19),
    ("trailing tokens", "add(1, 2) 3", r"expected the end of the text after the expression",
     1, 11),
    ("missing else", "fn (%c) {\n  if (%c) { 1 }\n}",
     r"expected 'else' after the then-branch of an if, got '}'", 3, 1),
    ("missing close brace", "fn (%x) { %x", r"expected '}' to close a function body, got end",
     1, 13),
    ("undefined global", "def @main() { @g(1) }", r"undefined global @g", 1, 15),
    ("unknown constructor pattern", "type T { A }\ndef @f(%x) { match (%x) { B => 1 } }",
     r"unknown constructor 'B'", 2, 27),
    ("named graph binding", "fn () { %x = 1; %x }",
     r"must use a numbered name such as %0", 1, 9),
    ("duplicate graph binding", "fn () { %0 = 1; %0 = 2; %0 }", r"%0 is already bound", 1, 17),
    ("missing metadata", "meta[relay.Constant][0]",
     r"meta\[relay.Constant\]\[0\] is not defined", 1, 1),
    ("unsupported version", '#[version = "0.1.0"]\n1',
     r'unsupported text format version "0.1.0"', 1, 13),
    ("unterminated comment", "1 /* never closed", r"unterminated comment", 1, 3),
    ("unterminated string", 'fn (%x) { nn.conv2d(%x, %x, data_layout="NCHW) }',
     r"unterminated string literal", 1, 41),
    ("free_var after an expression", "(1, free_var)",
     r"free_var declarations must come before the expression", 1, 5),
    ("keyword argument to a function", "fn (%f) { %f(1, axis=2) }",
     r"keyword arguments are only allowed in operator calls", 1, 17),
    ("bad metadata", '1\n#[metadata]\n{"relay.Constant": [}', r"bad metadata section", 3, 21),
]


@pytest.mark.parametrize("text, message, line, column",
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_parse_error_message_and_location(text, message, line, column):
    with pytest.raises(DiagnosticError, match=message) as info:
        fromtext(text, source_name="model.relay")
    err = info.value
    assert (err.line, err.column) == (line, column), str(err)
    assert str(err).startswith(f"model.relay:{line}:{column}: ")


def test_message_shows_the_line_with_a_caret_under_the_token():
    text = "def @main(%x) {\n    %2 = nn.relu(%x;\n}"
    with pytest.raises(DiagnosticError) as info:
        fromtext(text, source_name="model.relay")
    head, src_line, caret = str(info.value).split("\n")
    assert head == "model.relay:2:20: expected ')' after call arguments, got ';'"
    assert src_line == "        %2 = nn.relu(%x;"
    assert caret.index("^") == src_line.index(";")


def test_caret_follows_tabs():
    with pytest.raises(DiagnosticError) as info:
        parse_expr("\tnn.relu(%y)")
    _, src_line, caret = str(info.value).split("\n")
    assert caret.index("^") == src_line.index("%y")


def test_default_source_name():
    with pytest.raises(DiagnosticError, match=re.escape("<string>:1:1: unbound variable %x")):
        parse_expr("%x")


def test_diagnostic_error_is_a_tvm_error_and_names_no_internal_frames():
    with pytest.raises(tvm.TVMError) as info:
        fromtext("def @main() { add(1, 2 }")
    assert info.value.__cause__ is None and "Traceback" not in str(info.value)


def test_non_string_input_is_a_type_error():
    with pytest.raises(TypeError, match="expected the program as a str"):
        fromtext(b"1")  # type: ignore[arg-type]


@pytest.mark.parametrize("where", ["start", "middle", "end"])
def test_a_long_line_shows_the_part_around_the_error(where: str) -> None:
    from ember.ir._lexer import EXCERPT_WIDTH

    n = 20_000
    text = {"start": "(%y" + ", 1" * n + ")",
            "middle": "(" + "1, " * n + "%y, " + "1, " * n + ")",
            "end": "(" + "1, " * n + "%y)"}[where]
    with pytest.raises(DiagnosticError, match="unbound variable %y") as info:
        parse_expr(text)
    _, src_line, caret = str(info.value).split("\n")
    assert len(src_line) <= 4 + 3 + EXCERPT_WIDTH + 3
    assert src_line.startswith("    ...") == (where != "start")
    assert src_line.endswith("...") == (where != "end")
    assert src_line[caret.index("^"):].startswith("%y")
    assert info.value.column == text.index("%y") + 1

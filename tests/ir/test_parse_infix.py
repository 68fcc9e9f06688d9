"""Infix operators in the text format (``%a + %b``), as TVM's parser reads them: the same calls
as the prefix form, TVM's precedences, left associativity, and parse errors with a caret."""
from __future__ import annotations

import pytest

import ember as tvm
from ember.ir import assert_structural_equal
from ember.runtime.errors import DiagnosticError

HEAD = '#[version = "0.0.5"]\n'
SIG = "def @main(%a: Tensor[(2), float32], %b: Tensor[(2), float32]) "


def _main(body: str):
    return tvm.parser.fromtext(HEAD + SIG + "{ " + body + " }")


@pytest.mark.parametrize("infix, prefix", [
    ("%a + %b", "add(%a, %b)"),
    ("%a - %b * %a", "subtract(%a, multiply(%b, %a))"),
    ("%a / %b + %a", "add(divide(%a, %b), %a)"),
    ("%a - %b - %a", "subtract(subtract(%a, %b), %a)"),
    ("(%a + %b) * %a", "multiply(add(%a, %b), %a)"),
    ("%a + %b < %a * %b", "less(add(%a, %b), multiply(%a, %b))"),
    ("%a <= %b == %a >= %b", "equal(less_equal(%a, %b), greater_equal(%a, %b))"),
    ("%a != %b", "not_equal(%a, %b)"),
    ("%a > %b", "greater(%a, %b)"),
    ("exp(%a) + (%a, %b).1", "add(exp(%a), (%a, %b).1)"),
])
def test_infix_is_the_prefix_call(infix, prefix):
    assert_structural_equal(_main(infix), _main(prefix))


def test_infix_in_a_binding_and_after_calls():
    mod = _main("%0 = %a + %b; %1 = exp(%0) * %b; %1")
    assert_structural_equal(mod, _main("multiply(exp(add(%a, %b)), %b)"))


def test_missing_right_operand_points_at_it():
    with pytest.raises(DiagnosticError, match=r":2:44: expected an expression, got '}'") as err:
        tvm.parser.fromtext(HEAD + "def @main(%a: Tensor[(2), float32]) { %a + }")
    assert (err.value.line, err.value.column) == (2, 44)

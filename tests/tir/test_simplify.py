"""The index simplifier's rules, and the printer."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ember import tir
from ember.tir.simplify import bound, prove, simplify


def s(e, **ranges):
    return str(simplify(e, {v: r for v, r in ranges.values()}))


def test_constant_folding_and_identities():
    x = tir.Var("x")
    assert str(simplify(x * 1 + 0)) == "x"
    assert str(simplify((x + 3) - x)) == "3"
    assert str(simplify(tir.const(6) * 7 - 2)) == "40"
    assert str(simplify(x * 4 + x * 2 - x * 6 + 5)) == "5"
    f = tir.Var("f", "float32")
    assert str(simplify(f * 1.0 + 0.0)) == "f"
    assert str(simplify(tir.max(tir.const(2.0), 3.5))) == "3.5f"


def test_floordiv_floormod_with_ranges():
    i, j = tir.Var("i"), tir.Var("j")
    ranges = {j: (0, 15)}
    assert str(simplify((i * 16 + j) // 16, ranges)) == "i"
    assert str(simplify((i * 16 + j) % 16, ranges)) == "j"
    assert str(simplify((i * 32 + j + 16) // 16, ranges)) == "((i * 2) + 1)"
    assert str(simplify(j // 16, ranges)) == "0"
    assert str(simplify(tir.floordiv(i, 1))) == "i"


def test_bounds_and_proofs():
    i = tir.Var("i")
    n = tir.SizeVar("n")
    r = {i: (0, 7)}
    assert bound(i * 2 + 1, r) == (1, 15)
    assert prove(i < 8, r) is True
    assert prove(i < 7, r) is None
    assert prove(i >= 8, r) is False
    assert bound(n, {})[0] == 0
    assert str(simplify(tir.min(i, 9), r)) == "i"


def test_select_and_if_then_else_fold():
    x = tir.Var("x", "float32")
    assert str(simplify(tir.if_then_else(tir.const(True), x, 0.0))) == "x"
    i = tir.Var("i")
    assert str(simplify(tir.Select(i < 4, x, 1.0), {i: (0, 3)})) == "x"


@settings(max_examples=60, deadline=None)
@given(a=st.integers(-50, 50), b=st.integers(1, 9), c=st.integers(-20, 20),
       iv=st.integers(0, 30))
def test_simplified_matches_python(a, b, c, iv):
    i = tir.Var("i")
    exprs = [(i * a + c) // b, (i * a + c) % b, (i * b + c) - i * b, tir.min(i * a, c) + 1]
    for e in exprs:
        se = simplify(e, {i: (0, 30)})
        assert _eval(se, {"i": iv}) == _eval(e, {"i": iv}), (str(e), str(se))


def _eval(e, env):
    from ember.tir import expr as E

    if isinstance(e, E.IntImm):
        return e.value
    if isinstance(e, E.Var):
        return env[e.name]
    a, b = _eval(e.a, env), _eval(e.b, env)
    return {E.Add: a + b, E.Sub: a - b, E.Mul: a * b, E.FloorDiv: a // b if b else 0,
            E.FloorMod: a % b if b else 0, E.Min: min(a, b), E.Max: max(a, b)}[type(e)]


def test_printer_is_readable():
    from ember import te

    a = te.placeholder((4, 5), name="A")
    b = te.compute((4, 5), lambda i, j: a[i, j] * 2.0, name="B")
    sch = te.create_schedule(b.op)
    text = str(te.lower(sch, [a, b], "double_it"))
    assert text.splitlines()[0] == "@double_it(A: float32[4, 5], B: float32[4, 5]) {"
    assert "B[i, j] = (A[i, j] * 2.0f)" in text


def test_proofs_use_exact_integers_in_narrow_types():
    # min(max(x, 0), 255) on uint8: x - 255 is negative as an integer, whatever uint8 wraps to
    x = tir.Var("x", "uint8")
    e = tir.Min(tir.Max(x, tir.const(0, "uint8"), "uint8"), tir.const(255, "uint8"), "uint8")
    assert str(simplify(e)) == "min(max(x, uint8(0)), uint8(255))"


def test_square_and_first_power_need_no_pow_call():
    x = tir.Var("x", "float32")
    sq = simplify(tir.pow(x, tir.const(2.0, "float32")))
    assert isinstance(sq, tir.Mul) and sq.a is x and sq.b is x
    assert simplify(tir.pow(x, tir.const(1.0, "float32"))) is x
    cube = simplify(tir.pow(x, tir.const(3.0, "float32")))
    assert isinstance(cube, tir.Call) and cube.op == "pow"

"""Sizes of run-time shapes (size variables, n >= 0) in the simplifier: the bounds of products
with an unbounded end, ``min``/``max`` decided either way, and the shapes slices and
broadcasts build from them (before/expected pairs), checked against Python on values."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ember import tir
from ember.tir.simplify import bound, simplify

N, M = tir.SizeVar("n"), tir.SizeVar("m")


def test_a_size_times_a_negative_constant_is_bounded_above():
    assert bound(N * -1, {}) == (None, 0)
    assert bound(N * -2 + 7, {}) == (None, 7)
    assert bound(N * 3, {}) == (0, None)
    i = tir.Var("i")
    assert bound(i * -2 + 7, {i: (0, 3)}) == (1, 7)  # avg pool's divisor: a constant
    assert bound(i * M, {i: (0, 3)}) == (0, None)
    assert bound(i * M, {i: (-1, 3)}) == (None, None)
    assert bound(i * 0, {i: (None, None)}) == (0, 0)


def test_slice_and_broadcast_sizes_of_size_variables():
    pairs = [
        (tir.min(0, N), "0"),
        (tir.max(N, 0), "n"),
        (tir.min(tir.max(N, 0), N) - tir.min(0, N), "n"),  # a slice [0, n) of a size-n axis
        (tir.max(tir.min(1, N) - tir.min(0, N), 0), "min(1, n)"),  # a slice of size 1
        (tir.max(tir.max(N * M, N), N), "max((n * m), n)"),
        (tir.min(N, tir.min(N, M)), "min(n, m)"),
    ]
    for before, expected in pairs:
        assert str(simplify(before)) == expected, before


def test_a_select_of_one_value_is_that_value():
    x, c = tir.Var("x", "float32"), tir.Var("c", "bool")
    assert str(simplify(tir.Select(c, x * 2.0, x * 2.0))) == "(x * 2.0f)"
    assert str(simplify(tir.if_then_else(c, x + 1.0, x + 1.0))) == "(x + 1.0f)"


_ENDS = st.one_of(st.none(), st.integers(-20, 20))


@settings(max_examples=200, deadline=None)
@given(a=st.tuples(_ENDS, _ENDS), b=st.tuples(_ENDS, _ENDS), picks=st.tuples(
    st.integers(0, 40), st.integers(0, 40)))
def test_product_bounds_hold_for_values_inside(a, b, picks):
    x, y = tir.Var("x"), tir.Var("y")
    if None not in a and a[0] > a[1] or None not in b and b[0] > b[1]:
        return
    lo, hi = bound(x * y, {x: a, y: b})

    def pick(r, k):  # a value inside the range (an unbounded end reaches 20 past the other)
        low = r[0] if r[0] is not None else (r[1] if r[1] is not None else 0) - 20
        high = r[1] if r[1] is not None else low + 40
        return low + k % (high - low + 1)

    v = pick(a, picks[0]) * pick(b, picks[1])
    assert (lo is None or lo <= v) and (hi is None or v <= hi), (a, b, lo, hi, v)


@settings(max_examples=80, deadline=None)
@given(n=st.integers(0, 9), m=st.integers(0, 9))
def test_simplified_sizes_match_python(n, m):
    exprs = [tir.max(tir.min(1, N) - tir.min(0, N), 0) * tir.max(M, 0),
             tir.max(N, tir.min(1, M) * N), tir.min(tir.max(N, M), N) - tir.min(0, M),
             tir.max(tir.max(N * M, N), N), N * -2 + tir.max(0, M)]
    env = {N: tir.const(n), M: tir.const(m)}
    for e in exprs:
        want = simplify(tir.functor.substitute(e, env))
        got = simplify(tir.functor.substitute(simplify(e), env))
        assert str(got) == str(want), e

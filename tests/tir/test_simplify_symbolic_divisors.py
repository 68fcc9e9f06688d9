"""Division by a symbolic size: a loop fused over axes of run-time extent divides its index by
those extents; the simplifier undoes the divisions the index arithmetic does not need
(``(x // n) * n + x % n``, ``(y * n + x % n) // n``, ``(x % n) % n``), as it does for constant
divisors, so the inner loops of a dynamic kernel cost what a static kernel's do."""
from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ember import tir
from ember.tir.simplify import simplify

sys.path.insert(0, str(Path(__file__).parent))
from test_simplify import _eval  # noqa: E402

I, N, M = tir.Var("i"), tir.SizeVar("n"), tir.SizeVar("m")


def _divisions(e) -> int:
    from ember.tir import expr as E

    stack, count = [e], 0
    while stack:
        x = stack.pop()
        count += isinstance(x, (E.FloorDiv, E.FloorMod))
        stack += [v for v in (getattr(x, "a", None), getattr(x, "b", None)) if v is not None]
    return count


def test_a_fused_index_over_a_symbolic_extent_is_the_loop_variable() -> None:
    assert str(simplify((I // N) * N + I % N)) == "i"
    assert str(simplify(((I // N) * N) * 16 + (I % N) * 16)) == "(i * 16)"


def test_multiples_of_the_divisor_come_out_and_a_remainder_stays_one() -> None:
    assert str(simplify((M * N + I % N) // N)) == "m"
    assert str(simplify((M * N + I % N) % N)) == "floormod(i, n)"
    assert str(simplify((I % N) % N)) == "floormod(i, n)"
    assert _divisions(simplify((M * N + I) // N)) == 1  # m + i // n: one division left


def test_a_transpose_index_over_symbolic_axes_loses_its_extra_divisions() -> None:
    # (b, s) fused, then split again: the index of a (b, s, 2, 16) -> (b, 2, s, 16) copy
    t = (I // N % 2 % M) * N + I % N
    before = (t // N % M * N) * 32 + (t % N) * 32
    assert _divisions(simplify(before)) < _divisions(before)


@settings(max_examples=80, deadline=None)
@given(i=st.integers(0, 400), n=st.integers(1, 13), m=st.integers(0, 9))
def test_the_rules_keep_the_value(i: int, n: int, m: int) -> None:
    env = {"i": i, "n": n, "m": m}
    for e in [(I // N) * N + I % N, (M * N + I % N) // N, (M * N + I) // N, (M * N + I) % N,
              (I % N) % N, (I * 3 + M * N * 2 + 5) // N, ((I // N) * N) * 4 + (I % N) * 4 + M]:
        assert _eval(simplify(e), env) == _eval(e, env), str(e)


def _in_loop(index, var=I, extent=N):
    """``index`` as the value stored inside ``for var in [0, extent)``, simplified."""
    buf = tir.decl_buffer((64,), "int32", name="out")
    loop = tir.For(var, tir.const(0), extent, tir.ForKind.SERIAL,
                   tir.BufferStore(buf, index, [tir.const(0)]))
    return simplify(loop).body.value


def test_a_loop_variable_below_its_run_time_extent_is_its_own_remainder() -> None:
    assert str(_in_loop(I % N)) == "i"
    assert str(_in_loop(I // N)) == "0"
    assert str(_in_loop((M * N + I) // N)) == "m"  # a reshape's index over a loop of n trips
    assert str(_in_loop((M * N + I) % N)) == "i"
    # another extent proves nothing
    assert _divisions(_in_loop(I // M)) == 1 and _divisions(_in_loop(I % M)) == 1
    # nor does a loop that does not start at 0
    buf = tir.decl_buffer((64,), "int32", name="out")
    shifted = tir.For(I, tir.const(1), N, tir.ForKind.SERIAL,
                      tir.BufferStore(buf, I % N, [tir.const(0)]))
    assert _divisions(simplify(shifted).body.value) == 1


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 13), m=st.integers(0, 9), data=st.data())
def test_the_loop_rules_keep_the_value(n: int, m: int, data) -> None:
    i = data.draw(st.integers(0, n - 1))  # the loop's own range
    env = {"i": i, "n": n, "m": m}
    for e in [I % N, I // N, (M * N + I) // N, (M * N + I) % N, (I + M) % N]:
        assert _eval(_in_loop(e), env) == _eval(e, env), str(e)


def _truth(e, env):
    """``e`` (a comparison of the forms below) evaluated; casts are exact in Python ints."""
    from ember.tir import expr as E

    if isinstance(e, E.IntImm):
        return e.value
    if isinstance(e, E.Cast):
        return _truth(e.value, env)
    if isinstance(e, (E.LT, E.LE, E.GT, E.GE)):
        a, b = _truth(e.a, env), _truth(e.b, env)
        return {E.LT: a < b, E.LE: a <= b, E.GT: a > b, E.GE: a >= b}[type(e)]
    if isinstance(e, E.Mul):
        return _truth(e.a, env) * _truth(e.b, env)
    return _eval(e, env)


def _compares(c: int) -> list:
    q = I // N
    return [q < c, q <= c, q > c, q >= c]


def test_a_quotient_by_a_run_time_size_compared_with_a_constant_divides_no_more() -> None:
    # a pad's ``i / w < 129`` over a fused loop: a division per element, 5x the static pad
    ranges = {I: (0, None)}
    for e in _compares(129):
        assert _divisions(simplify(e, ranges)) == 0, str(e)
    assert str(simplify(I // N < 129, ranges)) == "(int64(i) < (int64(129) * int64(n)))"
    # a dividend that may be negative keeps its division (floor division rounds down)
    assert _divisions(simplify(I // N < 129)) == 1


@settings(max_examples=80, deadline=None)
@given(i=st.integers(0, 400), n=st.integers(1, 13), c=st.integers(-3, 40))
def test_the_quotient_compares_keep_the_value(i: int, n: int, c: int) -> None:
    env = {"i": i, "n": n}
    for e in _compares(c):
        assert bool(_truth(simplify(e, {I: (0, None)}), env)) == bool(_truth(e, env)), str(e)


def test_a_loop_variable_is_below_its_run_time_extent_in_a_comparison() -> None:
    # a reflect pad over a batch axis it does not pad: ``b >= n ? 2n - b - 2 : b``
    reflect = tir.Select(I >= N, N * 2 - I - 2, I)
    assert str(_in_loop(reflect)) == "i"
    assert str(_in_loop(tir.Select(I < N, I, M))) == "i"
    assert _in_loop(tir.Select(I >= M, M, I)) is not None  # another extent: nothing known
    assert "m" in str(_in_loop(tir.Select(I >= M, M, I)))

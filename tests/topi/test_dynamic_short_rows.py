"""Elementwise kernels whose last axis has a run-time extent (an image width, a sequence
length): the axes before it merge into one vector loop while every read stays contiguous or
invariant (``schedule._symbolic_tail``), with no division by the run-time extent left in the
loop (``simplify._spread_symbolic``). Against numpy at widths of 1, odd sizes and
non-multiples of the vector width; against the static build at the same shape."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dynamic_util import assert_same_result, build_dynamic, build_static, kernel_source, rand, \
    requires_cc
from ember import te
from ember.tir.simplify import simplify
from ember.topi.schedule import _contiguous_tail, schedule_injective

# a (1, 6, ?, ?) map: tanh, a per-channel bias, a per-column row (stops the merge at the
# width) and a per-row column (not contiguous in the width: the width alone)
TEXT = """#[version = "0.0.5"]
def @main(%x: Tensor[(1, 6, {h}, {w}), float32], %b: Tensor[(1, 6, 1, 1), float32],
          %r: Tensor[(1, 1, 1, {w}), float32], %c: Tensor[(1, 1, {h}, 1), float32]) {{
  (tanh(%x), add(%x, %b), multiply(%x, %r), subtract(%x, %c))
}}
"""


def _args(h: int, w: int) -> list[np.ndarray]:
    rng = np.random.default_rng(h * 100 + w)
    return [rand(rng, 1, 6, h, w), rand(rng, 1, 6, 1, 1), rand(rng, 1, 1, 1, w),
            rand(rng, 1, 1, h, 1)]


def _refs(x: np.ndarray, b: np.ndarray, r: np.ndarray, c: np.ndarray) -> list[np.ndarray]:
    return [np.tanh(x), x + b, x * r, x - c]


pytestmark = requires_cc


@pytest.fixture(scope="module")
def maps():
    return build_dynamic(TEXT, {})


@settings(max_examples=12, deadline=None)
@given(h=st.integers(1, 9), w=st.integers(1, 40))
def test_run_time_width_rows_match_numpy(maps, h: int, w: int) -> None:
    args = _args(h, w)
    for got, want in zip(maps(*args), _refs(*args)):
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("h, w", [(1, 1), (3, 37)])
def test_run_time_width_agrees_with_the_static_build(maps, h: int, w: int) -> None:
    args = _args(h, w)
    for got, want in zip(maps(*args), build_static(TEXT, {}, h=h, w=w)(*args)):
        assert_same_result(got, want)


def test_merged_loops_divide_by_no_run_time_extent() -> None:
    source = kernel_source(TEXT, {})
    loops = re.findall(r"\n\s*(.*(?:T_tanh|T_add|T_multiply|T_subtract)\[.*)", source)
    assert loops and not any(re.search(r"[/%] any_dim", line) for line in loops), loops


def test_symbolic_tail_merges_while_reads_stay_contiguous() -> None:
    h, w = te.size_var("h"), te.size_var("w")
    x = te.placeholder((2, 6, h, w), name="x")
    copy = te.compute(x.shape, lambda *i: x(*i) * 2.0, name="copy")
    assert _contiguous_tail(schedule_injective([copy]), copy.op, 16) == 4
    bias = te.placeholder((6,), name="b")
    add = te.compute(x.shape, lambda n, c, i, j: x[n, c, i, j] + bias[c], name="add")
    assert _contiguous_tail(schedule_injective([add]), add.op, 16) == 2  # (h, w) per channel
    row = te.placeholder((w,), name="r")
    mul = te.compute(x.shape, lambda n, c, i, j: x[n, c, i, j] * row[j], name="mul")
    assert _contiguous_tail(schedule_injective([mul]), mul.op, 16) == 1
    flip = te.compute(x.shape, lambda n, c, i, j: x[n, c, i, w - 1 - j], name="flip")
    assert _contiguous_tail(schedule_injective([flip]), flip.op, 16) == 1


def test_product_by_a_run_time_divisor_multiplies_out() -> None:
    f, c, w = te.size_var("f"), te.size_var("c"), te.size_var("w")
    assert str(simplify((c * 5 + f // w) * w + f % w)) == str(simplify(c * w * 5 + f))
    # no term divided by ``w``: the product stays whole
    assert str(simplify((c * 5 + f) * w)) == str((c * 5 + f) * w)


def test_steps_of_products_of_variables_and_other_atoms_compare_alike():
    """A monomial of a variable and an expression atom (``w * (h // 2)``): keys of both kinds
    in one product, in either order (strided slices and Trilu's run-time k made them)."""
    from ember.tir.expr import FloorDiv, IntImm
    from ember.tir.simplify import StructuralKeys
    from ember.tir.symbolic_steps import polynomial

    h, w = te.size_var("h"), te.size_var("w")
    keys = StructuralKeys()
    half = FloorDiv(h, IntImm("int32", 2))
    assert polynomial(w * half, keys) == polynomial(half * w, keys) != {}


def test_an_axis_of_extent_one_does_not_stop_the_merge() -> None:
    # vad's STFT magnitude: (?, 258, w) split in halves, squared, summed, expanded to
    # (?, 129, 1, w): the expanded axis reads nothing; rows of w = 5 merge into one loop
    for width in (te.size_var("w"), 5):
        assert _contiguous_tail(*_magnitude(width), 16) == 3, width


def _magnitude(width):
    x = te.placeholder((2, 258, width), name="x")
    mag = te.compute((2, 129, 1, width), lambda n, c, o, j: x[n, c, j] * x[n, c, j]
                     + x[n, c + 129, j] * x[n, c + 129, j], name="mag")
    return schedule_injective([mag]), mag.op

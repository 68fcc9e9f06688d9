"""The head split and merge of attention with a run-time batch and sequence length: reshape,
transpose, reshape copies whose loops are nested (not fused over the run-time sequence
length) and whose indices divide by no run-time extent, so they cost what the static build's
do; against numpy over many shapes, against the static build at the same shape."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from dynamic_util import assert_same_result, build_dynamic, build_static, kernel_source, rand, \
    requires_cc

pytestmark = requires_cc

# (b, s, 32) -> heads (2b, s, 16) -> scaled -> merged back (b, s, 32)
HEADS = """#[version = "0.0.5"]
def @main(%x: Tensor[({b}, {s}, 32), float32]) {{
  %0 = reshape(%x, newshape=[0, 0, 2, -1]);
  %1 = transpose(%0, axes=[0, 2, 1, 3]);
  %2 = reshape(%1, newshape=[-3, -2]);
  %3 = multiply(%2, 2f);
  %4 = reshape(%3, newshape=[-4, -1, 2, -2]);
  %5 = transpose(%4, axes=[0, 2, 1, 3]);
  (%2, reshape(%5, newshape=[0, 0, -1]))
}}
"""


def _refs(x: np.ndarray) -> list[np.ndarray]:
    b, s, _ = x.shape
    heads = x.reshape(b, s, 2, 16).transpose(0, 2, 1, 3).reshape(b * 2, s, 16)
    merged = (2 * heads).reshape(b, 2, s, 16).transpose(0, 2, 1, 3).reshape(b, s, 32)
    return [heads, merged]


@pytest.fixture(scope="module")
def heads():
    return build_dynamic(HEADS, {})


@settings(max_examples=15, deadline=None)
@given(b=st.integers(1, 3), s=st.integers(1, 41))
def test_dynamic_head_split_and_merge_match_numpy(heads, b: int, s: int) -> None:
    x = rand(np.random.default_rng(b * 100 + s), b, s, 32)
    for got, want in zip(heads(x), _refs(x)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("b, s", [(1, 1), (2, 9)])
def test_dynamic_head_split_agrees_with_the_static_build(heads, b: int, s: int) -> None:
    x = rand(np.random.default_rng(7), b, s, 32)
    for got, want in zip(heads(x), build_static(HEADS, {}, b=b, s=s)(x)):
        assert_same_result(got, want)


def test_the_copies_divide_by_no_run_time_extent() -> None:
    source = kernel_source(HEADS, {})
    stores = [line for line in source.splitlines() if re.search(r"T_\w+\[.*\] = ", line)]
    assert stores, source
    for line in stores:  # run-time extents are any_dim*: never a divisor in a copy's index
        assert not re.search(r"[/%] *\(?any_dim", line), line
        assert "ember_floordiv" not in line and "ember_floormod" not in line, line


def test_a_long_sequence_runs_on_two_threads() -> None:
    # enough work for the copies to launch tasks (a run-time decision of the kernel)
    model = ember.compile(HEADS.format(b="?", s="?"), executor="vm", threads=2)
    x = rand(np.random.default_rng(3), 2, 1031, 32)
    for got, want in zip(model(x), _refs(x)):
        np.testing.assert_array_equal(got, want)

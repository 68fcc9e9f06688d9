"""Reshapes over run-time sizes that merge or split only some axes: the axes both shapes lead
or end with unchanged (the same size variable) index themselves, so the kernel's index has no
division per element ((b * h, s, t) -> (b, h, s, t) reads x[i0 * h + i1, i2, i3]); values
against numpy at odd sizes and at size 1."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from topi_util import build_funcs, check, rand

import ember
from ember import te, tir, topi
from ember.tir.expr import FloorDiv, FloorMod
from ember.tir.functor import post_order

B, H, S, T, BH = (te.size_var(n) for n in ("b", "h", "s", "t", "bh"))
# name -> (input shape, output shape, numpy sizes of each from {b, h, s, t}, divides in C)
# (merging and regrouping divide the lowered function's per-axis indices, but the C's
# flattened indices fold: a reshape of contiguous memory is a copy at one index)
CASES = {
    "split_lead": ((BH, S, T), (B, H, S, T), lambda b, h, s, t: (b * h, s, t), False),
    "merge_lead": ((B, H, S, T), (BH, S, T), lambda b, h, s, t: (b, h, s, t), False),
    "split_last": ((B, S, 48), (B, S, 3, 16), lambda b, h, s, t: (b, s, 48), False),
    "drop_unit": ((B, 1, T), (B, T), lambda b, h, s, t: (b, 1, t), False),
    "mixed": ((B, S, T), (S, B, T), lambda b, h, s, t: (b, s, t), False),  # a real regroup
}


def _out_sizes(name, b, h, s, t):
    sizes = {id(B): b, id(H): h, id(S): s, id(T): t, id(BH): b * h}
    return tuple(d if isinstance(d, int) else sizes[id(d)] for d in CASES[name][1])


@pytest.fixture(scope="module")
def kernels():
    funcs, prims = {}, {}
    for name, (src, dst, _, _) in CASES.items():
        x = te.placeholder(src, name="x")
        y = topi.reshape(x, dst)
        funcs[name] = (topi.auto_schedule([y]), [x, y])
        prims[name] = te.lower(*funcs[name], name)
    return build_funcs(funcs), prims


@pytest.mark.parametrize("name", sorted(CASES))
def test_reshape_index_divides_only_where_axes_regroup(kernels, name):
    # in the C the kernel runs: the flattened indices of the copy (the lowered function's
    # are per axis; a loop fused over run-time axes folds back only once flattened)
    mod, prims = kernels
    chunks = re.split(r"\n(?=\S)", mod.get_source())
    stores = [line for chunk in chunks if re.search(rf"\b{name}_(unpacked|par\d+)\(", chunk)
              for line in chunk.splitlines() if "T_reshape[" in line and "=" in line]
    assert stores, str(prims[name])
    divisions = [line for line in stores if re.search(r" [/%] |ember_floor(div|mod)", line)]
    assert bool(divisions) == CASES[name][3], "\n".join(stores)


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=8, deadline=None)
@given(b=st.integers(1, 5), h=st.integers(1, 4), s=st.sampled_from([1, 3, 7]),
       t=st.sampled_from([1, 5, 16]))
def test_reshape_matches_numpy(kernels, name, b, h, s, t):
    mod, _ = kernels
    x = rand(CASES[name][2](b, h, s, t), seed=b * 7 + s)
    out_shape = _out_sizes(name, b, h, s, t)
    out = ember.nd.empty(out_shape)
    mod[name](ember.nd.array(x), out)
    check(out.numpy(), x.reshape(out_shape))


S2, T2 = te.size_var("s2"), te.size_var("t2")


def _at(size, i):
    # the read of a run-time size that may broadcast (relay's broadcast_load)
    return tir.Select(size == 1, tir.const(0), i)


@pytest.fixture(scope="module")
def scores_plus_mask():
    # attention scores (b * h, s, t) seen as (b, h, s, t) plus a mask (1, 1, s2, t2), either
    # of which may broadcast: the reshape is read at broadcast indices (s == 1 ? 0 : i)
    x, m = te.placeholder((BH, S, T), name="x"), te.placeholder((1, 1, S2, T2), name="m")
    y = topi.reshape(x, (B, H, S, T))
    out = te.compute((B, H, tir.max(S, S2), tir.max(T, T2)), lambda b, h, i, j: y[
        b, h, _at(S, i), _at(T, j)] + m[0, 0, _at(S2, i), _at(T2, j)], name="scores",
        tag="broadcast")
    sch = topi.auto_schedule([out])
    return build_funcs({"scores": (sch, [x, m, out])}), te.lower(sch, [x, m, out], "scores")


def test_a_reshape_read_at_broadcast_indices_divides_nothing(scores_plus_mask):
    _, prim = scores_plus_mask
    assert not [n for n in post_order(prim.body) if isinstance(n, (FloorDiv, FloorMod))], \
        str(prim)


@settings(max_examples=10, deadline=None)
@given(b=st.integers(1, 3), h=st.integers(1, 3), s=st.sampled_from([1, 5]),
       t=st.sampled_from([1, 6, 17]), mask_s=st.booleans(), mask_t=st.booleans())
def test_scores_plus_mask_match_numpy(scores_plus_mask, b, h, s, t, mask_s, mask_t):
    mod, _ = scores_plus_mask
    x = rand((b * h, s, t), seed=b + 3 * t)
    m = rand((1, 1, 1 if mask_s else s, 1 if mask_t else t), seed=s)
    if s == 1 or t == 1:  # the scores broadcast instead (their size 1 against the mask's)
        m = rand((1, 1, 4 if s == 1 else s, 3 if t == 1 else t), seed=s)
    out = ember.nd.empty(np.broadcast_shapes((b, h, s, t), m.shape))
    mod["scores"](ember.nd.array(x), ember.nd.array(m), out)
    check(out.numpy(), x.reshape(b, h, s, t) + m)

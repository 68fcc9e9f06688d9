"""Data-movement ops against numpy, with hypothesis-drawn shapes."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from topi_util import check, rand, run_kernel

import ember
from ember import te, tir, topi

SETTINGS = settings(max_examples=4, deadline=None)
dims = st.lists(st.integers(1, 6), min_size=1, max_size=4).map(tuple)


def _one(fn, shape, ref, dtype="float32"):
    x = te.placeholder(shape, dtype, name="x")
    xv = rand(shape, dtype, seed=sum(shape))
    (got,) = run_kernel(fn(x), [x], [xv])
    check(got, ref(xv))


@SETTINGS
@given(shape=dims, data=st.data())
def test_transpose_and_reshape(shape, data):
    perm = data.draw(st.permutations(range(len(shape))))
    _one(lambda x: topi.transpose(x, perm), shape, lambda v: v.transpose(perm))
    _one(lambda x: topi.reshape(x, [-1, shape[-1]]), shape, lambda v: v.reshape(-1, shape[-1]))


@SETTINGS
@given(shape=dims, data=st.data())
def test_squeeze_expand_dims(shape, data):
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    _one(lambda x: topi.squeeze(topi.expand_dims(x, axis)), shape,
         lambda v: np.squeeze(np.expand_dims(v, axis)))


@SETTINGS
@given(shape=dims, data=st.data())
def test_concatenate_and_stack(shape, data):
    axis = data.draw(st.integers(0, len(shape) - 1))
    other = tuple(d + 2 if i == axis else d for i, d in enumerate(shape))
    a, b = te.placeholder(shape, name="a"), te.placeholder(other, name="b")
    av, bv = rand(shape, seed=1), rand(other, seed=2)
    (got,) = run_kernel(topi.concatenate([a, b, a], axis), [a, b], [av, bv])
    check(got, np.concatenate([av, bv, av], axis))
    c = te.placeholder(shape, name="c")
    (got,) = run_kernel(topi.stack([a, c], axis), [a, c], [av, av + 1])
    check(got, np.stack([av, av + 1], axis))


@SETTINGS
@given(shape=dims, data=st.data())
def test_strided_slice(shape, data):
    begin, end, strides = [], [], []
    for d in shape:
        s = data.draw(st.sampled_from([1, 2, -1, 3]))
        begin.append(data.draw(st.integers(-d, d - 1)))
        end.append(data.draw(st.integers(-d - 1, d)))
        strides.append(s)
    sl = tuple(slice(b, e, s) for b, e, s in zip(begin, end, strides))
    if any(len(range(*slc.indices(d))) == 0 for slc, d in zip(sl, shape)):
        return
    _one(lambda x: topi.strided_slice(x, begin, end, strides), shape, lambda v: v[sl])


def test_split_sections_and_indices():
    x = te.placeholder((6, 5), name="x")
    xv = rand((6, 5))
    outs = topi.split(x, 3, axis=0)
    got = run_kernel(outs, [x], [xv])
    for g, w in zip(got, np.split(xv, 3, axis=0)):
        check(g, w)
    got = run_kernel(topi.split(x, [1, 4], axis=1), [x], [xv])
    for g, w in zip(got, np.split(xv, [1, 4], axis=1)):
        check(g, w)


@pytest.mark.parametrize("mode", ["clip", "wrap"])
@pytest.mark.parametrize("axis", [0, 1, None])
def test_take(mode, axis):
    a = te.placeholder((5, 7), name="a")
    idx = te.placeholder((3, 2), "int32", name="i")
    av = rand((5, 7))
    iv = np.array([[0, 4], [-1, 9], [2, 6]], "int32")
    (got,) = run_kernel(topi.take(a, idx, axis, mode), [a, idx], [av, iv])
    check(got, np.take(av, iv, axis=axis, mode=mode))


@SETTINGS
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple), data=st.data())
def test_tile_repeat_reverse(shape, data):
    reps = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    axis = data.draw(st.integers(0, len(shape) - 1))
    _one(lambda x: topi.tile(x, reps), shape, lambda v: np.tile(v, reps))
    _one(lambda x: topi.repeat(x, 3, axis), shape, lambda v: np.repeat(v, 3, axis))
    _one(lambda x: topi.reverse(x, axis), shape, lambda v: np.flip(v, axis))


def test_broadcast_to_arange_one_hot():
    _one(lambda x: topi.broadcast_to(x, (4, 3, 5)), (3, 1), lambda v: np.broadcast_to(v, (4, 3, 5)))
    (got,) = run_kernel(topi.arange(1.0, 4.0, 0.5), [], [])
    check(got, np.arange(1.0, 4.0, 0.5, dtype="float32"))
    idx = te.placeholder((4,), "int32", name="i")
    iv = np.array([0, 2, 1, 5], "int32")
    (got,) = run_kernel(topi.one_hot(idx, 1.0, 0.0, 4, -1), [idx], [iv])
    check(got, (iv[:, None] == np.arange(4)[None, :]).astype("float32"))


def _to_blocked(v):
    padded = np.concatenate([v, np.zeros((1, 12, 3, 5), "float32")], axis=1)
    return padded.reshape(1, 2, 16, 3, 5).transpose(0, 1, 3, 4, 2)


def test_layout_transform_roundtrip():
    _one(lambda t: topi.layout_transform(t, "NCHW", "NCHW16c"), (1, 20, 3, 5), _to_blocked)
    _one(lambda t: topi.layout_transform(t, "NCHW", "NHWC"), (1, 20, 3, 5),
         lambda v: v.transpose(0, 2, 3, 1))
    y = te.placeholder((1, 2, 3, 5, 16), name="y")
    xv = rand((1, 20, 3, 5))
    (got,) = run_kernel(topi.layout_transform(y, "NCHW16c", "NCHW"), [y], [_to_blocked(xv)])
    check(got, np.concatenate([xv, np.zeros((1, 12, 3, 5), "float32")], 1))


def test_pad_and_batch_flatten():
    _one(lambda x: topi.nn.pad(x, [0, 1, 2], [1, 0, 3], 1.5), (2, 3, 4),
         lambda v: np.pad(v, ((0, 1), (1, 0), (2, 3)), constant_values=1.5))
    _one(topi.nn.batch_flatten, (2, 3, 4), lambda v: v.reshape(2, -1))


@pytest.mark.parametrize("src,dst", [((1, 4, 15), (1, 4, 3, 5)), ((2, 3, 4), (6, 4)),
                                     ((1, 1), (1,)), ((4,), (4, 1, 1)), ((1, 1, 6), (6, 1)),
                                     ((2, 6), (3, 4)), ((3, 1, 5), (5, 3))])
def test_reshape_groups_match_numpy(src, dst):
    # axes paired in groups of equal size (unit axes joining a neighbour), and a pair of
    # shapes that share no group boundary (one group of everything)
    _one(lambda x: topi.reshape(x, dst), src, lambda v: v.reshape(dst))


def _gather_split_rows(batch, new_batch):
    """(x, rows, out): x (batch, 4, 15) reshaped to (new_batch, 4, 3, 5), rows[i] of its
    split axis gathered; asserts the lowered index divides nothing loaded from memory."""
    x = te.placeholder((batch, 4, 15), name="x")
    rows = te.placeholder((2,), "int32", name="rows")
    y = topi.reshape(x, (new_batch, 4, 3, 5))
    out = te.compute((batch, 4, 2, 5), lambda b, c, i, j: y[b, c, rows[i], j], name="gather")
    func = te.lower(topi.auto_schedule(out), [x, rows, out], "gather_rows")
    post_order = tir.functor.post_order
    divs = [d for d in post_order(func.body)
            if isinstance(d, (tir.expr.FloorDiv, tir.expr.FloorMod))
            and any(isinstance(m, tir.expr.BufferLoad) for m in post_order(d))]
    assert not divs, str(func)
    return x, rows, out


def test_reshape_splits_only_its_own_group():
    # a gather along the split axis (resize reading a token map seen as an image): the index
    # stays x[n, c, idx[i] * 5 + j], with no division by the other axes' sizes (which the
    # simplifier cannot drop for an index loaded from memory)
    x, rows, out = _gather_split_rows(1, 1)
    xv, rv = rand((1, 4, 15), seed=3), np.array([2, 0], "int32")
    (got,) = run_kernel(out, [x, rows], [xv, rv])
    check(got, xv.reshape(1, 4, 3, 5)[:, :, rv])


def _tokens_of_blocked(channels, block):
    # a blocked map read back as tokens (SegFormer's Mix-FFN after its depthwise conv):
    # out[hw, c] = x[c // block, hw, c % block]
    x = te.placeholder((channels // block, 6, block), name="x")
    out = te.compute((6, channels), lambda p, c: x[c // block, p, c % block] * 2.0, name="tok")
    return x, out


def _inner_loop_extents(func):
    return [int(n.extent.value) for n in tir.functor.post_order(func.body)
            if isinstance(n, tir.stmt.For) and n.kind == tir.stmt.ForKind.VECTORIZED]


@pytest.mark.parametrize("channels,block,vector", [(32, 8, 8), (24, 4, 4)])
def test_injective_inner_loop_split_by_the_block_it_reads(channels, block, vector):
    x, out = _tokens_of_blocked(channels, block)
    func = te.lower(topi.auto_schedule(out), [x, out], "tokens")
    assert _inner_loop_extents(func) == [vector], str(func)
    xv = rand((channels // block, 6, block), seed=4)
    (got,) = run_kernel(out, [x], [xv])
    check(got, xv.transpose(1, 0, 2).reshape(6, channels) * 2)


def test_injective_inner_loop_kept_whole_when_the_block_does_not_divide_it():
    x = te.placeholder((3, 8), name="x")
    out = te.compute((20,), lambda i: x[i // 8, i % 8] + 1.0, name="flat")
    two = te.compute((2, 20), lambda r, i: out[i] * r, name="rows")
    func = te.lower(topi.auto_schedule(two), [x, two], "rows")
    assert _inner_loop_extents(func) == [20], str(func)
    xv = rand((3, 8), seed=5)
    (got,) = run_kernel(two, [x], [xv])
    check(got, np.stack([xv.reshape(-1)[:20] + 1] * 2) * np.array([[0.0], [1.0]], "float32"))


def _upsample2(shape: tuple) -> tuple:
    """A blocked 2x nearest upsampling of ``shape`` (N, C/L, H, W, L) and its schedule."""
    x = te.placeholder(shape, name="x")
    n, cb, h, w, lanes = shape
    y = te.compute((n, cb, 2 * h, 2 * w, lanes),
                   lambda a, b, i, j, l: x[a, b, i // 2, j // 2, l], name="up", tag="injective")
    return x, y, topi.schedule_injective(y)


def test_outer_axes_fuse_until_the_parallel_loop_is_long_enough():
    # (1, 4, 256, 40, 8): batch x blocks x rows is 1024 iterations, so the columns stay a
    # nested loop (no division per vector for them); a small map fuses every outer axis
    x, y, s = _upsample2((1, 4, 128, 20, 8))
    text = str(ember.lower(s, [x, y], simple_mode=True))
    assert "a_b_fused_i_fused, 0, 1024" in text and "for (j, 0, 40)" in text, text
    xv = rand((1, 4, 128, 20, 8), seed=3)
    (got,) = run_kernel(y, [x], [xv], schedule=topi.schedule_injective)
    check(got, xv.repeat(2, axis=2).repeat(2, axis=3))
    xs, ys, ss = _upsample2((1, 2, 8, 8, 8))
    assert "a_b_fused_i_fused_j_fused, 0, 512" in str(ember.lower(ss, [xs, ys], simple_mode=True))


def test_reshape_of_a_symbolic_batch_splits_only_its_own_group():
    # segformer's token map under a ? batch: (?, 4, 15) -> (?, 4, 3, 5) keeps the batch as its
    # own group, so a gather along the split axis divides by nothing
    _gather_split_rows(tir.Var("n", "int32"), -1)


def test_reshape_of_a_symbolic_batch_matches_numpy():
    import ember
    from ember import relay

    x = relay.var("x", shape=(relay.Any(), 6, 4))
    y = relay.reshape(relay.transpose(x, (0, 2, 1)), (-1, 4, 3, 2))
    run = relay.create_executor("vm", mod=ember.IRModule.from_expr(relay.Function([x], y)),
                                target="llvm").evaluate()
    for batch in (1, 3, 7):
        v = rand((batch, 6, 4), seed=batch)
        check(run(v).numpy(), v.transpose(0, 2, 1).reshape(batch, 4, 3, 2))


def test_a_symbolic_batch_is_its_own_loop_before_the_fused_static_axes():
    # a concat of blocked maps along the channels at a ? batch (SqueezeNet's fire modules):
    # the batch fused with the static axes made every vector split its index again by a
    # chain of divisions; as its own loop, each piece is one contiguous run per batch item
    # (each piece's store twice: the plain loops below the run-time work test, and the task
    # that runs batch x static axes as one launch)
    from ember.tir.codegen import generate_c

    n = tir.Var("n", "int32")
    a = te.placeholder((n, 2, 15, 15, 8), name="a")
    b = te.placeholder((n, 3, 15, 15, 8), name="b")
    out = topi.concatenate([a, b], axis=1)
    func = te.lower(topi.schedule_injective(out), [a, b, out], "concat")
    text = str(func)
    assert "for (i0, 0, n)" in text and "i1_i2_fused_i3_fused, 0, 450" in text, text
    stores = [line for line in generate_c([func]).splitlines() if "T_concat[" in line]
    assert len(stores) == 4 and not any("/" in s or "%" in s for s in stores), stores


def test_a_symbolic_batch_concat_matches_numpy():
    import ember
    from ember import relay

    a = relay.var("a", shape=(relay.Any(), 2, 5, 3, 8))
    b = relay.var("b", shape=(relay.Any(), 1, 5, 3, 8))
    y = relay.concatenate([relay.nn.relu(a), b], axis=1)
    run = relay.create_executor("vm", mod=ember.IRModule.from_expr(relay.Function([a, b], y)),
                                target="llvm").evaluate()
    for batch in (1, 3, 7):
        av, bv = rand((batch, 2, 5, 3, 8), seed=batch), rand((batch, 1, 5, 3, 8), seed=9)
        check(run(av, bv).numpy(), np.concatenate([np.maximum(av, 0), bv], axis=1))

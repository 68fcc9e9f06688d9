"""Piecewise computes (te/piecewise.py): concatenate lowered as one copy nest per input, with
the stage's own schedule (fused, split with tails, parallel, vectorised), falling back to the
whole-domain body where the stage is inlined or copied by cache_write."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import te, tir, topi
from ember.contrib import cc
from ember.te.lower import MAX_CUTS
from ember.te.piecewise import piece_source, pieces_of, piecewise_compute
from ember.tir.expr import Call

needs_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")
RNG = np.random.default_rng(0)


def _rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def _selects(func) -> int:
    return sum(isinstance(n, Call) and n.op == "if_then_else"
               for n in tir.functor.post_order(func.body))


def _run(func, arrays, out_shape, dtype="float32"):
    mod = tir.build(func)
    out = ember.nd.empty(out_shape, dtype)
    mod[func.attrs["global_symbol"]](*[ember.nd.array(a) for a in arrays], out)
    return out.numpy()


def _head():
    """yolov8's head: three maps flattened (reshape inlined) and joined on the last axis."""
    xs = [te.placeholder((1, 6, s, s), name=f"x{s}") for s in (8, 4, 2)]
    flat = [topi.reshape(x, (1, 6, -1)) for x in xs]
    return xs, topi.concatenate(flat, axis=2)


def test_concat_lowers_to_one_select_free_nest_per_input():
    xs, out = _head()
    func = te.lower(topi.auto_schedule(out), [*xs, out], "head")
    assert _selects(func) == 0
    text = str(func)
    assert text.count("T_concat[") == 3, text


@needs_cc
def test_concat_of_reshapes_matches_numpy():
    xs, out = _head()
    func = te.lower(topi.auto_schedule(out), [*xs, out], "head")
    arrays = [_rand(*(int(d) for d in x.shape)) for x in xs]
    got = _run(func, arrays, (1, 6, 84))
    np.testing.assert_array_equal(got, np.concatenate([a.reshape(1, 6, -1) for a in arrays], 2))


@needs_cc
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_concat_with_a_split_schedule_and_tails(axis):
    # Extents 1, 5 and 3 along the axis; the axis split by 4 (a tail in every piece).
    shapes = [[2, 3, 7] for _ in range(3)]
    for s, e in zip(shapes, (1, 5, 3)):
        s[axis] = e
    xs = [te.placeholder(s, name=f"x{k}") for k, s in enumerate(shapes)]
    out = topi.concatenate(xs, axis)
    s = te.create_schedule(out.op)
    outer, inner = s[out].split(out.op.axis[axis], 4)
    s[out].vectorize(inner) if axis == 2 else s[out].parallel(outer)
    func = te.lower(s, [*xs, out], "cat")
    arrays = [_rand(*sh) for sh in shapes]
    want = np.concatenate(arrays, axis)
    np.testing.assert_array_equal(_run(func, arrays, want.shape), want)


@needs_cc
def test_inlined_concat_keeps_the_whole_body():
    # concat read by a consumer in the same kernel: inlined, lowered through the select chain.
    a, b = te.placeholder((2, 3), name="a"), te.placeholder((2, 4), name="b")
    cat = topi.concatenate([a, b], axis=1)
    out = te.compute((2, 7), lambda i, j: cat[i, 6 - j] * 2.0, name="mirror")
    func = te.lower(topi.auto_schedule(out), [a, b, out], "mirror")
    assert _selects(func) >= 1
    av, bv = _rand(2, 3), _rand(2, 4)
    want = np.concatenate([av, bv], 1)[:, ::-1] * 2
    np.testing.assert_allclose(_run(func, [av, bv], (2, 7)), want, rtol=1e-6)


@needs_cc
def test_concat_with_run_time_extents():
    n = te.size_var("n")
    a, b = te.placeholder((n, 3), name="a"), te.placeholder((2, 3), name="b")
    out = topi.concatenate([a, b], axis=0)
    func = te.lower(topi.auto_schedule(out), [a, b, out], "dyn_cat")
    assert _selects(func) == 0
    for rows in (1, 5):
        av, bv = _rand(rows, 3), _rand(2, 3)
        got = _run(func, [av, bv], (rows + 2, 3))
        np.testing.assert_array_equal(got, np.concatenate([av, bv]))


@needs_cc
def test_cache_write_copies_are_lowered_whole():
    # cache_write copies the op's attrs onto ops with other bodies: those must not take pieces.
    a, b = te.placeholder((4, 3), name="a"), te.placeholder((4, 5), name="b")
    out = topi.concatenate([a, b], axis=1)
    s = te.create_schedule(out.op)
    s.cache_write(out, "local")
    assert [pieces_of(st.op) for st in s.stages if isinstance(st.op, te.ComputeOp)] == [None,
                                                                                          None]
    func = te.lower(s, [a, b, out], "cached")
    av, bv = _rand(4, 3), _rand(4, 5)
    np.testing.assert_array_equal(_run(func, [av, bv], (4, 8)), np.concatenate([av, bv], 1))


def test_piecewise_compute_needs_a_piece():
    with pytest.raises(ValueError, match="T_empty: needs at least one piece along axis 0"):
        piecewise_compute((3,), 0, [], lambda k, i: i, "T_empty", "injective")


@needs_cc
@pytest.mark.parametrize("inputs", [3, 10])
def test_loop_cut_where_a_consumer_reads_an_inlined_concat(inputs):
    # yolov8's head: the concat is split again in the same kernel (inlined into the slices).
    # ``hi`` reads the piece axis at its own full axis: it takes the pieces. ``lo`` drops the
    # last column (its axis does not span the concat's): its innermost loop is cut at the
    # pieces' bounds instead (up to MAX_CUTS cuts; past that the tests stay, same result).
    xs = [te.placeholder((2, 4, k + 1), name=f"x{k}") for k in range(inputs)]
    cat = topi.concatenate(xs, axis=2)
    total = int(cat.shape[2])
    lo = te.compute((2, 1, total - 1), lambda a, b, c: cat[a, b, c], name="lo")
    hi = te.compute((2, 3, total), lambda a, b, c: cat[a, b + 1, c] + 1.0, name="hi")
    func = te.lower(topi.auto_schedule([lo, hi]), [*xs, lo, hi], "split_cat")
    assert (_selects(func) == 0) == (inputs - 1 <= MAX_CUTS)
    arrays = [_rand(2, 4, k + 1) for k in range(inputs)]
    want = np.concatenate(arrays, 2)
    mod = tir.build(func)
    outs = [ember.nd.empty(s, "float32") for s in ((2, 1, total - 1), (2, 3, total))]
    mod["split_cat"](*[ember.nd.array(a) for a in arrays], *outs)
    np.testing.assert_array_equal(outs[0].numpy(), want[:, :1, :-1])
    np.testing.assert_array_equal(outs[1].numpy(), want[:, 1:] + 1)


@needs_cc
def test_long_1d_concat_split_in_parallel_chunks():
    # schedule_loops splits a long 1-D output by 256 (parallel outer, vector inner): each
    # piece gets that split over its own extent, with a tail where 256 does not divide it.
    n = te.size_var("n")
    a, b = te.placeholder((20001,), name="a"), te.placeholder((n,), name="b")
    out = topi.concatenate([a, b], axis=0)
    func = te.lower(topi.auto_schedule(out), [a, b, out], "long_cat")
    assert _selects(func) == 0
    av, bv = _rand(20001), _rand(16500)
    np.testing.assert_array_equal(_run(func, [av, bv], (36501,)), np.concatenate([av, bv]))


@needs_cc
def test_elementwise_reader_of_a_concat_takes_its_pieces():
    # DenseNet: relu(concat) + a per-channel bias in one kernel, concat along the channels
    # (a fused outer loop): each piece reads its input directly.
    xs = [te.placeholder((1, c, 3, 5), name=f"x{c}") for c in (2, 3, 1)]
    bias = te.placeholder((6, 1, 1), name="bias")
    cat = topi.concatenate(xs, axis=1)
    out = topi.add(topi.nn.relu(cat), bias)
    func = te.lower(topi.auto_schedule(out), [*xs, bias, out], "cat_relu")
    assert _selects(func) == 0
    arrays = [_rand(*(int(d) for d in x.shape)) for x in xs] + [_rand(6, 1, 1)]
    want = np.maximum(np.concatenate(arrays[:3], 1), 0) + arrays[3]
    np.testing.assert_allclose(_run(func, arrays, (1, 6, 3, 5)), want, rtol=1e-6)


@needs_cc
def test_concat_also_read_elsewhere_keeps_its_whole_body():
    # the reader adds the concat to its mirror image: a second load that is not at the
    # reader's own indices, so the pieces do not apply (the result must still be right)
    a, b = te.placeholder((2, 3), name="a"), te.placeholder((2, 4), name="b")
    cat = topi.concatenate([a, b], axis=1)
    relu = topi.nn.relu(cat)
    out = te.compute((2, 7), lambda i, j: relu[i, j] + cat[i, 6 - j], name="mix")
    func = te.lower(topi.auto_schedule(out), [a, b, out], "mix")
    assert _selects(func) >= 1
    av, bv = _rand(2, 3), _rand(2, 4)
    c = np.concatenate([av, bv], 1)
    np.testing.assert_allclose(_run(func, [av, bv], (2, 7)), np.maximum(c, 0) + c[:, ::-1],
                               rtol=1e-6)


def _blocked_concat(channels, block=8):
    # concat along the channels, then to NCHW{block}c in the same kernel (SegFormer's decoder
    # before its fuse conv)
    xs = [te.placeholder((1, c, 3, 5), name=f"x{k}") for k, c in enumerate(channels)]
    out = topi.layout_transform(topi.concatenate(xs, axis=1), "NCHW", f"NCHW{block}c")
    func = te.lower(topi.auto_schedule(out), [*xs, out], "cat_blocked")
    arrays = [_rand(1, c, 3, 5) for c in channels]
    cat = np.concatenate(arrays, 1)
    total = cat.shape[1]
    blocks = -(-total // block)
    padded = np.zeros((1, blocks * block, 3, 5), "float32")
    padded[:, :total] = cat
    want = padded.reshape(1, blocks, block, 3, 5).transpose(0, 1, 3, 4, 2)
    return func, arrays, want


@needs_cc
def test_blocked_layout_of_a_concat_takes_its_pieces():
    # pieces of 8, 16 and 8 channels: the block loop splits at 1 and 3, each piece reading
    # its input at channel ``block * 8 + lane`` with no select
    func, arrays, want = _blocked_concat((8, 16, 8))
    assert _selects(func) == 0
    np.testing.assert_array_equal(_run(func, arrays, want.shape), want)


@needs_cc
@pytest.mark.parametrize("channels", [(4, 12), (8, 5)])
def test_blocked_layout_of_a_ragged_concat_keeps_its_whole_body(channels):
    # a piece bound inside a block (4), or channels padded to the block (13 -> 16):
    # no split by pieces, the selects stay, the result is still right
    func, arrays, want = _blocked_concat(channels)
    assert _selects(func) >= 1
    np.testing.assert_array_equal(_run(func, arrays, want.shape), want)


@needs_cc
def test_transposed_concat_takes_its_pieces_along_the_reader_axis():
    # the reader reads the concat's axis 0 at its own axis 1 (a transpose of a concat)
    a, b = te.placeholder((2, 3), name="a"), te.placeholder((5, 3), name="b")
    out = topi.transpose(topi.concatenate([a, b], axis=0), (1, 0))
    func = te.lower(topi.auto_schedule(out), [a, b, out], "cat_t")
    assert _selects(func) == 0
    av, bv = _rand(2, 3), _rand(5, 3)
    np.testing.assert_array_equal(_run(func, [av, bv], (3, 7)), np.concatenate([av, bv]).T)


def test_piece_split_of_each_reader():
    # which axis and factor each reader is split along (None: the whole-domain body)
    a, b = te.placeholder((1, 8, 2, 2), name="a"), te.placeholder((1, 16, 2, 2), name="b")
    cat = topi.concatenate([a, b], axis=1)
    readers = {
        "blocked": topi.layout_transform(cat, "NCHW", "NCHW8c"),
        "blocked4": topi.layout_transform(cat, "NCHW", "NCHW4c"),
        "nhwc": topi.layout_transform(cat, "NCHW", "NHWC"),
        "mirror": te.compute(cat.shape, lambda n, c, h, w: cat[n, 23 - c, h, w], name="m"),
        "half": te.compute((1, 12, 2, 2), lambda n, c, h, w: cat[n, c, h, w], name="half"),
    }
    got = {}
    for name, out in readers.items():
        split = piece_source(topi.auto_schedule(out), out.op)
        got[name] = None if split is None else (split.axis, split.factor)
    assert got == {"blocked": (1, 8), "blocked4": (1, 4), "nhwc": (3, 1), "mirror": None,
                   "half": None}


@needs_cc
def test_concat_inside_each_piece_is_cut_too():
    # YOLOv5's decode: per level a concat on the last axis (xy, wh, rest), the levels a
    # concat on the rows: each row piece's inner loop is cut at the inner concat's bounds,
    # not left a select per element.
    def level(rows: int, name: str):
        x = te.placeholder((rows, 7), name=name)
        parts = [topi.strided_slice(x, [0, lo], [rows, hi]) for lo, hi in ((0, 2), (2, 3), (3, 7))]
        parts = [topi.multiply(parts[0], 2.0), topi.add(parts[1], 1.0), topi.sigmoid(parts[2])]
        return x, topi.concatenate(parts, axis=1)
    (a, ca), (b, cb) = level(5, "a"), level(3, "b")
    out = topi.concatenate([ca, cb], axis=0)
    func = te.lower(topi.auto_schedule(out), [a, b, out], "cat_of_cats")
    assert _selects(func) == 0, func
    av, bv = _rand(5, 7), _rand(3, 7)

    def ref(v):
        return np.concatenate([v[:, :2] * 2, v[:, 2:3] + 1, 1 / (1 + np.exp(-v[:, 3:]))], 1)
    got = _run(func, [av, bv], (8, 7))
    np.testing.assert_allclose(got, np.concatenate([ref(av), ref(bv)]), rtol=1e-6, atol=1e-6)

"""The injective schedule of stages that transpose (topi/loop_order.py): the axis a large input
is contiguous along runs just outside the vector loop (and a long last axis in tiles outside
it). Numerics against numpy for transposes of 2-6 dims, depth-to-space / pixel shuffle,
channel shuffle, a YOLO detect-decode-shaped kernel, odd, 1-sized and run-time extents; the
order chosen, pinned on the lowered loops."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from topi_util import check, rand, run_kernel

from ember import te, topi
from ember.tir.stmt import For, ForKind
from ember.topi.loop_order import TransposeOrder, transpose_order

# extents around the thresholds: 1-sized, odd, below and above a cache line of floats
EXTENTS = st.sampled_from([1, 2, 3, 5, 16, 17, 33])


def _transposed(shape: tuple, perm: tuple) -> tuple[te.Tensor, te.Tensor]:
    x = te.placeholder(shape, name="x")
    return x, topi.transpose(x, perm)


def _order(out: te.Tensor, lanes: int = 16) -> TransposeOrder | None:
    s = topi.auto_schedule(out)
    return transpose_order(s, out.op, lanes)


def _loops(func) -> list[tuple[str, ForKind]]:
    """(variable, kind) of the loops of ``func``, outermost first, along the first nest."""
    out, node = [], func.body
    while node is not None:
        if isinstance(node, For):
            out.append((node.loop_var.name, node.kind))
            node = node.body
        else:
            node = next((c for c in getattr(node, "seq", ()) if isinstance(c, For)),
                        getattr(node, "body", None))
    return out


@settings(max_examples=15, deadline=None)
@given(shape=st.lists(EXTENTS, min_size=2, max_size=6).map(tuple), data=st.data())
def test_transposes_of_2_to_6_dims_match_numpy(shape, data):
    if math.prod(shape) > 1 << 18:
        shape = shape[-4:]
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    x, out = _transposed(shape, perm)
    xv = rand(shape, seed=len(shape))
    (got,) = run_kernel(topi.sigmoid(out), [x], [xv])  # an elementwise op fused in, too
    check(got, 1 / (1 + np.exp(-xv.transpose(perm))), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape, perm", [
    ((1, 40, 24, 33), (0, 3, 1, 2)),  # NHWC -> NCHW: channels next to the vector loop
    ((3, 300, 17), (0, 2, 1)),  # a long last axis (tiled by 256 with a tail)
    ((1, 1, 17, 20), (0, 3, 1, 2)),  # 1-sized axes around the transposed ones
    ((2, 33, 5, 17, 3), (4, 0, 3, 2, 1)),
])
def test_transposes_that_reorder_match_numpy(shape, perm):
    x, out = _transposed(shape, perm)
    assert _order(out) is not None
    xv = rand(shape)
    (got,) = run_kernel(out, [x], [xv])
    np.testing.assert_array_equal(got, xv.transpose(perm))


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_matches_numpy(mode):
    b, c, h, w, r = 1, 8, 9, 20, 2
    x = te.placeholder((b, c * r * r, h, w), name="x")
    if mode == "DCR":
        y = topi.transpose(topi.reshape(x, (b, r, r, c, h, w)), (0, 3, 4, 1, 5, 2))
    else:  # pixel shuffle
        y = topi.transpose(topi.reshape(x, (b, c, r, r, h, w)), (0, 1, 4, 2, 5, 3))
    out = topi.reshape(y, (b, c, h * r, w * r))
    xv = rand((b, c * r * r, h, w))
    if mode == "DCR":
        want = xv.reshape(b, r, r, c, h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        want = xv.reshape(b, c, r, r, h, w).transpose(0, 1, 4, 2, 5, 3)
    (got,) = run_kernel(out, [x], [xv])
    np.testing.assert_array_equal(got, want.reshape(b, c, h * r, w * r))


def test_channel_shuffle_and_space_to_depth_match_numpy():
    x = te.placeholder((1, 48, 7, 9), name="x")
    shuffle = topi.reshape(topi.transpose(topi.reshape(x, (1, 2, 24, 7, 9)), (0, 2, 1, 3, 4)),
                           (1, 48, 7, 9))
    y = te.placeholder((1, 3, 18, 40), name="y")  # space to depth, block 2
    s2d = topi.reshape(topi.transpose(topi.reshape(y, (1, 3, 9, 2, 20, 2)), (0, 3, 5, 1, 2, 4)),
                       (1, 12, 9, 20))
    xv, yv = rand((1, 48, 7, 9)), rand((1, 3, 18, 40))
    (got,) = run_kernel(shuffle, [x], [xv])
    np.testing.assert_array_equal(
        got, xv.reshape(1, 2, 24, 7, 9).transpose(0, 2, 1, 3, 4).reshape(1, 48, 7, 9))
    (got,) = run_kernel(s2d, [y], [yv])
    np.testing.assert_array_equal(
        got, yv.reshape(1, 3, 9, 2, 20, 2).transpose(0, 3, 5, 1, 2, 4).reshape(1, 12, 9, 20))


def _decode_level(x: te.Tensor, grid: te.Tensor, anchor: te.Tensor, ny: int, no: int,
                  stride: float) -> te.Tensor:
    y = topi.sigmoid(topi.transpose(topi.reshape(x, (1, 3, no, ny, ny)), (0, 1, 3, 4, 2)))
    xy = topi.strided_slice(y, [0, 0, 0, 0, 0], [1, 3, ny, ny, 2])
    wh = topi.strided_slice(y, [0, 0, 0, 0, 2], [1, 3, ny, ny, 4])
    rest = topi.strided_slice(y, [0, 0, 0, 0, 4], [1, 3, ny, ny, no])
    xy = topi.multiply(topi.add(topi.subtract(topi.multiply(xy, 2.0), 0.5), grid), stride)
    wh = topi.multiply(topi.power(topi.multiply(wh, 2.0), 2.0), anchor)
    return topi.reshape(topi.concatenate([xy, wh, rest], axis=4), (1, -1, no))


def _decode_ref(x, grid, anchor, ny, no, stride):
    y = 1 / (1 + np.exp(-x.reshape(1, 3, no, ny, ny).transpose(0, 1, 3, 4, 2)))
    xy = (y[..., :2] * 2 - 0.5 + grid) * stride
    wh = (y[..., 2:4] * 2) ** 2 * anchor
    return np.concatenate([xy, wh, y[..., 4:]], -1).reshape(1, -1, no)


def test_detect_decode_of_two_levels_matches_numpy():
    # YOLOv5's Detect head: per level reshape, transpose, sigmoid, slices, grid and anchor
    # math, a concat on the last axis; the levels a concat on the rows (pieces).
    no, levels = 11, ((8, 8.0), (4, 16.0))
    args, outs, arrays, want = [], [], [], []
    for k, (ny, stride) in enumerate(levels):
        x = te.placeholder((1, 3 * no, ny, ny), name=f"x{k}")
        grid = te.placeholder((1, 1, ny, ny, 2), name=f"grid{k}")
        anchor = te.placeholder((1, 3, 1, 1, 2), name=f"anchor{k}")
        args += [x, grid, anchor]
        outs.append(_decode_level(x, grid, anchor, ny, no, stride))
        vals = [rand((1, 3 * no, ny, ny), seed=k), rand((1, 1, ny, ny, 2), seed=k + 1),
                rand((1, 3, 1, 1, 2), seed=k + 2, lo=5, hi=20)]
        arrays += vals
        want.append(_decode_ref(*vals, ny, no, stride))
    (got,) = run_kernel(topi.concatenate(outs, axis=1), args, arrays)
    check(got, np.concatenate(want, 1), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("sizes", [(1, 5, 7), (2, 17, 3), (1, 1, 1)])
def test_run_time_extents(sizes):
    # NHWC -> NCHW with a run-time batch, height and width (a VM kernel's shapes)
    n, h, w = te.size_var("n"), te.size_var("h"), te.size_var("w")
    x = te.placeholder((n, h, w, 24), name="x")
    out = topi.transpose(x, (0, 3, 1, 2))
    assert _order(out) == TransposeOrder(1, None)
    xv = rand((*sizes, 24))
    (got,) = run_kernel(out, [x], [xv], out_shapes=[xv.transpose(0, 3, 1, 2).shape])
    np.testing.assert_array_equal(got, xv.transpose(0, 3, 1, 2))


def test_run_time_channels_keep_the_plain_order_where_rows_are_contiguous():
    # (b, s, h, d) -> (b, h, s, d), the head split: its last axis is contiguous in the input
    b, s = te.size_var("b"), te.size_var("s")
    x = te.placeholder((b, s, 4, 16), name="x")
    out = topi.transpose(x, (0, 2, 1, 3))
    assert _order(out) is None
    xv = rand((2, 9, 4, 16))
    (got,) = run_kernel(out, [x], [xv], out_shapes=[(2, 4, 9, 16)])
    np.testing.assert_array_equal(got, xv.transpose(0, 2, 1, 3))


@pytest.mark.parametrize("shape, perm, order", [
    ((1, 80, 80, 64), (0, 3, 1, 2), TransposeOrder(1, None)),  # NHWC -> NCHW
    ((1, 64, 80, 80), (0, 2, 3, 1), None),  # NCHW -> NHWC: W is already next to C
    ((1, 12, 128, 64), (0, 2, 1, 3), None),  # attention head merge: rows contiguous
    ((1, 1024, 1024), (0, 2, 1), TransposeOrder(1, 256)),  # a long last axis: tiles
    ((1, 960, 600), (0, 2, 1), TransposeOrder(1, 240)),  # a tile that divides the axis
    ((1, 1000, 600), (0, 2, 1), TransposeOrder(1, 256)),  # none does: a tested tail
    ((1, 3, 320, 320), (0, 2, 3, 1), None),  # to NHWC, 3 channels: too short to gather
    ((1, 320, 320, 3), (0, 3, 1, 2), None),  # from NHWC, 3 channels: stride 3 reads
    ((1, 4, 6400, 16), (0, 1, 3, 2), None),  # NCHW16c back to NCHW: a line per element, in order
])
def test_order_chosen(shape, perm, order):
    assert _order(_transposed(shape, perm)[1]) == order


def test_detect_decode_keeps_its_order():
    # the decode's rows (y, x) are contiguous in the input and already outside its last axis
    no, ny = 85, 40
    x = te.placeholder((1, 3 * no, ny, ny), name="x")
    grid, anchor = te.placeholder((1, 1, ny, ny, 2)), te.placeholder((1, 3, 1, 1, 2))
    assert _order(_decode_level(x, grid, anchor, ny, no, 8.0)) is None


def test_loop_order_of_nhwc_to_nchw_is_pinned():
    # channels just outside the vectorised W loop (fused into the parallel loop after H)
    x, out = _transposed((1, 20, 24, 32), (0, 3, 1, 2))
    func = te.lower(topi.auto_schedule(out), [x, out], "to_nchw")
    assert _loops(func) == [("i0_i2_fused_i1_fused", ForKind.SERIAL),
                            ("i3", ForKind.VECTORIZED)], str(func)


def test_loop_order_of_a_long_transpose_is_pinned():
    x, out = _transposed((512, 1024), (1, 0))
    func = te.lower(topi.auto_schedule(out), [x, out], "t2d")
    assert _loops(func) == [("i1_outer_i0_fused", ForKind.PARALLEL),
                            ("i1_inner", ForKind.VECTORIZED)], str(func)


def test_tiles_of_a_concat_divide_its_pieces():
    # yolov8's head: maps in channel blocks concatenated along the anchors; the tile of the
    # last axis divides each piece (no tail tests in any piece)
    a, b = te.placeholder((1, 320, 32), name="a"), te.placeholder((1, 160, 32), name="b")
    out = topi.concatenate([topi.transpose(a, (0, 2, 1)), topi.transpose(b, (0, 2, 1))], 2)
    assert _order(out) == TransposeOrder(1, 160)
    av, bv = rand((1, 320, 32), seed=1), rand((1, 160, 32), seed=2)
    (got,) = run_kernel(out, [a, b], [av, bv])
    np.testing.assert_array_equal(got, np.concatenate([av, bv], 1).transpose(0, 2, 1))

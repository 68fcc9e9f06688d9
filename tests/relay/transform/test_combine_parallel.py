"""CombineParallelConv2D / Dense / BatchMatmul and BatchingOps, called as Relay-era scripts
call them: before/expected text and the interpreter's result kept."""
from __future__ import annotations

import numpy as np
import pytest
from _pass_helpers import assert_main_equal, assert_same_result, parse, run

import ember
from ember import relay
from ember.relay import transform

RNG = np.random.default_rng(7)


def _rand(*shape):
    return RNG.uniform(-1, 1, shape).astype("float32")


def _args(mod):
    return [_rand(*[int(d) for d in p.checked_type.shape]) for p in mod["main"].params]


def test_conv2d_branches_with_bias_and_relu():
    before = """def @main(%x: Tensor[(1, 4, 8, 8), float32], %w0: Tensor[(2, 4, 1, 1), float32],
                         %w1: Tensor[(3, 4, 1, 1), float32], %w2: Tensor[(4, 4, 1, 1), float32],
                         %b0: Tensor[(2, 1, 1), float32], %b1: Tensor[(3, 1, 1), float32],
                         %b2: Tensor[(4, 1, 1), float32]) {
      (nn.relu(add(nn.conv2d(%x, %w0), %b0)), nn.relu(add(nn.conv2d(%x, %w1), %b1)),
       nn.relu(add(nn.conv2d(%x, %w2), %b2)))
    }"""
    expected = """def @main(%x: Tensor[(1, 4, 8, 8), float32], %w0: Tensor[(2, 4, 1, 1), float32],
                           %w1: Tensor[(3, 4, 1, 1), float32], %w2: Tensor[(4, 4, 1, 1), float32],
                           %b0: Tensor[(2, 1, 1), float32], %b1: Tensor[(3, 1, 1), float32],
                           %b2: Tensor[(4, 1, 1), float32]) {
      %0 = nn.conv2d(%x, concatenate((%w0, %w1, %w2)), channels=9);
      %1 = nn.relu(add(%0, concatenate((%b0, %b1, %b2))));
      (strided_slice(%1, begin=[0], end=[2], axes=[1]),
       strided_slice(%1, begin=[2], end=[5], axes=[1]),
       strided_slice(%1, begin=[5], end=[9], axes=[1]))
    }"""
    mod = parse(before)
    out = run(transform.CombineParallelConv2D(min_num_branches=3), mod)
    assert_main_equal(out, expected)
    assert_same_result(mod, out, *_args(mod))


def test_conv2d_nhwc_with_scalar_follower_stops_at_it():
    # multiply by a scalar cannot be joined (its argument has no channel axis): only the convs
    before = """def @main(%x: Tensor[(1, 6, 6, 3), float32], %w0: Tensor[(3, 3, 3, 2), float32],
                         %w1: Tensor[(3, 3, 3, 5), float32]) {
      %0 = nn.conv2d(%x, %w0, padding=[1, 1, 1, 1], data_layout="NHWC", kernel_layout="HWIO");
      %1 = nn.conv2d(%x, %w1, padding=[1, 1, 1, 1], data_layout="NHWC", kernel_layout="HWIO");
      (multiply(%0, 2f), multiply(%1, 2f))
    }"""
    expected = """def @main(%x: Tensor[(1, 6, 6, 3), float32], %w0: Tensor[(3, 3, 3, 2), float32],
                           %w1: Tensor[(3, 3, 3, 5), float32]) {
      %0 = nn.conv2d(%x, concatenate((%w0, %w1), axis=3), padding=[1, 1, 1, 1], channels=7,
                     data_layout="NHWC", kernel_layout="HWIO");
      (multiply(strided_slice(%0, begin=[0], end=[2], axes=[3]), 2f),
       multiply(strided_slice(%0, begin=[2], end=[7], axes=[3]), 2f))
    }"""
    mod = parse(before)
    out = run(transform.CombineParallelConv2D(2), mod)
    assert_main_equal(out, expected)
    assert_same_result(mod, out, *_args(mod))


def test_conv2d_incompatible_or_too_few_branches_stay():
    before = """def @main(%x: Tensor[(1, 4, 8, 8), float32], %w0: Tensor[(2, 4, 1, 1), float32],
                         %w1: Tensor[(3, 4, 3, 3), float32], %w2: Tensor[(4, 4, 1, 1), float32]) {
      (nn.conv2d(%x, %w0), nn.conv2d(%x, %w1), nn.conv2d(%x, %w2, strides=[2, 2]))
    }"""
    assert_main_equal(run(transform.CombineParallelConv2D(2), before), before)
    two = """def @main(%x: Tensor[(1, 4, 8, 8), float32], %w0: Tensor[(2, 4, 1, 1), float32],
                      %w1: Tensor[(3, 4, 1, 1), float32]) {
      (nn.conv2d(%x, %w0), nn.conv2d(%x, %w1))
    }"""
    assert_main_equal(run(transform.CombineParallelConv2D(), two), two)


def test_followers_used_twice_end_the_chain():
    before = """def @main(%x: Tensor[(1, 4, 4, 4), float32], %w0: Tensor[(2, 4, 1, 1), float32],
                         %w1: Tensor[(2, 4, 1, 1), float32]) {
      %0 = nn.conv2d(%x, %w0);
      %1 = nn.relu(%0);
      %2 = nn.relu(nn.conv2d(%x, %w1));
      (%1, %0, %2)
    }"""
    mod = parse(before)
    out = run(transform.CombineParallelConv2D(2), mod)
    assert sum(isinstance(n, relay.Call) and n.op.name == "nn.conv2d"
               for n in ember.ir.post_order(out["main"])) == 1
    assert_same_result(mod, out, *_args(mod))


DENSE = """def @main(%x: Tensor[(3, 4), float32], %w0: Tensor[(5, 4), float32],
                     %w1: Tensor[(5, 4), float32], %w2: Tensor[(5, 4), float32],
                     %b0: Tensor[(5), float32], %b1: Tensor[(5), float32],
                     %b2: Tensor[(5), float32]) {
  (add(nn.dense(%x, %w0), %b0), add(nn.dense(%x, %w1), %b1), add(nn.dense(%x, %w2), %b2))
}"""


def test_dense_to_batch_matmul():
    expected = """def @main(%x: Tensor[(3, 4), float32], %w0: Tensor[(5, 4), float32],
                           %w1: Tensor[(5, 4), float32], %w2: Tensor[(5, 4), float32],
                           %b0: Tensor[(5), float32], %b1: Tensor[(5), float32],
                           %b2: Tensor[(5), float32]) {
      %0 = nn.batch_matmul(stack((%x, %x, %x)), stack((%w0, %w1, %w2)));
      %1 = add(%0, stack((expand_dims(%b0, axis=0), expand_dims(%b1, axis=0),
                          expand_dims(%b2, axis=0))));
      (squeeze(strided_slice(%1, begin=[0], end=[1], axes=[0]), axis=[0]),
       squeeze(strided_slice(%1, begin=[1], end=[2], axes=[0]), axis=[0]),
       squeeze(strided_slice(%1, begin=[2], end=[3], axes=[0]), axis=[0]))
    }"""
    mod = parse(DENSE)
    out = run(transform.CombineParallelDense(min_num_branches=3), mod)
    assert_main_equal(out, expected)
    assert_same_result(mod, out, *_args(mod))


def test_dense_to_wider_dense_allows_different_units():
    before = """def @main(%x: Tensor[(3, 4), float32], %w0: Tensor[(2, 4), float32],
                         %w1: Tensor[(5, 4), float32], %w2: Tensor[(1, 4), float32]) {
      (nn.relu(nn.dense(%x, %w0)), nn.relu(nn.dense(%x, %w1)), nn.relu(nn.dense(%x, %w2)))
    }"""
    expected = """def @main(%x: Tensor[(3, 4), float32], %w0: Tensor[(2, 4), float32],
                           %w1: Tensor[(5, 4), float32], %w2: Tensor[(1, 4), float32]) {
      %0 = nn.relu(nn.dense(%x, concatenate((%w0, %w1, %w2)), units=8));
      (strided_slice(%0, begin=[0], end=[2], axes=[1]),
       strided_slice(%0, begin=[2], end=[7], axes=[1]),
       strided_slice(%0, begin=[7], end=[8], axes=[1]))
    }"""
    mod = parse(before)
    out = run(transform.CombineParallelDense(to_batch=False), mod)
    assert_main_equal(out, expected)
    assert_same_result(mod, out, *_args(mod))
    # to_batch needs one weight shape: nothing to do
    assert_main_equal(run(transform.CombineParallelDense(), before), before)


def test_batch_matmul_and_batching_ops():
    before = """def @main(%x: Tensor[(2, 3, 4), float32], %y0: Tensor[(2, 5, 4), float32],
                         %y1: Tensor[(2, 1, 4), float32], %y2: Tensor[(2, 2, 4), float32]) {
      (nn.batch_matmul(%x, %y0), nn.batch_matmul(%x, %y1), nn.batch_matmul(%x, %y2))
    }"""
    expected = """def @main(%x: Tensor[(2, 3, 4), float32], %y0: Tensor[(2, 5, 4), float32],
                           %y1: Tensor[(2, 1, 4), float32], %y2: Tensor[(2, 2, 4), float32]) {
      %0 = nn.batch_matmul(%x, concatenate((%y0, %y1, %y2), axis=1));
      (strided_slice(%0, begin=[0], end=[5], axes=[2]),
       strided_slice(%0, begin=[5], end=[6], axes=[2]),
       strided_slice(%0, begin=[6], end=[8], axes=[2]))
    }"""
    mod = parse(before)
    out = run(transform.CombineParallelBatchMatmul(), mod)
    assert_main_equal(out, expected)
    assert_same_result(mod, out, *_args(mod))
    assert_main_equal(run(transform.BatchingOps(), before), expected)
    dense = parse(DENSE)
    assert_same_result(dense, run(transform.BatchingOps(), dense), *_args(dense))


def test_opt_level_four_in_a_pipeline():
    mod = parse(DENSE)
    seq = ember.transform.Sequential([transform.CombineParallelDense()])
    with ember.transform.PassContext(opt_level=3):
        assert seq(mod) is mod
    with ember.transform.PassContext(opt_level=4):
        assert seq(mod) is not mod


@pytest.mark.parametrize("bad", [0, -1, "3", 2.5, True])
def test_bad_min_num_branches(bad):
    with pytest.raises(ValueError, match=r"CombineParallelConv2D: min_num_branches must be an "
                                         r"integer >= 1, got"):
        transform.CombineParallelConv2D(bad)


def test_bad_to_batch():
    with pytest.raises(TypeError, match="CombineParallelDense: to_batch must be a bool, got 'no'"):
        transform.CombineParallelDense(3, to_batch="no")


def test_registered_names():
    for name in ("combine-parallel-conv2d", "CombineParallelDense", "batching_ops"):
        assert isinstance(transform.get_pass(name), ember.transform.Pass)

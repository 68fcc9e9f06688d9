"""Every op's attrs survive InferType -> print -> parse (law: parse(print(m)) == m), and the
interpreter runs each op through its reference."""
from __future__ import annotations

import numpy as np
import pytest

import ember as tvm
from ember import relay


def _x():
    return relay.var("x", shape=(2, 8, 4, 4))


def _i():
    return relay.var("i", shape=(3,), dtype="int32")


CASES = {
    "strided_slice": lambda: relay.strided_slice(_x(), [0, 1], [2, 5], [1, 2]),
    "strided_slice_size": lambda: relay.strided_slice(_x(), [1], [3], axes=[3],
                                                      slice_mode="size"),
    "take": lambda: relay.take(_x(), _i(), axis=1, mode="wrap"),
    "take_flat": lambda: relay.take(_x(), _i()),
    "clip": lambda: relay.clip(_x(), -1.5, 2.0),
    "cast": lambda: relay.cast(_x(), "int8"),
    "arange": lambda: relay.arange(relay.const(1.0), relay.const(5.0), relay.const(0.5)),
    "layout_transform": lambda: relay.layout_transform(_x(), "NCHW", "NCHW4c"),
    "full": lambda: relay.full(relay.const(1, "int32"), (2, 2)),
    "pad": lambda: relay.nn.pad(_x(), ((0, 0), (0, 0), (1, 1), (2, 2)), 0.5),
    "upsampling": lambda: relay.nn.upsampling(_x(), 1.5, 2.0, method="bilinear",
                                              align_corners=True),
    "sum": lambda: relay.sum(_x(), axis=[1, 2], keepdims=True, exclude=True),
    "argmax": lambda: relay.argmax(_x(), axis=1, select_last_index=True),
    "std": lambda: relay.std(_x(), axis=1, unbiased=True),
    "avg_pool2d": lambda: relay.nn.avg_pool2d(_x(), (2, 2), padding=1, ceil_mode=True,
                                              count_include_pad=True),
    "adaptive": lambda: relay.nn.adaptive_avg_pool2d(_x(), (2, 1)),
    "one_hot": lambda: relay.one_hot(_i(), relay.const(1.0), relay.const(0.0), 5),
    "squeeze": lambda: relay.squeeze(relay.expand_dims(_x(), 0), [0]),
    "tile": lambda: relay.tile(_x(), (1, 2)),
    "dropout": lambda: relay.nn.dropout(_x(), 0.2),
    "batch_matmul": lambda: relay.nn.batch_matmul(relay.var("a", shape=(2, 3, 4)),
                                                  relay.var("b", shape=(2, 5, 4))),
    "conv2d_transpose": lambda: relay.nn.conv2d_transpose(
        _x(), relay.var("w", shape=(8, 2, 3, 3)), strides=2, output_padding=1, padding=1),
    "conv2d_nhwc": lambda: relay.nn.conv2d(
        relay.var("d", shape=(1, 5, 5, 4)), relay.var("w", shape=(3, 3, 1, 4)), groups=4,
        data_layout="NHWC", kernel_layout="HWIO", out_dtype="float64"),
    "layer_norm": lambda: relay.nn.layer_norm(_x(), relay.var("g", shape=(4,)),
                                              relay.var("b", shape=(4,)), epsilon=1e-3),
    "shape_of": lambda: relay.shape_of(_x(), "int64"),
    "reverse_reshape": lambda: relay.reverse_reshape(_x(), (-1, 0)),
    "stop_fusion": lambda: relay.annotation.stop_fusion(_x()),
    "split": lambda: relay.split(_x(), [1, 3], axis=1).astuple(),
    "zeros": lambda: relay.zeros((2, 3), "int8"),
    "gather": lambda: relay.gather(_x(), 1, relay.var("i", shape=(2, 2, 4, 4), dtype="int64")),
    "gather_nd": lambda: relay.gather_nd(_x(), relay.var("i", shape=(1, 2, 3), dtype="int32"),
                                         batch_dims=1, index_rank=1),
    "scatter_elements": lambda: relay.scatter_elements(
        _x(), relay.var("i", shape=(1, 8, 4, 4), dtype="int64"), relay.var("u", shape=(
            1, 8, 4, 4)), axis=0, reduction="max"),
    "topk": lambda: relay.topk(_x(), 2, axis=1, is_ascend=True, dtype="int64").astuple(),
    "cumsum": lambda: relay.cumsum(_x(), axis=2, exclusive=True),
    "cumprod": lambda: relay.cumprod(_x(), dtype="float64"),
    "resize2d": lambda: relay.image.resize2d(
        _x(), size=(3, 7), method="cubic", coordinate_transformation_mode="align_corners",
        cubic_alpha=-0.5, cubic_exclude=1, scales=(0.75, 1.75)),
    "depth_to_space": lambda: relay.nn.depth_to_space(_x(), 2, mode="CRD"),
    "space_to_depth": lambda: relay.nn.space_to_depth(_x(), 2),
}


@pytest.mark.parametrize("name", CASES)
def test_op_round_trips_through_text_and_runs(name):
    expr = CASES[name]()
    mod = tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(expr), expr))
    mod = relay.transform.InferType()(mod)
    parsed = relay.transform.InferType()(tvm.parser.fromtext(mod.astext()))
    tvm.ir.assert_structural_equal(parsed, mod)
    rng = np.random.default_rng(0)
    args = [rng.random(p.type_annotation.concrete_shape).astype(p.type_annotation.dtype)
            for p in mod["main"].params]
    relay.create_executor("debug", mod=mod).evaluate()(*args)

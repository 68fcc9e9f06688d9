"""One representative case per operator, for the test that every op lowers and compiles.

``default_cases(rng)`` maps every op name to a Case with odd sizes (not multiples of the vector
width). A new op without an entry here fails ``test_every_op_has_a_lowering_case``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from _lowering_util import SUMS, Case, rand

from ember.topi.signal import fft_table

UNARY_RANGES = {
    "log": (0.1, 5), "log2": (0.1, 5), "log10": (0.1, 5), "sqrt": (0.0, 5), "rsqrt": (0.1, 5),
    "tan": (-1.2, 1.2), "asin": (-0.99, 0.99), "acos": (-0.99, 0.99),
}
UNARY_FLOAT = ["exp", "log", "log2", "log10", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "sin",
               "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "floor", "ceil", "trunc",
               "round", "round_half_even", "negative", "abs", "sign", "copy", "isnan", "isinf",
               "isfinite", "logical_not", "nn.relu", "annotation.stop_fusion", "fast_exp", "fast_tanh",
               "fast_erf"]
BINARY = ["add", "subtract", "multiply", "divide", "floor_divide", "mod", "floor_mod", "power",
          "maximum", "minimum", "logical_and", "logical_or", "logical_xor", "equal",
          "not_equal", "less", "less_equal", "greater", "greater_equal"]
BITWISE = ["bitwise_and", "bitwise_or", "bitwise_xor"]
REDUCE = ["sum", "mean", "max", "min", "prod", "all", "any", "argmax", "argmin"]


def _unary(rng: np.random.Generator, name: str) -> Case:
    lo, hi = UNARY_RANGES.get(name, (-3, 3))
    return Case(name, [rand(rng, (3, 7), lo=lo, hi=hi)])


def _binary(rng: np.random.Generator, name: str) -> Case:
    lo = 0.5 if name in ("power", "divide", "floor_divide", "mod", "floor_mod") else -3
    return Case(name, [rand(rng, (2, 3, 5), lo=lo), rand(rng, (3, 1), lo=lo)])


def _nn(rng: np.random.Generator) -> dict[str, Case]:
    x4 = rand(rng, (1, 3, 7, 5))
    return {
        "nn.conv2d": Case("nn.conv2d", [x4, rand(rng, (5, 3, 3, 3))],
                          {"padding": (1, 1), "strides": (2, 1)}, SUMS),
        "nn.contrib_conv2d_NCHWc_fused": Case(
            "nn.contrib_conv2d_NCHWc_fused",
            [rand(rng, (1, 2, 5, 6, 4)), rand(rng, (2, 2, 3, 3, 4, 4)), rand(rng, (8,))],
            {"lanes": 4, "in_block": 4, "padding": (1, 1), "strides": (2, 1),
             "activation": "relu"}, SUMS),
        "nn.contrib_conv2d_NCHWc_fused_add": Case(
            "nn.contrib_conv2d_NCHWc_fused_add",
            [rand(rng, (1, 3, 5, 5)), rand(rng, (2, 3, 1, 1, 1, 4)), rand(rng, (8,)),
             rand(rng, (1, 2, 5, 5, 4))],
            {"lanes": 4, "in_block": 1, "activation": "clip", "clip_min": -1.0, "clip_max": 2.0,
             "act_after_add": False}, SUMS),
        "nn.contrib_conv2d_winograd_NCHWc_fused": Case(
            "nn.contrib_conv2d_winograd_NCHWc_fused",
            [rand(rng, (1, 2, 5, 7, 4)), rand(rng, (16, 3, 8, 4)), rand(rng, (12,))],
            {"lanes": 4, "in_block": 4, "padding": (1, 0, 2, 1), "tile_size": 2,
             "activation": "relu"}, SUMS),
        "nn.contrib_conv2d_winograd_NCHWc_fused_add": Case(
            "nn.contrib_conv2d_winograd_NCHWc_fused_add",
            [rand(rng, (1, 1, 6, 5, 4)), rand(rng, (36, 2, 4, 4)), rand(rng, (8,)),
             rand(rng, (1, 2, 6, 5, 4))],
            {"lanes": 4, "in_block": 4, "padding": (1, 1, 1, 1), "tile_size": 4,
             "activation": "clip", "clip_min": -1.0, "clip_max": 2.0, "act_after_add": False},
            SUMS),
        "nn.contrib_max_pool2d_NCHWc_fused": Case(
            "nn.contrib_max_pool2d_NCHWc_fused",
            [rand(rng, (1, 2, 7, 5, 4)), rand(rng, (8,)), rand(rng, (8,))],
            {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1), "layout": "NCHW4c",
             "relu": True}),
        "nn.conv2d_transpose": Case("nn.conv2d_transpose", [x4, rand(rng, (3, 2, 3, 3))],
                                    {"strides": (2, 2), "padding": (1, 1)}, SUMS),
        "nn.contrib_conv2d_transpose_interleave": Case(
            "nn.contrib_conv2d_transpose_interleave", [rand(rng, (1, 12, 2, 2))],
            {"strides": (3, 1), "offset": (2, 0), "out_size": (4, 2)}),
        "nn.contrib_conv2d_transpose_fewoc": Case(
            "nn.contrib_conv2d_transpose_fewoc",
            [rand(rng, (1, 2, 3, 4, 8)), rand(rng, (1, 2, 2, 2, 8, 4)), rand(rng, (4,))],
            {"padding": (1, 1, 1, 1), "lanes": 4, "in_block": 8, "activation": "sigmoid",
             "strides": (2, 2), "offset": (1, 0), "out_size": (6, 9)}, SUMS),
        # 2x2 phases of 3x3 taps on a 3x2 map (one 8-lane block in and out; tile 1: 2x4
        # pixels x 3 blocks, weights padded to 3 blocks)
        "nn.contrib_conv2d_transpose_phased": Case(
            "nn.contrib_conv2d_transpose_phased",
            [rand(rng, (1, 1, 3, 2, 8)), rand(rng, (4, 3, 1, 3, 3, 8, 8)), rand(rng, (96,))],
            {"padding": (2, 2, 2, 2), "rows": (5, 4), "strides": (2, 2), "offset": (1, 0),
             "out_size": (8, 7), "channels": 8, "tile": 1, "activation": "relu"}, SUMS),
        # 5 -> 6 channels, 3x3 stride (2, 1), x as u8 with zero point 7, a weight zero point
        "nn.contrib_qconv2d": Case(
            "nn.contrib_qconv2d",
            [rng.integers(0, 256, (1, 5, 7, 6)).astype("uint8"),
             rng.integers(-128, 128, (1, 2, 18, 4, 4)).astype("int8"),
             rng.integers(-999, 999, (6,)).astype("int32"),
             rng.integers(-3, 3, (6,)).astype("int32"), rand(rng, (6,), lo=1e-4, hi=1e-3)],
            {"channels": 6, "kernel_size": (3, 3), "strides": (2, 1), "padding": (1, 1),
             "x_zp": 7, "has_w_zp": True, "y_zp": 3}, (0, 0)),
        # the conv above, its u8 output (zero point 3) plus an s8 residual into s8
        "nn.contrib_qconv2d_add": Case(
            "nn.contrib_qconv2d_add",
            [rng.integers(0, 256, (1, 5, 7, 6)).astype("uint8"),
             rng.integers(-128, 128, (1, 2, 18, 4, 4)).astype("int8"),
             rng.integers(-999, 999, (6,)).astype("int32"),
             rng.integers(-3, 3, (6,)).astype("int32"), rand(rng, (6,), lo=1e-4, hi=1e-3),
             rng.integers(-128, 128, (1, 6, 4, 6)).astype("int8")],
            {"channels": 6, "kernel_size": (3, 3), "strides": (2, 1), "padding": (1, 1),
             "x_zp": 7, "has_w_zp": True, "y_zp": 3, "ra": 0.6, "rb": 0.3, "r_zp": -4,
             "s_zp": 2, "s_dtype": "int8"}, (0, 0)),
        # (2, 3, 9) u8 rows with zero point 5 by a packed (7, 9) int8 weight
        "nn.contrib_qdense": Case(
            "nn.contrib_qdense",
            [rng.integers(0, 256, (2, 3, 9)).astype("uint8"),
             rng.integers(-128, 128, (1, 3, 16, 4)).astype("int8"),
             rng.integers(-999, 999, (7,)).astype("int32"), np.array(5, "uint8")],
            {"units": 7}, (0, 0)),
        "nn.contrib_minmax": Case("nn.contrib_minmax", [rand(rng, (3, 7, 5))]),
        # channels 1..10 of a 3-group shuffle of 7 + 5 channels (padded 4-lane blocks) into
        # 8-lane blocks
        "nn.contrib_channel_shuffle_nchwc": Case(
            "nn.contrib_channel_shuffle_nchwc", [rand(rng, (2, 2, 3, 5, 4)),
                                                 rand(rng, (2, 2, 3, 5, 4))],
            {"channels": (7, 5), "groups": 3, "begin": 1, "end": 11, "lanes": 8}),
        # a u8 and an s8 operand of 3 x 7 into s8 (the vector loop's tail only)
        "nn.contrib_qadd": Case(
            "nn.contrib_qadd",
            [rng.integers(0, 256, (3, 7)).astype("uint8"),
             rng.integers(-128, 128, (3, 7)).astype("int8")],
            {"ra": 0.4, "rb": 0.7, "a_zp": 9, "b_zp": -4, "y_zp": 3, "out_dtype": "int8"}, (0, 0)),
        "nn.dense": Case("nn.dense", [rand(rng, (3, 9)), rand(rng, (5, 9))], {}, SUMS),
        "nn.matmul": Case("nn.matmul", [rand(rng, (3, 9)), rand(rng, (9, 5))], {}, SUMS),
        "nn.batch_matmul": Case("nn.batch_matmul", [rand(rng, (2, 3, 9)), rand(rng, (2, 5, 9))],
                                {}, SUMS),
        "nn.contrib_gemm": Case("nn.contrib_gemm", [rand(rng, (3, 9)), rand(rng, (5, 9)),
                                                    rand(rng, (5,)), rand(rng, (3, 5))],
                                {"has_bias": True, "has_residual": True, "act1": "relu"}, SUMS),
        # 3 heads of 5 read from (1, 7, 15) rows (relay/op/nn/attention.py), a per-key bias and
        # a (7, 7) mask broadcast over the heads
        "nn.contrib_attention": Case(
            "nn.contrib_attention", [rand(rng, (1, 7, 15)), rand(rng, (1, 7, 15)),
                                     rand(rng, (1, 7, 15)), rand(rng, (7,)),
                                     rand(rng, (1, 1, 7, 7))],
            {"qk_view": (3, 7, 7, 5, 105, 15, 105, 1, 15, 147, 7, 3, 5, 5, 49),
             "pv_view": (3, 7, 5, 7, 147, 7, 105, 15, 1, 105, 15, 3, 49, 5, 5),
             "out_shape": (1, 7, 15), "alpha": 0.4, "has_bias": True,
             "mask_strides": (0, 0, 7, 1)}, SUMS),
        "nn.contrib_gemm_pack": Case("nn.contrib_gemm_pack", [rand(rng, (5, 9))], {"nr": 8}),
        **_recurrent(rng),
        "nn.bias_add": Case("nn.bias_add", [x4, rand(rng, (3,))], {"axis": 1}),
        "nn.leaky_relu": Case("nn.leaky_relu", [x4], {"alpha": 0.2}),
        "nn.hardswish": Case("nn.hardswish", [4 * x4]),
        "nn.hardsigmoid": Case("nn.hardsigmoid", [4 * x4], {"alpha": 0.2, "beta": 0.4}),
        "nn.silu": Case("nn.silu", [4 * x4]),
        "nn.gelu": Case("nn.gelu", [4 * x4], {"approximate": "tanh"}),
        "nn.mish": Case("nn.mish", [4 * x4]),
        "nn.prelu": Case("nn.prelu", [x4, rand(rng, (3,))], {"axis": 1}),
        "nn.softmax": Case("nn.softmax", [x4], {"axis": 1}),
        "nn.log_softmax": Case("nn.log_softmax", [x4], {"axis": -1}),
        "nn.batch_flatten": Case("nn.batch_flatten", [x4]),
        "nn.pad": Case("nn.pad", [x4, np.array(1.5, "float32")],
                       {"pad_width": ((0, 0), (1, 0), (2, 1), (0, 3))}),
        "nn.dropout": Case("nn.dropout", [x4], {"rate": 0.3}),
        "nn.upsampling": Case("nn.upsampling", [x4], {"scale_h": 2, "scale_w": 1.5,
                                                      "method": "bilinear"}),
        "nn.batch_norm": Case("nn.batch_norm", [x4, *(rand(rng, (3,)) for _ in range(3)),
                                                rand(rng, (3,), lo=0.5, hi=2)], {"axis": 1}),
        "nn.layer_norm": Case("nn.layer_norm", [x4, rand(rng, (5,)), rand(rng, (5,))], {}, SUMS),
        "nn.rms_norm": Case("nn.rms_norm", [x4, rand(rng, (5,))], {"epsilon": 1e-3}, SUMS),
        "nn.contrib_layer_norm_act": Case(  # over H; rows (N, C, W): per channel, row_div W
            "nn.contrib_layer_norm_act",
            [x4, rand(rng, (7,)), rand(rng, (7,)), rand(rng, (3,)), rand(rng, (3,))],
            {"axis": 2, "has_row_scale": True, "has_row_shift": True, "row_count": 3,
             "row_div": 5, "activation": "gelu_erf", "params": (0.5, 0.7071067811865476)}, SUMS),
        "nn.max_pool2d": Case("nn.max_pool2d", [x4], {"pool_size": (3, 2), "strides": (2, 1),
                                                      "padding": (1, 1)}),
        "nn.avg_pool2d": Case("nn.avg_pool2d", [x4], {"pool_size": (3, 3), "padding": (1, 1),
                                                      "ceil_mode": True}, SUMS),
        "nn.global_max_pool2d": Case("nn.global_max_pool2d", [x4]),
        "nn.global_avg_pool2d": Case("nn.global_avg_pool2d", [x4], {}, SUMS),
        "nn.adaptive_max_pool2d": Case("nn.adaptive_max_pool2d", [x4], {"output_size": (3, 2)}),
        "nn.adaptive_avg_pool2d": Case("nn.adaptive_avg_pool2d", [x4], {"output_size": (4, 3)},
                                       SUMS),
    }


def _transform(rng: np.random.Generator) -> dict[str, Case]:
    x = rand(rng, (2, 3, 5))
    idx = np.array([[0, 2], [4, 1], [3, 3]], "int32")
    return {
        "reshape": Case("reshape", [x], {"newshape": (0, -1)}),
        "contrib_reverse_reshape": Case("contrib_reverse_reshape", [x], {"newshape": (-1, 0)}),
        "reshape_like": Case("reshape_like", [x, rand(rng, (6, 5))]),
        "transpose": Case("transpose", [x], {"axes": (1, 2, 0)}),
        "squeeze": Case("squeeze", [rand(rng, (3, 1, 5))], {"axis": (1,)}),
        "expand_dims": Case("expand_dims", [x], {"axis": -1, "num_newaxis": 2}),
        "broadcast_to": Case("broadcast_to", [rand(rng, (3, 1))], {"shape": (2, 3, 5)}),
        "broadcast_to_like": Case("broadcast_to_like", [rand(rng, (1, 5)), x]),
        "tile": Case("tile", [x], {"reps": (2, 1, 1, 3)}),
        "repeat": Case("repeat", [x], {"repeats": 3, "axis": 1}),
        "reverse": Case("reverse", [x], {"axis": 2}),
        "layout_transform": Case("layout_transform", [rand(rng, (1, 6, 3, 5))],
                                 {"src_layout": "NCHW", "dst_layout": "NHWC"}),
        "shape_of": Case("shape_of", [x], {"dtype": "int64"}),
        "concatenate": Case("concatenate", [[x, rand(rng, (2, 1, 5))]], {"axis": 1}),
        "stack": Case("stack", [[x, rand(rng, (2, 3, 5))]], {"axis": -1}),
        "split": Case("split", [x], {"indices_or_sections": (1, 4), "axis": 2}),
        "take": Case("take", [x, idx], {"axis": 2, "mode": "wrap"}),
        "strided_slice": Case("strided_slice", [x], {"begin": (1, -1), "end": (2, 0),
                                                     "strides": (1, -2)}),
        "where": Case("where", [rand(rng, (3, 1), "bool"), x, rand(rng, (5,))]),
        "clip": Case("clip", [x], {"a_min": -1.0, "a_max": 0.5}),
        "cast": Case("cast", [x], {"dtype": "int32"}),
        "cast_like": Case("cast_like", [x, rand(rng, (2,), "float64")]),
        "variance": Case("variance", [x, x.mean(axis=1, keepdims=True)], {"axis": (1,)}),
    }


def _creation(rng: np.random.Generator) -> dict[str, Case]:
    x = rand(rng, (3, 5))
    return {
        "zeros": Case("zeros", [], {"shape": (3, 5), "dtype": "int32"}),
        "ones": Case("ones", [], {"shape": (2, 7), "dtype": "float32"}),
        "full": Case("full", [np.array(2.5, "float32")], {"shape": (3, 5), "dtype": "float64"}),
        "zeros_like": Case("zeros_like", [x]),
        "ones_like": Case("ones_like", [x]),
        "full_like": Case("full_like", [x, np.array(-1.5, "float32")]),
        "arange": Case("arange", [np.array(1.0, "float32"), np.array(8.0, "float32"),
                                  np.array(1.5, "float32")],
                       {"start": 1.0, "stop": 8.0, "step": 1.5, "dtype": "float32"}),
        "one_hot": Case("one_hot", [np.array([0, 3, 1, 5], "int32"), np.array(1.0, "float32"),
                                    np.array(-1.0, "float32")], {"depth": 5, "axis": 0}),
    }


def _indexing(rng: np.random.Generator) -> dict[str, Case]:
    x = rand(rng, (3, 4, 5))
    idx = np.array([[[0, -1, 2, 1, 3]], [[1, 1, 0, -4, 2]]], "int64")  # (2, 1, 5)
    return {
        "gather": Case("gather", [x, idx], {"axis": 1}),
        "check_indices": Case("check_indices", [x, idx.astype("int32")], {"axes": (1,)}),
        "gather_nd": Case("gather_nd", [x, np.array([[0, 2], [3, -1]], "int32")]),
        "scatter_elements": Case("scatter_elements", [x, idx, rand(rng, (2, 1, 5))],
                                 {"axis": 1, "reduction": "add"}),
        "scatter_nd": Case("scatter_nd", [x, np.array([[1, -1, 1]], "int64"),
                                          rand(rng, (3, 4, 5))], {"mode": "update"}),
        "nonzero_padded": Case("nonzero_padded", [np.array([[0, 2, 0], [1, 0, -3]], "int32")]),
        **_random(),
        "reinterpret": Case("reinterpret", [np.array([1.5, -0.0, np.inf], "float32")],
                            {"dtype": "int32"}),
        "unique": Case("unique", [np.array([[1, 0], [2, 2], [1, 0], [0, 3], [2, 2]], "float32")],
                       {"sorted": True, "return_counts": True}),
        "topk": Case("topk", [x], {"k": 3, "axis": 1}),
        "cumsum": Case("cumsum", [x], {"axis": -1}, SUMS),
        "cumprod": Case("cumprod", [x], {"axis": 0, "exclusive": True}, SUMS),
        "image.resize2d": Case("image.resize2d", [rand(rng, (1, 2, 3, 5))],
                               {"size": (7, 4), "method": "cubic"}, SUMS),
        "nn.depth_to_space": Case("nn.depth_to_space", [rand(rng, (1, 8, 3, 5))],
                                  {"block_size": 2, "mode": "CRD"}),
        "nn.space_to_depth": Case("nn.space_to_depth", [rand(rng, (1, 3, 4, 6))],
                                  {"block_size": 2}),
        # 2 batches, 3 classes, 9 boxes (corners), at most 2 per class, scores above 0.3
        "vision.all_class_non_max_suppression": Case(
            "vision.all_class_non_max_suppression",
            [np.sort(rand(rng, (2, 9, 4), lo=0.0, hi=4.0), axis=-1), rand(rng, (2, 3, 9), lo=0.0),
             np.array(2, "int64"), np.array(0.4, "float32"), np.array(0.3, "float32")],
            {"max_output_size": 2}),
        # frames of 50 samples at 3 .. 52 of a 60-point FFT, every 7 samples (radices 4, 3, 5)
        "signal.frames_fft": Case(
            "signal.frames_fft", [rand(rng, (2, 150)), fft_table(60, rand(rng, (50,), lo=0.1))],
            {"length": 60, "frame_length": 60, "step": 7, "start": 3, "positions": 50,
             "onesided": True}, SUMS),
    }


def _random() -> dict[str, Case]:
    key = np.array([0x1234_5678_9ABC_DEF0, 7] + [0] * 8, "uint64")
    lo, hi = np.array(-1.0, "float32"), np.array(2.0, "float32")
    return {
        "random.threefry_generate": Case("random.threefry_generate", [key], {"out_shape": (3, 5)}),
        "random.threefry_split": Case("random.threefry_split", [key]),
        "random.uniform": Case("random.uniform", [key, lo, hi], {"out_shape": (7, 3)}),
        "random.normal": Case("random.normal", [key, lo, hi], {"out_shape": (7, 3)}),
        "random.multinomial": Case("random.multinomial",
                                   [key, np.array([[1, 2, 7], [0, 1, 0]], "float32")],
                                   {"num_samples": 9}),
    }


def _dyn(rng: np.random.Generator) -> dict[str, Case]:
    """The dyn.* ops: the kernel alone (its output allocated at the reference's shape; the
    VM's shape functions are tested in test_op_dyn.py)."""
    x = rand(rng, (3, 4, 5))
    i64 = lambda v: np.array(v, "int64")  # noqa: E731
    return {
        "dyn.reshape": Case("dyn.reshape", [x, i64([0, -1, 10])]),
        "dyn.broadcast_to": Case("dyn.broadcast_to", [rand(rng, (3, 1)), i64([2, 3, 4])]),
        "dyn.tile": Case("dyn.tile", [rand(rng, (2, 3)), i64([2, 1, 3])]),
        "dyn.strided_slice": Case("dyn.strided_slice", [x, i64([2, 1]), i64([-5, 4]),
                                                        i64([-1, 2])]),
        "dyn.full": Case("dyn.full", [np.array(2.5, "float32"), i64([3, 2])]),
        "dyn.zeros": Case("dyn.zeros", [i64([2, 3])], {"dtype": "int32"}),
        "dyn.ones": Case("dyn.ones", [i64([4])]),
        "dyn.squeeze": Case("dyn.squeeze", [rand(rng, (3, 1, 5, 1)), i64([-1, 1])]),
        "dyn.expand_dims": Case("dyn.expand_dims", [x, np.array(-2, "int64")],
                                {"num_newaxis": 2}),
        "dyn.one_hot": Case("dyn.one_hot", [np.array([0, 3, 1], "int32"), np.array(1.0, "float32"),
                                            np.array(-1.0, "float32"), np.array(4, "int64")]),
        "dyn.topk": Case("dyn.topk", [x, np.array(2, "int64")], {"axis": 1}),
        "dyn.nn.pad": Case("dyn.nn.pad", [rand(rng, (3, 4)), i64([[1, -1], [2, 0]]),
                                          np.array(0.5, "float32")]),
        "dyn.image.resize2d": Case("dyn.image.resize2d", [rand(rng, (1, 2, 3, 5)), i64([7, 4]),
                                                          np.array([2.5, 0.8], "float32")],
                                   {"method": "cubic"}, SUMS),
    }


def _recurrent(rng: np.random.Generator) -> dict[str, Case]:
    """nn.lstm (peepholes, initial states, bidirectional), nn.gru (Rbh, sequence_lens),
    nn.rnn (nothing optional); hidden 5, input 3, 4 steps, batch 2."""
    zero = np.array(0, "float32")

    def acts(names: tuple[str, ...]) -> dict[str, Any]:
        return {"activations": names, "activation_alpha": (0.0,) * len(names),
                "activation_beta": (0.0,) * len(names), "hidden_size": 5}

    x = rand(rng, (4, 2, 3), lo=-1, hi=1)
    lstm = [x, rand(rng, (2, 20, 3), lo=-.6, hi=.6), rand(rng, (2, 20, 5), lo=-.6, hi=.6),
            rand(rng, (2, 20)), rand(rng, (2, 15)), rand(rng, (2, 2, 5)), rand(rng, (2, 2, 5)),
            zero]
    gru = [x, rand(rng, (1, 15, 3), lo=-.6, hi=.6), rand(rng, (1, 15, 5), lo=-.6, hi=.6),
           rand(rng, (1, 15)), rand(rng, (1, 5)), zero, zero, np.array([4, 2], "int64")]
    rnn = [x, rand(rng, (1, 5, 3), lo=-.6, hi=.6), rand(rng, (1, 5, 5), lo=-.6, hi=.6),
           rand(rng, (1, 5)), zero, zero, zero, zero]
    return {
        "nn.lstm": Case("nn.lstm", lstm, {**acts(("sigmoid", "tanh", "tanh") * 2),
                                          "direction": "bidirectional", "has_extra": True,
                                          "has_init_h": True, "has_init_c": True}),
        "nn.gru": Case("nn.gru", gru, {**acts(("sigmoid", "tanh")), "linear_before_reset": True,
                                       "has_extra": True, "has_seq_lens": True}),
        "nn.rnn": Case("nn.rnn", rnn, {**acts(("tanh",)), "direction": "reverse"}),
    }


def default_cases(rng: np.random.Generator) -> dict[str, Case]:
    """One case per op name."""
    cases: dict[str, Case] = {}
    for name in UNARY_FLOAT:
        cases[name] = _unary(rng, name)
    for name in BINARY:
        cases[name] = _binary(rng, name)
    for name in BITWISE:
        cases[name] = Case(name, [rand(rng, (3, 5), "int32", -50, 50),
                                  rand(rng, (5,), "int32", -50, 50)])
    cases["bitwise_not"] = Case("bitwise_not", [rand(rng, (3, 5), "int8", -100, 100)])
    for name in REDUCE:
        dtype = "bool" if name in ("all", "any") else "float32"
        attrs: dict[str, Any] = {"axis": (1,), "keepdims": name == "sum"}
        cases[name] = Case(name, [rand(rng, (3, 5, 2), dtype)], attrs, SUMS)
    cases["collapse_sum_like"] = Case("collapse_sum_like", [rand(rng, (2, 3, 5)),
                                                            rand(rng, (3, 1))], tol=SUMS)
    cases["collapse_sum_to"] = Case("collapse_sum_to", [rand(rng, (2, 3, 5))],
                                    {"shape": (1, 5)}, SUMS)
    builders: list[Callable[[np.random.Generator], dict[str, Case]]] = [
        _nn, _transform, _creation, _indexing, _dyn]
    for build in builders:
        cases.update(build(rng))
    return cases

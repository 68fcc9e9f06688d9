"""Det, MaxRoiPool, DeformConv, TensorScatter and BitCast against onnxruntime, and their
bad inputs (messages name the node)."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import SUMS, check, make_model, node_case, rand
from onnx import TensorProto as TP

from ember import relay
from ember.runtime.errors import FrontendError, OpNotImplemented

RNG = np.random.default_rng(11)
I64 = "int64"


def _singular() -> np.ndarray:
    m = rand(RNG, 2, 4, 4)
    m[1, 3] = m[1, 0] * 2  # rows dependent: det 0
    m[0] = m[0][[2, 0, 3, 1]] * 0  # all zero
    return m


def test_det_max_roi_pool_and_deform_conv():
    rois = np.array([[0, 0, 0, 5, 5], [1, 1.4, 0.6, 4.2, 6.8], [0, 3, 3, 3, 3],
                     [1, -2, -1, 9, 9], [0, 6, 6, 1, 1]], "float32")
    x, w = rand(RNG, 2, 4, 6, 7), rand(RNG, 6, 2, 3, 3)
    offset = rand(RNG, 2, 2 * 2 * 9, 3, 7, lo=-1.5, hi=1.5)  # offset_group 2, oH 3, oW 7
    mask = rand(RNG, 2, 2 * 9, 3, 7, lo=0, hi=1)
    cases = [
        node_case("det", "Det", {"x": rand(RNG, 3, 2, 5, 5)}, tol=SUMS),
        node_case("det_2d", "Det", {"x": np.array([[0, 2, 1], [3, 0, 0], [1, 1, 4]],
                                                  "float32")}),
        node_case("det_singular", "Det", {"x": _singular()}, tol=SUMS),
        node_case("roi_pool", "MaxRoiPool", {"x": rand(RNG, 2, 3, 8, 9), "r": rois},
                  pooled_shape=[3, 2]),
        node_case("roi_pool_scaled", "MaxRoiPool", {"x": rand(RNG, 2, 3, 8, 9), "r": rois},
                  pooled_shape=[2, 4], spatial_scale=0.5),
        node_case("deform", "DeformConv", {"x": x, "w": w, "o": offset, "m": mask},
                  inits={"b": rand(RNG, 6)}, order=["x", "w", "o", "b", "m"], group=2,
                  offset_group=2, pads=[1, 1, 0, 1], strides=[2, 1], dilations=[1, 1],
                  tol=SUMS),
        node_case("deform_plain", "DeformConv",
                  {"x": rand(RNG, 1, 2, 5, 5), "w": rand(RNG, 3, 2, 2, 2),
                   "o": rand(RNG, 1, 8, 4, 4, lo=-2, hi=2)}, tol=SUMS),
    ]
    check(cases, opset=19)


def test_tensor_scatter_and_bit_cast():
    past, update = rand(RNG, 2, 3, 6, 4), rand(RNG, 2, 3, 2, 4)
    floats = np.array([1.5, -0.0, np.inf, 3e-39], "float32")
    cases = [
        node_case("scatter", "TensorScatter", {"p": past, "u": update,
                                               "i": np.array([1, 4], I64)}),
        node_case("scatter_circular", "TensorScatter", {"p": past, "u": update,
                                                        "i": np.array([5, 0], I64)},
                  mode="circular"),
        node_case("scatter_no_indices", "TensorScatter", {"p": rand(RNG, 2, 5, 3),
                                                          "u": rand(RNG, 2, 2, 3)}, axis=1),
        node_case("bits_f32", "BitCast", {"x": floats}, to=TP.INT32),
        node_case("bits_i64", "BitCast", {"x": np.array([1, -1, 2**62], I64)}, to=TP.DOUBLE),
        node_case("bits_u8", "BitCast", {"x": np.array([-1, 5, -128], "int8")}, to=TP.UINT8),
        node_case("bits_u32", "BitCast", {"x": np.array([0x3F800000, 2**32 - 1], "uint32")},
                  to=TP.FLOAT),
    ]
    check(cases, opset=26)


BAD = [
    (node_case("d", "Det", {"x": rand(RNG, 3, 4)}), FrontendError,
     r"Det node 'd__Det': X must be \[..., n, n\]"),
    (node_case("r", "MaxRoiPool", {"x": rand(RNG, 1, 2, 4, 4), "r": np.zeros((2, 4), "float32")},
               pooled_shape=[2, 2]), FrontendError, r"MaxRoiPool node 'r__MaxRoiPool': X must "
                                                    r"be \(N, C, H, W\) and rois \(R, 5\)"),
    (node_case("t", "TensorScatter", {"p": rand(RNG, 2, 4, 3), "u": rand(RNG, 2, 5, 3)},
               axis=1), FrontendError, "TensorScatter node 't__TensorScatter': update has shape"),
    (node_case("t0", "TensorScatter", {"p": rand(RNG, 2, 4), "u": rand(RNG, 2, 4)}, axis=0),
     FrontendError, "axis must not be 0"),
    (node_case("b", "BitCast", {"x": rand(RNG, 3)}, to=TP.INT64), FrontendError,
     r"BitCast node 'b__BitCast': input is float32 \(32 bits\) but 'to' is int64"),
    (node_case("b16", "BitCast", {"x": np.zeros(3, "int16")}, to=TP.FLOAT16), OpNotImplemented,
     "bit casts of int16"),
    (node_case("dc", "DeformConv", {"x": rand(RNG, 1, 2, 5, 5), "w": rand(RNG, 3, 2, 2, 2),
                                    "o": rand(RNG, 1, 8, 3, 3)}), FrontendError,
     r"DeformConv node 'dc__DeformConv': offset must have shape \[1, 8, 4, 4\]"),
]


@pytest.mark.parametrize("case,error,message", BAD, ids=[c.name for c, _, _ in BAD])
def test_bad_inputs_name_the_node(case, error, message):
    with pytest.raises(error, match=message):
        relay.frontend.from_onnx(make_model([case], 26 if case.name[0] in "tb" else 22))

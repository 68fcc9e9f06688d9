"""Lowered nn.conv2d / nn.conv2d_transpose vs the numpy references: hypothesis-drawn groups
(depthwise included), strides, dilation, asymmetric padding, odd sizes, every layout
permutation, out_dtype, and symbolic batch sizes."""
from __future__ import annotations

import numpy as np
from _lowering_util import (
    SUMS,
    Case,
    build,
    check_cases,
    need_cc,
    prim_func,
    rand,
    reference,
    run,
    sweep,
)
from hypothesis import assume
from hypothesis import strategies as st
from strategies import conv2d_case

from ember.ir.types import Any as AnyDim
from ember.ir.types import TensorType
from ember.relay.backend.te_compiler import TECompiler

PERMS = st.permutations("NCHW").map("".join)


def _seed(data: st.DataObject) -> np.random.Generator:
    return np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))


def _relayout(arr: np.ndarray, src: str, dst: str) -> np.ndarray:
    return np.ascontiguousarray(arr.transpose([src.index(a) for a in dst]))


def _conv2d(data: st.DataObject) -> None:
    rng = _seed(data)
    cases = []
    for layout in ("NCHW", "NHWC"):  # topi's own layouts (packed, depthwise, grouped)
        c = data.draw(conv2d_case(layout), label=layout)
        cases.append(Case("nn.conv2d", [rand(rng, c["data"]), rand(rng, c["weight"])],
                          c["attrs"], SUMS))
    c = data.draw(conv2d_case("NCHW"), label="permuted")
    attrs = dict(c["attrs"])
    dl, kl = data.draw(PERMS, label="data_layout"), data.draw(PERMS.map(
        lambda p: p.replace("N", "O").replace("C", "I")), label="kernel_layout")
    attrs.update(data_layout=dl, kernel_layout=kl, out_layout=data.draw(PERMS))
    x = _relayout(rand(rng, c["data"]), "NCHW", dl)
    w = _relayout(rand(rng, c["weight"]), "OIHW", kl)
    cases.append(Case("nn.conv2d", [x, w], attrs, SUMS))
    c = data.draw(conv2d_case("NCHW"), label="int8")
    cases.append(Case("nn.conv2d", [rand(rng, c["data"], "int8", -20, 20),
                                    rand(rng, c["weight"], "int8", -20, 20)],
                      {**c["attrs"], "out_dtype": "int32"}))
    check_cases(cases)


test_conv2d, test_conv2d_wide = sweep(_conv2d)


@st.composite
def conv2d_transpose_case(draw) -> dict:
    groups = draw(st.sampled_from([1, 1, 2]))
    cin, og = groups * draw(st.integers(1, 3)), draw(st.integers(1, 3))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = (draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1)),
               draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1)))
    out_pad = (draw(st.integers(0, strides[0] - 1)), draw(st.integers(0, strides[1] - 1)))
    h, w = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    for size, k, s, d, pads, op in ((h, kh, strides[0], dilation[0], padding[0::2], out_pad[0]),
                                    (w, kw, strides[1], dilation[1], padding[1::2], out_pad[1])):
        assume((size - 1) * s - sum(pads) + (k - 1) * d + 1 + op > 0)
    return {"data": (draw(st.integers(1, 2)), cin, h, w), "weight": (cin, og, kh, kw),
            "attrs": {"strides": strides, "padding": padding, "dilation": dilation,
                      "groups": groups, "output_padding": out_pad}}


def _conv2d_transpose(data: st.DataObject) -> None:
    rng = _seed(data)
    cases = []
    for _ in range(2):
        c = data.draw(conv2d_transpose_case())
        cases.append(Case("nn.conv2d_transpose", [rand(rng, c["data"]), rand(rng, c["weight"])],
                          c["attrs"], SUMS))
    c = data.draw(conv2d_transpose_case(), label="NHWC")
    x = _relayout(rand(rng, c["data"]), "NCHW", "NHWC")
    w = _relayout(rand(rng, c["weight"]), "IOHW", "HWOI")
    cases.append(Case("nn.conv2d_transpose", [x, w], {**c["attrs"], "data_layout": "NHWC",
                                                     "kernel_layout": "HWOI"}, SUMS))
    check_cases(cases)


test_conv2d_transpose, test_conv2d_transpose_wide = sweep(_conv2d_transpose)


def test_conv2d_with_any_batch_and_size_runs_at_several_shapes():
    need_cc()
    compiler = TECompiler()
    attrs = {"padding": (1, 0, 2, 1), "strides": (2, 1), "dilation": (1, 2), "groups": 2}
    types = [TensorType((AnyDim(), 4, AnyDim(), AnyDim()), "float32"),
             TensorType((6, 2, 3, 2), "float32")]
    rng = np.random.default_rng(0)
    w = rand(rng, (6, 2, 3, 2))
    proto = Case("nn.conv2d", [np.zeros((1, 4, 5, 5), "float32"), w], attrs, SUMS, types)
    lowered = compiler.lower(prim_func(proto))
    assert lowered.is_dynamic
    mod = build([lowered], compiler)
    for n, h, wd in [(1, 5, 5), (2, 4, 7), (3, 9, 3)]:
        case = Case("nn.conv2d", [rand(rng, (n, 4, h, wd)), w], attrs)
        want = reference(case)
        np.testing.assert_allclose(run(mod, lowered, case.args, want)[0], want[0], rtol=1e-4,
                                   atol=1e-4)

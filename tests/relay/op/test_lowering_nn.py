"""Lowered dense/matmul/batch_matmul, activations, softmax, pad, dropout, upsampling and the
norms vs their numpy references (hypothesis-drawn sizes, odd and tiny ones included)."""
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
from hypothesis import strategies as st
from strategies import shapes

from ember.ir.types import Any as AnyDim
from ember.ir.types import TensorType
from ember.relay.backend.te_compiler import TECompiler

SIZE = st.integers(1, 19)


def _seed(data: st.DataObject) -> np.random.Generator:
    return np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))


def _matrix_products(data: st.DataObject) -> None:
    rng = _seed(data)
    m, k, n, b = (data.draw(SIZE, label=x) for x in "mknb")
    dtype = data.draw(st.sampled_from(["float32", "float64"]))
    lead = data.draw(shapes(0, 2, max_side=3), label="dense lead")
    cases = [Case("nn.dense", [rand(rng, (m, k), dtype), rand(rng, (n, k), dtype)], {}, SUMS),
             Case("nn.dense", [rand(rng, (*lead, k)), rand(rng, (n, k))], {"units": n}, SUMS),
             Case("nn.dense", [rand(rng, (m, k), "int8"), rand(rng, (n, k), "int8")],
                  {"out_dtype": "int32"})]
    ta, tb = data.draw(st.booleans()), data.draw(st.booleans())
    a = rand(rng, (k, m) if ta else (m, k))
    w = rand(rng, (n, k) if tb else (k, n))
    cases.append(Case("nn.matmul", [a, w], {"transpose_a": ta, "transpose_b": tb}, SUMS))
    bx, by = data.draw(st.sampled_from([(b, b), (1, b), (b, 1)]))
    x = rand(rng, (bx, k, m) if ta else (bx, m, k))
    y = rand(rng, (by, n, k) if tb else (by, k, n))
    cases.append(Case("nn.batch_matmul", [x, y], {"transpose_a": ta, "transpose_b": tb}, SUMS))
    check_cases(cases)


test_matrix_products, test_matrix_products_wide = sweep(_matrix_products)


def _activations_and_norms(data: st.DataObject) -> None:
    rng = _seed(data)
    shape = data.draw(shapes(1, 4), label="shape")
    x = rand(rng, shape)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    c = shape[axis]
    cases = [Case("nn.bias_add", [x, rand(rng, (c,))], {"axis": axis}),
             Case("nn.leaky_relu", [x], {"alpha": data.draw(st.sampled_from([0.01, 0.3, 2.0]))}),
             Case("nn.prelu", [x, rand(rng, (c,))], {"axis": axis}),
             Case("nn.softmax", [x], {"axis": axis}),
             Case("nn.log_softmax", [x], {"axis": axis}),
             Case("nn.dropout", [x], {"rate": 0.5}),
             Case("nn.layer_norm", [x, rand(rng, (c,)), rand(rng, (c,))],
                  {"axis": axis, "epsilon": 1e-3, "center": data.draw(st.booleans()),
                   "scale": data.draw(st.booleans())}, SUMS),
             Case("nn.batch_norm", [x, rand(rng, (c,)), rand(rng, (c,)), rand(rng, (c,)),
                                    rand(rng, (c,), lo=0.2, hi=2)],
                  {"axis": axis, "center": data.draw(st.booleans()),
                   "scale": data.draw(st.booleans())})]
    check_cases(cases)


test_activations_and_norms, test_activations_and_norms_wide = sweep(_activations_and_norms)


def _pad_and_upsampling(data: st.DataObject) -> None:
    rng = _seed(data)
    shape = data.draw(shapes(1, 4, min_side=3), label="pad shape")
    cases = []
    for mode in ("constant", "edge", "reflect"):
        hi = 2 if mode == "reflect" else 3
        width = tuple((data.draw(st.integers(0, hi)), data.draw(st.integers(0, hi)))
                      for _ in shape)
        cases.append(Case("nn.pad", [rand(rng, shape), np.array(-2.5, "float32")],
                          {"pad_width": width, "pad_mode": mode}))
    layout = data.draw(st.sampled_from(["NCHW", "NHWC"]))
    n, c, h, w = (data.draw(st.integers(1, 7)) for _ in range(4))
    x = rand(rng, (n, c, h, w) if layout == "NCHW" else (n, h, w, c))
    for method in ("nearest_neighbor", "bilinear"):
        cases.append(Case("nn.upsampling", [x], {
            "scale_h": data.draw(st.sampled_from([1, 2, 3, 0.5, 1.5])),
            "scale_w": data.draw(st.sampled_from([1, 2, 2.5, 0.75])), "layout": layout,
            "method": method, "align_corners": data.draw(st.booleans())}))
    check_cases(cases)


test_pad_and_upsampling, test_pad_and_upsampling_wide = sweep(_pad_and_upsampling)


def test_dense_with_any_batch_runs_at_several_batch_sizes():
    need_cc()
    compiler = TECompiler()
    types = [TensorType((AnyDim(), 13), "float32"), TensorType((7, 13), "float32")]
    w = rand(np.random.default_rng(0), (7, 13))
    proto = Case("nn.dense", [np.zeros((2, 13), "float32"), w], {}, SUMS, types)
    lowered = compiler.lower(prim_func(proto))
    assert lowered.is_dynamic and lowered.outputs[0].shape[1] == 7
    mod = build([lowered], compiler)
    for batch in (1, 2, 5, 16, 33):
        case = Case("nn.dense", [rand(np.random.default_rng(batch), (batch, 13)), w])
        want = reference(case)
        np.testing.assert_allclose(run(mod, lowered, case.args, want)[0], want[0], rtol=1e-4,
                                   atol=1e-4)


def test_batch_matmul_with_any_batch_broadcasts_a_batch_of_one():
    need_cc()
    compiler = TECompiler()
    types = [TensorType((AnyDim(), 3, 5), "float32"), TensorType((1, 4, 5), "float32")]
    proto = Case("nn.batch_matmul", [np.zeros((2, 3, 5), "float32"),
                                     np.zeros((1, 4, 5), "float32")], {}, SUMS, types)
    lowered = compiler.lower(prim_func(proto))
    mod = build([lowered], compiler)
    rng = np.random.default_rng(4)
    y = rand(rng, (1, 4, 5))
    for batch in (1, 3):
        case = Case("nn.batch_matmul", [rand(rng, (batch, 3, 5)), y])
        want = reference(case)
        np.testing.assert_allclose(run(mod, lowered, case.args, want)[0], want[0], rtol=1e-4,
                                   atol=1e-4)

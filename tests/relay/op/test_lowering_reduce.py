"""Lowered reductions vs their numpy references: hypothesis-drawn shapes, axes (None, empty,
negative, several), keepdims, exclude and dtypes; one compile per example."""
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
from strategies import axes_for, shapes

from ember.ir.types import Any as AnyDim
from ember.ir.types import TensorType
from ember.relay.backend.te_compiler import TECompiler

REDUCERS = ["sum", "mean", "max", "min", "prod", "all", "any", "argmax", "argmin"]


def _attrs(data: st.DataObject, ndim: int, label: str) -> dict:
    return {"axis": data.draw(axes_for(ndim), label=f"{label} axis"),
            "keepdims": data.draw(st.booleans()), "exclude": data.draw(st.booleans())}


def _values(rng: np.random.Generator, name: str, shape: tuple, dtype: str) -> np.ndarray:
    if name in ("all", "any") and dtype == "bool":
        return rng.random(shape) < 0.8
    if name == "prod":
        return rand(rng, shape, dtype, 0.5, 1.5) if dtype.startswith("float") else rand(
            rng, shape, dtype, -2, 2)
    return rand(rng, shape, dtype, -1, 1) if dtype.startswith("float") else rand(
        rng, shape, dtype, -50, 50)


def _reductions(data: st.DataObject) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    cases = []
    for name in REDUCERS:
        shape = data.draw(shapes(0, 3 if name == "prod" else 4, max_side=5 if name == "prod"
                                 else 7), label=name)
        dtypes = ["bool", "float32", "int32"] if name in ("all", "any") else [
            "float32", "float64", "int32", "int8"]
        dtype = data.draw(st.sampled_from(dtypes))
        attrs = _attrs(data, len(shape), name)
        if name.startswith("arg"):
            attrs["select_last_index"] = data.draw(st.booleans())
            if any(d == 0 for d in shape):
                continue
        cases.append(Case(name, [_values(rng, name, shape, dtype)], attrs, SUMS))
    check_cases(cases)


test_reductions, test_reductions_wide = sweep(_reductions)


def _variance(data: st.DataObject) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    cases = []
    for dtype in ("float32", "float64"):
        shape = data.draw(shapes(1, 4, min_side=2), label="shape")
        attrs = _attrs(data, len(shape), "variance")
        attrs["unbiased"] = data.draw(st.booleans())
        x = rand(rng, shape, dtype, -1, 1)
        from ember.ir.op import Op
        from ember.relay.op.reduce import reduce_axes

        rec = Op.get("variance").make_attrs(**attrs)
        axes = tuple(reduce_axes("variance", x.ndim, rec))
        if attrs["unbiased"] and int(np.prod([x.shape[a] for a in axes])) < 2:
            attrs["unbiased"] = False
        mean = x.mean(axis=axes, keepdims=True).astype(dtype)
        cases.append(Case("variance", [x, mean], attrs, SUMS))
    check_cases(cases)


test_variance, test_variance_wide = sweep(_variance)


def test_argmax_ties_pick_first_or_last():
    x = np.array([[1, 3, 3, 0], [2, 2, 2, 2]], "int32")
    check_cases([Case(name, [x], {"axis": (1,), "select_last_index": last})
                 for name in ("argmax", "argmin") for last in (False, True)])


def test_argmax_over_two_of_three_axes_flattens_row_major():
    x = np.random.default_rng(0).permutation(60).reshape(3, 4, 5).astype("float32")
    check_cases([Case("argmax", [x], {"axis": (0, 2), "keepdims": True}),
                 Case("argmin", [x], {"axis": (2, 0)})])


def test_sum_with_symbolic_dims_runs_at_several_sizes():
    need_cc()
    compiler = TECompiler()
    dyn = TensorType((AnyDim(), 3, AnyDim()), "float32")
    proto = Case("sum", [np.zeros((2, 3, 4), "float32")], {"axis": (0, 2)}, SUMS, [dyn])
    lowered = compiler.lower(prim_func(proto))
    mod = build([lowered], compiler)
    rng = np.random.default_rng(1)
    for n, m in [(1, 1), (2, 5), (7, 3), (16, 33)]:
        case = Case("sum", [rand(rng, (n, 3, m), lo=-1, hi=1)], {"axis": (0, 2)})
        want = reference(case)
        np.testing.assert_allclose(run(mod, lowered, case.args, want)[0], want[0], **_tol())


def _tol() -> dict:
    return {"rtol": SUMS[0], "atol": SUMS[1]}

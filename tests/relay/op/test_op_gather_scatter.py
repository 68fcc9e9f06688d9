"""gather (GatherElements), gather_nd and scatter_elements: references against plain loops,
type relations and their errors, and compiled kernels against the references."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from _lowering_util import Case, check_cases, sweep
from _op_helpers import check, infer, ref
from hypothesis import strategies as st

from ember.ir.types import Any, TensorType
from ember.runtime.errors import OpAttributeInvalid, TypeInferenceError


def _loop_gather(data, idx, axis):
    out = np.empty(idx.shape, data.dtype)
    for p in itertools.product(*map(range, idx.shape)):
        q = list(p)
        q[axis] = idx[p] % data.shape[axis]
        out[p] = data[tuple(q)]
    return out


def test_gather_matches_loops_with_negative_indices():
    rng = np.random.default_rng(0)
    data = rng.random((3, 4, 5)).astype("float32")
    for axis in range(3):
        shape = [2, 3, 4]
        idx = rng.integers(-data.shape[axis], data.shape[axis], shape).astype("int64")
        np.testing.assert_array_equal(check("gather", data, idx, axis=axis),
                                      _loop_gather(data, idx, axis))


def test_gather_nd_matches_loops():
    rng = np.random.default_rng(1)
    data = rng.random((3, 4, 5)).astype("float32")
    idx = np.stack([rng.integers(0, 3, (2, 6)), rng.integers(-4, 4, (2, 6))])  # (2, 2, 6)
    out = check("gather_nd", data, idx.astype("int32"))
    want = np.array([[data[idx[0, i, j], idx[1, i, j]] for j in range(6)] for i in range(2)])
    np.testing.assert_array_equal(out, want)
    bidx = rng.integers(0, 4, (1, 3, 2))  # batch_dims=1: per row of data, a column index
    out = check("gather_nd", data, bidx, batch_dims=1)
    want = np.array([[data[b, bidx[0, b, j]] for j in range(2)] for b in range(3)])
    np.testing.assert_array_equal(out, want)


def test_scatter_elements_matches_loops():
    rng = np.random.default_rng(2)
    data = rng.random((4, 5)).astype("float32")
    idx = rng.integers(-4, 4, (3, 5)).astype("int64")
    upd = rng.random((3, 5)).astype("float32")
    for reduction, fn in (("update", lambda a, b: b), ("add", np.add), ("mul", np.multiply),
                          ("min", np.minimum), ("max", np.maximum)):
        want = data.copy()
        for i, j in itertools.product(range(3), range(5)):
            k = idx[i, j] % 4
            want[k, j] = fn(want[k, j], upd[i, j])
        np.testing.assert_allclose(check("scatter_elements", data, idx, upd, axis=0,
                                         reduction=reduction), want, rtol=1e-6)


def test_type_relations_and_errors():
    f, i = "float32", "int64"
    assert infer("gather", TensorType((Any(), 4), f), TensorType((2, 3), i),
                 axis=1) == TensorType((2, 3), f)
    out = infer("gather_nd", TensorType((5, 6, 7), f), TensorType((2, 3, 4), i))
    assert out == TensorType((3, 4, 7), f)
    with pytest.raises(TypeInferenceError, match="gather: indices must be an integer"):
        infer("gather", TensorType((3,), f), TensorType((3,), f))
    with pytest.raises(TypeInferenceError, match="gather: indices must have the rank"):
        infer("gather", TensorType((3, 2), f), TensorType((3,), i))
    with pytest.raises(TypeInferenceError, match="gather_nd: .* do not fit"):
        infer("gather_nd", TensorType((3,), f), TensorType((2, 4), i))
    with pytest.raises(TypeInferenceError, match="scatter_elements: indices .* differ"):
        infer("scatter_elements", TensorType((3, 3), f), TensorType((2, 3), i),
              TensorType((2, 2), f))
    with pytest.raises(OpAttributeInvalid, match="reduction"):
        infer("scatter_elements", TensorType((3,), f), TensorType((3,), i), TensorType((3,), f),
              reduction="mean")
    with pytest.raises(IndexError, match="out of range"):
        ref("gather", np.zeros((2, 2), "float32"), np.full((2, 2), 5, "int64"), axis=0)


def _body(data: st.DataObject) -> None:
    shape = data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=3))
    axis = data.draw(st.integers(0, len(shape) - 1))
    n = shape[axis]
    rng = np.random.default_rng(data.draw(st.integers(0, 999)))
    x = rng.standard_normal(shape).astype("float32")
    ishape = [data.draw(st.integers(1, d)) if k != axis else data.draw(st.integers(1, 4))
              for k, d in enumerate(shape)]
    idx = rng.integers(-n, n, ishape).astype("int64")
    # distinct targets per column for "update" (the winner of a collision is unspecified)
    perm = np.argsort(rng.random((n, *[d for k, d in enumerate(ishape) if k != axis])), 0)
    uniq = np.moveaxis(perm[:min(n, ishape[axis])], 0, axis).astype("int64")
    upd = rng.standard_normal(ishape).astype("float32")
    reduction = data.draw(st.sampled_from(["add", "mul", "min", "max"]))
    cases = [Case("gather", [x, idx], {"axis": axis}),
             Case("scatter_elements", [x, idx, upd], {"axis": axis, "reduction": reduction},
                  tol=(1e-5, 1e-5)),
             Case("scatter_elements", [x, uniq, upd[tuple(slice(0, d) for d in uniq.shape)]],
                  {"axis": axis})]
    nd_idx = np.stack([rng.integers(-d, d, (3,)) for d in shape[:data.draw(
        st.integers(1, len(shape)))]]).astype("int64")
    cases.append(Case("gather_nd", [x, nd_idx]))
    check_cases(cases)


test_compiled_matches_reference, test_compiled_matches_reference_wide = sweep(_body)

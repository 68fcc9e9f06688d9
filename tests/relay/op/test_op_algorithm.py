"""topk, cumsum, cumprod: references against numpy, type relations and errors, compiled
kernels against the references."""
from __future__ import annotations

import numpy as np
import pytest
from _lowering_util import SUMS, Case, check_cases, sweep
from _op_helpers import check, infer
from hypothesis import strategies as st

from ember import relay
from ember.ir.types import Any, TensorType, TupleType
from ember.runtime.errors import OpAttributeInvalid, TypeInferenceError


def test_topk_reference_orders_and_ties():
    x = np.array([[1, 3, 3, 2, 3, 0]], "float32")
    values, indices = check("topk", x, k=4)
    np.testing.assert_array_equal(values, [[3, 3, 3, 2]])
    np.testing.assert_array_equal(indices, [[1, 2, 4, 3]])  # ties: the lower index first
    values, indices = check("topk", x, k=3, is_ascend=True, dtype="int64")
    np.testing.assert_array_equal(values, [[0, 1, 2]])
    assert indices.dtype == np.int64
    only = check("topk", x.T, k=2, axis=0, ret_type="values")
    np.testing.assert_array_equal(only, [[3], [3]])


def test_cumsum_cumprod_reference():
    x = np.arange(1, 7, dtype="int32").reshape(2, 3)
    np.testing.assert_array_equal(check("cumsum", x, axis=1), np.cumsum(x, 1))
    np.testing.assert_array_equal(check("cumsum", x, axis=0, exclusive=True), [[0, 0, 0],
                                                                               [1, 2, 3]])
    np.testing.assert_array_equal(check("cumsum", x), np.cumsum(x))
    np.testing.assert_array_equal(check("cumprod", x, axis=1, dtype="int64"), np.cumprod(x, 1))
    np.testing.assert_array_equal(check("cumprod", x, axis=1, exclusive=True),
                                  [[1, 1, 2], [1, 4, 20]])


def test_types_and_errors():
    ty = infer("topk", TensorType((Any(), 9)), k=3)
    assert ty == TupleType((TensorType((Any(), 3)), TensorType((Any(), 3), "int32")))
    assert infer("cumsum", TensorType((2, Any()), "int8"), axis=1, dtype="int32") == TensorType(
        (2, Any()), "int32")
    with pytest.raises(TypeInferenceError, match="topk: k=5 is larger than the axis size 4"):
        infer("topk", TensorType((4,)), k=5)
    with pytest.raises(TypeInferenceError, match="cumsum: axis 2 is out of range"):
        infer("cumsum", TensorType((4, 2)), axis=2)
    with pytest.raises(OpAttributeInvalid, match="ret_type"):
        relay.topk(relay.var("x", shape=(3,)), 1, ret_type="all")


def _body(data: st.DataObject) -> None:
    shape = data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=3))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    rng = np.random.default_rng(data.draw(st.integers(0, 999)))
    x = rng.integers(-3, 4, shape).astype("float32")  # small ints: many ties
    k = data.draw(st.integers(0, shape[axis]))
    check_cases([
        Case("topk", [x], {"k": k, "axis": axis, "is_ascend": data.draw(st.booleans())}),
        Case("cumsum", [x], {"axis": axis, "exclusive": data.draw(st.booleans())}, SUMS),
        Case("cumprod", [x / 2], {"axis": axis}, SUMS),
        Case("cumsum", [x.astype("int32")], {"dtype": "int64"}),
    ])


test_compiled_matches_reference, test_compiled_matches_reference_wide = sweep(_body)

"""nonzero_padded: the reference against numpy's nonzero, the type relation and its error,
the compiled kernel against the reference."""
from __future__ import annotations

import numpy as np
import pytest
from _lowering_util import Case, check_cases
from _op_helpers import infer, ref

from ember.ir.types import Any, TensorType, TupleType
from ember.runtime.errors import TypeInferenceError


def test_reference_pads_numpys_nonzero():
    x = np.array([[0, 2, 0], [1, 0, -3]], "int32")
    indices, count = ref("nonzero_padded", x)
    assert count.tolist() == [3]
    np.testing.assert_array_equal(indices[:, :3], np.stack(np.nonzero(x)))
    assert not indices[:, 3:].any() and indices.shape == (2, 6)
    indices, count = ref("nonzero_padded", np.zeros((2, 2), "float32"))
    assert count.tolist() == [0] and not indices.any()


def test_type_relation():
    out = infer("nonzero_padded", TensorType((2, 3, 4), "bool"))
    assert out == TupleType((TensorType((3, 24), "int64"), TensorType((1,), "int64")))
    with pytest.raises(TypeInferenceError, match="nonzero_padded: data must have a static"):
        infer("nonzero_padded", TensorType((Any(), 3), "float32"))


def test_compiled_matches_reference():
    rng = np.random.default_rng(0)
    cases = [Case("nonzero_padded", [(rng.random(shape) < 0.4).astype(dtype)])
             for shape, dtype in (((7,), "bool"), ((3, 5), "float32"), ((2, 3, 4), "int64"))]
    cases.append(Case("nonzero_padded", [np.ones((2, 3), "uint8")]))
    check_cases(cases)


def test_compiled_is_linear_on_a_large_map_and_handles_empty():
    # A 640x640 map: the former O(size^2) ranking kernel (1.6e11 steps) never finished here.
    rng = np.random.default_rng(1)
    big = (rng.random((640, 640)) < 0.3).astype("float32")
    check_cases([Case("nonzero_padded", [big]),
                 Case("nonzero_padded", [np.zeros((0, 4), "int32")]),
                 Case("nonzero_padded", [np.zeros((3, 4), "int32")])])

"""reinterpret: numpy's view as the oracle for every pair of same-width dtypes it takes, the
compiled kernel against it, and the type relation's errors."""
from __future__ import annotations

import numpy as np
import pytest
from _lowering_util import Case, check_cases
from _op_helpers import infer

from ember.ir.types import TensorType
from ember.runtime.errors import TypeInferenceError

VALUES = {
    "float32": np.array([1.5, -0.0, np.inf, 3e-39, -7.25], "float32"),
    "int32": np.array([0, -1, 2**31 - 1, -(2**31), 0x3F800000], "int32"),
    "uint32": np.array([0, 2**32 - 1, 0x7FC00000, 1, 0x80000000], "uint32"),
    "float64": np.array([1e300, -0.0, np.nan, 5e-324, 2.5]),
    "int64": np.array([-1, 2**62, 0, -(2**63), 12345], "int64"),
    "uint64": np.array([2**64 - 1, 0, 1, 2**63, 0x3FF0000000000000], "uint64"),
    "int8": np.array([-1, 5, -128, 127, 0], "int8"),
    "uint8": np.array([255, 5, 128, 127, 0], "uint8"),
}
SAME_WIDTH = [("float32", "int32"), ("int32", "float32"), ("uint32", "float32"),
              ("float32", "uint32"), ("float64", "int64"), ("int64", "float64"),
              ("uint64", "float64"), ("float64", "uint64"), ("int8", "uint8"), ("uint8", "int8")]


def test_compiled_matches_numpy_view():
    cases = [Case("reinterpret", [VALUES[src]], {"dtype": to}) for src, to in SAME_WIDTH]
    check_cases(cases)


def test_type_relation_and_errors():
    assert infer("reinterpret", TensorType((2, 3), "float32"), dtype="int32") == \
        TensorType((2, 3), "int32")
    with pytest.raises(TypeInferenceError, match="reinterpret: float32 has 32 bits but int64 "
                                                 "has 64"):
        infer("reinterpret", TensorType((2,), "float32"), dtype="int64")
    with pytest.raises(TypeInferenceError, match="reinterpret: dtype float16 is not supported"):
        infer("reinterpret", TensorType((2,), "int16"), dtype="float16")

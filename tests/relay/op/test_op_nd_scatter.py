"""scatter_nd: the reference against plain loops, the type relation and its errors, and the
compiled kernel (every mode, index tuples of every length) against the reference."""
from __future__ import annotations

import numpy as np
import pytest
from _lowering_util import Case, check_cases
from _op_helpers import check, infer, ref

from ember.ir.types import Any, TensorType
from ember.runtime.errors import OpAttributeInvalid, TypeInferenceError

MODES = {"update": lambda a, b: b, "add": np.add, "mul": np.multiply, "min": np.minimum,
         "max": np.maximum}


def _loops(data, idx, upd, mode):
    out = data.copy()
    for y in np.ndindex(*idx.shape[1:]):
        where = tuple(int(idx[(k, *y)]) % data.shape[k] for k in range(idx.shape[0]))
        out[where] = MODES[mode](out[where], upd[y])
    return out


def _case(rng, m, mode):
    data = rng.random((3, 4, 2)).astype("float32")
    idx = np.stack([rng.integers(-d, d, (2, 3)) for d in data.shape[:m]]).astype("int64")
    upd = rng.random((2, 3, *data.shape[m:])).astype("float32")
    return data, idx, upd


def test_reference_matches_loops_with_negative_and_repeated_indices():
    rng = np.random.default_rng(0)
    for m in (1, 2, 3):
        for mode in MODES:
            data, idx, upd = _case(rng, m, mode)
            np.testing.assert_allclose(check("scatter_nd", data, idx, upd, mode=mode),
                                       _loops(data, idx, upd, mode), rtol=1e-6)


def test_compiled_matches_reference_in_every_mode():
    rng = np.random.default_rng(1)
    cases = [Case("scatter_nd", list(_case(rng, m, mode)), {"mode": mode}, tol=(1e-5, 1e-5))
             for m in (1, 2, 3) for mode in MODES]
    check_cases(cases)


def test_type_relation_and_errors():
    f, i = "float32", "int64"
    assert infer("scatter_nd", TensorType((Any(), 4), f), TensorType((1, 5), i),
                 TensorType((5, 4), f)) == TensorType((Any(), 4), f)
    with pytest.raises(TypeInferenceError, match="scatter_nd: indices must be an integer"):
        infer("scatter_nd", TensorType((3,), f), TensorType((1, 2), f), TensorType((2,), f))
    with pytest.raises(TypeInferenceError, match="scatter_nd: updates are int64 but data"):
        infer("scatter_nd", TensorType((3,), f), TensorType((1, 2), i), TensorType((2,), i))
    with pytest.raises(TypeInferenceError, match=r"index tuples of a static length of at most "
                                                 r"data's rank 1"):
        infer("scatter_nd", TensorType((3,), f), TensorType((2, 2), i), TensorType((2,), f))
    with pytest.raises(TypeInferenceError, match=r"updates must have shape \(2, 4\)"):
        infer("scatter_nd", TensorType((3, 4), f), TensorType((1, 2), i),
              TensorType((2, 3), f))
    with pytest.raises(OpAttributeInvalid, match="mode"):
        infer("scatter_nd", TensorType((3,), f), TensorType((1, 2), i), TensorType((2,), f),
              mode="mean")
    with pytest.raises(IndexError, match="index 3 is out of range for an axis of size 3"):
        ref("scatter_nd", np.zeros(3, "float32"), np.array([[3]]), np.zeros(1, "float32"))

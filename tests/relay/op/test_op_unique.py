"""unique: the reference against the Relay era's examples and numpy, the type relation and its
errors, the compiled kernel against the reference, and a VM program that cuts the count."""
from __future__ import annotations

import numpy as np
import pytest
from _lowering_util import Case, check_cases
from _op_helpers import infer, ref
from _vm_util import vm_runner

from ember import relay
from ember.ir.types import Any, TensorType, TupleType
from ember.runtime.errors import TypeInferenceError

DATA = np.array([4, 5, 1, 2, 3, 3, 4, 5], "int32")


def test_reference_matches_the_relay_era_examples():
    values, indices, inverse, num = ref("unique", DATA, sorted=False)
    assert values.tolist() == [4, 5, 1, 2, 3, 0, 0, 0] and num.tolist() == [5]
    assert indices[:5].tolist() == [0, 1, 2, 3, 4]
    assert inverse.tolist() == [0, 1, 2, 3, 4, 4, 0, 1]
    values, indices, inverse, num, counts = ref("unique", DATA, sorted=True, return_counts=True)
    assert values[:5].tolist() == [1, 2, 3, 4, 5] and indices[:5].tolist() == [2, 3, 4, 0, 1]
    assert inverse.tolist() == [3, 4, 0, 1, 2, 2, 3, 4] and counts[:5].tolist() == [1, 1, 2, 2, 2]


def test_reference_rows_are_ordered_lexicographically():
    rows = np.array([[1, 0], [0, 9], [1, 0], [0, 3]], "float32")
    values, indices, inverse, num = ref("unique", rows)
    assert num.tolist() == [3] and values[:3].tolist() == [[0, 3], [0, 9], [1, 0]]
    assert indices[:3].tolist() == [3, 1, 0] and inverse.tolist() == [2, 1, 2, 0]


def test_type_relation_and_errors():
    out = infer("unique", TensorType((6, 2), "float32"), return_counts=True)
    per_row = TensorType((6,), "int32")
    assert out == TupleType((TensorType((6, 2), "float32"), per_row, per_row,
                             TensorType((1,), "int32"), per_row))
    with pytest.raises(TypeInferenceError, match="unique: data must have a static shape"):
        infer("unique", TensorType((Any(),), "float32"))
    with pytest.raises(TypeInferenceError, match="unique: data must have rank >= 1"):
        infer("unique", TensorType((), "float32"))


def test_compiled_matches_reference():
    rng = np.random.default_rng(0)
    ints = rng.integers(0, 4, (9,)).astype("int64")
    slices = rng.integers(0, 2, (6, 2, 2)).astype("float32")
    check_cases([Case("unique", [DATA], {"sorted": False, "return_counts": True}),
                 Case("unique", [ints], {"sorted": True}),
                 Case("unique", [slices], {"sorted": False, "return_counts": True})])


def test_vm_cuts_the_run_time_count():
    x = relay.var("x", shape=(8,), dtype="int32")
    values, _, inverse, num = relay.unique(x)
    cut = relay.strided_slice(values, relay.const(np.array([0], "int32")), num, axes=[0])
    run = vm_runner(relay.Function([x], relay.Tuple([cut, inverse])))
    got_values, got_inverse = run(DATA)
    want_values, want_inverse = np.unique(DATA, return_inverse=True)
    np.testing.assert_array_equal(got_values, want_values)
    np.testing.assert_array_equal(got_inverse, want_inverse)

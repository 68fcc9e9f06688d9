"""check_indices: indices passed through when in range, a run that fails naming the element
otherwise, on every executor, at static and run-time sizes; the compiled kernel against the
reference over shapes and values (hypothesis)."""
from __future__ import annotations

import numpy as np
import pytest
from _lowering_util import Case, check_cases, need_cc
from _op_helpers import check, infer
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember import relay
from ember.ir.types import Any, TensorType
from ember.runtime.errors import (ArgumentIndexError, OpAttributeInvalid, TVMError,
                                  TypeInferenceError)

F, I64, I32 = "float32", "int64", "int32"
DATA = np.arange(24, dtype=F).reshape(2, 3, 4)


def test_reference_passes_indices_in_range_and_names_the_first_bad_one():
    idx = np.array([[0, -3], [2, 1]], I64)
    np.testing.assert_array_equal(check("check_indices", DATA, idx, axes=(1,)), idx)
    tuples = np.array([[1, 2], [-2, -3], [0, 0]], I32)  # (axis 0, axis 1) pairs
    np.testing.assert_array_equal(check("check_indices", DATA, tuples, axes=(0, 1)), tuples)
    with pytest.raises(ArgumentIndexError, match=r"Gather node 'g': index 3 \(element 2 of the "
                                                 r"indices, flat\) is out of range for axis 1 "
                                                 r"of data \(size 3\): indices must be in "
                                                 r"\[-3, 2\]"):
        check("check_indices", DATA, np.array([0, 1, 3, 7], I64), axes=(1,),
              where="Gather node 'g'")
    with pytest.raises(ArgumentIndexError, match=r"index -3 \(element 2 .* axis 0 of data \(size 2\)"):
        check("check_indices", DATA, np.array([[1, 2], [-3, 0]], I64), axes=(0, 1))


def test_type_relation_and_errors():
    assert infer("check_indices", TensorType((Any(), 3), F), TensorType((5, Any()), I64),
                 axes=(0,)) == TensorType((5, Any()), I64)
    with pytest.raises(TypeInferenceError, match="indices must be int32 or int64, got float32"):
        infer("check_indices", TensorType((3,), F), TensorType((2,), F))
    with pytest.raises(TypeInferenceError, match="axis 2 is out of range"):
        infer("check_indices", TensorType((3, 4), F), TensorType((2,), I64), axes=(2,))
    with pytest.raises(TypeInferenceError, match=r"tuples of 2 indices along their last axis"):
        infer("check_indices", TensorType((3, 4), F), TensorType((2, 3), I64), axes=(0, 1))
    with pytest.raises(OpAttributeInvalid, match="axes"):
        relay.check_indices(relay.var("x", shape=(3,)), relay.var("i", shape=(1,), dtype=I64),
                            axes=())


def test_compiled_matches_reference_for_both_dtypes_and_tuples():
    cases = [Case("check_indices", [DATA, np.array([[-3, 2, 0], [1, 1, -1]], dt)], {"axes": (1,)})
             for dt in (I32, I64)]
    cases.append(Case("check_indices", [DATA, np.array([[[1, -4], [0, 3]]], I64)],
                      {"axes": (0, 2)}))
    check_cases(cases)


def _gather_module(shape: tuple, where: str = "Gather node 'g'") -> ember.IRModule:
    """take(x, check_indices(i)) along axis 0; None in ``shape`` is a run-time size."""
    dynamic = None in shape
    x = relay.var("x", shape=tuple(relay.Any() if d is None else d for d in shape))
    i = relay.var("i", shape=(relay.Any(),) if dynamic else (2,), dtype=I64)
    y = relay.take(x, relay.check_indices(x, i, axes=0, where=where), axis=0, mode="wrap")
    return ember.IRModule.from_expr(relay.Function([x, i], y))


@pytest.mark.parametrize("kind, shape", [("graph", (3, 4)), ("aot", (3, 4)), ("vm", (3, 4)),
                                         ("vm", (None, 4))])
def test_a_bad_index_fails_the_run_and_the_executor_stays_usable(kind, shape):
    need_cc()
    data = np.arange(12, dtype=F).reshape(3, 4)
    run = relay.create_executor(kind, mod=_gather_module(shape), target="llvm").evaluate()
    np.testing.assert_array_equal(run(data, np.array([0, -3])).numpy(), data[[0, 0]])
    for bad in ([0, 3], [-4, 1]):
        with pytest.raises(TVMError, match=rf"Gather node 'g': index {bad[0] if bad[0] < 0 else 3}"
                                           r" \(element \d of the indices, flat\) is out of "
                                           r"range for axis 0 of data \(size 3\)"):
            run(data, np.array(bad))
    np.testing.assert_array_equal(run(data, np.array([2, -1])).numpy(), data[[2, 2]])


def test_the_label_reaches_the_error_verbatim():
    """Quotes, backslashes, a newline, '??' (a trigraph) and UTF-8 survive the C literal."""
    need_cc()
    where = 'Gather node "a\\b"??=\n\u00e9'
    run = relay.create_executor("graph", mod=_gather_module((3, 4), where),
                                target="llvm").evaluate()
    with pytest.raises(TVMError) as err:
        run(np.zeros((3, 4), F), np.array([5, 0]))
    assert str(err.value).startswith(where + ": index 5 (element 0")


@settings(max_examples=12, deadline=None)
@given(rows=st.integers(1, 5), cols=st.integers(1, 7), seed=st.integers(0, 2**16),
       tuples=st.booleans(), dtype=st.sampled_from([I32, I64]))
def test_compiled_agrees_with_reference_on_random_shapes_and_values(rows, cols, seed, tuples,
                                                                      dtype):
    rng = np.random.default_rng(seed)
    data = rng.random((rows, cols)).astype(F)
    if tuples:
        idx = np.stack([rng.integers(-rows - 1, rows + 1, 4),
                        rng.integers(-cols - 1, cols + 1, 4)], -1).astype(dtype)
        axes = (0, 1)
    else:
        idx, axes = rng.integers(-cols - 1, cols + 1, (2, 3)).astype(dtype), (1,)
    try:
        want: np.ndarray | None = check("check_indices", data, idx, axes=axes)
    except ArgumentIndexError:
        want = None
    mod = ember.IRModule.from_expr(relay.Function(
        [x := relay.var("x", shape=data.shape), i := relay.var("i", shape=idx.shape, dtype=dtype)],
        relay.check_indices(x, i, axes=axes)))
    need_cc()
    run = relay.create_executor("graph", mod=mod, target="llvm").evaluate()
    if want is None:
        with pytest.raises(TVMError, match="is out of range for axis"):
            run(data, idx)
    else:
        np.testing.assert_array_equal(run(data, idx).numpy(), want)

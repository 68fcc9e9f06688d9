"""A VM model's call at any shape reads its inputs and writes its outputs in the caller's
arrays (``plan_native.in_place_sites``, ``ember_decide_in_place`` in csrc/dynamic_call.h),
per signature where that is safe: results equal numpy, are fresh arrays per call (never the
caller's input, never an earlier result), the caller's inputs are never written, and inputs
of another dtype, layout or kind still take the checked path."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember.api.model import ModelInputError
from ember.runtime.vm.plan_native import DynamicCall

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _vm_testlib import requires_cc  # noqa: E402

pytestmark = requires_cc

CHAIN = """#[version = "0.0.5"]
def @main(%x: Tensor[(?, 3, ?), float32], %y: Tensor[(?, 3, ?), float32]) {
  %0 = nn.relu(add(%x, %y));
  (multiply(%0, 2f), subtract(%x, %y))
}
"""

# an output that is a reshape of a kernel's output, a concatenation of a kernel's output with
# the input, and a kernel's output that another kernel reads after it is written
MIXED = """#[version = "0.0.5"]
def @main(%x: Tensor[(?, 4), float32]) {
  %0 = nn.relu(%x);
  (reshape(multiply(%0, 3f), newshape=[-1]), concatenate((%0, %x), axis=0), %0)
}
"""

# an output that is the input itself (no dynamic call: the checked path copies it)
ALIAS = """#[version = "0.0.5"]
def @main(%x: Tensor[(?, 4), float32]) {
  (%x, nn.relu(%x))
}
"""


@pytest.fixture(scope="module")
def chain():
    return ember.compile(CHAIN)


def _native(model) -> DynamicCall:  # type: ignore[no-untyped-def]
    ctx = model._pool.acquire()
    model._pool.release(ctx)
    assert isinstance(ctx.native, DynamicCall)
    return ctx.native


def _in_place(native: DynamicCall) -> list[int]:
    """This signature's decision per input, then output (1: the caller's array)."""
    return list(native._keep["sites"][2])


def _chain_want(x: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    return [np.maximum(x + y, 0) * 2, x - y]


def test_inputs_and_outputs_are_the_callers_arrays(chain) -> None:
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 5, 3, 7)).astype("float32")
    chain(x, y)
    chain(x, y)
    native = _native(chain)
    for shape in [(5, 3, 7), (1, 3, 1), (4, 3, 6)]:  # new signatures within the buffers
        x, y = rng.standard_normal((2, *shape)).astype("float32")
        kept = x.copy(), y.copy()
        got = native.run((x, y))
        assert got is not None
        assert _in_place(native) == [1, 1, 1, 1]
        for g, w in zip(got, _chain_want(x, y)):
            np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(x, kept[0])  # inputs only read
        np.testing.assert_array_equal(y, kept[1])


def test_results_are_fresh_per_call_and_the_buffers_still_serve_python(chain) -> None:
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((2, 3, 3, 4)).astype("float32")
    first = chain(x, y)
    second = chain(x, y)
    assert all(a is not b and not np.shares_memory(a, b) for a, b in zip(first, second))
    kept = [a.copy() for a in second]
    chain(x * 5, y)
    assert all(np.array_equal(a, b) for a, b in zip(second, kept))
    # a list (the checked Python path, on the plan's own buffers) after C pointed the
    # kernels' tensors into the caller's arrays and back
    for g, w in zip(chain(x.tolist(), y), _chain_want(x, y)):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    for g, w in zip(chain(y, x), _chain_want(y, x)):
        np.testing.assert_array_equal(g, w)


def test_inputs_of_other_dtypes_layouts_and_kinds_take_the_checked_path(chain) -> None:
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((2, 4, 3, 10)).astype("float32")
    chain(x, y)
    chain(x, y)
    native = _native(chain)
    strided = x[:, :, ::2]  # not C-contiguous
    assert native.run((strided, y[:, :, ::2])) is None
    assert native.run((x.astype("float64"), y)) is None
    fortran = np.asfortranarray(x)
    assert native.run((fortran, y)) is None
    unaligned = np.frombuffer(b"\0" + x.tobytes(), "float32", offset=1).reshape(x.shape)
    assert native.run((unaligned, y)) is None
    with pytest.raises(ModelInputError, match="float64"):  # refused by name, not cast
        chain(x.astype("float64"), y)
    for args in [(strided, y[:, :, ::2]), (fortran, y), (unaligned, y), (x.tolist(), y)]:
        want = _chain_want(*(np.asarray(a, "float32") for a in args))
        for g, w in zip(chain(*args), want):
            np.testing.assert_array_equal(g, w)


def test_a_shape_that_grows_the_buffers_then_shrinks(chain) -> None:
    rng = np.random.default_rng(3)
    for shape in [(2, 3, 2), (2, 3, 2), (30, 3, 41), (1, 3, 5), (31, 3, 40), (2, 3, 2)]:
        x, y = rng.standard_normal((2, *shape)).astype("float32")
        kept = x.copy()
        for g, w in zip(chain(x, y), _chain_want(x, y)):
            np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(x, kept)
    assert _in_place(_native(chain)) == [1, 1, 1, 1]


def test_outputs_written_in_parts_or_read_by_later_kernels_stay_right() -> None:
    model = ember.compile(MIXED)
    rng = np.random.default_rng(4)
    for n in [3, 3, 1, 5, 2, 5]:
        x = rng.standard_normal((n, 4)).astype("float32")
        kept = x.copy()
        flat, both, relu = model(x)
        want = np.maximum(kept, 0)
        np.testing.assert_array_equal(flat, (want * 3).reshape(-1))
        np.testing.assert_array_equal(both, np.concatenate([want, kept]))
        np.testing.assert_array_equal(relu, want)
        np.testing.assert_array_equal(x, kept)
    assert _in_place(_native(model)) == [1, 1, 1, 1]  # (the last call's, in C)


def test_an_output_that_is_the_input_is_a_copy() -> None:
    model = ember.compile(ALIAS)
    rng = np.random.default_rng(5)
    for n in [3, 3, 1, 5]:
        x = rng.standard_normal((n, 4)).astype("float32")
        same, relu = model(x)
        np.testing.assert_array_equal(same, x)
        assert not np.shares_memory(same, x)
        x[:] = 7
        np.testing.assert_array_equal(relu, np.maximum(same, 0))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(1, 13)), min_size=1, max_size=6))
def test_any_sequence_of_shapes_equals_numpy_and_leaves_inputs_alone(chain, shapes) -> None:
    rng = np.random.default_rng(len(shapes))
    for n, m in shapes:
        x, y = rng.standard_normal((2, n, 3, m)).astype("float32")
        kept = x.copy(), y.copy()
        got = chain(x, y)
        for g, w in zip(got, _chain_want(*kept)):
            assert g.shape == w.shape
            np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(x, kept[0])
        np.testing.assert_array_equal(y, kept[1])


def test_a_creeping_shape_grows_the_buffers_a_logarithmic_number_of_times(monkeypatch) -> None:
    """A batch that grows by one each call: once a buffer must grow again, every buffer
    takes room for twice its size, so the calls that C declines (Python grows the buffers)
    are logarithmic in the largest size, and the memory held stays within 2.5 times the
    largest size asked (twice it, in the allocator's size classes)."""
    from ember.runtime.execution_pool import VMContext

    model = ember.compile(CHAIN)
    python: list[int] = []
    original = VMContext.call

    def counted(self, values):  # type: ignore[no-untyped-def]
        python.append(len(values[0]))
        return original(self, values)

    monkeypatch.setattr(VMContext, "call", counted)
    rng = np.random.default_rng(6)
    for n in range(1, 65):
        x, y = rng.standard_normal((2, n, 3, 5)).astype("float32")
        for g, w in zip(model(x, y), _chain_want(x, y)):
            np.testing.assert_array_equal(g, w)
    assert len(python) <= 2 + 7, python  # the first calls, then about log2(64) growths
    calls = _native(model).calls
    largest = 64 * 3 * 5 * 4
    held = [g.capacity for g in calls.inputs] + [g.capacity for g in calls.results.values()]
    assert all(largest <= c <= 2.5 * largest for c in held), held
    plan = calls.plan
    assert all(c <= 2.5 * largest for c in plan._capacity.values()), plan._capacity


def test_threads_sharing_the_model_read_and_write_only_their_own_arrays() -> None:
    """Eight threads call one model at shapes of their own (some growing the buffers of
    the context they get): each result is its own inputs', and no input is written."""
    import threading

    model = ember.compile(CHAIN)
    errors: list[str] = []
    start = threading.Barrier(8)

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        start.wait()
        for _ in range(60):
            n, m = int(rng.integers(0, 12)), int(rng.integers(1, 20))
            x, y = rng.standard_normal((2, n, 3, m)).astype("float32")
            kept = x.copy(), y.copy()
            got = model(x, y)
            if not all(np.array_equal(g, w) for g, w in zip(got, _chain_want(*kept))):
                errors.append(f"thread {seed}: wrong result at {(n, 3, m)}")
            if not (np.array_equal(x, kept[0]) and np.array_equal(y, kept[1])):
                errors.append(f"thread {seed}: an input was written")

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert errors == []

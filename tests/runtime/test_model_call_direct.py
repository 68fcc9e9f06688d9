"""A model call that reads its inputs and writes its outputs in the caller's arrays
(``EmberModelCallDirect``, ``model_call.direct_sites``): only where no other tensor shares the
buffer's memory, inputs only where no kernel writes them, outputs only where the kernels write
all of them; the results are exact, fresh per call, and the executor's own buffers still work
after."""
from __future__ import annotations

import numpy as np
import pytest

import ember

from .test_model_call import native_of

EXECUTORS = ["graph", "aot", "vm"]


def _compile(text: str, executor: str, **kwargs: object) -> ember.CompiledModel:
    return ember.compile(text, executor=executor, **kwargs)


def _flags(model: ember.CompiledModel, *args: np.ndarray) -> list[bool] | None:
    for _ in range(2 if args else 0):  # a VM model's one-C-call form: from its second call
        model(*args)
    native = native_of(model)
    assert native is not None
    extra = native._keep[-1]
    return list(extra[1]) if extra else None


CHAIN = """#[version = "0.0.5"]
def @main(%x: Tensor[(64, 33), float32]) {
  %0 = nn.relu(%x);
  %1 = multiply(%0, 2f);
  (add(%1, 1f), %0)
}
"""


@pytest.mark.parametrize("executor", EXECUTORS)
def test_outputs_written_in_place_are_exact_and_fresh(executor: str) -> None:
    model = _compile(CHAIN, executor)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 33)).astype("float32")
    flags = _flags(model, x)
    assert flags == [True, True, True], flags  # input read, outputs written in place
    keep = x.copy()
    first = model(x)
    np.testing.assert_array_equal(first[0], np.maximum(x, 0) * 2 + 1)
    np.testing.assert_array_equal(first[1], np.maximum(x, 0))
    np.testing.assert_array_equal(x, keep)  # the caller's input is not written
    x2 = -x
    second = model(x2)
    assert second[0] is not first[0] and not np.shares_memory(second[0], first[0])
    np.testing.assert_array_equal(first[0], np.maximum(x, 0) * 2 + 1)  # untouched
    np.testing.assert_array_equal(second[0], np.maximum(x2, 0) * 2 + 1)
    # the checked path (a list, converted) runs on the executor's own buffers afterwards
    np.testing.assert_array_equal(model(x.tolist())[0], np.maximum(x, 0) * 2 + 1)
    np.testing.assert_array_equal(model(x2)[1], np.maximum(x2, 0))


CONSTANT_OUT = """#[version = "0.0.5"]
def @main(%x: Tensor[(4, 5), float32], %w: Tensor[(4, 5), float32]) {
  (add(%x, %w), %w, %x)
}
"""


@pytest.mark.parametrize("executor", EXECUTORS)
def test_outputs_no_kernel_writes_keep_their_copy(executor: str) -> None:
    """A weight returned as an output (the kernels only read it) and an input returned as
    an output: the caller's fresh arrays must not replace their memory."""
    w = np.arange(20, dtype="float32").reshape(4, 5)
    model = _compile(CONSTANT_OUT, executor, params={"w": w})
    x = np.full((4, 5), 0.5, "float32")
    for _ in range(3):
        got = model(x)
        np.testing.assert_array_equal(got[0], x + w)
        np.testing.assert_array_equal(got[1], w)
        np.testing.assert_array_equal(got[2], x)
        x = x + 1


SPLIT = """#[version = "0.0.5"]
def @main(%x: Tensor[(6, 8), float32]) {
  %0 = split(%x, indices_or_sections=3);
  (%0.0, %0.1, %0.2)
}
"""


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_kernel_with_several_outputs(executor: str) -> None:
    model = _compile(SPLIT, executor)
    x = np.arange(48, dtype="float32").reshape(6, 8)
    assert _flags(model, x) == [True] * 4
    for k in range(2):
        got = model(x + k)
        for part, want in zip(got, np.split(x + k, 3)):
            np.testing.assert_array_equal(part, want)


def test_overlapping_or_unwritten_buffers_are_not_direct() -> None:
    """direct_sites on a model's plan: with nothing known to be written no output is direct;
    two buffers over the same memory are neither."""
    import ctypes

    from ember.runtime.model_call import direct_sites

    model = _compile(CHAIN, "graph")
    native = native_of(model)
    calls, count = native._keep[5], native._plan.call.num_calls
    ctx = model._pool.acquire()
    model._pool.release(ctx)
    buffers = [*ctx.inputs, *ctx.outputs]
    sites, flags = direct_sites(calls, count, buffers, 1, frozenset())
    assert flags == [True, False, False], flags  # the input alone: read, never written
    alias = np.frombuffer((ctypes.c_char * buffers[0].nbytes).from_address(
        buffers[0].ctypes.data), dtype="float32").reshape(buffers[0].shape)
    sites, flags = direct_sites(calls, count, [buffers[0], alias], 1, frozenset())
    assert flags == [False, False] and sites == []

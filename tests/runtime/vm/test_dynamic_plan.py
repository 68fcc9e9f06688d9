"""Plans of functions with symbolic shapes (vm/static_plan.py, vm/plan_walk.py): the shape
phase, the checks, blocks grown to the largest shape seen, kept signatures, sync points where
a size comes from data. Every result is compared bit for bit with the interpreter's, every
error with the interpreter's error."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember.runtime.vm import VirtualMachine, VMError
from ember.runtime.vm import static_plan
from ember.runtime.vm import plan_phase
from ember.runtime.vm.static_plan import StaticPlan

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_static_plan import plan_of, same_error, values, vms  # noqa: E402
from _vm_testlib import DYNAMIC, requires_cc  # noqa: E402

pytestmark = requires_cc

# main(x: float32[?]) = (x + x) * x through an intermediate block of the input's size.
GROWING = DYNAMIC[:DYNAMIC.index("    load_const $8")] + """    alloc_storage $8 $5 64 float32 0
    alloc_tensor_reg $9 $8 $4 $1 float32
    invoke_packed PackedFunc[vm_mul_f32] (in: $7, $0, out: $9)
    ret $9
"""
# main(s: int64[1], x: float32[?]) = x + x, its shape taken from the *data* of s: the size is
# known only after a kernel ran, so the plan checks it between two native calls.
FROM_DATA = """
main(s, x):
    # param types = int64[1], float32[?]
    load_consti $2 8
    alloc_storage $3 $2 64 int64 0
    load_consti $4 0
    alloc_tensor $5 $3 $4 [] int64
    invoke_packed PackedFunc[vm_nbytes_f32] (in: $0, out: $5)
    alloc_storage $6 $5 64 float32 0
    alloc_tensor_reg $7 $6 $4 $0 float32
    invoke_packed PackedFunc[vm_add_f32] (in: $1, $1, out: $7)
    ret $7
"""


def same(vm: VirtualMachine, interpreter: VirtualMachine, *args: np.ndarray) -> None:
    got, want = values(vm.run(*args)), values(interpreter.run(*args))
    assert [(g.shape, g.tobytes()) for g in got] == [(w.shape, w.tobytes()) for w in want]


@pytest.mark.parametrize("n", [6, 12, 2])
def test_a_symbolic_function_is_planned_once_for_every_shape(n: int) -> None:
    vm, interpreter = vms(DYNAMIC, (np.array([2, n // 2], "int64"),))
    x = np.arange(n, dtype="float32")
    same(vm, interpreter, x)
    plan = plan_of(vm)
    assert isinstance(plan, StaticPlan)
    assert plan._shape_run is not None and len(plan._segments) == 1  # two native calls
    same(vm, interpreter, x)
    assert plan_of(vm) is plan


def test_shapes_seen_before_skip_the_shape_phase() -> None:
    vm, interpreter = vms(GROWING)
    plan = None
    for n in (3, 8, 5, 8, 3, 1, 0):
        x = np.linspace(-1, 1, n).astype("float32")
        same(vm, interpreter, x)
        plan = plan or plan_of(vm)
        assert plan_of(vm) is plan
    assert isinstance(plan, StaticPlan) and len(plan._seen) == 5
    assert plan._early.vector is not None  # the shape phase's checks are vectorised
    calls = []
    shape_run = plan._shape_run
    plan._shape_run = lambda: calls.append(1) or shape_run()
    same(vm, interpreter, np.ones(8, "float32"))  # seen: no shape phase
    same(vm, interpreter, np.ones(9, "float32"))  # new: one
    assert calls == [1]


def test_an_intermediate_block_grows_to_the_largest_shape_and_stays() -> None:
    vm, interpreter = vms(GROWING)
    sizes = []
    for n in (4, 16, 8, 2, 16):
        same(vm, interpreter, np.full(n, 1.5, "float32"))
        plan = plan_of(vm)
        sizes.append(dict(plan._capacity))
    grown = [next(iter(s.values())) for s in sizes]
    assert grown == [16, 64, 64, 64, 64]


def test_a_creeping_size_regrows_a_logarithmic_number_of_times() -> None:
    # a length that grows by one each call: the block takes twice what it had each time it
    # must grow (a few sizes from 16 to 236 bytes, not 56), so most calls need no new memory
    vm, interpreter = vms(GROWING)
    grown = []
    for n in range(4, 60):
        same(vm, interpreter, np.full(n, 1.5, "float32"))
        grown.append(next(iter(plan_of(vm)._capacity.values())))
    assert len(set(grown)) <= 9 and grown == sorted(grown) and grown[-1] >= 4 * 59


def test_a_block_takes_exactly_its_size_when_the_margin_does_not_fit(monkeypatch) -> None:
    # memory for the size asked but not for twice as much: the block grows to the size
    from ember.runtime.errors import TVMError

    vm, interpreter = vms(GROWING)
    same(vm, interpreter, np.full(40, 1.5, "float32"))
    plan = plan_of(vm)
    alloc = plan._allocator.alloc

    def tight(nbytes, *args):
        if nbytes > 4 * 41:
            raise TVMError(f"alloc_storage: cannot allocate {nbytes} bytes")
        return alloc(nbytes, *args)

    monkeypatch.setattr(plan._allocator, "alloc", tight)
    same(vm, interpreter, np.full(41, 1.5, "float32"))
    assert next(iter(plan._capacity.values())) == 4 * 41


def test_kept_signatures_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(static_plan, "SIGNATURES", 4)
    vm, interpreter = vms(GROWING)
    for n in range(1, 12):
        same(vm, interpreter, np.arange(n, dtype="float32"))
    assert len(plan_of(vm)._seen) == 4
    for n in range(1, 12):  # evicted signatures are computed again, correctly
        same(vm, interpreter, np.arange(n, dtype="float32"))


def test_results_of_one_run_are_untouched_by_the_next() -> None:
    vm, _ = vms(GROWING)
    first = vm.run(np.full(5, 2, "float32"))
    kept = first.numpy().copy()
    vm.run(np.full(9, 3, "float32"))
    vm.run(np.full(5, 4, "float32"))
    assert first.numpy().tobytes() == kept.tobytes()


def test_a_size_computed_from_data_is_checked_between_native_calls() -> None:
    vm, interpreter = vms(FROM_DATA)
    for n in (5, 3, 7, 3):
        same(vm, interpreter, np.array([n], "int64"), np.arange(n, dtype="float32"))
    plan = plan_of(vm)
    assert isinstance(plan, StaticPlan) and plan._shape_run is None
    assert len(plan._segments) == 2 and plan._segments[1][0] is not None
    # A shape from data that disagrees with x: the kernel refuses, the interpreter reports.
    err = same_error(vm, interpreter, np.array([4], "int64"), np.ones(3, "float32"))
    assert isinstance(err, VMError)
    # A negative size from data: the check refuses, the interpreter reports.
    err = same_error(vm, interpreter, np.array([-2], "int64"), np.ones(3, "float32"))
    assert "negative" in str(err)
    same(vm, interpreter, np.array([3], "int64"), np.arange(3, dtype="float32"))


def test_a_reshape_that_changes_the_element_count_raises_the_interpreters_error() -> None:
    vm, interpreter = vms(DYNAMIC, (np.array([2, 3], "int64"),))
    same(vm, interpreter, np.arange(6, dtype="float32"))
    assert plan_of(vm)._early.vector is not None
    err = same_error(vm, interpreter, np.arange(8, dtype="float32"))
    assert "cannot reshape tensor float32[8] to [2, 3]" in str(err)
    same(vm, interpreter, np.arange(6, dtype="float32"))


def test_arguments_of_another_rank_or_dtype_are_interpreted() -> None:
    vm, interpreter = vms(GROWING)
    same(vm, interpreter, np.ones(4, "float32"))
    plan = plan_of(vm)
    err = same_error(vm, interpreter, np.ones((2, 2), "float32"))
    assert isinstance(err, TypeError | ValueError | ember.TVMError)
    same(vm, interpreter, np.ones(4, "float32"))
    assert plan_of(vm) is plan


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=8))
def test_any_sequence_of_lengths_matches_the_interpreter(lengths: list[int]) -> None:
    vm, interpreter = vms(GROWING)
    rng = np.random.default_rng(len(lengths))
    for n in lengths:
        same(vm, interpreter, rng.standard_normal(n).astype("float32"))


def test_a_compiled_model_with_a_symbolic_batch_runs_on_its_plan() -> None:
    text = """#[version = "0.0.5"]
def @main(%x: Tensor[(?, 16), float32], %w: Tensor[(8, 16), float32]) {
  nn.relu(nn.dense(%x, %w))
}
"""
    model = ember.compile(text)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 16)).astype("float32")
    for n in (3, 1, 17, 3, 64):
        x = rng.standard_normal((n, 16)).astype("float32")
        np.testing.assert_allclose(model(x, w), np.maximum(x @ w.T, 0), rtol=1e-5, atol=1e-5)
    vm = model._pool.acquire().vm
    plan = vm._plans[vm._function_index("main")]
    assert isinstance(plan, StaticPlan), plan
    assert plan._shape_run is not None and len(plan._segments) == 1


# Two sizes computed into the same 8 bytes, one after the other (a memory plan that reuses a
# shape function's slot once its value was read): the shape phase may not run them both first.
REUSED_SLOT = """
main(x, y):
    # param types = float32[?], float32[?]
    shape_of $2 $0
    shape_of $3 $1
    load_consti $4 8
    alloc_storage $5 $4 64 int64 0
    load_consti $6 0
    alloc_tensor $7 $5 $6 [] int64
    invoke_packed PackedFunc[vm_nbytes_f32] (in: $2, out: $7)
    alloc_storage $8 $7 64 float32 0
    alloc_tensor_reg $9 $8 $6 $2 float32
    invoke_packed PackedFunc[vm_add_f32] (in: $0, $0, out: $9)
    alloc_tensor $10 $5 $6 [] int64
    invoke_packed PackedFunc[vm_nbytes_f32] (in: $3, out: $10)
    alloc_storage $11 $10 64 float32 0
    alloc_tensor_reg $12 $11 $6 $3 float32
    invoke_packed PackedFunc[vm_add_f32] (in: $1, $1, out: $12)
    alloc_data $13 tag(0) [$9, $12]
    ret $13
"""


def test_shape_values_in_reused_bytes_stay_in_program_order() -> None:
    vm, interpreter = vms(REUSED_SLOT)
    for n, m in ((5, 2), (2, 5), (3, 3), (7, 1)):
        same(vm, interpreter, np.arange(n, dtype="float32"), np.ones(m, "float32"))
    plan = plan_of(vm)
    assert isinstance(plan, StaticPlan)
    assert plan._shape_run is None  # the slot is written twice: nothing runs ahead
    assert all(checks is not None for checks, _ in plan._segments[1:])
    assert plan_phase._overlap([(0, 8), (0, 8)]) and plan_phase._overlap([(0, 16), (8, 24)])
    assert not plan_phase._overlap([(0, 8), (8, 16), (64, 72)])

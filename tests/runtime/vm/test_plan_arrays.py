"""A model's calls on numpy arrays through its plan (vm/plan_arrays.py, execution_pool's
VMContext): per signature one ArrayCall made once, the interpreter's results bit for bit, the
caller's own result arrays, buffers grown and kept signatures bounded, and every failure left
to the interpreter, which raises its usual error."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import ember
from ember.api.model import ModelInputError
from ember.runtime.errors import TVMError
from ember.runtime.execution_pool import VMContext
from ember.runtime.vm import VirtualMachine, VMError
from ember.runtime.vm import static_plan
from ember.runtime.vm.plan_arrays import ArrayCall, ArrayCalls

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_dynamic_plan import FROM_DATA, GROWING  # noqa: E402
from test_static_plan import FAILING, TUPLE, TUPLE_CONSTS, tuple_reference, values  # noqa: E402
from _vm_testlib import make_exe, requires_cc  # noqa: E402

pytestmark = requires_cc
CPU = ember.cpu(0)


def contexts(text: str, consts: tuple = (), shapes=None, dtypes=("float32",)):
    """(a VMContext of the program, an interpreter of the same executable)."""
    exe = make_exe(text, consts)
    interpreter = VirtualMachine(exe, CPU)
    interpreter.static_plans = False
    shapes = shapes or [None] * len(dtypes)
    return VMContext(VirtualMachine(exe, CPU), shapes, dtypes), interpreter


def test_a_seen_signature_is_served_by_its_array_call() -> None:
    ctx, interpreter = contexts(GROWING)
    rng = np.random.default_rng(0)
    for n in (5, 1, 9, 5, 9, 1):
        x = rng.standard_normal(n).astype("float32")
        got, want = ctx.call([x]), values(interpreter.run(x))
        assert [g.tobytes() for g in got] == [w.tobytes() for w in want]
    assert isinstance(ctx.arrays, ArrayCalls)
    assert sorted(ctx.made) == [(1,), (5,), (9,)] and ctx.made is ctx.arrays.made
    # a seen signature runs no shape phase: the ArrayCall alone
    made = ctx.made[(5,)]
    ctx.arrays.make = None  # a miss would now fail
    x = rng.standard_normal(5).astype("float32")
    assert ctx.call([x])[0].tobytes() == values(interpreter.run(x))[0].tobytes()
    assert ctx.made[(5,)] is made


def test_results_are_the_callers_and_untouched_by_later_calls() -> None:
    ctx, _ = contexts(GROWING)
    first = [ctx.call([np.full(5, 2, "float32")]) for _ in range(3)][-1][0]
    kept = first.copy()
    second = ctx.call([np.full(5, 3, "float32")])[0]
    ctx.call([np.full(40, 4, "float32")])  # buffers grow
    assert not np.may_share_memory(first, second)
    assert first.tobytes() == kept.tobytes()
    first[:] = 99  # writing into a result changes nothing the model keeps
    assert ctx.call([np.full(5, 2, "float32")])[0].tobytes() == kept.tobytes()


def test_a_tuple_of_results_in_order() -> None:
    ctx, _ = contexts(TUPLE, TUPLE_CONSTS, shapes=[(2, 2), (4,)], dtypes=["float32"] * 2)
    x, y = np.arange(4, dtype="float32").reshape(2, 2), np.full(4, 2, "float32")
    for _ in range(3):
        got = ctx.call([x, y])
        assert [g.tobytes() for g in got] == [w.tobytes() for w in tuple_reference(x, y)]
    assert ctx.made[((2, 2), (4,))] is not None


def test_growing_buffers_drop_the_array_calls_made_before() -> None:
    ctx, interpreter = contexts(GROWING)
    for n in (3, 3, 4):  # 12 and 16 bytes: one size class, nothing grows
        ctx.call([np.ones(n, "float32")])
    small = ctx.made[(3,)]
    assert ctx.made[(4,)] is not small
    x = np.arange(50, dtype="float32")
    assert ctx.call([x])[0].tobytes() == values(interpreter.run(x))[0].tobytes()
    assert list(ctx.made) == [(50,)]  # the older views were of smaller buffers
    x = np.arange(3, dtype="float32")
    assert ctx.call([x])[0].tobytes() == values(interpreter.run(x))[0].tobytes()
    assert ctx.made[(3,)] is not small


def test_kept_signatures_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(static_plan, "SIGNATURES", 2)
    ctx, interpreter = contexts(GROWING)
    for n in (9, 9, 1, 2, 3, 1):
        x = np.arange(n, dtype="float32")
        assert ctx.call([x])[0].tobytes() == values(interpreter.run(x))[0].tobytes()
    assert list(ctx.made) == [(3,), (1,)]


def test_runs_of_the_vm_in_between_repoint_the_plan() -> None:
    # VirtualMachine.run (NDArray results from the allocator) and model calls share one plan
    ctx, interpreter = contexts(GROWING)
    for k, n in enumerate((6, 6, 6, 7, 6)):
        x = np.arange(n, dtype="float32") + k  # new values: a stale result would show
        assert ctx.call([x])[0].tobytes() == values(interpreter.run(x))[0].tobytes()
        y = -x[:-1]
        assert ctx.vm.run(y).numpy().tobytes() == values(interpreter.run(y))[0].tobytes()


def test_a_failing_kernel_raises_the_interpreters_error_every_call() -> None:
    ctx, interpreter = contexts(FAILING, shapes=[(4,)])
    with pytest.raises(VMError) as want:
        interpreter.run(np.ones(4, "float32"))
    for _ in range(3):
        with pytest.raises(VMError) as got:
            ctx.call([np.ones(4, "float32")])
        assert str(got.value) == str(want.value)
    assert isinstance(ctx.made[(4,)], ArrayCall)


def test_a_library_without_the_batch_runner_still_runs(monkeypatch) -> None:
    monkeypatch.setattr(static_plan, "c_plan", lambda funcs, calls: None)
    ctx, interpreter = contexts(GROWING)
    for n in (2, 2, 5, 2):
        x = np.arange(n, dtype="float32")
        assert ctx.call([x])[0].tobytes() == values(interpreter.run(x))[0].tobytes()
    ctx, _ = contexts(FAILING, shapes=[(4,)])
    for _ in range(2):
        with pytest.raises(VMError, match="vm_fail"):
            ctx.call([np.ones(4, "float32")])


def test_sizes_from_data_stay_with_the_plans_own_run() -> None:
    ctx, interpreter = contexts(FROM_DATA, dtypes=["int64", "float32"])
    for n in (3, 3, 5):
        args = [np.array([n], "int64"), np.arange(n, dtype="float32")]
        assert ctx.call(args)[0].tobytes() == values(interpreter.run(*args))[0].tobytes()
    assert ctx.arrays is None and ctx.made == {}
    with pytest.raises(TVMError):
        ctx.call([np.array([4], "int64"), np.ones(3, "float32")])


TWO_INPUTS = """#[version = "0.0.5"]
def @main(%x: Tensor[(?, 4), float32], %y: Tensor[(?, 4), float32]) {
  nn.relu(add(%x, %y))
}
"""


@pytest.fixture(scope="module")
def two_inputs():
    return ember.compile(TWO_INPUTS)


def test_a_compiled_model_at_odd_sizes_and_one(two_inputs) -> None:
    rng = np.random.default_rng(1)
    for n in (1, 7, 1, 13, 7):
        x, y = rng.standard_normal((2, n, 4)).astype("float32")
        np.testing.assert_array_equal(two_inputs(x, y), np.maximum(x + y, 0))
    ctx = two_inputs._pool.acquire()
    two_inputs._pool.release(ctx)
    # the last 7 ran in C (plan_native: the buffers grown for 13 hold it), not through an
    # ArrayCall; 13 was the last signature the Python path made
    assert list(ctx.made) == [((13, 4), (13, 4))]
    assert ctx.native is ctx.dynamic is not None


def test_inputs_that_contradict_each_other_are_a_model_input_error(two_inputs) -> None:
    x = np.ones((3, 4), "float32")
    two_inputs(x, x)
    with pytest.raises(ModelInputError, match="x.*y|y.*x"):
        two_inputs(x, np.ones((5, 4), "float32"))
    # broadcasting a 1 is what add allows: not an error
    np.testing.assert_array_equal(two_inputs(x, np.ones((1, 4), "float32")), x + 1)
    np.testing.assert_array_equal(two_inputs(x, x), x + x)

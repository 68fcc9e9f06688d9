"""Static plans (vm/static_plan.py) on hand-assembled programs: the same results as the
interpreter, bit for bit; results of one run untouched by the next; the interpreter for
whatever the plan cannot run, with the same errors; the profiler still times every step."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember.runtime.container import ADT
from ember.runtime.errors import TVMError
from ember.runtime.executor_common import CPlan
from ember.runtime.vm import VirtualMachine, VMError, VMModule
from ember.runtime.vm.profiler import VirtualMachineProfiler
from ember.runtime.vm import static_plan
from ember.runtime.vm.static_plan import StaticPlan

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _threads import errors_in_threads  # noqa: E402
from _vm_testlib import ADD, SUM, make_exe, requires_cc  # noqa: E402

pytestmark = requires_cc
CPU = ember.cpu(0)


def vms(text: str, constants: tuple = ()) -> tuple[VirtualMachine, VirtualMachine]:
    """(a VM with static plans, one that only interprets) of one executable."""
    exe = make_exe(text, constants)
    interpreter = VirtualMachine(exe, CPU)
    interpreter.static_plans = False
    return VirtualMachine(exe, CPU), interpreter


def values(result: object) -> list[np.ndarray]:
    return [f.numpy() for f in result.fields] if isinstance(result, ADT) else [result.numpy()]


def plan_of(vm: VirtualMachine, name: str = "main") -> StaticPlan | str:
    return vm._plans[vm._function_index(name)]


def same_error(vm: VirtualMachine, interpreter: VirtualMachine, *args: object,
               **kwargs: object) -> TVMError:
    """The error both VMs raise on ``run(*args, **kwargs)`` (same type and text, else the
    test fails)."""
    with pytest.raises(TVMError) as got:
        vm.run(*args, **kwargs)
    with pytest.raises(TVMError) as want:
        interpreter.run(*args, **kwargs)
    assert type(got.value) is type(want.value) and str(got.value) == str(want.value)
    return got.value


# main(x, y) = ((x' + y) * x', x' * c) with x' = reshape(x, [4]): an intermediate at an
# offset in an arena, a reshaped argument, a constant operand, and a tuple of two results in
# blocks of their own.
TUPLE = """
main(x, y):
    # param types = float32[2, 2], float32[4]
    load_consti $2 32
    alloc_storage $3 $2 64 float32 0
    load_consti $4 0
    load_consti $5 16
    load_const $6 Const[0]
    reshape_tensor $7 $0 $6
    alloc_tensor $8 $3 $5 [4] float32
    invoke_packed PackedFunc[vm_add_f32] (in: $7, $1, out: $8)
    load_consti $9 16
    alloc_storage $10 $9 64 float32 0
    alloc_tensor $11 $10 $4 [4] float32
    invoke_packed PackedFunc[vm_mul_f32] (in: $8, $7, out: $11)
    kill_register $8
    alloc_storage $12 $9 64 float32 0
    alloc_tensor $13 $12 $4 [2, 2] float32
    load_const $14 Const[1]
    invoke_packed PackedFunc[vm_mul_f32] (in: $7, $14, out: $13)
    alloc_data $15 tag(0) [$11, $13]
    ret $15
"""
TUPLE_CONSTS = (np.array([4], "int64"), np.array([1, -2, 3, 0.5], "float32"))


def tuple_reference(x: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    flat = x.reshape(4)
    return [(flat + y) * flat, (flat * TUPLE_CONSTS[1]).reshape(2, 2)]


def test_a_static_function_gets_a_plan_with_the_interpreters_results() -> None:
    vm, interpreter = vms(TUPLE, TUPLE_CONSTS)
    x, y = np.arange(4, dtype="float32").reshape(2, 2), np.full(4, 0.25, "float32")
    got = vm.run(x, y)
    assert isinstance(plan_of(vm), StaticPlan)
    assert isinstance(got, ADT) and got.tag == 0 and len(got.fields) == 2
    want = values(interpreter.run(x, y))
    for g, w, ref in zip(values(got), want, tuple_reference(x, y)):
        assert g.tobytes() == w.tobytes()
        np.testing.assert_array_equal(g, ref)
    assert not interpreter._plans


def test_results_of_a_run_are_unchanged_by_the_next() -> None:
    vm, _ = vms(TUPLE, TUPLE_CONSTS)
    x, y = np.ones((2, 2), "float32"), np.ones(4, "float32")
    first = vm.run(x, y)
    kept = [f.numpy() for f in first.fields]
    view = np.asarray(first.fields[0])  # a numpy view must stay valid too
    second = vm.run(x * 3, y * 5)
    for f, k in zip(first.fields, kept):
        np.testing.assert_array_equal(f.numpy(), k)
    np.testing.assert_array_equal(view, kept[0])
    np.testing.assert_array_equal(values(second)[0], (3 + 5) * np.full(4, 3, "float32"))
    assert not np.may_share_memory(np.asarray(first.fields[0]), np.asarray(second.fields[0]))


def test_module_interface_outputs_survive_the_next_run() -> None:
    m = VMModule(make_exe(ADD), CPU)
    m.set_input(x=np.ones(4, "float32"), y=np.ones(4, "float32"))
    m.run()
    out = m.get_output(0)
    m.set_input("x", np.full(4, 7, "float32"))
    m.run()
    np.testing.assert_array_equal(out.numpy(), np.full(4, 2, "float32"))
    np.testing.assert_array_equal(m.get_output(0).numpy(), np.full(4, 8, "float32"))
    assert isinstance(plan_of(m.vm), StaticPlan)


def test_plan_allocations_match_the_interpreters() -> None:
    # The result block comes from the allocator every run: one fresh buffer, then reuse.
    vm, interpreter = vms(ADD)
    x = np.ones(4, "float32")
    counts = []
    for machine in (vm, interpreter):
        held = [machine.run(x, x) for _ in range(2)]  # two results alive: two blocks
        seen = [machine.allocator.fresh_allocations]
        for _ in range(5):  # while a run makes the third, two are alive: three blocks
            held = [held[-1], machine.run(x, x)]
            seen.append(machine.allocator.fresh_allocations)
        counts.append((seen, machine.allocator.stats()["requests"]))
    assert counts[0] == counts[1] == ([2, 3, 3, 3, 3, 3], 7)


# The size of the result's block is computed by a kernel (4 bytes per element of x).
RUNTIME_SIZE = """
main(x):
    # param types = int64[1]
    load_consti $1 8
    alloc_storage $2 $1 64 int64 0
    load_consti $3 0
    alloc_tensor $4 $2 $3 [] int64
    invoke_packed PackedFunc[vm_nbytes_f32] (in: $0, out: $4)
    alloc_storage $5 $4 64 int64 0
    alloc_tensor $6 $5 $3 [] int64
    invoke_packed PackedFunc[vm_copy] (in: $4, out: $6)
    ret $6
"""
# main(x: float32[4]) starting with x + x into a block of its own ($4).
DOUBLED = """
main(x):
    # param types = float32[4]
    load_consti $1 16
    alloc_storage $2 $1 64 float32 0
    load_consti $3 0
    alloc_tensor $4 $2 $3 [4] float32
    invoke_packed PackedFunc[vm_add_f32] (in: $0, $0, out: $4)
"""
# Two results viewing one block: (t, reshape(t)).
TWO_VIEWS = DOUBLED + """    load_const $5 Const[0]
    reshape_tensor $6 $4 $5
    alloc_data $7 tag(0) [$4, $6]
    ret $7
"""


@pytest.mark.parametrize("text, func, arg, why", [
    (SUM, "sum", np.int64(20), "instructions[1] (if $0 $1 1 2) is not straight-line"),
    (SUM, "main", np.int64(20), "instructions[0] (invoke $1 VMFunc[0]($0)) is not straight"),
    ("main(x):\n    ret $0\n", "main", np.ones(3, "float32"),
     "not a tensor the function allocated"),
    (TWO_VIEWS, "main", np.ones(4, "float32"), "returns two views of one block"),
])
def test_functions_the_plan_cannot_run_are_interpreted(text: str, func: str, arg: np.ndarray,
                                                       why: str) -> None:
    vm, interpreter = vms(text, (np.array([2, 2], "int64"),))
    assert [v.tolist() for v in values(vm.invoke(func, arg))] == \
        [v.tolist() for v in values(interpreter.invoke(func, arg))]
    assert why in plan_of(vm, func)


def test_moves_fields_and_device_copies_are_followed() -> None:
    text = """
main(x, y):
    # param types = float32[4], float32[4]
    load_consti $2 16
    alloc_storage $3 $2 64 float32 0
    load_consti $4 0
    alloc_tensor $5 $3 $4 [4] float32
    move $6 $0
    alloc_data $7 tag(3) [$6, $1]
    get_field $8 $7[1]
    device_copy $9 $8 0 0
    invoke_packed PackedFunc[vm_mul_f32] (in: $7, out: $5)
    invoke_packed PackedFunc[vm_add_f32] (in: $5, $9, out: $5)
    ret $5
"""
    vm, interpreter = vms(text)
    x, y = np.arange(4, dtype="float32"), np.full(4, 3, "float32")
    assert vm.run(x, y).numpy().tobytes() == interpreter.run(x, y).numpy().tobytes()
    assert isinstance(plan_of(vm), StaticPlan)
    np.testing.assert_array_equal(vm.run(x, y).numpy(), x * y + y)


UNTYPED_ADD = "\n".join(line for line in ADD.splitlines() if "param types" not in line)


def test_arguments_of_another_shape_than_the_plans_are_interpreted() -> None:
    vm, interpreter = vms(UNTYPED_ADD)
    x = np.arange(4, dtype="float32")
    np.testing.assert_array_equal(vm.run(x, x).numpy(), 2 * x)
    plan = plan_of(vm)
    assert isinstance(plan, StaticPlan)
    square = x.reshape(2, 2)  # the kernel takes any 4 elements; the plan was made for [4]
    np.testing.assert_array_equal(vm.run(square, square).numpy(), 2 * x)
    bad = np.ones(3, "float32")
    err = same_error(vm, interpreter, bad, bad)
    assert isinstance(err, VMError)
    assert "arguments must have the same number of elements" in str(err)
    assert plan_of(vm) is plan  # still the plan of the first call
    np.testing.assert_array_equal(vm.run(x, x).numpy(), 2 * x)


FAILING = DOUBLED + """    invoke_packed PackedFunc[vm_fail] (in: $4, out: $4)
    ret $4
"""


def test_a_failing_kernel_raises_the_interpreters_error() -> None:
    vm, interpreter = vms(FAILING)
    err = same_error(vm, interpreter, np.ones(4, "float32"))
    assert isinstance(plan_of(vm), StaticPlan) and isinstance(err, VMError)
    assert "vm_fail: this kernel always fails" in str(err)
    assert "instructions[5]" in str(err)


def test_a_library_without_the_batch_runner_calls_kernels_one_by_one(monkeypatch) -> None:
    # Libraries built before EmberRunCalls existed: the plan makes its calls from Python.
    monkeypatch.setattr(static_plan, "c_plan", lambda funcs, calls: None)
    vm, interpreter = vms(TUPLE, TUPLE_CONSTS)
    x, y = np.arange(4, dtype="float32").reshape(2, 2), np.full(4, 2, "float32")
    got = vm.run(x, y)
    assert not isinstance(plan_of(vm)._run_calls, CPlan)
    assert [g.tobytes() for g in values(got)] == \
        [w.tobytes() for w in values(interpreter.run(x, y))]
    assert "vm_fail" in str(same_error(*vms(FAILING), np.ones(4, "float32")))


@pytest.mark.parametrize("args, kwargs", [
    ((np.ones(3, "float32"), np.ones(4, "float32")), {}),   # shape
    ((np.ones(4, "float64"), np.ones(4, "float32")), {}),   # dtype
    ((np.ones(4, "float32"),), {"z": np.ones(4, "float32")}),  # name
    ((np.ones(4, "float32"),), {}),                          # count
])
def test_argument_errors_are_the_interpreters(args: tuple, kwargs: dict) -> None:
    vm, interpreter = vms(ADD)
    x = np.ones(4, "float32")
    vm.run(x, x)  # the plan exists
    same_error(vm, interpreter, *args, **kwargs)
    np.testing.assert_array_equal(vm.run(x, x).numpy(), 2 * x)


def test_the_profiler_still_times_every_instruction() -> None:
    prof = VirtualMachineProfiler(make_exe(ADD), CPU)
    x = np.ones(4, "float32")
    prof.run(x, x)
    report = prof.profile(x, x)
    names = [call["Name"] for call in report.calls]
    assert "vm_add_f32" in names and "VM::AllocStorage" in names and "VM::AllocTensor" in names
    assert not prof._plans


@pytest.mark.parametrize("plans", [True, False])
def test_threads_sharing_a_vm_take_turns(plans: bool) -> None:
    """Four threads calling one VM with their own arguments (invoke with arguments stores
    them, then runs): each gets the results of its own arguments, planned or interpreted."""
    vm = VirtualMachine(make_exe(TUPLE, TUPLE_CONSTS), CPU)
    vm.static_plans = plans

    def work(seed: int) -> str | None:
        rng = np.random.default_rng(seed)
        for _ in range(150):
            x = rng.uniform(-1, 1, (2, 2)).astype("float32")
            y = rng.uniform(-1, 1, 4).astype("float32")
            for g, w in zip(values(vm.run(x, y)), tuple_reference(x, y)):
                if not np.allclose(g.reshape(w.shape), w, rtol=1e-6):
                    return f"thread {seed}: {g} != {w}"
        return None

    assert errors_in_threads(work) == []


def test_a_plan_in_use_sends_the_call_to_the_interpreter() -> None:
    # A plan already running (a call back into the VM from one of its kernels) holds its
    # lock; this call must not share its buffers.
    vm, _ = vms(ADD)
    x = np.arange(4, dtype="float32")
    vm.run(x, x)
    plan = plan_of(vm)
    calls, plan._run_calls = plan._run_calls, None  # a call of the plan would fail
    with plan._lock:
        np.testing.assert_array_equal(vm.run(x, x + 1).numpy(), 2 * x + 1)
    plan._run_calls = calls
    np.testing.assert_array_equal(vm.run(x, x).numpy(), 2 * x)


# -- random straight-line programs ------------------------------------------------------------
@st.composite
def programs(draw: st.DrawFn) -> tuple[str, tuple, int]:
    """(assembly, constants, n): main(x, y) over float32 vectors of n elements; kernels
    write into slots of one arena (a later kernel may overwrite an earlier value, as a wrong
    memory plan would, but the same in plan and interpreter) or into blocks of their own;
    operands may be reshaped; the result is one tensor or a tuple."""
    n = draw(st.integers(1, 6))
    slots = draw(st.integers(1, 3))
    typed = draw(st.booleans())
    consts = (np.array([n, 1], "int64"), np.linspace(-1, 1, n).astype("float32"))
    lines = ["main(x, y):"]
    if typed:
        lines.append(f"    # param types = float32[{n}], float32[{n}]")
    lines += [f"    load_consti $2 {4 * n * slots}", "    alloc_storage $3 $2 64 float32 0",
              f"    load_consti $4 {4 * n}", "    alloc_storage $5 $4 64 float32 0",
              "    load_const $6 Const[0]", "    load_const $7 Const[1]", "    load_consti $8 0"]
    live, own, reg = [0, 1, 7], [], 9
    for _ in range(draw(st.integers(1, 6))):
        a, b = (live[draw(st.integers(0, len(live) - 1))] for _ in range(2))
        if draw(st.booleans()):
            lines.append(f"    reshape_tensor ${reg} ${a} $6")
            a, reg = reg, reg + 1
        if draw(st.booleans()):  # a block of its own
            lines += [f"    alloc_storage ${reg} $4 64 float32 0",
                      f"    alloc_tensor ${reg + 1} ${reg} $8 [{n}] float32"]
            own.append(reg + 1)
            reg += 1
        else:
            slot = draw(st.integers(0, slots - 1))
            lines += [f"    load_consti ${reg} {4 * n * slot}",
                      f"    alloc_tensor ${reg + 1} $3 ${reg} [{n}] float32"]
            reg += 1
        kernel = draw(st.sampled_from(["vm_add_f32", "vm_mul_f32"]))
        lines.append(f"    invoke_packed PackedFunc[{kernel}] (in: ${a}, ${b}, out: ${reg})")
        live.append(reg)
        reg += 1
    if len(own) >= 2 and draw(st.booleans()):
        lines += [f"    alloc_data ${reg} tag(0) [${own[-1]}, ${own[-2]}]", f"    ret ${reg}"]
    else:
        lines.append(f"    ret ${live[-1]}")
    return "\n".join(lines) + "\n", consts, n


@settings(max_examples=40, deadline=None)
@given(programs(), st.integers(0, 2**31 - 1))
def test_random_programs_plan_equals_interpreter(program: tuple, seed: int) -> None:
    text, consts, n = program
    vm, interpreter = vms(text, consts)
    rng = np.random.default_rng(seed)
    x, y = (rng.standard_normal(n).astype("float32") for _ in range(2))
    got = vm.run(x, y)
    kept = [v.copy() for v in values(got)]
    want = values(interpreter.run(x, y))
    assert [g.tobytes() for g in values(got)] == [w.tobytes() for w in want]
    last = text.strip().splitlines()[-1]
    # a result in the arena makes it a block every run allocates: still a plan
    assert isinstance(plan_of(vm), StaticPlan), (plan_of(vm), last)
    again = vm.run(y, x)
    assert [v.tobytes() for v in values(got)] == [k.tobytes() for k in kept]
    assert [g.tobytes() for g in values(again)] == \
        [w.tobytes() for w in values(interpreter.run(y, x))]

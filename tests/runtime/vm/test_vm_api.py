"""The Relay-era VirtualMachine API: inputs by position and name, stateful runs, outputs,
benchmark, the Module interface, argument checking, and the profiler's reports."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import ember
from ember.runtime.container import ADT
from ember.runtime.errors import TVMError
from ember.runtime.profiling import Duration, Report
from ember.runtime.vm import VirtualMachine

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _vm_testlib import ADD, SUM, make_exe, requires_cc  # noqa: E402

pytestmark = requires_cc
CPU = ember.cpu(0)
X, Y = np.arange(4, dtype="float32"), np.full(4, 10, dtype="float32")

# main(x, y) = (x + y, x * y): a tuple result.
PAIR = """
main(x, y):
    load_consti $2 32
    alloc_storage $3 $2 64 float32 0
    load_consti $4 0
    load_consti $5 16
    alloc_tensor $6 $3 $4 [4] float32
    alloc_tensor $7 $3 $5 [4] float32
    invoke_packed PackedFunc[vm_add_f32] (in: $0, $1, out: $6)
    invoke_packed PackedFunc[vm_mul_f32] (in: $0, $1, out: $7)
    alloc_data $8 tag(0) [$6, $7]
    ret $8
"""


def test_set_input_by_position_and_name_then_invoke() -> None:
    vm = VirtualMachine(make_exe(ADD), CPU)
    vm.set_input("main", X, y=Y)
    np.testing.assert_array_equal(vm.invoke("main").numpy(), X + Y)
    vm.set_input("main", y=X, x=Y)
    np.testing.assert_array_equal(vm.run().numpy(), X + Y)
    assert vm.get_input_index("y") == 1 and vm.get_input_index("nope") == -1


def test_set_one_input_variants() -> None:
    vm = VirtualMachine(make_exe(ADD), CPU)
    vm.set_one_input("main", "x", X)
    with pytest.raises(TVMError, match=r"inputs not set: y"):
        vm.invoke("main")
    vm.set_one_input("main", 1, Y)
    np.testing.assert_array_equal(vm.invoke("main").numpy(), X + Y)
    vm.set_one_input("main", y=X)
    np.testing.assert_array_equal(vm.invoke("main").numpy(), X + X)
    with pytest.raises(TVMError, match=r"set_one_input\('main'\): no input named 'z'; this "
                                       r"model's inputs are 'x', 'y'"):
        vm.set_one_input("main", "z", X)


def test_invoke_stateful_and_tuple_outputs() -> None:
    vm = VirtualMachine(make_exe(PAIR), CPU)
    with pytest.raises(TVMError, match="no outputs; call invoke_stateful first"):
        vm.get_outputs()
    vm.invoke_stateful("main", X, Y)
    outs = vm.get_outputs()
    assert vm.get_num_outputs() == 2 and len(outs) == 2
    np.testing.assert_array_equal(outs[0].numpy(), X + Y)
    np.testing.assert_array_equal(vm.get_output(1).numpy(), X * Y)
    assert isinstance(vm.invoke("main"), ADT)
    with pytest.raises(IndexError, match="index 2 out of range"):
        vm.get_output(2)


def test_module_interface() -> None:
    vm = VirtualMachine(make_exe(ADD), CPU)
    assert isinstance(vm, ember.runtime.Module)
    np.testing.assert_array_equal(vm["invoke"]("main", ember.nd.array(X),
                                                ember.nd.array(Y)).numpy(), X + Y)
    vm["invoke_stateful"]("main")
    assert vm["get_num_outputs"]() == 1
    np.testing.assert_array_equal(vm["get_output"](0).numpy(), X + Y)


def test_benchmark_returns_timings() -> None:
    vm = VirtualMachine(make_exe(ADD), CPU)
    result = vm.benchmark(CPU, X, Y, repeat=2, number=3)
    assert len(result.results) == 2 and result.mean > 0
    result = vm.benchmark(CPU, func_name="main", repeat=1, number=1)  # stored inputs
    assert len(result.results) == 1


def test_arguments_are_checked_against_the_declared_types() -> None:
    vm = VirtualMachine(make_exe(ADD), CPU)
    with pytest.raises(TVMError, match=r"invoke\('main'\): expected 2 arguments \(x, y\), got 3"):
        vm.invoke("main", X, Y, Y)  # positional count, via set_input
    with pytest.raises(TVMError, match=r"argument 1 \(y\): expected float32\[4\], got "
                                       r"float32\[5\]"):
        vm.invoke("main", X, np.ones(5, "float32"))
    with pytest.raises(TVMError, match=r"argument 0 \(x\): expected float32\[4\], got "
                                       r"float64\[4\]"):
        vm.invoke("main", X.astype("float64"), Y)
    with pytest.raises(TVMError, match=r"argument 0 \(x\): expected float32\[4\], got "
                                       r"float32\[1, 4\]"):  # a tuple is a nested list
        vm.invoke("main", (X,), Y)
    with pytest.raises(TVMError, match=r"no parameter named 'z'; its parameters are 'x', 'y'"):
        vm.invoke("main", X, z=Y)
    with pytest.raises(TVMError, match=r"no function 'other'"):
        vm.invoke("other", X)
    with pytest.raises(TypeError, match=r"argument 0 \(x\): expected an array .* got dict"):
        vm.invoke("main", {}, Y)


def test_python_scalars_and_sequences_become_vm_values() -> None:
    vm = VirtualMachine(make_exe("main(a, b, c, d):\n    alloc_data $4 tag(0) [$0, $1, $2, "
                                 "$3]\n    ret $4\n"), CPU)
    out = vm.invoke("main", 3, 2.5, True, [np.int8(1), (X,)])
    assert [out[0].dtype, out[1].dtype, out[2].dtype] == ["int32", "float32", "bool"]
    assert isinstance(out[3], ADT) and out[3][0].dtype == "int8"
    np.testing.assert_array_equal(out[3][1][0].numpy(), X)


def test_profiler_report() -> None:
    from ember.runtime.profiler_vm import VirtualMachineProfiler

    vm = VirtualMachineProfiler(make_exe(SUM), CPU)
    report = vm.profile(np.int64(5), func_name="main")
    assert isinstance(report, Report)
    kernels = [c for c in report.calls if not c["Name"].startswith("VM::")]
    assert sorted(c["Name"] for c in kernels) == ["vm_add_i64"] * 5 + ["vm_sub_i64"] * 5
    assert kernels[0]["Argument Shapes"] == "int64[], int64[], int64[]"
    kinds = {c["Name"]: c for c in report.calls if c["Name"].startswith("VM::")}
    assert int(kinds["VM::AllocStorage"]["Count"]) == 10 and int(kinds["VM::If"]["Count"]) == 6
    assert "VM::Dispatch" in kinds and report.configuration["Executor"] == "VM"
    total = report.device_metrics[str(CPU)]["Duration (us)"]
    parts = sum(float(c["Duration (us)"]) for c in report.calls)
    assert isinstance(total, Duration) and parts == pytest.approx(float(total), rel=1e-6)
    assert vm.get_outputs()[0].numpy() == 15
    assert "vm_add_i64" in report.table() and "Name,Duration (us)" in report.csv()
    back = Report.from_json(report.json())
    assert [c["Name"] for c in back.calls] == [c["Name"] for c in report.calls]
    assert "vm_sub_i64" in vm.get_stat()
    with pytest.raises(TVMError, match="collectors are not supported"):
        vm.profile(np.int64(1), collectors=[object()])


def test_profiler_times_steps_by_its_clock() -> None:
    # ``clock`` (wall time by default; time.thread_time on a busy machine) is read around each
    # step, so setting it after construction counts: a clock that advances 1 s per read
    from ember.runtime.profiler_vm import VirtualMachineProfiler

    vm = VirtualMachineProfiler(make_exe(SUM), CPU)
    ticks = iter(range(10**6))
    vm.clock = lambda: float(next(ticks))
    report = vm.profile(np.int64(5), func_name="main")
    kernels = [c for c in report.calls if not c["Name"].startswith("VM::")]
    assert kernels and all(float(c["Duration (us)"]) == 1e6 for c in kernels)


def test_relay_era_import_paths() -> None:
    import ember as tvm

    assert tvm.runtime.vm.VirtualMachine is VirtualMachine
    assert tvm.runtime.profiler_vm.enabled()
    assert tvm.runtime.vm.Executable.load_exec is not None


def test_module_based_interface() -> None:
    from ember.runtime.vm import VMModule

    m = VMModule(make_exe(PAIR), CPU)
    assert m.get_num_inputs() == 2 and m.get_input_index("y") == 1
    m.set_input("x", X)
    m.set_input(1, Y)
    m.run()
    assert m.get_num_outputs() == 2
    np.testing.assert_array_equal(m.get_output(0).numpy(), X + Y)
    out = ember.nd.empty((4,), "float32")
    assert m.get_output(1, out=out) is out
    np.testing.assert_array_equal(out.numpy(), X * Y)
    y = ember.nd.array(Y)
    m["set_input"]("x", y)
    m["run"]()
    np.testing.assert_array_equal(m["get_output"](0).numpy(), Y + Y)
    assert m.get_input("x") is y
    with pytest.raises(TVMError, match="no input named 'img'; this model's inputs are 'x', 'y'"):
        m.set_input("img", X)
    with pytest.raises(TVMError, match="input index 5 out of range"):
        m.set_input(5, X)
    assert len(m.benchmark(CPU, repeat=1, number=1).results) == 1
    fresh = VMModule(make_exe(PAIR), CPU)
    with pytest.raises(TVMError, match="input 'x' is not set"):
        fresh.get_input("x")


# main(x) = x: the result is the input tensor itself.
IDENTITY = """
main(x):
    # param types = float32[4]
    ret $0
"""


def test_module_set_input_refills_its_own_buffer() -> None:
    from ember.runtime.vm import VMModule

    m = VMModule(make_exe(ADD), CPU)
    m.set_input(x=X, y=Y)
    first = m.get_input("x")
    for k in range(3):  # numpy inputs go into the buffer the first call made
        m.set_input(x=X + k, y=Y)
        m.run()
        assert m.get_input("x") is first
        np.testing.assert_array_equal(m.get_output(0).numpy(), X + k + Y)
    mine = ember.nd.array(X * 2)
    m.set_input(x=mine)  # an NDArray is used as it is, and never written by set_input
    m.set_input(x=X)
    assert m.get_input("x") is not mine
    np.testing.assert_array_equal(mine.numpy(), X * 2)
    before = m.get_input("x").numpy()
    with pytest.raises(TVMError, match="expected float32"):  # checked before anything changes
        m.set_input(x=X + 100, y=np.zeros(4, "int64"))
    np.testing.assert_array_equal(m.get_input("x").numpy(), before)


def test_module_set_input_never_changes_an_output_held_from_the_last_run() -> None:
    from ember.runtime.vm import VMModule

    m = VMModule(make_exe(IDENTITY), CPU)
    m.set_input(x=X)
    m.run()
    held = m.get_output(0)
    m.set_input(x=X + 5)  # the output views the input buffer: a new buffer is made
    np.testing.assert_array_equal(held.numpy(), X)
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), X + 5)

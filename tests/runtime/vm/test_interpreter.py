"""The VM running hand-assembled programs: kernels, recursion, closures, ADTs, control flow,
dynamic shapes, and the errors a program or its caller can cause."""
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
from ember.runtime.vm import Executable, VerificationError, VirtualMachine, VMClosure, VMError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _vm_testlib import ADD, DYNAMIC, SUM, make_exe, requires_cc  # noqa: E402

pytestmark = requires_cc
CPU = ember.cpu(0)


def vm_for(text: str, constants: tuple = (), **kwargs: object) -> VirtualMachine:
    return VirtualMachine(make_exe(text, constants), CPU, **kwargs)


def test_add_kernel_destination_passing() -> None:
    vm = vm_for(ADD)
    x, y = np.arange(4, dtype="float32"), np.full(4, 0.5, dtype="float32")
    out = vm.invoke("main", x, y)
    assert isinstance(out, ember.nd.NDArray)
    np.testing.assert_array_equal(out.numpy(), x + y)
    np.testing.assert_array_equal(vm.run(ember.nd.array(y), ember.nd.array(y)).numpy(), y + y)


@pytest.mark.parametrize("n", [0, 1, 10, 2000])
def test_recursion_sum(n: int) -> None:
    vm = vm_for(SUM)
    assert vm.invoke("main", np.int64(n)).numpy() == n * (n + 1) // 2
    assert vm.invoke("sum", np.int64(n)).numpy() == n * (n + 1) // 2


def test_runaway_recursion_is_an_error_not_a_crash() -> None:
    vm = vm_for(SUM)
    vm.max_call_depth = 50
    with pytest.raises(VMError, match="call depth exceeds 50"):
        vm.run(np.int64(100))
    assert vm.run(np.int64(40)).numpy() == 820  # the VM is still usable


CLOSURE = """
add_captured(c, x):
    load_consti $2 16
    alloc_storage $3 $2 64 float32 0
    load_consti $4 0
    alloc_tensor $5 $3 $4 [4] float32
    invoke_packed PackedFunc[vm_add_f32] (in: $0, $1, out: $5)
    ret $5
make_adder(c):
    alloc_closure $1 VMFunc[0]($0)
    ret $1
main(c, x):
    invoke $2 VMFunc[1]($0)
    invoke_closure $3 $2($1)
    invoke_closure $4 $2($3)
    ret $4
"""


def test_closure_captures_a_tensor() -> None:
    vm = vm_for(CLOSURE)
    c, x = np.full(4, 10, dtype="float32"), np.arange(4, dtype="float32")
    np.testing.assert_array_equal(vm.invoke("main", c, x).numpy(), x + 2 * c)
    clo = vm.invoke("make_adder", c)
    assert isinstance(clo, VMClosure) and clo.func_index == 0
    np.testing.assert_array_equal(clo.free_vars[0].numpy(), c)


def test_closure_called_with_wrong_arity() -> None:
    text = CLOSURE.replace("invoke_closure $3 $2($1)", "invoke_closure $3 $2($1, $1)")
    with pytest.raises(VMError, match="takes 2 arguments, the closure gives 1 captured \\+ 2"):
        vm_for(text).invoke("main", np.zeros(4, "float32"), np.zeros(4, "float32"))


ADT_PROGRAM = """
main(x, y):
    alloc_data $2 tag(3) [$0, $1]
    get_tag $3 $2
    get_field $4 $2[1]
    alloc_data $5 tag(0) [$3, $4, $2]
    ret $5
"""


def test_adt_construct_tag_and_fields() -> None:
    x, y = np.ones(2, "float32"), np.arange(3, dtype="int64")
    out = vm_for(ADT_PROGRAM).invoke("main", x, y)
    with pytest.raises(ValueError, match="read-only"):
        out[0].copyfrom(np.array(1, "int32"))  # tags are shared between runs
    assert isinstance(out, ADT) and out.tag == 0 and len(out) == 3
    assert out[0].numpy() == 3 and out[0].dtype == "int32"
    np.testing.assert_array_equal(out[1].numpy(), y)
    assert out[2].tag == 3 and [f.shape for f in out[2]] == [(2,), (3,)]


def test_tuple_arguments_and_flattened_kernel_arguments() -> None:
    # A tuple input arrives as an ADT; invoke_packed passes an ADT's fields one by one.
    text = ADD.replace("main(x, y):", "main(t):").replace("# param types = float32[4], "
                                                            "float32[4]", "")
    text = text.replace("(in: $0, $1, out: $5)", "(in: $0, out: $5)")
    vm = vm_for(text)
    a, b = np.ones(4, "float32"), np.arange(4, dtype="float32")
    np.testing.assert_array_equal(vm.invoke("main", (a, b)).numpy(), a + b)


def test_get_field_out_of_range() -> None:
    text = ADT_PROGRAM.replace("get_field $4 $2[1]", "get_field $4 $2[7]")
    with pytest.raises(VMError, match=r"cannot take field 7 of ADT with 2 fields"):
        vm_for(text).invoke("main", np.ones(1), np.ones(1))


def test_fatal_raises_naming_the_place() -> None:
    text = "main(x):\n    fatal\n"
    with pytest.raises(VMError, match=r"fatal instruction reached in functions\['main'\]"
                                      r".instructions\[0\]"):
        vm_for(text).run(np.ones(1))


MIN = """
main(a, b):
    load_consti $2 1
    alloc_storage $3 $2 64 bool 0
    load_consti $4 0
    alloc_tensor $5 $3 $4 [] bool
    invoke_packed PackedFunc[vm_less_i64] (in: $0, $1, out: $5)
    if $5 $2 @a_smaller @b_smaller
a_smaller:
    ret $0
b_smaller:
    ret $1
"""


@settings(max_examples=30, deadline=None)
@given(st.integers(-1000, 1000), st.integers(-1000, 1000))
def test_if_branches_on_a_kernel_computed_bool(a: int, b: int) -> None:
    assert vm_for(MIN).run(np.int64(a), np.int64(b)).numpy() == min(a, b)


def test_goto_loop_counts() -> None:
    # i = 0; while i != n: i = i + 1 -- a loop inside one frame, through goto.
    text = """
main(n):
    load_consti $1 0
    load_consti $2 1
    load_consti $3 8
    move $4 $1
loop:
    if $4 $0 @done @body
body:
    alloc_storage $5 $3 64 int64 0
    alloc_tensor $6 $5 $1 [] int64
    invoke_packed PackedFunc[vm_add_i64] (in: $4, $2, out: $6)
    move $4 $6
    kill_register $5
    goto @loop
done:
    ret $4
"""
    vm = vm_for(text)
    assert vm.run(np.int64(500)).numpy() == 500





@pytest.mark.parametrize("n", [6, 12])
def test_dynamic_shapes_shape_of_alloc_reg_reshape(n: int) -> None:
    vm = vm_for(DYNAMIC, (np.array([2, n // 2], dtype="int64"),))
    x = np.arange(n, dtype="float32")
    out = vm.run(x)
    assert out.shape == (2, n // 2)
    np.testing.assert_array_equal(out.numpy(), (x + x).reshape(2, n // 2))


def test_reshape_to_a_wrong_size_names_both() -> None:
    vm = vm_for(DYNAMIC, (np.array([4, 4], dtype="int64"),))
    with pytest.raises(VMError, match=r"cannot reshape tensor float32\[6\] to \[4, 4\]"):
        vm.run(np.arange(6, dtype="float32"))


def test_alloc_tensor_outside_its_storage() -> None:
    # A constant size: the verifier sees it before anything runs.
    text = ADD.replace("load_consti $2 16", "load_consti $2 12")
    with pytest.raises(VerificationError, match=r"instructions\[3\] \(AllocTensor\): a "
                                                r"float32\[4\] tensor \(16 bytes\) at offset 0 "
                                                r"does not fit in the 12-byte storage block"):
        vm_for(text)
    # A size known at run time only (here: 12 on one path, 16 on the other): the step checks.
    text = ADD.replace("    load_consti $2 16\n", "    load_consti $2 12\n    if $2 $2 2 1\n"
                                                  "    load_consti $2 16\n")
    with pytest.raises(VMError, match="a tensor of 16 bytes at offset 0 does not fit in a "
                                      "storage block of 12 bytes"):
        vm_for(text).run(np.ones(4, "float32"), np.ones(4, "float32"))


def test_kernel_error_carries_vm_context() -> None:
    text = ADD.replace("PackedFunc[vm_add_f32]", "PackedFunc[vm_fail]")
    with pytest.raises(VMError) as info:
        vm_for(text).run(np.ones(4, "float32"), np.ones(4, "float32"))
    msg = str(info.value)
    assert "vm_fail: this kernel always fails" in msg
    assert "while executing functions['main'].instructions[4]: invoke_packed" in msg
    assert "(kernel 'vm_fail')" in msg and "$0 = float32[4]" in msg


def test_error_in_a_callee_shows_the_call_chain() -> None:
    text = SUM.replace("PackedFunc[vm_add_i64]", "PackedFunc[vm_fail]")
    with pytest.raises(VMError) as info:
        vm_for(text).run(np.int64(3))
    assert info.value.args[0].count("called from functions['sum'].instructions[8]") == 2
    assert "called from functions['main'].instructions[0]" in str(info.value)


def test_missing_kernel_is_named_at_creation() -> None:
    exe = Executable.from_functions("main(x):\n    ret $0\n", primitive_ops=["no_such_kernel"],
                                    lib=make_exe(ADD).lib)
    with pytest.raises(TVMError, match=r"kernel 'no_such_kernel' \(PackedFunc\[0\]\) not found"):
        VirtualMachine(exe, CPU)
    exe = Executable.from_functions("main(x):\n    ret $0\n", primitive_ops=["k"])
    with pytest.raises(TVMError, match="the executable has none"):
        VirtualMachine(exe, CPU)


def test_python_kernels_work_too() -> None:
    from ember.runtime.module import PyModule

    def add(a: ember.nd.NDArray, b: ember.nd.NDArray, out: ember.nd.NDArray) -> None:
        out.copyfrom(a.numpy() + b.numpy())

    text = ADD.replace("PackedFunc[vm_add_f32]", "PackedFunc[0]")
    exe = Executable.from_functions(text, primitive_ops=["add"], lib=PyModule({"add": add}))
    np.testing.assert_array_equal(VirtualMachine(exe, CPU).run(np.ones(4, "float32"),
                                                                np.ones(4, "float32")).numpy(), 2)


def test_non_cpu_devices_are_refused() -> None:
    with pytest.raises(TVMError, match="not supported"):
        VirtualMachine(make_exe(ADD), ember.cuda(0))
    exe = make_exe(ADD, virtual_devices=[ember.cuda(0)])
    with pytest.raises(TVMError, match="virtual device 0 is cuda\\(0\\)"):
        VirtualMachine(exe, CPU)

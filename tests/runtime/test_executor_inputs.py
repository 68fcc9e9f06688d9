"""The executors' argument checks, one error path each: the shared input rules
(``input_array``), ``out=``, whole-call atomicity of ``set_input``/``load_params``/
``share_params``/``benchmark``/``run``, the factories (wrong device, wrong module name, bad
params), the VM's dynamic shapes and allocation bound, and module function lookup."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import ember
from ember import relay
from ember.runtime.dtype import DataType
from ember.runtime.errors import (
    ArgumentError,
    ArgumentIndexError,
    ArgumentTypeError,
    ArtifactError,
    FunctionNotFoundError,
    TVMError,
)
from ember.runtime.executor_common import input_array
from ember.runtime.ndarray import NDArray
from ember.runtime.vm import VirtualMachine
from ember.testing import find_c_compiler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _executor_fuzz import factory, reference  # noqa: E402
from _threads import errors_in_threads  # noqa: E402

needs_cc = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")
A = np.arange(6, dtype="float32").reshape(2, 3)
B = np.array([1, 2, 3], "float32")
C = np.ones((2, 3), "int32")
KINDS = ["graph", "aot-packed", "aot-c", "vm"]


# ---- the conversion rules (no compiler needed) ------------------------------------------------
@pytest.mark.parametrize("value", [
    A, A.T.copy().T, np.asfortranarray(A), A.astype(">f4"), np.broadcast_to(A[0], (2, 3)),
    A.tolist(), [[0, 1, 2], [3, 4, 5]], ember.nd.array(A), np.array(A, copy=True)[::1],
])
def test_accepted_values(value):
    out = input_array(value, "float32", (2, 3), "set_input('a')")
    np.testing.assert_array_equal(np.asarray(out, "float32"), np.asarray(value, "float32"))


def test_read_only_and_zero_stride_arrays_are_read_not_copied_first():
    ro = A.copy()
    ro.flags.writeable = False
    assert input_array(ro, "float32", (2, 3), "x") is ro
    view = np.broadcast_to(B, (2, 3))
    assert input_array(view, "float32", (-1, 3), "x") is view  # -1: any extent


@pytest.mark.parametrize("value, error, message", [
    (A.astype("float64"), ArgumentError, r"expected float32\[2, 3\], got float64\[2, 3\]"),
    (B, ArgumentError, r"expected float32\[2, 3\], got float32\[3\]"),  # never broadcast
    (1.0, ArgumentError, r"got float32\[\]"),
    ([[1, 2], [3, 4]], ArgumentError, r"got float32\[2, 2\]"),
    ([[1, 2, 3], [4]], ArgumentError, "cannot convert the list"),
    (None, ArgumentTypeError, "expected an array .* got NoneType"),
    ("1.5", ArgumentTypeError, "got str"),
    (b"abc", ArgumentTypeError, "got bytes"),
    ({"a": 1}, ArgumentTypeError, "got dict"),
    (A.astype(object), ArgumentTypeError, "cannot use an array of object"),
    (A.astype("complex64"), ArgumentTypeError, "cannot use an array of complex64"),
    ([["a", "b", "c"]] * 2, ArgumentTypeError, "list of strings"),
    ([[1e300] * 3] * 2, ArgumentError, "overflow float32"),
    ([[2**40 + 1] * 3] * 2, ArgumentError, "out of the range of float32"),
    (NDArray(A.copy(), ember.cuda(0), DataType("float32")), ArgumentError, "is on cuda"),
    (ember.nd.array(A.astype("float16")), ArgumentError, "got float16"),
])
def test_refused_values(value, error, message):
    with pytest.raises(error, match=message):
        input_array(value, "float32", (2, 3), "set_input('a')")


@pytest.mark.parametrize("value, message", [
    ([[1.5, 2, 3], [4, 5, 6]], "float values would be truncated to int32"),
    ([[2**31, 0, 0], [0, 0, 0]], "out of the range of int32"),
    ([[10**30, 0, 0], [0, 0, 0]], "out of the range of int32"),
    (A.astype("int64"), r"expected int32\[2, 3\], got int64\[2, 3\]"),
])
def test_integer_inputs_take_no_lossy_values(value, message):
    with pytest.raises(ArgumentError, match=message):
        input_array(value, "int32", (2, 3), "set_input('c')")
    assert input_array([[1, 2, 3], [True, 0, -7]], "int32", (2, 3), "c").dtype == np.int32


# ---- executors --------------------------------------------------------------------------------
def _executor(kind):
    return factory(kind)["default"](ember.cpu(0))


@needs_cc
@pytest.mark.parametrize("kind", KINDS)
def test_messages_name_the_input_by_name_and_index(kind):
    m = _executor(kind)
    with pytest.raises(ArgumentError, match=r"set_input\('b'\): expected float32\[3\], got "
                                            r"float64\[3\] \(input 1 of 3\)"):
        m.set_input(1, B.astype("float64"))
    with pytest.raises(ArgumentError, match=r"set_input: no input named 'B'; this model's inputs "
                                            r"are 'a', 'b', 'c'"):
        m.set_input("B", B)
    with pytest.raises(ArgumentIndexError, match=r"input index -1 out of range \(this model has "
                                                 r"3 inputs\)"):
        m.get_input(-1)


@needs_cc
@pytest.mark.parametrize("kind", KINDS)
def test_a_rejected_call_changes_no_input(kind):
    m = _executor(kind)
    m.set_input(a=A, b=B, c=C)
    with pytest.raises(ArgumentError, match=r"set_input\('c'\)"):
        m.set_input(a=A + 100, b=B + 100, c=C.astype("int64"))  # the last one is bad
    with pytest.raises(ArgumentError, match="given twice"):
        m.set_input("a", A + 100, a=A)
    with pytest.raises(ArgumentError, match="without an input name"):
        m.set_input(None, A)
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), reference({"a": A, "b": B, "c": C}))


@needs_cc
@pytest.mark.parametrize("kind", ["graph", "aot-packed"])
def test_out_arguments_are_checked(kind):
    m = _executor(kind)
    m.set_input(a=A, b=B, c=C)
    m.run()
    with pytest.raises(ArgumentError, match=r"get_output: out is float64\[2, 3\], expected "
                                            r"float32\[2, 3\]"):
        m.get_output(0, ember.nd.empty((2, 3), "float64"))
    with pytest.raises(ArgumentTypeError, match="out must be an NDArray, got ndarray"):
        m.get_output(0, np.empty((2, 3), "float32"))
    with pytest.raises(ArgumentError, match=r"get_input: out is float32\[2\]"):
        m.get_input("b", ember.nd.empty((2,), "float32"))
    out = m.get_output(0, ember.nd.empty((2, 3), "float32"))
    np.testing.assert_array_equal(out.numpy(), reference({"a": A, "b": B, "c": C}))


@needs_cc
@pytest.mark.parametrize("kind", ["graph", "aot-packed", "vm"])
def test_benchmark_checks_its_arguments_before_setting_inputs(kind):
    m = _executor(kind)
    m.set_input(a=A, b=B, c=C)
    for bad, error in [({"number": 0}, ArgumentError), ({"repeat": "2"}, ArgumentTypeError),
                       ({"min_repeat_ms": -1}, ArgumentError)]:
        with pytest.raises(error):
            m.benchmark(ember.cpu(0), a=A + 1, **bad)
        np.testing.assert_array_equal(m.get_input("a").numpy(), A)


@needs_cc
def test_graph_params_are_checked_whole():
    m = _executor("graph")
    m.set_input(a=A, b=B, c=C)
    with pytest.raises(ArgumentError, match=r"load_params\('c'\): expected int32"):
        m.load_params({"a": A + 1, "c": C.astype("float32")})
    with pytest.raises(ArgumentTypeError, match="expected a dict of arrays or the params bytes"):
        m.load_params([A])
    with pytest.raises(ArtifactError):
        m.load_params(b"not params")
    np.testing.assert_array_equal(m.get_input("a").numpy(), A)
    other = _executor("graph")
    with pytest.raises(ArgumentError, match="no input named 'w'"):
        m.share_params(other, ember.runtime.save_param_dict({"a": A, "w": B}))
    with pytest.raises(ArgumentTypeError, match="expected the params bytes, got dict"):
        m.share_params(other, {"a": A})
    with pytest.raises(ArgumentError, match=r"expected \(device_type, device_id, name0"):
        m.run_from_inputs(1, 0, "a")
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), reference({"a": A, "b": B, "c": C}))


@needs_cc
def test_debug_executor_checks_before_running():
    m = factory("graph").debug_create("default", ember.cpu(0))
    m.set_input(a=A, b=B, c=C)
    with pytest.raises(ArgumentError, match="run: number must be >= 1, got 0"):
        m.run(number=0, a=A + 1, display=False)
    np.testing.assert_array_equal(m.get_input("a").numpy(), A)
    with pytest.raises(ArgumentTypeError, match="run_individual: repeat must be an int"):
        m.run_individual(repeat=1.5)
    with pytest.raises(ArgumentError, match="debug_get_output: out is float64"):
        m.debug_get_output(3, ember.nd.empty((2, 3), "float64"))
    with pytest.raises(ArgumentTypeError, match="node must be an int or a name, got float"):
        m.debug_get_output(1.0)


# ---- factories --------------------------------------------------------------------------------
@needs_cc
@pytest.mark.parametrize("kind", KINDS)
def test_factory_wrong_device_and_module_name(kind):
    f = factory(kind)
    with pytest.raises(ArgumentTypeError, match=r"expected a Device.*got str"):
        f["default"]("cpu")
    with pytest.raises(ArgumentError, match="cuda.* not supported"):
        f["default"](ember.cuda(0))
    with pytest.raises(FunctionNotFoundError, match=r"no module or function named 'mod'; this "
                                                    r"factory holds module 'default'") as info:
        f["mod"]
    assert isinstance(info.value, AttributeError)  # as the Relay-era API raised
    with pytest.raises(ArgumentTypeError, match="named by str, got int"):
        f[0]


@needs_cc
def test_factory_params_are_checked():
    from ember.runtime.executor_factory import GraphExecutorFactoryModule

    f = factory("graph")
    with pytest.raises(ArgumentTypeError, match="params are named by str, got int"):
        GraphExecutorFactoryModule(f.graph, f.lib, params={0: A})
    with pytest.raises(ArgumentError, match="param 'a': .*object"):
        GraphExecutorFactoryModule(f.graph, f.lib, params={"a": A.astype(object)})
    with pytest.raises(ArgumentTypeError, match="params must be a dict"):
        GraphExecutorFactoryModule(f.graph, f.lib, params=[A])
    bad = GraphExecutorFactoryModule(f.graph, f.lib, params={"w": A})
    with pytest.raises(ArgumentError, match="no input named 'w'"):
        bad["default"](ember.cpu(0))


# ---- the VM -----------------------------------------------------------------------------------
@needs_cc
def test_vm_construction_errors():
    exe = factory("vm").get_executor()
    with pytest.raises(ArgumentError, match="memory_cfg must be"):
        VirtualMachine(exe, ember.cpu(0), memory_cfg="big")
    with pytest.raises(ArgumentTypeError, match="expected a Device or a list of them, got str"):
        VirtualMachine(exe, "cpu")
    with pytest.raises(ArgumentTypeError, match="expected an Executable, got int"):
        VirtualMachine(3, ember.cpu(0))
    vm = VirtualMachine(exe, ember.cpu(0))
    with pytest.raises(ArgumentError, match="invoke: no function 'mian'; the executable has "
                                            "'main'"):
        vm.invoke("mian")
    with pytest.raises(ArgumentTypeError, match="the function is named by a str, got int"):
        vm.invoke(0)
    with pytest.raises(ArgumentTypeError, match="get_input_index: expected a name"):
        vm.get_input_index(0)


@needs_cc
def test_vm_errors_name_the_dynamic_argument_and_bound_allocations(monkeypatch):
    x = relay.var("x", shape=(1, 3, relay.Any(), relay.Any()))
    mod = ember.IRModule.from_expr(relay.Function([x], relay.nn.max_pool2d(x, pool_size=(3, 3))))
    vm = VirtualMachine(relay.vm.compile(mod, target="llvm"), ember.cpu(0))
    with pytest.raises(ArgumentError, match=r"argument 0 \(x\): expected float32\[1, 3, \?, \?\]"
                                            r", got float32\[1, 3, 4\]"):
        vm.invoke("main", np.ones((1, 3, 4), "float32"))
    with pytest.raises(TVMError, match=r"x = float32\[1, 3, 1, 1\] \(declared "
                                       r"float32\[1, 3, \?, \?\]\)"):
        vm.invoke("main", np.ones((1, 3, 1, 1), "float32"))  # a 3x3 window does not fit
    monkeypatch.setattr(type(vm.allocator), "max_block_bytes", 1000)
    with pytest.raises(TVMError, match="more than this machine's 1000 bytes of memory"):
        vm.invoke("main", np.ones((1, 3, 40, 40), "float32"))
    monkeypatch.undo()
    out = vm.invoke("main", np.ones((1, 3, 5, 5), "float32"))
    assert out.shape == (1, 3, 3, 3)


@needs_cc
def test_vm_module_interface_errors():
    m = _executor("vm")
    with pytest.raises(TVMError, match="get_input: input 'a' is not set"):
        m.get_input("a")
    with pytest.raises(TVMError, match="no outputs; call invoke_stateful first"):
        m.get_output(0)
    m.set_input(a=A, b=B, c=C)
    m.run()
    with pytest.raises(ArgumentIndexError, match=r"get_output: index 1 out of range"):
        m.get_output(1)
    with pytest.raises(ArgumentError, match=r"get_output: out is float32\[3\]"):
        m.get_output(0, ember.nd.empty((3,), "float32"))


def test_module_function_lookup_errors():
    mod = ember.runtime.Module()
    with pytest.raises(FunctionNotFoundError, match="has no function named 'f'"):
        mod["f"]
    with pytest.raises(ArgumentTypeError, match="named by str, got NoneType"):
        mod.get_function(None)


@pytest.mark.parametrize("kind", ["graph", "aot-packed"])
def test_one_module_per_thread_from_one_factory(kind):
    """docs/graph_executor.md, Threads: each thread creates its own module from one factory;
    four threads running their own inputs at once each get their own results."""
    from ember.runtime.aot_executor import AotModule

    lib = factory(kind)
    wrap = ember.contrib.graph_executor.GraphModule if kind == "graph" else AotModule

    def work(seed: int) -> str | None:
        m = wrap(lib["default"](ember.cpu(0)))
        rng = np.random.default_rng(seed)
        for _ in range(100):
            values = {"a": rng.random((2, 3), dtype="float32"),
                      "b": rng.random(3, dtype="float32"),
                      "c": rng.integers(0, 4, (2, 3)).astype("int32")}
            for name, v in values.items():
                m.set_input(name, v)
            m.run()
            if not np.allclose(m.get_output(0).numpy(), reference(values), rtol=1e-6):
                return f"thread {seed}"
        return None

    assert errors_in_threads(work) == []

"""The AOT executor's run side: the module-based interface (set_input by name, index or
keywords; get_input/get_output/info; benchmark), its errors (names, shapes, dtypes, indices, an
input never set), ``tvm.runtime.executor.AotModule``, and the compiled entry points called
directly: the packed ``tvmgen_<mod>_run`` with wrong arguments, and the C interface's
``tvmgen_<mod>_run(struct inputs*, struct outputs*)`` through ctypes, NULL pointers included."""
from __future__ import annotations

import ctypes
import functools
import os
from pathlib import Path

import numpy as np
import pytest
from _aot_util import build, mlp, needs_cc

import ember as tvm
from ember.runtime.aot_executor import AotExecutor, AotModule, create
from ember.runtime.errors import ArtifactError, TVMError

pytestmark = needs_cc


@functools.cache
def factories():
    mod, params = mlp(batch=1, features=8, hidden=(16,), classes=4)
    return {c: build(mod, c, params, mod_name="net") for c in ("cpp-cpacked", "crt-c")}


@pytest.fixture(params=["cpp-cpacked", "crt-c"])
def executor(request):
    return factories()[request.param]["net"](tvm.cpu(0))


def _data(seed=0):
    return np.random.default_rng(seed).standard_normal((1, 8)).astype("float32")


def test_set_input_by_name_index_and_keywords(executor):
    executor.set_input("data", _data(1))
    executor.run()
    first = executor.get_output(0).numpy()
    executor.set_input(0, tvm.nd.array(_data(2)))
    executor.run()
    assert not np.array_equal(first, executor.get_output(0).numpy())
    executor.run(data=_data(1))
    np.testing.assert_array_equal(first, executor.get_output(0).numpy())
    np.testing.assert_array_equal(executor.get_input("data").numpy(), _data(1))
    out = tvm.nd.empty((1, 4), "float32")
    executor.get_output(0, out)
    np.testing.assert_array_equal(out.numpy(), first)


def test_introspection(executor):
    assert executor.get_num_inputs() == 1 and executor.get_num_outputs() == 1
    assert executor.get_input_index("data") == 0 and executor.get_input_index("nope") == -1
    assert executor.get_input_name(0) == "data"
    assert executor.get_input_info() == ({"data": (1, 8)}, {"data": "float32"})
    assert executor.get_output_info() == ({"output": (1, 4)}, {"output": "float32"})
    meta = executor.get_model_metadata()
    assert meta.module_name == "net" and meta.main.inputs[0].relay_name_hint == "data"
    assert '"module_name":"net"' in executor["get_model_metadata"]()
    assert executor["get_num_outputs"]() == 1  # also reachable as packed functions


def test_run_refuses_an_input_never_set(executor):
    with pytest.raises(TVMError, match=r"run: input 'data' has not been set; call "
                       r"set_input\('data', value\) first"):
        executor.run()


def test_input_written_through_get_input_counts_as_set(executor):
    executor.get_input("data").copyfrom(_data(3))
    executor.run()  # as the graph executor and the C AOT executor accept it
    through_view = executor.get_output(0).numpy()
    fresh = factories()["cpp-cpacked"]["net"](tvm.cpu(0))
    fresh.set_input("data", _data(3))
    fresh.run()
    np.testing.assert_array_equal(through_view, fresh.get_output(0).numpy())
    copy = tvm.nd.empty((1, 8), "float32")
    other = factories()["cpp-cpacked"]["net"](tvm.cpu(0))
    other.get_input("data", copy)  # a copy out does not set the input
    with pytest.raises(TVMError, match="input 'data' has not been set"):
        other.run()


@pytest.mark.parametrize("key, value, message", [
    ("img", np.zeros((1, 8), "float32"), (r"set_input: no input named 'img'; this model's "
                                         r"inputs are 'data'")),
    ("data", np.zeros((1, 8), "float64"), (r"set_input\('data'\): expected float32\[1, 8\], got "
                                          r"float64\[1, 8\]")),
    ("data", np.zeros((2, 8), "float32"), (r"set_input\('data'\): expected float32\[1, 8\], got "
                                          r"float32\[2, 8\]")),
    (3, np.zeros((1, 8), "float32"), (r"set_input: input index 3 out of range \(this model has "
                                     r"1 input\)")),
    ("data", "text", r"set_input\('data'\): expected an array .* got str \(input 0 of 1\)"),
])
def test_set_input_errors(executor, key, value, message):
    with pytest.raises(TVMError, match=message):
        executor.set_input(key, value)


def test_get_output_errors(executor):
    with pytest.raises(IndexError, match=r"get_output: index 1 out of range \(this model has 1 "
                       r"output\)"):
        executor.get_output(1)
    with pytest.raises(TypeError, match="index must be an int"):
        executor.get_output("output")


def test_benchmark(executor):
    executor.set_input("data", _data())
    result = executor.benchmark(number=3, repeat=2)
    assert len(result.results) == 2 and result.min > 0
    assert executor.benchmark(number=2, repeat=1, end_to_end=True, data=_data()).mean > 0


def test_aot_module_wrapper_and_aliases():
    import subprocess
    import sys

    code = ("import ember as tvm; r = tvm.runtime; "
            "assert r.executor.AotModule is r.executor.aot_executor.AotModule "
            "is r.aot_executor.AotModule")
    root = str(Path(__file__).resolve().parents[3])
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60,  # fresh: lazy names
                   env={**os.environ, "PYTHONPATH": root})
    m = tvm.runtime.executor.AotModule(factories()["cpp-cpacked"]["default"](tvm.cpu(0)))
    m.set_input("data", _data())
    m.run()
    assert m.get_output(0).shape == (1, 4) and AotModule(m).module is m.module
    with pytest.raises(TypeError, match="expected an AOT executor Module"):
        AotModule(42)


def test_create_from_a_library_reads_its_metadata():
    factory = factories()["crt-c"]
    with pytest.raises(TVMError, match="constant 'p0'.*missing from the params"):
        create(factory.get_lib(), tvm.cpu(0), "net")  # params not linked: the factory has them
    m = AotExecutor(factory.get_lib(), tvm.cpu(0), None, factory.get_params(), "net")
    m.run(data=_data())
    with pytest.raises(ArtifactError, match="has no tvmgen_other_get_metadata"):
        create(factory.get_lib(), tvm.cpu(0), "other")


# -- the compiled entry points, called directly ----------------------------------------------------
def test_packed_entry_checks_its_arguments():
    factory = factories()["cpp-cpacked"]
    run = factory.get_lib()["tvmgen_net_run"]
    meta = factory.get_model_metadata()
    data, out = tvm.nd.array(_data()), tvm.nd.empty((1, 4), "float32")
    pool = tvm.nd.empty((meta.constant_pool_bytes,), "uint8")
    with pytest.raises(TVMError, match=r"tvmgen_net_run: expected 3 arguments \(data, output, "
                       r"constants\) and optionally a workspace"):
        run(data, out)
    with pytest.raises(TVMError, match=r"tvmgen_net_run: argument 0 \(data\): shape mismatch "
                       r"\(expected float32\[1, 8\]\)"):
        run(tvm.nd.empty((2, 8), "float32"), out, pool)
    with pytest.raises(TVMError, match=r"argument 1 \(output\): dtype mismatch"):
        run(data, tvm.nd.empty((1, 4), "int32"), pool)
    with pytest.raises(TVMError, match=r"argument 0 \(data\): expected a tensor"):
        run(1, out, pool)
    with pytest.raises(TVMError, match=r"argument 2 \(constants\): too small \(expected "
                       rf"uint8\[>= {meta.constant_pool_bytes}\]"):
        run(data, out, tvm.nd.empty((8,), "uint8"))
    with pytest.raises(TVMError, match=r"argument 3 \(workspace\): too small"):
        run(data, out, pool, tvm.nd.empty((1,), "uint8"))
    run(data, out, pool)  # no workspace: the entry takes one from TVMBackendAllocWorkspace


def _c_entry(factory):
    meta = factory.get_model_metadata()
    lib = factory.get_lib()
    entry = lib.get_function(meta.symbol("run"))
    run = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)(entry.address)
    set_constants = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_uint64)(
        lib.get_function(meta.symbol("set_constants")).address)

    class Inputs(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p)]

    class Outputs(ctypes.Structure):
        _fields_ = [("output", ctypes.c_void_p)]

    return run, set_constants, Inputs, Outputs, entry._take_error


def test_c_entry_through_ctypes_and_null_pointers():
    factory = factories()["crt-c"]
    run, set_constants, Inputs, Outputs, take_error = _c_entry(factory)
    data = np.ascontiguousarray(_data(7))
    out = np.zeros((1, 4), "float32")
    ins, outs = Inputs(data.ctypes.data), Outputs(out.ctypes.data)
    # the executor made for the same library sets the constant pool (kept with the library)
    reference = factories()["crt-c"]["net"](tvm.cpu(0))
    reference.run(data=data)
    assert run(ctypes.byref(ins), ctypes.byref(outs)) == 0
    np.testing.assert_array_equal(out, reference.get_output(0).numpy())
    assert run(None, ctypes.byref(outs)) != 0
    assert b"inputs and outputs must not be NULL" in take_error()
    assert run(ctypes.byref(Inputs(None)), ctypes.byref(outs)) != 0
    assert take_error() == b"tvmgen_net_run: input data is NULL"
    assert run(ctypes.byref(ins), ctypes.byref(Outputs(None))) != 0
    assert take_error() == b"tvmgen_net_run: output output is NULL"
    assert set_constants(None, 0) != 0
    assert b"tvmgen_net_set_constants: the pool must hold" in take_error()

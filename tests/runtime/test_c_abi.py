"""Hand-written C PackedFuncs called from Python, and Python called from C."""
from __future__ import annotations

import os
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember.runtime.module import CSourceModule

# the shared helper sits beside this file (also under --import-mode=importlib)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ffi_testlib import C_SOURCE, requires_cc  # noqa: E402

pytestmark = requires_cc


@pytest.fixture(scope="module")
def lib() -> ember.runtime.Module:
    mod = CSourceModule(C_SOURCE)
    mod["nop"]  # compile now, once for the whole file
    return mod


def vec(values, dtype="float32"):
    return ember.nd.array(np.asarray(values, dtype=dtype))


def test_add_ndarrays_matches_numpy(lib):
    a, b = np.random.rand(100).astype("float32"), np.random.rand(100).astype("float32")
    out = ember.nd.empty((100,), "float32")
    assert lib["add_f32"](vec(a), vec(b), out) is None
    np.testing.assert_allclose(out.numpy(), a + b, rtol=1e-6)


def test_entry_function_is_named_by_tvm_main(lib):
    out = ember.nd.empty((2,), "float32")
    lib(vec([1, 2]), vec([3, 4]), out)
    np.testing.assert_array_equal(out.numpy(), [4, 6])


def test_c_rejects_wrong_dtype_and_shape_with_message(lib):
    out = ember.nd.empty((3,), "float32")
    with pytest.raises(ember.TVMError, match=r"add_f32: argument 1 \(b\): expected float32"):
        lib["add_f32"](vec([1, 2, 3]), vec([1, 2, 3], "int32"), out)
    with pytest.raises(ember.TVMError, match=r"argument 0 \(a\): expected ndim 1, got 2"):
        lib["add_f32"](vec([[1.0]]), vec([1]), out)
    with pytest.raises(ember.TVMError, match="same length"):
        lib["add_f32"](vec([1, 2]), vec([1, 2, 3]), out)
    with pytest.raises(ember.TVMError, match=r"argument 2 \(out\): expected a tensor, got type"):
        lib["add_f32"](vec([1]), vec([1]), 5)


def test_c_error_without_message_still_raises(lib):
    with pytest.raises(ember.TVMError, match="fail_silently: returned an error code"):
        lib["fail_silently"]()
    with pytest.raises(ember.TVMError, match="^custom message$"):
        lib["raise_msg"]("custom message")


def test_symbols_that_are_not_packed_functions_are_refused(lib):
    for name in ("some_data", "printf", "TVMBackendAllocWorkspace", "no_such_function"):
        with pytest.raises(AttributeError, match=name):
            lib[name]


def test_python_types_map_to_type_codes(lib):
    codes = [(1, 0), (True, 0), (2.0, 2), (None, 4), ("s", 11), (b"b", 12)]
    for value, code in codes:
        assert lib["type_code"](value) == code
    assert lib["type_code"](ember.DataType("int8")) == 5
    assert lib["type_code"](ember.cpu(0)) == 6
    assert lib["type_code"](vec([1])) == 7
    assert lib["type_code"](lambda: 0) == 10
    assert lib["type_code"](lib) == 9
    assert lib["type_code"]([1, 2]) == 8


def test_c_returns_string_and_arguments(lib):
    assert lib["hello"]() == "hello from C"
    a = vec([1, 2])
    assert lib["echo"](a) is a
    assert lib["echo"](ember.DataType("float32x4")) == ember.DataType("float32x4")
    assert lib["echo"](ember.cpu(3)) == ember.cpu(3)


int64s = st.integers(min_value=-(2**63), max_value=2**63 - 1)
c_strings = st.text(alphabet=st.characters(blacklist_categories=("Cs",),
                                           blacklist_characters="\x00"))
scalars = int64s | st.floats(allow_nan=False) | c_strings | st.binary() | st.none()


@settings(max_examples=150, deadline=None)
@given(scalars)
def test_c_echo_round_trips_scalars(lib, value):
    out = lib["echo"](value)
    assert out == value and type(out) is type(value)


@settings(max_examples=100, deadline=None)
@given(scalars)
def test_python_echo_called_from_c_round_trips(lib, value):
    assert lib["call_cb"](lambda x: x, value) == value


def test_unrepresentable_values_are_rejected(lib):
    with pytest.raises(OverflowError, match="echo: argument 0"):
        lib["echo"](2**63)
    with pytest.raises(ValueError, match=r"echo: argument 0 \(str\) is not valid UTF-8"):
        lib["echo"]("\ud800")


def test_c_calls_registered_python_function(lib):
    ember.register_func("test_c_abi.mul", lambda x, y: x * y, override=True)
    try:
        assert lib["call_global"]("test_c_abi.mul", 6, 7) == 42
        assert lib["call_global"]("test_c_abi.mul", "ab", 3) == "ababab"
    finally:
        ember.remove_global_func("test_c_abi.mul")


def test_c_lookup_of_missing_function_fails_cleanly(lib):
    with pytest.raises(ember.TVMError, match="cannot find function 'no.such.func'"):
        lib["call_global"]("no.such.func")


def test_c_calls_own_function_through_environment(lib):
    assert lib["call_global"]("hello") == "hello from C"


def test_python_callback_passed_into_c(lib):
    seen = []
    result = lib["call_cb"](lambda *args: seen.append(args) or sum(args), 1, 2, 3)
    assert result == 6 and seen == [(1, 2, 3)]
    arr = vec([1, 2, 3])
    got = lib["call_cb"](lambda t: t.numpy().sum(), arr)
    assert got == 6.0


def test_callback_receives_tensor_view_sharing_memory(lib):
    arr = vec([1, 2, 3])

    def double(t):
        t[:] = t.numpy() * 2

    lib["call_cb"](double, arr)
    np.testing.assert_array_equal(arr.numpy(), [2, 4, 6])


def test_python_exception_in_callback_reraised_with_original_type(lib):
    class Custom(Exception):
        pass

    def bad():
        raise ValueError("bad value 17")

    with pytest.raises(ValueError, match="bad value 17"):
        lib["call_cb"](bad)

    def custom():
        raise Custom("mine")

    with pytest.raises(Custom, match="mine"):
        lib["call_cb"](custom)


def test_nested_callbacks_and_errors(lib):
    # Python -> C -> Python -> C -> Python, three deep, re-entering the same C function.
    def level(depth):
        if depth == 0:
            return 100
        return lib["call_cb"](level, depth - 1) + 1

    assert lib["call_cb"](level, 3) == 103

    def deep_fail(depth):
        if depth == 0:
            raise KeyError("deep")
        return lib["call_cb"](deep_fail, depth - 1)

    with pytest.raises(KeyError, match="deep") as info:
        lib["call_cb"](deep_fail, 3)
    if hasattr(info.value, "__notes__"):
        assert info.value.__notes__ == ["(passed up through compiled function call_cb)"] * 4


def test_c_that_handles_callback_error_does_not_leak_it(lib):
    def bad():
        raise ValueError("handled in C")

    assert lib["catch_cb"](bad) == "caught: ValueError: handled in C"
    # a later, unrelated C error is reported as itself
    with pytest.raises(ember.TVMError, match="^later$"):
        lib["raise_msg"]("later")
    assert lib["catch_cb"](bad) == "caught: ValueError: handled in C"
    with pytest.raises(ember.TVMError, match="without setting an error message"):
        lib["fail_silently"]()


def test_c_error_inside_callback_propagates_as_tvmerror(lib):
    with pytest.raises(ember.TVMError, match="inner C failure"):
        lib["call_cb"](lambda: lib["raise_msg"]("inner C failure"))


def test_wrong_argument_type_names_position_and_type(lib):
    with pytest.raises(TypeError, match=r"echo: argument 0 has type builtins.object"):
        lib["echo"](object())
    with pytest.raises(TypeError, match=r"type_code: argument 0 \(list\).*numpy.ndarray"):
        lib["type_code"]([np.zeros(2)])


def test_workspace_is_64_byte_aligned(lib):
    for n in (0, 1, 100, 4096, 1 << 20):
        assert lib["workspace"](n) == 0


def test_a_freed_workspace_block_is_reused_for_the_next_one_of_its_size(lib):
    result = lib["workspace_reuse"](40000)
    assert result % 2 == 1 and result // 2 >= 1  # the same block, and it went back
    # past the largest block the cache keeps (16 MB): freed, not cached
    before = lib["workspace_reuse"](64) // 2
    assert lib["workspace_reuse"](20 << 20) // 2 == before


def test_workspace_blocks_stay_intact_while_threads_share_the_cache(lib):
    """Four threads allocate, fill, check and free blocks of mixed sizes at once: none sees
    another's bytes in its block (a block handed out twice would)."""
    assert lib["workspace_churn"](4) == 0


def test_parallel_launch_computes_sum(lib):
    x = np.random.rand(10001).astype("float32")
    assert lib["parallel_sum"](vec(x)) == pytest.approx(float(x.astype("float64").sum()), 1e-5)


def test_parallel_launch_serial_fallback_without_openmp():
    serial = CSourceModule(C_SOURCE, compile_options=["-fno-openmp"])
    try:
        func = serial["parallel_sum"]
    except ember.error.CompileError:
        pytest.skip("the compiler does not accept -fno-openmp")
    x = np.random.rand(1001).astype("float32")
    assert func(vec(x)) == pytest.approx(float(x.sum(dtype="float64")), 1e-5)


def test_concurrent_calls_from_threads(lib):
    errors = []
    x = np.arange(64, dtype="float32")

    def work():
        out = ember.nd.empty((64,), "float32")
        for _ in range(300):
            lib["add_f32"](vec(x), vec(x), out)
            if not np.array_equal(out.numpy(), 2 * x):
                errors.append("wrong result")

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_many_arguments_use_a_fresh_buffer(lib):
    f = ember.get_global_func("testing.echo")
    assert lib["call_cb"](lambda *a: len(a), *range(20)) == 20
    assert lib["call_cb"](f, "x") == "x"


def test_c_packed_func_header_alone_is_enough(tmp_path):
    from ember.contrib import cc

    src = tmp_path / "only_header.c"
    src.write_text('#include "ember/c_packed_func.h"\n'
                   "TVM_DLL int f(TVMValue* a, int* c, int n, TVMValue* r, int* rc, void* h) {\n"
                   '  if (n != 0) { TVMPackedFuncSetLastError("f: no args"); return -1; }\n'
                   "  r->v_int64 = 7; *rc = kTVMArgInt; return 0; }\n")
    cc.create_shared(str(tmp_path / "only_header.so"), [str(src)])
    mod = ember.runtime.load_module(str(tmp_path / "only_header.so"))
    assert mod["f"]() == 7
    with pytest.raises(ember.TVMError, match="f: no args"):
        mod["f"](1)


def test_c_runtime_api_from_c(lib, tmp_path):
    path = str(tmp_path / "again.so")
    CSourceModule(C_SOURCE).export_library(path)
    assert lib["host_api"](path) == "hello from C|5|1"
    with pytest.raises(ember.TVMError, match="no such file"):
        lib["host_api"](str(tmp_path / "missing.so"))


def test_c_gets_functions_of_a_module_argument(lib):
    from _ffi_testlib import KVModule

    kv = KVModule({"q": 7})
    assert lib["mod_call"](kv, "get", "q") == 7
    with pytest.raises(ember.TVMError, match="cannot find function 'nope'"):
        lib["mod_call"](kv, "nope")


def test_handles_returned_through_c_do_not_accumulate(lib):
    from ember.runtime import _bridge

    f = ember.get_global_func("testing.echo")
    lib["call_cb"](lambda: f)
    before = len(_bridge._HANDLES)
    for _ in range(50):
        assert lib["call_cb"](lambda: f) is f
        assert lib["call_cb"](lambda: [1, 2]) == [1, 2]
        assert lib["echo"](f) is f
    assert len(_bridge._HANDLES) == before

"""``tvm._ffi``: the names scripts import from the FFI package."""
from __future__ import annotations

import pytest

import ember as tvm
from ember._ffi.base import c_str, py_str


def test_py_str_and_c_str():
    assert py_str(b"caf\xc3\xa9") == "café" and py_str("abc") == "abc"
    assert py_str(bytearray(b"x")) == "x"
    assert c_str("café") == b"caf\xc3\xa9"
    with pytest.raises(TypeError, match="py_str: expected bytes or str, got int"):
        py_str(3)
    with pytest.raises(TypeError, match="c_str: expected a str"):
        c_str(b"x")


def test_registry_names():
    @tvm._ffi.register_func("test_ffi_base.twice")
    def twice(x):
        return 2 * x

    assert tvm._ffi.get_global_func("test_ffi_base.twice")(4) == 8
    tvm._ffi.registry.remove_global_func("test_ffi_base.twice")
    assert tvm._ffi.get_global_func("test_ffi_base.twice", allow_missing=True) is None


def test_base_error_and_runtime_ctypes():
    assert tvm._ffi.base.TVMError is tvm.TVMError
    assert tvm._ffi.runtime_ctypes.Device is tvm.runtime.Device
    assert tvm._ffi.runtime_ctypes.DataType("float32") == tvm.DataType("float32")
    assert isinstance("s", tvm._ffi.base.string_types)

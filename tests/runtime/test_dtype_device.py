"""DataType parsing/printing and Device values."""
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ember
from ember.runtime.dtype import DataType, DataTypeCode


@pytest.mark.parametrize("text, code, bits, lanes", [
    ("float32", DataTypeCode.FLOAT, 32, 1),
    ("int8", DataTypeCode.INT, 8, 1),
    ("uint64", DataTypeCode.UINT, 64, 1),
    ("float16", DataTypeCode.FLOAT, 16, 1),
    ("bool", DataTypeCode.BOOL, 8, 1),
    ("float32x4", DataTypeCode.FLOAT, 32, 4),
    ("int8x16", DataTypeCode.INT, 8, 16),
    ("handle", DataTypeCode.HANDLE, 64, 1),
    ("bfloat16", DataTypeCode.BFLOAT, 16, 1),
])
def test_parse(text, code, bits, lanes):
    dt = ember.DataType(text)
    assert (dt.type_code, dt.bits, dt.lanes) == (code, bits, lanes)
    assert str(dt) == text
    assert repr(dt) == f"DataType({text!r})"


def test_defaults_and_aliases():
    assert str(DataType("float")) == "float32"
    assert str(DataType("int")) == "int32"
    assert str(DataType(" uint8 ")) == "uint8"
    assert DataType("float32x4").scalar == "float32"
    assert DataType("float32x4").itemsize == 16


@pytest.mark.parametrize("bad", ["floaty", "int8x", "", "bool8", "int0", "float32x0", "int256",
                                 "f32", "float32x70000", "x4"])
def test_bad_strings_name_the_string(bad):
    with pytest.raises(ValueError, match=repr(bad).replace("[", r"\[")):
        DataType(bad)


def test_none_is_rejected():
    with pytest.raises(TypeError, match="None"):
        DataType(None)


def test_equality_with_strings_numpy_and_hash():
    assert DataType("float32") == "float32"
    assert DataType("float32") != "float64"
    assert DataType("float32") != "not a dtype"
    assert DataType("bool") == "bool"
    assert DataType("float32x4") == "float32x4" and DataType("float32x4") != "float32"
    assert DataType("float32") == np.float32
    assert DataType("int8") == np.dtype("int8")
    assert DataType("float32") != 3
    assert len({DataType("int8"), DataType("int8"), DataType("int16")}) == 2
    assert hash(DataType("int8")) == hash(DataType(DataType("int8")))


def test_from_numpy_and_back():
    for name in ember.nd.SUPPORTED_DTYPES:
        assert DataType(np.dtype(name)).numpy_dtype == np.dtype(name)
        assert str(DataType(np.dtype(name).type)) == name
    assert str(DataType(bool)) == "bool"
    with pytest.raises(TypeError, match="vector"):
        _ = DataType("float32x4").numpy_dtype
    with pytest.raises(TypeError, match="numpy"):  # (bfloat16 has one once ml_dtypes, which
        _ = DataType("handle").numpy_dtype         # onnx imports, is loaded)


def test_dl_round_trip_and_bool_forms():
    for text in ("float32", "int8x4", "uint16", "bool", "float64x2"):
        dl = DataType(text).to_dl()
        assert DataType.from_dl(dl.code, dl.bits, dl.lanes) == text
    assert DataType.from_dl(int(DataTypeCode.UINT), 1) == "bool"
    assert DataType.from_dl(int(DataTypeCode.BOOL), 8) == "bool"


def test_pickle_datatype():
    dt = DataType("int16x8")
    assert pickle.loads(pickle.dumps(dt)) == dt


@given(code=st.sampled_from(["int", "uint", "float"]), bits=st.sampled_from([8, 16, 32, 64]),
       lanes=st.integers(1, 64))
def test_print_parse_round_trip(code, bits, lanes):
    text = f"{code}{bits}" + (f"x{lanes}" if lanes > 1 else "")
    dt = DataType(text)
    assert str(dt) == text
    assert DataType(str(dt)) == dt
    assert dt.lanes == lanes and dt.bits == bits


# -- Device -------------------------------------------------------------------------------------
def test_cpu_device_values():
    dev = ember.cpu(0)
    assert str(dev) == repr(dev) == "cpu(0)"
    assert dev.device_type == 1 and dev.device_id == 0
    assert dev.exist
    assert ember.device("cpu", 0) == dev
    assert ember.device("llvm") == dev
    assert ember.device("llvm -mcpu=skylake") == dev
    assert ember.device(1, 0) == dev
    assert ember.nd.cpu(0) == dev
    assert hash(ember.cpu(0)) == hash(dev)
    assert ember.cpu(1) != dev


@pytest.mark.parametrize("make, name, dev_type", [
    (ember.cuda, "cuda", 2), (ember.opencl, "opencl", 4), (ember.vulkan, "vulkan", 7),
    (ember.runtime.metal, "metal", 8), (ember.runtime.rocm, "rocm", 10),
])
def test_other_devices_are_values_that_refuse_allocation(make, name, dev_type):
    dev = make(7)
    assert str(dev) == f"{name}(7)"
    assert dev.device_type == dev_type and not dev.exist
    assert ember.device(name, 7) == dev
    with pytest.raises(ember.TVMError, match=rf"{name}\(7\).*CPU"):
        ember.nd.empty((2,), "float32", dev)
    with pytest.raises(ember.TVMError, match=rf"{name}\(7\)"):
        ember.nd.array([1, 2], dev)
    with pytest.raises(ember.TVMError):
        ember.nd.array([1, 2]).copyto(dev)


def test_unknown_device_name():
    with pytest.raises(ValueError, match="'tpu'"):
        ember.device("tpu")


def test_device_pickle_and_dl():
    dev = ember.cuda(3)
    assert pickle.loads(pickle.dumps(dev)) == dev
    dl = dev.to_dl()
    assert (dl.device_type, dl.device_id) == (2, 3)
    ember.cpu(0).sync()  # a no-op on the CPU

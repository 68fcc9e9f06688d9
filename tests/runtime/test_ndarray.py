"""NDArray: creation, conversion, copies, the stable DLTensor, and views over DLTensor*."""
import ctypes
import gc
import pickle
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember
from ember.runtime._abi import DLTensor
from ember.runtime.ndarray import ALIGNMENT, SUPPORTED_DTYPES, from_dltensor_address

DTYPES = list(SUPPORTED_DTYPES)


def _sample(dtype, shape):
    rng = np.random.default_rng(0)
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.startswith("float"):
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 0, 3), (2, 3, 4)])
def test_array_numpy_round_trip_every_dtype(dtype, shape):
    data = _sample(dtype, shape)
    arr = ember.nd.array(data)
    assert arr.dtype == dtype
    assert arr.shape == shape
    assert arr.ndim == len(shape)
    assert arr.device == ember.cpu(0)
    out = arr.numpy()
    assert out.dtype == np.dtype(dtype) and out.shape == shape
    np.testing.assert_array_equal(out, data)
    np.testing.assert_array_equal(arr.asnumpy(), data)


@settings(max_examples=60, deadline=None)
@given(data=hnp.arrays(dtype=st.sampled_from(DTYPES).map(np.dtype),
                       shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5)))
def test_round_trip_law(data):
    arr = ember.nd.array(data)
    np.testing.assert_array_equal(arr.numpy(), data)
    assert arr.data_ptr % ALIGNMENT == 0


def test_numpy_returns_a_copy():
    arr = ember.nd.array([1.0, 2.0])
    out = arr.numpy()
    out[0] = 9
    assert arr.numpy()[0] == 1.0


def test_dtype_inference_and_conversion():
    assert ember.nd.array([1.0, 2.0]).dtype == "float64"
    assert ember.nd.array([1, 2]).dtype == "int64"
    assert ember.nd.array([True, False]).dtype == "bool"
    assert ember.nd.array(3.5).shape == ()
    a = ember.nd.array([1.7, -2.2], dtype="int32")
    assert a.dtype == "int32"
    np.testing.assert_array_equal(a.numpy(), [1, -2])
    b = ember.nd.array(a, dtype="float16")
    assert b.dtype == "float16"
    c = ember.nd.array(a)  # from an NDArray: a copy with the same dtype
    assert c.dtype == "int32" and c.data_ptr != a.data_ptr
    big_endian = np.arange(3, dtype=">f4")
    np.testing.assert_array_equal(ember.nd.array(big_endian).numpy(), [0, 1, 2])


@pytest.mark.parametrize("bad", [np.zeros(2, np.complex64), np.array(["a"]), np.array([object()])])
def test_unsupported_dtypes_are_refused(bad):
    with pytest.raises(TypeError, match="not supported"):
        ember.nd.array(bad)


@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 5), (0, 4), (1, 1, 65)])
def test_empty_is_aligned_and_described_by_a_stable_dltensor(shape):
    arr = ember.nd.empty(shape, "float32")
    assert arr.shape == shape and arr.dtype == "float32"
    assert arr.data_ptr % ALIGNMENT == 0 and arr.is_aligned and not arr.is_view
    addr = arr.handle.value
    assert addr == arr.handle.value == arr._dl_addr
    dl = DLTensor.from_address(addr)
    assert dl.ndim == len(shape)
    assert tuple(dl.shape[i] for i in range(dl.ndim)) == shape
    assert (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes) == (2, 32, 1)
    assert (dl.device.device_type, dl.device.device_id) == (1, 0)
    assert dl.data == arr.data_ptr and not dl.strides and dl.byte_offset == 0


def test_empty_shapes_and_errors():
    assert ember.nd.empty(4).shape == (4,)
    assert ember.nd.empty(np.int64(2), "int8").shape == (2,)
    assert ember.nd.empty(ember.runtime.ShapeTuple([2, 3])).shape == (2, 3)
    with pytest.raises(ValueError, match="negative"):
        ember.nd.empty((2, -1))
    with pytest.raises(TypeError, match="shape"):
        ember.nd.empty("abc")
    with pytest.raises(ValueError, match="'float33x'"):
        ember.nd.empty((2,), "float33x")


def test_copyfrom_conversions_and_return_value():
    arr = ember.nd.empty((2, 2), "float32")
    assert arr.copyfrom(np.arange(4, dtype="int64").reshape(2, 2)) is arr
    np.testing.assert_array_equal(arr.numpy(), [[0, 1], [2, 3]])
    arr.copyfrom([[1.5, 2.5], [3.5, 4.5]])
    np.testing.assert_array_equal(arr.numpy(), [[1.5, 2.5], [3.5, 4.5]])
    arr.copyfrom(ember.nd.array(np.ones((2, 2), "float64")))
    assert arr.numpy().dtype == np.float32 and arr.numpy().sum() == 4
    ints = ember.nd.empty((2,), "int8").copyfrom([3.9, -1.2])
    np.testing.assert_array_equal(ints.numpy(), [3, -1])


def test_copyfrom_shape_mismatch_names_both_shapes():
    arr = ember.nd.empty((2, 3), "float32")
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(3, 2\)"):
        arr.copyfrom(np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(6,\)"):
        arr.copyfrom(ember.nd.array(np.zeros(6)))
    with pytest.raises(TypeError, match="cannot convert"):
        ember.nd.empty((1,), "float32").copyfrom(np.array(["x"]))


def test_copyto_array_and_device():
    src = ember.nd.array(np.arange(6, dtype="float32").reshape(2, 3))
    dst = ember.nd.empty((2, 3), "float64")
    assert src.copyto(dst) is dst
    np.testing.assert_array_equal(dst.numpy(), src.numpy())
    moved = src.copyto(ember.cpu(0))
    assert moved.data_ptr != src.data_ptr and moved.dtype == "float32"
    np.testing.assert_array_equal(moved.numpy(), src.numpy())
    with pytest.raises(TypeError, match="NDArray or a Device"):
        src.copyto("cpu")


def test_whole_array_assignment():
    arr = ember.nd.empty((3,), "int32")
    arr[:] = np.array([1, 2, 3])
    np.testing.assert_array_equal(arr.numpy(), [1, 2, 3])
    arr[:] = 7
    np.testing.assert_array_equal(arr.numpy(), [7, 7, 7])
    with pytest.raises(ValueError, match="whole-array"):
        arr[0] = 1


def test_vector_dtype_arrays():
    arr = ember.nd.empty((3,), "float32x4")
    assert arr.shape == (3,) and arr.dtype == "float32x4"
    assert arr.numpy().shape == (3, 4)
    dl = DLTensor.from_address(arr.handle.value)
    assert dl.ndim == 1 and dl.dtype.lanes == 4
    v = ember.nd.array(np.ones((2, 4)), dtype="float32x4")
    assert v.shape == (2,) and v.numpy().dtype == np.float32
    with pytest.raises(ValueError, match="4 lanes"):
        ember.nd.array(np.ones((2, 3)), dtype="float32x4")


def test_numpy_interop_pickle_and_repr():
    arr = ember.nd.array(np.arange(4, dtype="int16"))
    assert np.asarray(arr).base is not None  # __array__ gives a view, not a copy
    np.testing.assert_array_equal(np.add(arr, 1), [1, 2, 3, 4])
    back = pickle.loads(pickle.dumps(arr))
    assert back.dtype == "int16"
    np.testing.assert_array_equal(back.numpy(), arr.numpy())
    vec = pickle.loads(pickle.dumps(ember.nd.empty((2,), "int8x4")))
    assert vec.dtype == "int8x4"
    assert "shape=(4,)" in repr(arr) and "cpu(0)" in repr(arr)
    assert str(arr) == "[0 1 2 3]"


# -- views over DLTensor* ------------------------------------------------------------------------
def test_view_of_an_ndarray_handle_shares_memory():
    base = ember.nd.array(np.arange(6, dtype="float32").reshape(2, 3))
    view = from_dltensor_address(base.handle.value)
    assert view.is_view and view.shape == (2, 3) and view.dtype == "float32"
    assert view.data_ptr == base.data_ptr
    view[:] = np.full((2, 3), 5.0)
    assert base.numpy().sum() == 30


def _dltensor_over(buf, shape, dtype_code, bits, strides=None, byte_offset=0, device_type=1):
    """A hand-built DLTensor (as C code would pass one) over a numpy buffer."""
    shape_arr = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    dl = DLTensor()
    dl.data = buf.ctypes.data if buf.size else None
    dl.device.device_type, dl.device.device_id = device_type, 0
    dl.ndim = len(shape)
    dl.dtype.code, dl.dtype.bits, dl.dtype.lanes = dtype_code, bits, 1
    dl.shape = ctypes.cast(shape_arr, ctypes.POINTER(ctypes.c_int64))
    if strides is not None:
        stride_arr = (ctypes.c_int64 * len(strides))(*strides)
        dl.strides = ctypes.cast(stride_arr, ctypes.POINTER(ctypes.c_int64))
        dl._keep = stride_arr
    dl.byte_offset = byte_offset
    dl._keep_shape = shape_arr
    return dl


@pytest.mark.parametrize("dtype", DTYPES)
def test_view_reads_every_dtype_from_the_struct(dtype):
    data = _sample(dtype, (2, 3))
    code = ember.DataType(dtype).to_dl()
    dl = _dltensor_over(data, (2, 3), code.code, code.bits)
    view = from_dltensor_address(ctypes.addressof(dl), owner=data)
    assert view.dtype == dtype
    np.testing.assert_array_equal(view.numpy(), data)


def test_view_zero_dim_empty_offset_and_owner():
    scalar = np.array(7, "int32")
    dl0 = _dltensor_over(scalar, (), 0, 32)
    v0 = from_dltensor_address(ctypes.addressof(dl0), owner=scalar)
    assert v0.shape == () and v0.numpy() == 7
    empty = np.zeros((0, 3), "float32")
    dl1 = _dltensor_over(empty, (0, 3), 2, 32)
    assert from_dltensor_address(ctypes.addressof(dl1)).shape == (0, 3)
    buf = np.arange(8, dtype="int64")
    dl2 = _dltensor_over(buf, (3,), 0, 64, byte_offset=16)
    np.testing.assert_array_equal(from_dltensor_address(ctypes.addressof(dl2)).numpy(), [2, 3, 4])
    # The owner lives as long as the view.
    owner = np.arange(4.0)
    ref = weakref.ref(owner_box := type("Box", (), {})())
    owner_box.arr = owner
    dl3 = _dltensor_over(owner, (4,), 2, 64)
    view = from_dltensor_address(ctypes.addressof(dl3), owner_box)
    del owner_box, owner, dl3
    gc.collect()
    assert ref() is not None and view.numpy().sum() == 6
    del view
    gc.collect()
    assert ref() is None


def test_view_strides_and_errors():
    buf = np.arange(6, dtype="float32")
    compact = _dltensor_over(buf, (2, 3), 2, 32, strides=(3, 1))
    np.testing.assert_array_equal(from_dltensor_address(ctypes.addressof(compact)).numpy(),
                                  buf.reshape(2, 3))
    strided = _dltensor_over(buf, (2, 2), 2, 32, strides=(3, 1))
    with pytest.raises(ValueError, match="non-contiguous"):
        from_dltensor_address(ctypes.addressof(strided))
    with pytest.raises(ValueError, match="NULL"):
        from_dltensor_address(0)
    on_gpu = _dltensor_over(buf, (6,), 2, 32, device_type=2)
    with pytest.raises(ember.TVMError, match="cuda"):
        from_dltensor_address(ctypes.addressof(on_gpu))
    weird = _dltensor_over(buf, (6,), 9, 32)
    with pytest.raises(ember.TVMError, match="code=9"):
        from_dltensor_address(ctypes.addressof(weird))
    null_data = _dltensor_over(np.zeros(0), (6,), 2, 32)
    with pytest.raises(ember.TVMError, match="NULL data"):
        from_dltensor_address(ctypes.addressof(null_data))

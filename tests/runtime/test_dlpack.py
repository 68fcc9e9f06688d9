"""DLPack both ways with numpy: sharing, ownership, and no crash or leak on dropped capsules."""
import gc
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember
from ember.runtime.ndarray import SUPPORTED_DTYPES

DTYPES = list(SUPPORTED_DTYPES)
SHAPES = [(), (0,), (5,), (2, 0, 3), (3, 4)]


def _data(dtype, shape):
    return (np.arange(int(np.prod(shape)), dtype="int64") % 7).astype(dtype).reshape(shape)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_numpy_from_ember_shares_memory(dtype, shape):
    arr = ember.nd.array(_data(dtype, shape))
    view = np.from_dlpack(arr)
    assert view.dtype == np.dtype(dtype) and view.shape == shape
    np.testing.assert_array_equal(view, arr.numpy())
    if view.size:
        assert view.ctypes.data == arr.data_ptr
        view[...] = np.ones(shape, dtype)  # writes through to the NDArray
        np.testing.assert_array_equal(arr.numpy(), np.ones(shape, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_ember_from_numpy_is_zero_copy_when_contiguous(dtype, shape):
    src = _data(dtype, shape)
    arr = ember.nd.from_dlpack(src)
    assert arr.dtype == dtype and arr.shape == shape and arr.is_view
    np.testing.assert_array_equal(arr.numpy(), src)
    if src.size:
        assert arr.data_ptr == src.ctypes.data
        src[...] = np.zeros(shape, dtype)  # the producer's writes are visible
        np.testing.assert_array_equal(arr.numpy(), np.zeros(shape, dtype))


def test_non_contiguous_and_read_only_sources_are_copied():
    src = np.arange(12.0).reshape(3, 4)[:, ::2]
    arr = ember.nd.from_dlpack(src)
    assert not arr.is_view and arr.is_aligned
    np.testing.assert_array_equal(arr.numpy(), src)
    with pytest.raises(BufferError, match="not C-contiguous"):
        ember.nd.from_dlpack(src, copy=False)
    frozen = np.arange(4.0)
    frozen.flags.writeable = False
    copied = ember.nd.from_dlpack(frozen)
    assert not copied.is_view
    np.testing.assert_array_equal(copied.numpy(), frozen)


def test_copy_flag():
    src = np.arange(4, dtype="int32")
    arr = ember.nd.from_dlpack(src, copy=True)
    assert not arr.is_view and arr.data_ptr != src.ctypes.data
    assert ember.nd.from_dlpack(src, copy=False).data_ptr == src.ctypes.data
    out = np.from_dlpack(ember.nd.array(src), copy=True)
    np.testing.assert_array_equal(out, src)


def test_capsule_protocol_details():
    arr = ember.nd.array(np.arange(3, dtype="float32"))
    assert arr.__dlpack_device__() == (1, 0)
    cap = arr.__dlpack__()
    assert 'capsule object "dltensor"' in repr(cap)
    back = ember.nd.from_dlpack(cap)  # a raw capsule is accepted too
    assert back.data_ptr == arr.data_ptr
    assert 'used_dltensor' in repr(cap)
    with pytest.raises(ValueError, match="already consumed"):
        ember.nd.from_dlpack(cap)
    with pytest.raises(BufferError, match="stream"):
        arr.__dlpack__(stream=1)
    with pytest.raises(BufferError, match="device"):
        arr.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError, match="vector dtype"):
        ember.nd.empty((2,), "float32x4").__dlpack__()
    with pytest.raises(TypeError, match="__dlpack__"):
        ember.nd.from_dlpack([1, 2, 3])
    with pytest.raises(BufferError, match="complex64"):
        ember.nd.from_dlpack(np.zeros(2, np.complex64))


def test_ember_to_ember_shares_memory():
    a = ember.nd.array(np.arange(4.0))
    b = ember.nd.from_dlpack(a)
    b[:] = np.full(4, 2.0)
    np.testing.assert_array_equal(a.numpy(), np.full(4, 2.0))


def test_exported_array_lives_until_the_consumer_lets_go():
    arr = ember.nd.array(np.arange(5.0))
    ref = weakref.ref(arr)
    view = np.from_dlpack(arr)
    del arr
    gc.collect()
    assert ref() is not None
    np.testing.assert_array_equal(view, np.arange(5.0))
    del view
    gc.collect()
    assert ref() is None


def test_unconsumed_capsule_releases_the_array():
    arr = ember.nd.array(np.arange(5.0))
    ref = weakref.ref(arr)
    cap = arr.__dlpack__()
    del arr
    gc.collect()
    assert ref() is not None
    del cap
    gc.collect()
    assert ref() is None


def test_imported_view_keeps_the_producer_alive():
    src = np.arange(6.0)
    holder = weakref.ref(src)
    arr = ember.nd.from_dlpack(src)
    del src
    gc.collect()
    assert holder() is not None and arr.numpy().sum() == 15
    del arr
    gc.collect()
    assert holder() is None


_CRASH_PROBE = textwrap.dedent("""
    import gc, weakref
    import numpy as np
    import ember
    arr = ember.nd.array(np.arange(4.0))
    ref = weakref.ref(arr)
    for make in (lambda: arr.__dlpack__(), lambda: np.from_dlpack(arr),
                 lambda: ember.nd.from_dlpack(np.arange(3.0)),
                 lambda: ember.nd.from_dlpack(arr)):
        try:
            [make(), 1 / 0]  # the capsule/view dies while the exception unwinds
        except ZeroDivisionError as err:
            assert str(err) == "division by zero", err
    for _ in range(1000):  # many unconsumed capsules
        arr.__dlpack__()
    del arr
    gc.collect()
    assert ref() is None, "leaked"
    print("ok")
""")


def test_no_crash_when_capsules_die_during_exception_unwinding():
    out = subprocess.run([sys.executable, "-c", _CRASH_PROBE], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok" and "Exception ignored" not in out.stderr


@settings(max_examples=40, deadline=None)
@given(data=hnp.arrays(dtype=st.sampled_from(DTYPES).map(np.dtype),
                       shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)))
def test_round_trip_law(data):
    arr = ember.nd.from_dlpack(data)
    back = np.from_dlpack(arr)
    np.testing.assert_array_equal(back, data)
    if data.size:
        assert np.shares_memory(back, data)

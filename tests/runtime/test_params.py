"""The params byte format: round trips, and precise errors on truncated or foreign bytes."""
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember
from ember.runtime import load_param_dict, save_param_dict
from ember.runtime.errors import ArtifactError
from ember.runtime.ndarray import SUPPORTED_DTYPES
from ember.runtime.params import (PARAMS_MAGIC, deserialize_ndarray, serialize_ndarray)


def _params():
    return {
        "weight": np.arange(12, dtype="float32").reshape(3, 4),
        "bias": ember.nd.array(np.array([1, -2], dtype="int8")),
        "flag": np.array(True),
        "empty": np.zeros((0, 5), "uint16"),
        "vec": ember.nd.array(np.ones((2, 4), "float16"), dtype="float16x4"),
        "ünïcode name": np.array([2**63 + 1], dtype="uint64"),
    }


def test_round_trip_keeps_names_order_dtypes_and_values():
    params = _params()
    blob = save_param_dict(params)
    assert isinstance(blob, bytearray) and blob[:8] == PARAMS_MAGIC
    loaded = load_param_dict(blob)
    assert list(loaded) == list(params)
    for name, value in params.items():
        got = loaded[name]
        assert isinstance(got, ember.nd.NDArray) and got.is_aligned
        want_dtype = value.dtype if isinstance(value, ember.nd.NDArray) else str(value.dtype)
        assert got.dtype == want_dtype
        np.testing.assert_array_equal(got.numpy(), np.asarray(value))
    assert load_param_dict(bytes(blob)).keys() == loaded.keys()
    assert load_param_dict(memoryview(blob)).keys() == loaded.keys()
    assert load_param_dict(save_param_dict({})) == {}
    assert ember.runtime.save_param_dict is save_param_dict


@settings(max_examples=50, deadline=None)
@given(params=st.dictionaries(
    st.text(min_size=1, max_size=10),
    hnp.arrays(dtype=st.sampled_from(SUPPORTED_DTYPES).map(np.dtype),
               shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4)),
    max_size=4))
def test_round_trip_law(params):
    loaded = load_param_dict(save_param_dict(params))
    assert list(loaded) == list(params)
    for name, value in params.items():
        assert loaded[name].dtype == str(value.dtype) and loaded[name].shape == value.shape
        np.testing.assert_array_equal(loaded[name].numpy(), value)


def test_every_truncation_is_reported_with_an_offset():
    blob = bytes(save_param_dict({"a": np.arange(3, dtype="int32"), "b": np.ones((2, 2))}))
    for cut in range(len(blob)):
        with pytest.raises(ArtifactError, match=r"byte offset \d+"):
            load_param_dict(blob[:cut])


def test_specific_truncation_message():
    blob = bytes(save_param_dict({"w": np.arange(4, dtype="float32")}))
    with pytest.raises(ArtifactError, match=r"data of param 'w' needs 16 bytes but only 10 "
                                            r"remain at byte offset \d+"):
        load_param_dict(blob[:-6])


@pytest.mark.parametrize("data", [b"PK\x03\x04 not params", b"\x7fELF\x02\x01\x01",
                                  b"{\"nodes\": []}"])
def test_foreign_bytes_have_bad_magic(data):
    with pytest.raises(ArtifactError, match=r"bad magic .* at byte offset 0"):
        load_param_dict(data)


def _patched(blob, offset, fmt, value):
    out = bytearray(blob)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def test_corrupt_fields_are_located():
    blob = bytes(save_param_dict({"ab": np.arange(3, dtype="int32")}))
    record = 16 + 8 + 4 + 2  # header, count, name length, name
    cases = [
        (_patched(blob, 8, "<I", 2), r"format version 2 is not supported.*offset 8"),
        (_patched(blob, 12, "<I", 3), r"unknown flags.*offset 12"),
        (_patched(blob, 16, "<Q", 10**12), r"tensor count 1000000000000 .*offset 16"),
        (_patched(blob, record, "<B", 9), rf"unsupported dtype \(code=9.*offset {record}"),
        (_patched(blob, record + 4, "<I", 1000), rf"implausible ndim 1000.*offset {record + 4}"),
        (_patched(blob, record + 8, "<q", -3), rf"negative dimension.*offset {record + 8}"),
        (_patched(blob, record + 16, "<Q", 13), rf"declares 13 data bytes.*offset {record + 16}"),
        (blob + b"\x00", rf"1 unexpected trailing bytes at byte offset {len(blob) - 4}"),
        (_patched(blob, 28, "<2s", b"\xff\xfe"), r"name 0 is not valid UTF-8.*offset 28"),
    ]
    for data, match in cases:
        with pytest.raises(ArtifactError, match=match):
            load_param_dict(data)


def test_every_flipped_byte_is_caught():
    blob = bytes(save_param_dict({"w": np.arange(6, dtype="float32").reshape(2, 3),
                                  "b": np.ones(2, "int8")}))
    for pos in range(len(blob)):
        bad = bytearray(blob)
        bad[pos] ^= 0x10
        with pytest.raises(ArtifactError, match=r"byte offset \d+"):
            load_param_dict(bytes(bad))


def test_data_corruption_is_reported_as_a_checksum_mismatch():
    blob = bytearray(save_param_dict({"w": np.zeros(8, "float32")}))
    blob[-10] ^= 0xFF  # inside the tensor data: every field still parses
    with pytest.raises(ArtifactError, match=r"checksum mismatch: the data is corrupt at byte "
                                            rf"offset {len(blob) - 4}"):
        load_param_dict(bytes(blob))
    arr = serialize_ndarray(np.arange(4, dtype="int64"))
    with pytest.raises(ArtifactError, match="checksum mismatch"):
        deserialize_ndarray(arr[:-5] + bytes([arr[-5] ^ 1]) + arr[-4:])


def test_blob_without_checksum_still_loads():
    blob = bytearray(save_param_dict({"w": np.arange(3, dtype="float32")}))
    struct.pack_into("<I", blob, 12, 0)  # flags 0: no checksum follows
    out = load_param_dict(bytes(blob[:-4]))
    np.testing.assert_array_equal(out["w"].numpy(), np.arange(3, dtype="float32"))


def test_duplicate_names_are_refused():
    blob = bytearray(save_param_dict({"aa": np.zeros(1), "ab": np.zeros(1)}))
    blob[16 + 8 + 4 + 2 + 4 + 1] = ord("a")  # rename "ab" to "aa"
    with pytest.raises(ArtifactError, match="duplicate name 'aa'"):
        load_param_dict(bytes(blob))


def test_save_errors():
    with pytest.raises(TypeError, match="names must be str"):
        save_param_dict({1: np.zeros(1)})
    with pytest.raises(TypeError, match="complex64"):
        save_param_dict({"c": np.zeros(1, np.complex64)})
    with pytest.raises(TypeError, match="expected bytes"):
        load_param_dict("not bytes")


def test_single_tensor_blobs():
    for value in (np.float16(3.5) * np.ones((2, 3), "float16"), np.array(7, "int64")):
        back = deserialize_ndarray(serialize_ndarray(value))
        np.testing.assert_array_equal(back.numpy(), value)
    with pytest.raises(ArtifactError, match="not an ember tensor blob"):
        deserialize_ndarray(bytes(save_param_dict({})))

"""The wire format by itself: value encoding round trips (hypothesis), hostile payloads,
frames over a socket pair, error class mapping, and session file names."""
from __future__ import annotations

import socket

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember import rpc
from ember.runtime.rpc.codec import (
    Reader,
    Side,
    Writer,
    decode_value,
    encode_value,
    read_ndarray,
    write_ndarray,
)
from ember.runtime.rpc.files import SessionFiles
from ember.runtime.rpc.protocol import Kind, ProtocolError, RPCConnectionError, pack_header
from ember.runtime.rpc.remote_errors import make_remote_error, remote_class
from ember.runtime.rpc.transport import SocketChannel, read_frame, write_frame

scalars = (st.none() | st.booleans() | st.integers(-(1 << 63), (1 << 63) - 1)
           | st.floats(allow_nan=False) | st.text() | st.binary())
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=5), inner, max_size=4), max_leaves=20)


def _round_trip(value: object) -> object:
    w = Writer()
    encode_value(w, value, Side())
    r = Reader(w.getvalue(), "test")
    out = decode_value(r, Side())
    r.done()
    return out


@given(values)
@settings(max_examples=150, deadline=None)
def test_values_round_trip(value):
    assert _round_trip(value) == value


@given(st.sampled_from(["float32", "int8", "uint64", "float16", "bool"]),
       st.lists(st.integers(0, 4), max_size=3))
@settings(max_examples=40, deadline=None)
def test_arrays_by_value_round_trip(dtype, shape):
    data = (np.arange(int(np.prod(shape))) % 3).astype(dtype).reshape(shape)
    w = Writer()
    write_ndarray(w, ember.nd.array(data))
    r = Reader(w.getvalue(), "test")
    r.u8("tag")
    out = read_ndarray(r)
    assert out.dtype == dtype and out.is_aligned
    np.testing.assert_array_equal(out.numpy(), data)


@pytest.mark.parametrize("payload, message", [
    (b"", "truncated reading value tag"),
    (b"\x63", "unknown value tag 99"),
    (b"\x04\x05\x00\x00\x00ab", "needs 5 bytes, 2 left"),
    (b"\x08" + b"\x07\x00\x00\x00float32" + b"\x01\x00\x00\x00" + b"\x02" + b"\x00" * 7
     + b"\x09" + b"\x00" * 7, "needs 8 bytes, the payload says 9"),
    (b"\x08" + b"\x04\x00\x00\x00nope" + b"\x00" * 12, "bad array dtype 'nope'"),
    (b"\x0d\x01\x00\x00\x00\x0c\x00\x00\x00\x00\x00", "a map key must not be a list"),
    (b"\x0e\xff\xff\xff\xff\x00\x00\x00\x00", "negative ADT tag"),
])
def test_hostile_payloads(payload, message):
    with pytest.raises(ProtocolError, match=message):
        decode_value(Reader(payload, "test"), Side())


def test_values_that_cannot_cross():
    with pytest.raises(TypeError, match="object cannot cross an RPC session"):
        encode_value(Writer(), object(), Side())
    deep: list = []
    for _ in range(40):
        deep = [deep]
    with pytest.raises(ValueError, match="nested deeper than 32"):
        encode_value(Writer(), deep, Side())


def test_frames_over_a_socket_pair():
    a, b = socket.socketpair()
    left, right = SocketChannel(a, "left"), SocketChannel(b, "right")
    write_frame(left, Kind.CALL, 9, [b"abc", memoryview(b"def")])
    kind, seq, payload = read_frame(right, 1 << 10, 5.0, 5.0)
    assert (kind, seq, bytes(payload)) == (Kind.CALL, 9, b"abcdef")
    left.send([pack_header(Kind.CALL, 1, 1 << 11)], 5.0)
    with pytest.raises(ProtocolError, match="CALL frame of 2048 bytes exceeds the limit of 1024"):
        read_frame(right, 1 << 10, 5.0, 5.0)
    with pytest.raises(RPCConnectionError, match="timed out after 0.1 s waiting for the next "
                                                 "frame"):
        read_frame(right, 1 << 10, 0.1, 0.1)
    left.close()
    with pytest.raises(RPCConnectionError, match="connection closed"):
        read_frame(right, 1 << 10, 5.0, 5.0)


def test_remote_error_classes():
    assert issubclass(remote_class("ValueError"), ValueError)
    assert issubclass(remote_class("ValueError"), rpc.RPCError)
    assert issubclass(remote_class("ember.runtime.errors.ArtifactError"),
                      ember.error.ArtifactError)
    assert issubclass(remote_class("FileNotFoundError"), FileNotFoundError)
    err = make_remote_error("UnicodeDecodeError", "bad", "", "host:1")  # needs 5 arguments
    assert type(err) is rpc.RPCError and str(err) == "UnicodeDecodeError: bad"
    assert remote_class("os.system") is rpc.RPCError  # never looked up outside ember
    assert remote_class("ember.runtime.rpc.protocol.RPCPathError") is rpc.RPCPathError
    err = make_remote_error("somewhere.Custom", "it broke", "", "host:1")
    assert type(err) is rpc.RPCError and str(err) == "somewhere.Custom: it broke"


def test_session_file_names(tmp_path):
    files = SessionFiles(str(tmp_path))
    assert files.resolve("a/./b.so", "x") == str(tmp_path.resolve() / "a" / "b.so")
    (tmp_path / "link").symlink_to("/etc")
    for name, message in (("../a", "leaves the session directory"),
                          ("/etc/passwd", "is an absolute path"),
                          ("C:/x", "is an absolute path"),
                          ("link/passwd", "resolves outside the session directory"),
                          ("", "expected a non-empty file name")):
        with pytest.raises(rpc.RPCPathError, match=message):
            files.resolve(name, "upload")


def test_the_documented_example_frame():
    """docs/rpc.md spells out CALL testing.echo(7) byte by byte; the encoder must agree."""
    from pathlib import Path

    from ember.runtime.rpc.codec import encode_values

    w = Writer()
    w.u8(0)
    w.string("testing.echo")
    w.parts += encode_values([7], Side()).parts
    payload = w.getvalue()
    frame = (pack_header(Kind.CALL, 1, len(payload)) + payload).hex(" ").upper()
    doc = (Path(__file__).resolve().parents[2] / "docs" / "rpc.md").read_text()
    block = doc.split("Example: `CALL testing.echo(7)`, seq 1:")[1].split("```")[1]
    hex_columns = [line.split("     ")[0] for line in block.strip().splitlines()]  # no comments
    assert " ".join(" ".join(hex_columns).split()) == frame

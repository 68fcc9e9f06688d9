"""Faults against a real server: each one ends its own session with a logged reason, and the
server then serves a new client. A client whose server (or session) dies, or that waits past
its timeout, gets an RPCError instead of hanging."""
from __future__ import annotations

import signal
import socket
import struct
import threading

import pytest
from _rpc_util import log_size, start_server, wait_for_log

from ember import rpc
from ember.runtime.rpc.codec import Side, Tag, Writer, encode_values, error_payload, read_error
from ember.runtime.rpc.handshake import client_handshake, hello_payload
from ember.runtime.rpc.protocol import HEADER, MAGIC, PROTOCOL_VERSION, Kind, pack_header
from ember.runtime.rpc.transport import SocketChannel, read_frame, write_frame


@pytest.fixture(autouse=True)
def _fresh_log(server: rpc.Server) -> None:
    """Log checks of a test read only what the server logged during that test."""
    server.log_mark = log_size(server)  # type: ignore[attr-defined]


def _raw(server: rpc.Server) -> socket.socket:
    return socket.create_connection((server.host, server.port), timeout=10)


def _session_channel(server: rpc.Server) -> SocketChannel:
    """A channel past the handshake, for sending bytes by hand."""
    ch = SocketChannel(_raw(server))
    client_handshake(ch, "", None, 0, 10.0)
    return ch


def _healthy(server: rpc.Server) -> None:
    with rpc.connect(server.host, server.port, timeout=20) as sess:
        assert sess.get_function("rpc.test.addone")(1) == 2


def _reply_error(ch: SocketChannel) -> str:
    """The message of the ERROR frame the server sent before closing."""
    kind, _, payload = read_frame(ch, 1 << 20, 10.0, 10.0)
    assert kind == Kind.ERROR
    return read_error(payload)[1]


def _closed(sock: socket.socket) -> bool:
    sock.settimeout(10)
    try:
        while sock.recv(4096):
            pass
    except ConnectionResetError:
        pass
    return True


def test_garbage_before_the_handshake(server):
    sock = _raw(server)
    sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert _closed(sock)
    wait_for_log(server, "bad frame magic b'GET '")
    _healthy(server)


def test_wrong_protocol_version(server):
    ch = SocketChannel(_raw(server))
    payload = bytearray(hello_payload("", 0, False, bytes(16)))
    payload[:4] = struct.pack("<I", 99)
    write_frame(ch, Kind.HELLO, 0, [bytes(payload)])
    assert "client speaks RPC protocol version 99" in _reply_error(ch)
    wait_for_log(server, f"this server speaks version {PROTOCOL_VERSION}")
    _healthy(server)


def test_wrong_key(server):
    with pytest.raises(rpc.RPCError, match="key 'nope' does not match the server's key"):
        rpc.connect(server.host, server.port, key="nope", timeout=10)
    _healthy(server)


def test_frame_before_hello(server):
    ch = SocketChannel(_raw(server))
    write_frame(ch, Kind.CALL, 1, [b"\x00"])
    assert "expected a HELLO frame" in _reply_error(ch)
    _healthy(server)


def test_silent_client_times_out_in_the_handshake(server):
    sock = _raw(server)  # connects and sends nothing
    assert _closed(sock)
    wait_for_log(server, "timed out")
    _healthy(server)


def test_oversized_frame(server):
    ch = _session_channel(server)
    ch.send([pack_header(Kind.CALL, 1, 1 << 30)], 10.0)
    assert "CALL frame of 1073741824 bytes exceeds the limit" in _reply_error(ch)
    wait_for_log(server, "exceeds the limit")
    _healthy(server)


def test_truncated_frame(server):
    ch = _session_channel(server)
    ch.send([pack_header(Kind.CALL, 1, 100), b"\x00" * 10], 10.0)
    ch.sock.shutdown(socket.SHUT_WR)
    assert "truncated CALL frame" in _reply_error(ch)
    wait_for_log(server, "the stream ended after 10 of 100 payload bytes")
    _healthy(server)


def test_stalled_frame(server):
    ch = _session_channel(server)
    ch.send([pack_header(Kind.CALL, 1, 100), b"\x00" * 10], 10.0)  # and nothing more
    assert "timed out" in _reply_error(ch)
    _healthy(server)


def test_garbage_after_the_handshake(server):
    ch = _session_channel(server)
    ch.send([b"\xde\xad\xbe\xef" * 8], 10.0)
    assert "bad frame magic" in _reply_error(ch)
    _healthy(server)


def test_unknown_message_kind(server):
    ch = _session_channel(server)
    write_frame(ch, 0x7777, 1, [])
    assert "unexpected 0x7777 frame" in _reply_error(ch)
    _healthy(server)


@pytest.mark.parametrize("payload, message", [
    (b"\x00\xff\xff\xff\x7f", "truncated reading function name"),
    (b"\x07", "unknown target kind 7"),
    (b"\x00" + struct.pack("<I", 4) + b"\xff\xfe\xfd\xfc", "function name is not UTF-8"),
])
def test_malformed_call(server, payload, message):
    ch = _session_channel(server)
    write_frame(ch, Kind.CALL, 1, [payload])
    assert message in _reply_error(ch)
    _healthy(server)


def test_hostile_values(server):
    ch = _session_channel(server)
    head = Writer()
    head.u8(0)
    head.string("testing.echo")
    nested = bytes([Tag.LIST]) + struct.pack("<I", 1)
    args = struct.pack("<I", 1) + nested * 40 + bytes([Tag.NONE])
    write_frame(ch, Kind.CALL, 1, head.parts + [args])
    assert "nested deeper than 32 levels" in _reply_error(ch)
    ch = _session_channel(server)
    count = struct.pack("<I", 1) + bytes([Tag.LIST]) + struct.pack("<I", 1 << 31)
    write_frame(ch, Kind.CALL, 1, head.parts + [count])
    assert "list of 2147483648 items in 0 bytes" in _reply_error(ch)
    _healthy(server)


def test_unknown_handle_is_an_error_not_a_fault(server):
    ch = _session_channel(server)
    w = Writer()
    w.u8(1)
    w.u64(12345)
    w.parts += encode_values([], Side()).parts
    write_frame(ch, Kind.CALL, 7, w.parts)
    kind, seq, payload = read_frame(ch, 1 << 20, 10.0, 10.0)
    assert (kind, seq) == (Kind.ERROR, 7)
    assert "no function with handle 12345" in read_error(payload)[1]
    write_frame(ch, Kind.CLOSE, 8, [])
    wait_for_log(server, "client closed the session")


def test_client_disconnects_mid_call(server):
    ch = _session_channel(server)
    head = Writer()
    head.u8(0)
    head.string("rpc.test.sleep")
    write_frame(ch, Kind.CALL, 1, head.parts + encode_values([0.3], Side()).parts)
    ch.close()
    # The reply may still fit in the socket's buffer: then the next read sees the hang-up.
    wait_for_log(server, ("client went away before the reply", "ended: client disconnected"))
    _healthy(server)


def test_call_that_raises_keeps_the_session(server):
    with rpc.connect(server.host, server.port, timeout=20) as sess:
        for _ in range(3):
            with pytest.raises(ValueError, match="bad"):
                sess.get_function("rpc.test.except")("bad")
        assert sess.get_function("rpc.test.addone")(1) == 2


def test_session_process_dies(server):
    sess = rpc.connect(server.host, server.port, timeout=20)
    with pytest.raises(rpc.RPCConnectionError, match="connection closed.*during call of "
                                                     "rpc.test.exit"):
        sess.get_function("rpc.test.exit")(3)
    with pytest.raises(rpc.RPCError, match="is closed"):
        sess.get_function("rpc.test.addone")
    wait_for_log(server, "exited with status 3")
    _healthy(server)


def test_reply_timeout(server):
    sess = rpc.connect(server.host, server.port, timeout=0.5)
    with pytest.raises(rpc.RPCConnectionError, match="timed out after 0.5 s waiting for the "
                                                     "next frame.*during call of rpc.test.sleep"):
        sess.get_function("rpc.test.sleep")(3)
    _healthy(server)


def test_session_timeout(server):
    sess = rpc.connect(server.host, server.port, session_timeout=1)
    with pytest.raises(rpc.RPCConnectionError, match="connection closed"):
        sess.get_function("rpc.test.sleep")(20)
    wait_for_log(server, "passed its session timeout of 1 s")
    _healthy(server)


def test_server_dies_mid_call(tmp_path):
    srv = start_server(tmp_path)
    try:
        sess = rpc.connect(srv.host, srv.port, timeout=60)
        sleep = sess.get_function("rpc.test.sleep")
        killer = threading.Timer(0.3, srv._signal_group, (signal.SIGKILL,))
        killer.start()
        with pytest.raises(rpc.RPCConnectionError, match="during call of rpc.test.sleep"):
            sleep(50)
        killer.join()
    finally:
        srv.terminate()
    with pytest.raises(rpc.RPCConnectionError, match="cannot connect"):
        rpc.connect(srv.host, srv.port, timeout=5, connect_timeout=5)


def test_frame_header_is_16_bytes():
    assert HEADER.size == 16 and MAGIC == b"EMBR"
    assert pack_header(Kind.CALL, 5, 9) == b"EMBR\x10\x00\x00\x00\x05\x00\x00\x00\x09\x00\x00\x00"
    assert error_payload("E", "m", "") == b"\x01\x00\x00\x00E\x01\x00\x00\x00m\x00\x00\x00\x00"

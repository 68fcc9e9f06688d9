"""The server's limits against clients that try to stretch them: a handshake dribbled byte by
byte, handshake places filled by such clients, sessions left idle, sessions kept alive with
tiny requests, and frame headers that claim 64 MiB. After each, the server serves a real
client within the limit's documented bound (the client's own timeout is that bound plus a
wide margin: it fails only where a client would wait for the attacker to give up)."""
from __future__ import annotations

import socket
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import numpy as np
import pytest
from _rpc_util import start_server, wait_for_log

from ember import rpc
from ember.runtime.rpc.handshake import client_handshake, hello_payload
from ember.runtime.rpc.protocol import Kind, ProtocolError, RPCConnectionError, pack_header
from ember.runtime.rpc.server import main as server_main
from ember.runtime.rpc.slots import Child, IdleClock, choose_victim
from ember.runtime.rpc import transport
from ember.runtime.rpc.transport import PAYLOAD_CHUNK, SocketChannel, read_frame, write_frame

SECRET = "limits"
HELLO = hello_payload("", 0, False, bytes(16))
HELLO_FRAME = pack_header(Kind.HELLO, 0, len(HELLO)) + HELLO


@contextmanager
def _running(tmp_path: Path, **limits: object) -> Iterator[rpc.Server]:
    """A loopback server with these limits, ended on the way out."""
    srv = start_server(tmp_path, **limits)
    try:
        yield srv
    finally:
        srv.terminate()


def _connect(srv: rpc.Server, **kwargs: object) -> rpc.RPCSession:
    """A real client; its timeout bounds the wait for a slot (see the module docstring)."""
    return rpc.connect(srv.host, srv.port, timeout=20, **kwargs)  # type: ignore[arg-type]


def _served(srv: rpc.Server, **kwargs: object) -> None:
    with _connect(srv, **kwargs) as sess:
        assert sess.get_function("rpc.test.addone")(1) == 2


def _drip(sock: socket.socket, data: bytes, every: float) -> int:
    """Send ``data`` a byte every ``every`` s until the server answers or closes; returns the
    bytes it took before that."""
    for sent in range(len(data)):
        try:
            sock.send(data[sent:sent + 1])
        except OSError:
            return sent
        sock.settimeout(every)
        try:
            sock.recv(1, socket.MSG_PEEK)
            return sent + 1  # ERROR, or end of file
        except TimeoutError:
            pass
        except OSError:
            return sent + 1
    return len(data)


def _in_pieces(sock: socket.socket, pieces: list[bytes], gap: float) -> None:
    for i, piece in enumerate(pieces):
        if i:
            time.sleep(gap)
        try:
            sock.sendall(piece)
        except OSError:
            return


def _reply_error(sock: socket.socket) -> str:
    from ember.runtime.rpc.codec import read_error

    kind, _, payload = read_frame(SocketChannel(sock, "test"), 1 << 20, 10.0, 10.0)
    assert kind == Kind.ERROR
    return read_error(payload)[1]


# ---- payloads follow the bytes, not the header ----------------------------------------------
def _peak_while(read: object) -> tuple[int, object]:
    tracemalloc.start()
    try:
        try:
            result = read()  # type: ignore[operator]
        except Exception as err:  # noqa: BLE001
            result = err
        return tracemalloc.get_traced_memory()[1], result
    finally:
        tracemalloc.stop()


def test_a_64_mib_claim_allocates_what_arrives():
    a, b = socket.socketpair()
    with a, b:
        a.sendall(pack_header(Kind.CALL, 1, 64 << 20) + b"\x01" * 1000)
        a.shutdown(socket.SHUT_WR)
        peak, err = _peak_while(lambda: read_frame(SocketChannel(b, "peer"), 64 << 20, 5.0, 5.0))
    assert isinstance(err, ProtocolError)
    assert "the stream ended after 1000 of 67108864 payload bytes" in str(err)
    assert peak < 2 * PAYLOAD_CHUNK


def test_a_stalled_claim_allocates_what_arrives():
    a, b = socket.socketpair()
    with a, b:
        sender = threading.Thread(target=a.sendall, args=(
            pack_header(Kind.UPLOAD, 1, 64 << 20) + bytes(3 * PAYLOAD_CHUNK // 2),))
        sender.start()  # more than the socket buffers: it ends once the reader has it all
        peak, err = _peak_while(lambda: read_frame(SocketChannel(b, "peer"), 64 << 20, 5.0, 0.5))
        sender.join(10)
    assert isinstance(err, ProtocolError)
    assert "timed out after 0.5 s waiting for the payload of a UPLOAD frame" in str(err)
    assert peak <= 6 * PAYLOAD_CHUNK + (64 << 10)  # 1.5 MiB came: at most 4 times that


@pytest.mark.parametrize("grow", ["_grow_unfilled", "_grow_zeroed"])
@pytest.mark.parametrize("size", [0, 1, PAYLOAD_CHUNK, PAYLOAD_CHUNK + 1, 5 * PAYLOAD_CHUNK + 7])
def test_payloads_across_chunks_arrive_whole(size, grow, monkeypatch):
    monkeypatch.setattr(transport, "_grow", getattr(transport, grow))
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    a, b = socket.socketpair()
    with a, b:
        writer = threading.Thread(target=write_frame,
                                  args=(SocketChannel(a, "a"), Kind.UPLOAD, 3, [data], 10.0))
        writer.start()
        kind, seq, payload = read_frame(SocketChannel(b, "b"), 8 * PAYLOAD_CHUNK, 10.0, 10.0)
        writer.join(10)
    assert (kind, seq, len(payload)) == (Kind.UPLOAD, 3, size) and bytes(payload) == data


def test_frame_timeout_covers_the_whole_frame():
    """Each piece comes within the frame timeout of the last, the frame does not."""
    frame = pack_header(Kind.CALL, 1, 8) + bytes(8)
    a, b = socket.socketpair()
    with a, b:
        sender = threading.Thread(target=_in_pieces, args=(a, [frame[:1], frame[1:16],
                                                               frame[16:]], 0.7))
        sender.start()
        with pytest.raises(ProtocolError, match="timed out after 1 s waiting for the payload"):
            read_frame(SocketChannel(b, "b"), 1 << 10, 5.0, 1.0)
        sender.join(10)


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_a_64_mib_claim_does_not_grow_the_session(tmp_path):
    with _running(tmp_path, frame_timeout=3.0, max_sessions=1) as srv:
        ch = SocketChannel(socket.create_connection((srv.host, srv.port), timeout=10))
        client_handshake(ch, "", None, 0, 10.0)
        (child,) = _children(srv.pid)
        before = _rss_kib(child)
        ch.send([pack_header(Kind.CALL, 1, 64 << 20)], 5.0)  # and not a byte of payload
        time.sleep(0.5)
        grown = _rss_kib(child) - before
        assert grown < 16 << 10, f"the session grew by {grown} KiB on a 64 MiB claim"
        assert "timed out after 3 s waiting for the payload of a CALL frame" in \
            _reply_error(ch.sock)
        ch.close()
        _served(srv)


# ---- the handshake --------------------------------------------------------------------------
def test_one_deadline_for_the_whole_handshake(tmp_path):
    """Three pieces 0.7 s apart: each read would fit a fresh 1 s timeout, the handshake
    does not fit its 1 s deadline."""
    with _running(tmp_path, handshake_timeout=1.0) as srv:
        sock = socket.create_connection((srv.host, srv.port), timeout=10)
        _in_pieces(sock, [HELLO_FRAME[:1], HELLO_FRAME[1:16], HELLO_FRAME[16:]], 0.7)
        assert "timed out after 1 s (the handshake's deadline)" in _reply_error(sock)
        wait_for_log(srv, "refused: ")
        _served(srv)


def test_handshake_drip_holds_a_place_for_the_deadline_only(tmp_path):
    """Clients that send a byte every 0.3 s fill every handshake place; each is dropped at
    the 1 s deadline, and a real client gets its session."""
    with _running(tmp_path, handshake_timeout=1.0, max_handshakes=2, max_sessions=1,
                  secret=SECRET) as srv, ExitStack() as stack:
        socks = [stack.enter_context(socket.create_connection((srv.host, srv.port), timeout=10))
                 for _ in range(2)]
        taken: list[int] = []
        drips = [threading.Thread(target=lambda s=s: taken.append(_drip(s, HELLO_FRAME, 0.3)))
                 for s in socks]
        for t in drips:
            t.start()
        _served(srv, secret=SECRET)
        for t in drips:
            t.join(30)
        assert len(taken) == 2 and max(taken) < len(HELLO_FRAME), taken
        wait_for_log(srv, "handshake's deadline")


def test_unauthenticated_clients_cannot_take_a_session(tmp_path):
    """On a server with a secret, a client that never proves it does not displace an idle
    authenticated session, however long it waits."""
    with _running(tmp_path, secret=SECRET, max_sessions=1, reclaim_idle=0.1,
                  handshake_timeout=1.0) as srv, _connect(srv, secret=SECRET) as sess:
        with socket.create_connection((srv.host, srv.port), timeout=10) as silent:
            with pytest.raises(rpc.AuthenticationError, match="requires authentication"):
                _connect(srv)
            assert "the handshake's deadline" in _reply_error(silent)
        assert sess.get_function("rpc.test.addone")(1) == 2


# ---- sessions -------------------------------------------------------------------------------
def test_idle_sessions_give_their_slot_to_a_waiting_client(tmp_path):
    with _running(tmp_path, max_sessions=2, reclaim_idle=0.5, idle_timeout=120) as srv:
        first, second = _connect(srv), _connect(srv)
        for sess in (first, second):  # first is idle longest
            assert sess.get_function("testing.echo")(1) == 1
        _served(srv)  # without reclaim: a wait for the idle timeout, past the client's own
        with pytest.raises(rpc.RPCConnectionError, match="the server ended the session: another "
                                                         "client needed the slot and this "
                                                         "session was idle for"):
            first.get_function("testing.echo")(2)
        assert second.get_function("testing.echo")(3) == 3
        second.close()


def test_a_running_request_is_never_reclaimed(tmp_path):
    with _running(tmp_path, max_sessions=1, reclaim_idle=1.0, idle_timeout=120) as srv:
        busy = _connect(srv)
        result: list[object] = []
        call = threading.Thread(target=lambda: result.append(
            busy.get_function("rpc.test.sleep")(1.5)))
        call.start()
        time.sleep(0.05)  # the call starts well within the 1 s it could be reclaimed after
        _served(srv)  # it waits for the call to end, then takes the slot
        call.join(30)
        assert result == [1.5]  # the call ran to its end
        with pytest.raises(rpc.RPCConnectionError, match="another client needed the slot"):
            busy.get_function("testing.echo")(1)


@pytest.mark.parametrize("every, limits, why", [
    (0.05, {"reclaim_idle": 30.0, "reclaim_age": 1.0}, "had held it for"),
    (1.0, {"reclaim_idle": 0.3, "reclaim_age": 0.0}, "was idle for"),
])
def test_keepalive_clients_cannot_keep_a_slot(tmp_path, every, limits, why):
    """A client that sends a tiny request every ``every`` s (faster, or slower, than the
    reclaim idle time) loses its slot to a client that waits."""
    errors: list[Exception] = []
    stop, holding = threading.Event(), threading.Event()

    def keepalive(srv: rpc.Server) -> None:
        with _connect(srv) as sess:
            nop = sess.get_function("testing.nop")
            holding.set()
            while not stop.wait(every):
                try:
                    nop()
                except rpc.RPCError as err:
                    errors.append(err)
                    return

    with _running(tmp_path, max_sessions=1, idle_timeout=120, **limits) as srv:
        pinger = threading.Thread(target=keepalive, args=(srv,))
        pinger.start()
        try:
            assert holding.wait(20)
            _served(srv)
            pinger.join(30)
            assert len(errors) == 1 and why in str(errors[0]), errors
        finally:
            stop.set()
            pinger.join(30)


def test_a_client_that_does_not_read_its_reply_is_dropped(tmp_path):
    """A 32 MiB reply to a client that reads none of it: the reply must go out within the
    frame timeout, then the slot is free."""
    from ember.runtime.rpc.codec import Reader, Writer

    with _running(tmp_path, max_sessions=1, frame_timeout=1.0) as srv:
        ch = SocketChannel(socket.create_connection((srv.host, srv.port), timeout=10))
        with ch.sock:
            client_handshake(ch, "", None, 0, 10.0)
            new = Writer()
            new.string("uint8")
            new.shape((32 << 20,))
            new.device(1, 0)
            write_frame(ch, Kind.ARRAY_NEW, 1, new.parts, 5.0)
            handle = Reader(read_frame(ch, 1 << 20, 10.0, 10.0)[2], "RETURN")
            handle.u8("tag")
            read = Writer()
            read.u64(handle.u64("handle"))
            read.u64(0)
            read.u64(32 << 20)
            write_frame(ch, Kind.ARRAY_READ, 2, read.parts, 5.0)  # and reads nothing
            wait_for_log(srv, "before the reply to ARRAY_READ (127.0.0.1")
            assert "timed out after 1 s sending" in wait_for_log(srv, "s sending")
            _served(srv)


def test_idle_timeout_ends_a_forgotten_session(tmp_path):
    with _running(tmp_path, idle_timeout=1.0) as srv:
        sess = _connect(srv)
        assert sess.get_function("testing.echo")(1) == 1
        wait_for_log(srv, "ended: no request for 1 s (the server's idle timeout)")
        with pytest.raises(rpc.RPCConnectionError, match="the server ended the session: no "
                                                         "request for 1 s"):
            sess.get_function("testing.echo")(2)
        with pytest.raises(rpc.RPCError, match="is closed"):
            sess.get_function("testing.echo")
        _served(srv)


def test_a_client_that_leaves_while_waiting_frees_its_place(tmp_path):
    with _running(tmp_path, max_sessions=1, max_handshakes=1, reclaim_idle=30.0) as srv:
        busy = _connect(srv)
        quitter = socket.create_connection((srv.host, srv.port), timeout=10)
        quitter.sendall(HELLO_FRAME)  # then waits for the slot, and leaves
        wait_for_log(srv, "waits for a slot (all 1 are taken)")
        quitter.close()
        wait_for_log(srv, "the client left while waiting for a session slot")
        busy.close()
        _served(srv)  # the only handshake place is free again


# ---- the policy, and the options ------------------------------------------------------------
def _child(idle_for: float | None, held: float, now: float) -> Child:
    clock = IdleClock()
    if idle_for is not None:
        clock.mark_idle(now - idle_for)
    return Child(0, socket.socket(), clock, "", "peer", 0.0, granted=now - held)


def test_choose_victim_prefers_the_longest_idle():
    now = time.monotonic()
    busy, briefly, idle, longer = (_child(None, 50, now), _child(0.1, 900, now),
                                   _child(2.0, 5, now), _child(3.0, 5, now))
    try:
        assert choose_victim([busy, briefly, idle, longer], now, 1.0, 600.0)[0] is longer
        assert choose_victim([busy, briefly], now, 1.0, 600.0)[0] is briefly  # by age
        assert choose_victim([busy, briefly], now, 1.0, 0.0) is None  # age off
        assert choose_victim([busy], now, 0.0, 1.0) is None  # running a request
    finally:
        for c in (busy, briefly, idle, longer):
            c.ctrl.close()
            c.clock.close()


@pytest.mark.parametrize("argv, message", [
    (["--idle-timeout", "-1"], "--idle-timeout -1.0: must be a number of seconds >= 0"),
    (["--handshake-timeout", "0"], "--handshake-timeout 0.0: must be a number of seconds > 0"),
    (["--reclaim-age", "nan"], "--reclaim-age nan: must be a number of seconds >= 0"),
    (["--frame-timeout", "inf"], "--frame-timeout inf: must be a number of seconds > 0"),
    (["--max-handshakes", "0"], "--max-handshakes 0: at least 1"),
])
def test_limit_options_are_checked(capsys, argv, message):
    assert server_main(argv) == 1
    assert capsys.readouterr().out == f"ember-rpc-server error: {message}\n"


def test_idle_timeout_over_stdio_when_asked():
    """A --stdio session has a process of its own: no idle timeout unless one is given."""
    args = ("-m", "ember.exec.rpc_server", "--stdio", "--silent", "--idle-timeout", "0.3")
    with rpc.PopenSession(sys.executable, args, timeout=30) as sess:
        assert sess.get_function("testing.echo")("x") == "x"
        sess._proc.wait(20)
        with pytest.raises(RPCConnectionError, match="no request for 0.3 s"):
            sess.get_function("testing.echo")("y")

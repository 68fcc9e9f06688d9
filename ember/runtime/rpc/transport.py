"""Byte streams that carry frames: a TCP socket or a pair of pipes, each with timeouts.

``read_frame``/``write_frame`` are the only places that touch the stream: a reader waits up
to ``timeout`` for a frame to start (None: forever) and then up to ``frame_timeout`` for all
of the rest of it, so a peer that stops (or dribbles) half way through a frame cannot hold the
reader forever. A ``Deadline`` caps both, for an exchange of several frames that must end by
one time (the handshake). A payload buffer grows with the bytes that arrive, never straight
to the length a header claims: a peer that announces 64 MiB and sends nothing costs 1 MiB.
"""
from __future__ import annotations

import ctypes
import os
import select
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass

from .protocol import (
    HEADER_SIZE,
    ProtocolError,
    RPCConnectionError,
    kind_name,
    pack_header,
    unpack_header,
)

Buffer = bytes | bytearray | memoryview
_SMALL = 1 << 16  # payloads below this are joined with their header into one write
PAYLOAD_CHUNK = 1 << 20  # a payload buffer starts at most this large, then grows with the bytes


class _TimedOut(Exception):
    """A wait on the stream ran out of time (``read_frame`` says for what)."""


@dataclass(frozen=True)
class Deadline:
    """One end time for several reads and writes: ``Deadline.after(10, "the handshake's
    deadline")``; every wait under it is bounded by the time left, not given a timeout of its
    own."""

    at: float  # time.monotonic()
    seconds: float
    name: str

    @staticmethod
    def after(seconds: float, name: str) -> Deadline:
        return Deadline(time.monotonic() + seconds, seconds, name)

    def left(self) -> float:
        """Seconds left (at least a millisecond, so a last small write still gets a try)."""
        return max(self.at - time.monotonic(), 1e-3)


def _bound(timeout: float | None, deadline: Deadline | None) -> tuple[float | None, str]:
    """When a wait of ``timeout`` seconds under ``deadline`` ends, and how to say it ran out."""
    until = None if timeout is None else time.monotonic() + timeout
    if deadline is not None and (until is None or deadline.at < until):
        return deadline.at, f"timed out after {deadline.seconds:g} s ({deadline.name})"
    return until, "" if timeout is None else f"timed out after {timeout:g} s"


class Channel:
    """A bidirectional byte stream. Subclasses implement ``_recv_some`` and ``_send_all``."""

    def __init__(self, peer: str) -> None:
        self.peer = peer
        self.closed = False

    def recv_exact(self, buf: memoryview, until: float | None) -> int:
        """Fill ``buf`` before the ``time.monotonic()`` value ``until`` (None: no limit);
        returns the bytes read, fewer only at end of stream. _TimedOut when ``until`` passes
        first."""
        got = 0
        while got < len(buf):
            left = None if until is None else until - time.monotonic()
            if left is not None and left <= 0:
                raise _TimedOut()
            n = self._recv_some(buf[got:], left)
            if n == 0:
                break
            got += n
        return got

    def send(self, parts: Sequence[Buffer], timeout: float | None) -> None:
        """Send every part within ``timeout`` seconds in all (None: no limit)."""
        until = None if timeout is None else time.monotonic() + timeout
        try:
            for part in parts:
                if len(part):
                    left = None if until is None else max(until - time.monotonic(), 1e-3)
                    self._send_all(part, left)
        except _TimedOut:
            raise RPCConnectionError(f"{self.peer}: timed out after {timeout:g} s sending") \
                from None

    def fileno(self) -> int | None:
        """The descriptor a reader can wait on with select (None: this stream has none)."""
        return None

    def _recv_some(self, buf: memoryview, timeout: float | None) -> int:
        """Read at least one byte (0: end of stream); _TimedOut after ``timeout`` s."""
        raise NotImplementedError

    def _send_all(self, data: Buffer, timeout: float | None) -> None:
        """Write all of ``data``; _TimedOut after ``timeout`` s."""
        raise NotImplementedError

    def close(self) -> None:
        self.closed = True

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.peer})"


class SocketChannel(Channel):
    """A connected TCP (or Unix) socket."""

    def __init__(self, sock: socket.socket, peer: str | None = None) -> None:
        if peer is None:
            try:
                host, port = sock.getpeername()[:2]
                peer = f"{host}:{port}"
            except (OSError, ValueError):
                peer = "socket"
        super().__init__(peer)
        self.sock = sock
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)

    def fileno(self) -> int | None:
        return self.sock.fileno()

    def _recv_some(self, buf: memoryview, timeout: float | None) -> int:
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv_into(buf)
        except TimeoutError:
            raise _TimedOut() from None
        except OSError as err:  # reset by peer and friends: the stream ended
            if self.closed:
                return 0
            raise RPCConnectionError(f"{self.peer}: connection lost: {err}") from None

    def _send_all(self, data: Buffer, timeout: float | None) -> None:
        self.sock.settimeout(timeout)
        try:
            self.sock.sendall(data)
        except TimeoutError:
            raise _TimedOut() from None
        except OSError as err:
            raise RPCConnectionError(f"{self.peer}: connection lost while sending: {err}") \
                from None

    def close(self) -> None:
        if not self.closed:
            super().close()
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.sock.close()


class PipeChannel(Channel):
    """Two file descriptors: one to read, one to write (a subprocess's stdout and stdin)."""

    def __init__(self, read_fd: int, write_fd: int, peer: str = "pipe",
                 owns_fds: bool = True) -> None:
        super().__init__(peer)
        self.read_fd, self.write_fd = read_fd, write_fd
        self.owns_fds = owns_fds  # False: whoever opened them (a Popen) closes them

    def fileno(self) -> int | None:
        return self.read_fd

    def _wait(self, fd: int, for_write: bool, timeout: float | None) -> None:
        reads, writes = ([], [fd]) if for_write else ([fd], [])
        if not any(select.select(reads, writes, [], timeout)):
            raise _TimedOut()

    def _recv_some(self, buf: memoryview, timeout: float | None) -> int:
        self._wait(self.read_fd, False, timeout)
        try:
            return os.readv(self.read_fd, [buf])
        except OSError as err:
            raise RPCConnectionError(f"{self.peer}: read failed: {err}") from None

    def _send_all(self, data: Buffer, timeout: float | None) -> None:
        view = memoryview(data).cast("B")
        while len(view):
            self._wait(self.write_fd, True, timeout)
            try:
                n = os.write(self.write_fd, view[:1 << 20])
            except OSError as err:  # EPIPE: the reader is gone
                raise RPCConnectionError(f"{self.peer}: write failed: {err}") from None
            view = view[n:]

    def close(self) -> None:
        if not self.closed:
            super().close()
            for fd in {self.read_fd, self.write_fd} if self.owns_fds else ():
                try:
                    os.close(fd)
                except OSError:
                    pass


def read_frame(ch: Channel, limit: int, timeout: float | None = None,
               frame_timeout: float | None = None, deadline: Deadline | None = None
               ) -> tuple[int, int, memoryview]:
    """``(kind, seq, payload)`` of the next frame: it must start within ``timeout`` and then
    arrive in full within ``frame_timeout`` (None: no limit), both capped by ``deadline``.

    Raises RPCConnectionError when the stream ends before a frame starts (or times out), and
    ProtocolError for a truncated frame, a bad magic or a length over ``limit``.
    """
    head = bytearray(HEADER_SIZE)
    got = _recv(ch, memoryview(head)[:1], _bound(timeout, deadline), "the next frame")
    if got == 0:
        raise RPCConnectionError(f"{ch.peer}: connection closed")
    rest = _bound(frame_timeout, deadline)
    try:  # the frame has started: a wait that runs out now is the peer's fault
        got += _recv(ch, memoryview(head)[1:], rest, "the rest of a frame header")
        if got < HEADER_SIZE:
            raise ProtocolError(f"truncated frame: the stream ended after {got} of "
                                f"{HEADER_SIZE} header bytes")
        kind, seq, length = unpack_header(bytes(head), limit)
        payload, got = _read_payload(ch, length, rest, f"the payload of a {kind_name(kind)} "
                                                       "frame")
    except RPCConnectionError as err:
        raise ProtocolError(f"incomplete frame: {err}") from None
    if got < length:
        raise ProtocolError(f"truncated {kind_name(kind)} frame: the stream ended after {got} "
                            f"of {length} payload bytes")
    return kind, seq, memoryview(payload)


def _recv(ch: Channel, buf: memoryview, bound: tuple[float | None, str], what: str) -> int:
    try:
        return ch.recv_exact(buf, bound[0])
    except _TimedOut:
        raise RPCConnectionError(f"{ch.peer}: {bound[1]} waiting for {what}") from None
    finally:
        buf.release()


def _read_payload(ch: Channel, length: int, bound: tuple[float | None, str], what: str
                  ) -> tuple[bytearray, int]:
    """The payload and the bytes that came (fewer than ``length`` only at end of stream).
    The buffer starts at PAYLOAD_CHUNK and, each time it is full, grows to four times what
    has come: memory follows the bytes that arrive, not the length the header claims."""
    buf = bytearray(min(length, PAYLOAD_CHUNK))
    got = 0
    while True:
        got += _recv(ch, memoryview(buf)[got:], bound, what)
        if got < len(buf) or got == length:
            return buf, got
        _grow(buf, min(length, 4 * got))


def _grow_unfilled(buf: bytearray, size: int) -> None:
    # CPython's PyByteArray_Resize: realloc without zeroing the new bytes (the reads fill
    # them), so the pages are touched once, by the bytes that come.
    if _resize(ctypes.py_object(buf), size) != 0:  # pragma: no cover (it raises instead)
        raise MemoryError(f"cannot grow a frame buffer to {size} bytes")


def _grow_zeroed(buf: bytearray, size: int) -> None:
    buf += bytes(size - len(buf))


try:
    _resize = ctypes.pythonapi.PyByteArray_Resize
    _resize.argtypes, _resize.restype = [ctypes.py_object, ctypes.c_ssize_t], ctypes.c_int
    _grow = _grow_unfilled
except AttributeError:  # pragma: no cover (a Python without its C API in ctypes)
    _grow = _grow_zeroed


def write_frame(ch: Channel, kind: int, seq: int, parts: Sequence[Buffer],
                timeout: float | None = None) -> None:
    """Send one frame whose payload is the concatenation of ``parts``."""
    length = sum(memoryview(p).nbytes for p in parts)
    head = pack_header(kind, seq, length)
    if length < _SMALL:
        ch.send([b"".join([head, *parts])], timeout)
    else:
        ch.send([head, *parts], timeout)

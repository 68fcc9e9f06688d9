"""Byte streams that carry frames: a TCP socket or a pair of pipes, each with timeouts.

``read_frame``/``write_frame`` are the only places that touch the stream: a reader waits up
to ``timeout`` for a frame to start (None: forever) and then up to ``frame_timeout`` for the
rest of it, so a peer that stops half way through a frame cannot hold the reader forever.
"""
from __future__ import annotations

import os
import select
import socket
import time
from collections.abc import Sequence

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


class _TimedOut(Exception):
    """A wait on the stream ran out of time (``recv_exact`` says for what)."""


class Channel:
    """A bidirectional byte stream. Subclasses implement ``_recv_some`` and ``_send_all``."""

    def __init__(self, peer: str) -> None:
        self.peer = peer
        self.closed = False

    def recv_exact(self, buf: memoryview, timeout: float | None, what: str) -> int:
        """Fill ``buf``; returns the bytes read, fewer only at end of stream. RPCConnectionError
        when ``timeout`` seconds pass first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        got = 0
        while got < len(buf):
            left = None if deadline is None else deadline - time.monotonic()
            try:
                if left is not None and left <= 0:
                    raise _TimedOut()
                n = self._recv_some(buf[got:], left)
            except _TimedOut:
                raise RPCConnectionError(f"{self.peer}: timed out after {timeout:g} s waiting "
                                         f"for {what}") from None
            if n == 0:
                break
            got += n
        return got

    def send(self, parts: Sequence[Buffer], timeout: float | None) -> None:
        for part in parts:
            if len(part):
                self._send_all(part, timeout)

    def _recv_some(self, buf: memoryview, timeout: float | None) -> int:
        raise NotImplementedError

    def _send_all(self, data: Buffer, timeout: float | None) -> None:
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
            raise RPCConnectionError(f"{self.peer}: timed out after {timeout:g} s sending") \
                from None
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
            try:
                self._wait(self.write_fd, True, timeout)
            except _TimedOut:
                raise RPCConnectionError(f"{self.peer}: timed out after {timeout:g} s "
                                         "sending") from None
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
               frame_timeout: float | None = None) -> tuple[int, int, memoryview]:
    """``(kind, seq, payload)`` of the next frame.

    Raises RPCConnectionError when the stream ends before a frame starts (or times out), and
    ProtocolError for a truncated frame, a bad magic or a length over ``limit``.
    """
    head = memoryview(bytearray(HEADER_SIZE))
    got = ch.recv_exact(head[:1], timeout, "the next frame")
    if got == 0:
        raise RPCConnectionError(f"{ch.peer}: connection closed")
    try:  # the frame has started: a wait that runs out now is the peer's fault
        got += ch.recv_exact(head[1:], frame_timeout, "the rest of a frame header")
        if got < HEADER_SIZE:
            raise ProtocolError(f"truncated frame: the stream ended after {got} of "
                                f"{HEADER_SIZE} header bytes")
        kind, seq, length = unpack_header(bytes(head), limit)
        payload = memoryview(bytearray(length))
        got = ch.recv_exact(payload, frame_timeout, f"the payload of a {kind_name(kind)} frame")
    except RPCConnectionError as err:
        raise ProtocolError(f"incomplete frame: {err}") from None
    if got < length:
        raise ProtocolError(f"truncated {kind_name(kind)} frame: the stream ended after {got} "
                            f"of {length} payload bytes")
    return kind, seq, payload


def write_frame(ch: Channel, kind: int, seq: int, parts: Sequence[Buffer],
                timeout: float | None = None) -> None:
    """Send one frame whose payload is the concatenation of ``parts``."""
    length = sum(memoryview(p).nbytes for p in parts)
    head = pack_header(kind, seq, length)
    if length < _SMALL:
        ch.send([b"".join([head, *parts])], timeout)
    else:
        ch.send([head, *parts], timeout)

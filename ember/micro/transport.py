"""Byte transports between this process and a micro device, as ``tvm.micro.transport``.

A ``Transport`` opens a link to a device (``open``/``close``, or a ``with`` block) and moves
bytes over it with a timeout on each read and write. ``ember.micro.Session`` runs the RPC
protocol over one; ``GeneratedProject.transport()`` gives one to the host "device" process.

Errors: ``IoTimeoutError`` (a read or write ran out of time) and ``SessionTerminatedError``
(the device went away: the process died, the link closed); both are ``MicroSessionError``s
and ``rpc.RPCConnectionError``s.
"""
from __future__ import annotations

import abc
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..runtime.errors import RPCError
from ..runtime.rpc.protocol import RPCConnectionError
from ..runtime.rpc.transport import Channel

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is Python 3.11+

log = logging.getLogger("ember.micro.transport")


class MicroSessionError(RPCError):
    """A micro session failed: the device, its link or its project."""


class IoTimeoutError(MicroSessionError, RPCConnectionError):
    """A read or write on a transport did not complete within its timeout."""


class SessionTerminatedError(MicroSessionError, RPCConnectionError):
    """The device ended the link (its process exited, the line closed): '<device>: exited
    with status -9 (killed by signal SIGKILL); its last log lines: ...'."""


@dataclass(frozen=True)
class TransportTimeouts:
    """The timeouts of a session over a transport, in seconds (``tvm.micro``'s names).

    ``session_start_retry_timeout_sec``: kept for the Relay-era API (a pipe or serial link that
    is open is not retried); ``session_start_timeout_sec``: the handshake;
    ``session_established_timeout_sec``: each request once the session runs (0: no limit).
    """

    session_start_retry_timeout_sec: float = 0.0
    session_start_timeout_sec: float = 10.0
    session_established_timeout_sec: float = 60.0


class Transport(abc.ABC):
    """A link to a device. Subclasses implement ``open``, ``close``, ``read``, ``write`` and
    ``timeouts``; ``with transport:`` opens and closes it."""

    def __enter__(self) -> Self:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abc.abstractmethod
    def timeouts(self) -> TransportTimeouts:
        """The timeouts a session over this transport should use."""

    @abc.abstractmethod
    def open(self) -> None:
        """Establish the link (start the device process, open the port)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the link and everything it started; idempotent."""

    @abc.abstractmethod
    def read(self, n: int, timeout_sec: float | None) -> bytes:
        """Between 1 and ``n`` bytes. Raises IoTimeoutError after ``timeout_sec`` (None: wait
        forever) and SessionTerminatedError when the device closed the link."""

    @abc.abstractmethod
    def write(self, data: bytes | bytearray | memoryview, timeout_sec: float | None) -> int:
        """Write some of ``data`` (at least one byte); returns how many. Raises as ``read``."""


class TransportChannel(Channel):
    """A Transport as the byte stream of an RPC session (``ember.rpc.ChannelSession``)."""

    def __init__(self, transport: Transport, peer: str) -> None:
        super().__init__(peer)
        self.transport = transport

    def _recv_some(self, buf: memoryview, timeout: float | None) -> int:
        data = self._io(self.transport.read, len(buf), timeout)
        if not data:
            raise SessionTerminatedError(f"{self.peer}: the transport returned no data")
        if len(data) > len(buf):
            raise MicroSessionError(f"{self.peer}: the transport returned {len(data)} bytes for "
                                    f"a read of at most {len(buf)}")
        buf[:len(data)] = data
        return len(data)

    def _send_all(self, data: Any, timeout: float | None) -> None:
        view = memoryview(data).cast("B")
        while len(view):
            n = self._io(self.transport.write, view, timeout)
            if not 0 < n <= len(view):
                raise MicroSessionError(f"{self.peer}: the transport wrote {n} of {len(view)} "
                                        "bytes")
            view = view[n:]

    def _io(self, op: Any, arg: Any, timeout: float | None) -> Any:
        if self.closed:
            raise SessionTerminatedError(f"{self.peer}: the session's transport is closed")
        try:
            return op(arg, timeout)
        except IoTimeoutError as err:
            raise IoTimeoutError(f"{self.peer}: {err}") from None

    def close(self) -> None:
        self.closed = True  # the transport itself is closed by whoever opened it


__all__ = ["IoTimeoutError", "MicroSessionError", "SessionTerminatedError", "Transport",
           "TransportChannel", "TransportTimeouts"]

"""A server's connection to its tracker: register as free, learn when a client was sent.

While free, the server is registered under its key with a fresh random match key; the tracker
gives that match key to the one client it dispatches here, and the server accepts no other.
When that session ends (or the client does not come within ``assign_timeout``) the server
registers again with a new match key. A lost tracker is retried every few seconds.
"""
from __future__ import annotations

import logging
import secrets
import selectors
import socket
import time

from ..errors import RPCError
from .tracker_proto import TRACKER_VERSION, read_message, send_message
from .transport import SocketChannel

log = logging.getLogger("ember.rpc.server")
RETRY_SECONDS = 3.0


class TrackerLink:
    """The server side of the tracker protocol, driven by the server's select loop."""

    def __init__(self, addr: tuple[str, int], key: str, port: int, custom_addr: str | None,
                 assign_timeout: float, sel: selectors.BaseSelector) -> None:
        self.addr, self.key, self.port, self.custom_addr = addr, key, port, custom_addr
        self.assign_timeout = assign_timeout
        self.sel = sel
        self.ch: SocketChannel | None = None
        self.matchkey: str | None = None
        self.assigned_deadline: float | None = None
        self.retry_at = 0.0
        self.busy = False  # a session this server was dispatched for is running

    def expected_key(self) -> str | None:
        """The key the next client must present (None while a dispatched session runs)."""
        return None if self.busy else self.matchkey

    def next_timeout(self, now: float) -> float:
        times = [self.retry_at - now] if self.ch is None else []
        if self.assigned_deadline is not None:
            times.append(self.assigned_deadline - now)
        return min(times, default=1.0)

    def maintain(self) -> None:
        now = time.monotonic()
        if self.ch is None and now >= self.retry_at:
            self._connect()
        if (self.assigned_deadline is not None and now >= self.assigned_deadline
                and not self.busy and self.ch is not None):
            log.info("the client the tracker sent did not arrive within %g s; registering again",
                     self.assign_timeout)
            self._put()

    def _connect(self) -> None:
        host, port = self.addr
        try:
            sock = socket.create_connection((host, port), timeout=2.0)
            ch = SocketChannel(sock, f"tracker {host}:{port}")
            send_message(ch, {"op": "hello", "version": TRACKER_VERSION, "role": "server"})
            reply = read_message(ch, 5.0, expect_reply=True)
            if not reply.get("ok"):
                ch.close()
                raise RPCError(f"tracker refused the server: {reply.get('error')}")
        except (OSError, RPCError) as err:
            log.warning("cannot reach the tracker at %s:%s: %s; retrying in %g s", host, port,
                        err, RETRY_SECONDS)
            self.retry_at = time.monotonic() + RETRY_SECONDS
            return
        self.ch = ch
        self.sel.register(sock, selectors.EVENT_READ, "tracker")
        log.info("registered with the tracker at %s:%s under key %r", host, port, self.key)
        if not self.busy:
            self._put()

    def _put(self) -> None:
        assert self.ch is not None, "put needs a tracker connection"
        self.matchkey = f"{self.key}:{secrets.token_hex(8)}"
        self.assigned_deadline = None
        try:
            send_message(self.ch, {"op": "put", "key": self.key, "port": self.port,
                                   "matchkey": self.matchkey, "addr": self.custom_addr})
        except RPCError as err:
            self._lost(err)

    def on_readable(self) -> None:
        assert self.ch is not None, "tracker events need a tracker connection"
        try:
            message = read_message(self.ch, 5.0)
        except RPCError as err:
            self._lost(err)
            return
        if message.get("event") == "assigned" and message.get("matchkey") == self.matchkey:
            self.assigned_deadline = time.monotonic() + self.assign_timeout

    def _lost(self, err: Exception) -> None:
        log.warning("lost the tracker connection: %s; reconnecting in %g s", err, RETRY_SECONDS)
        self.close()
        self.retry_at = time.monotonic() + RETRY_SECONDS

    def session_started(self) -> None:
        self.busy = True
        self.matchkey = None
        self.assigned_deadline = None

    def session_ended(self) -> None:
        self.busy = False
        if self.ch is not None:
            self._put()

    def close(self) -> None:
        if self.ch is not None:
            self.sel.unregister(self.ch.sock)
            self.ch.close()
            self.ch = None

    def close_in_child(self) -> None:
        """In a forked session: drop the copy of the connection without telling the tracker."""
        if self.ch is not None:
            self.ch.sock.close()

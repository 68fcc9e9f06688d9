"""The tracker's event loop: free servers per key, queued requests per key, and the matching.

One process, one thread, a selector over every connection. Frames are reassembled from
whatever bytes arrive, so a slow or silent peer never blocks the others; a peer that breaks
the protocol is dropped, with its registration or its queued requests. Requests are served
highest priority first, in arrival order within a priority.
"""
from __future__ import annotations

import heapq
import itertools
import logging
import selectors
import signal
import socket
from dataclasses import dataclass, field
from typing import Any

from ..errors import RPCError
from .protocol import HEADER_SIZE, Kind, ProtocolError, kind_name, unpack_header
from .tracker_proto import TRACKER_MAX_FRAME, TRACKER_VERSION, parse_message, send_message
from .tracker_proto import field as get_field
from .transport import SocketChannel

log = logging.getLogger("ember.rpc.tracker")


@dataclass(eq=False)
class _Peer:
    ch: SocketChannel
    host: str
    buf: bytearray = field(default_factory=bytearray)
    role: str | None = None
    server: tuple[str, str, int, str] | None = None  # key, host, port, matchkey (while free)
    registered: tuple[str, str, int] | None = None  # key, host, port of the last put
    requests: set[int] = field(default_factory=set)


class TrackerLoop:
    """Runs until SIGTERM or SIGINT."""

    def __init__(self, listener: socket.socket) -> None:
        self.listener = listener
        self.sel = selectors.DefaultSelector()
        self.free: dict[str, list[_Peer]] = {}
        self.queue: dict[str, list[tuple[int, int, _Peer, int]]] = {}
        self.seq = itertools.count()
        self.stop = False

    def run(self) -> None:
        """Serve until SIGTERM or SIGINT."""
        wake_r, wake_w = socket.socketpair()
        wake_w.setblocking(False)
        signal.set_wakeup_fd(wake_w.fileno())
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        self.listener.setblocking(False)
        self.sel.register(self.listener, selectors.EVENT_READ, None)
        self.sel.register(wake_r, selectors.EVENT_READ, "wake")
        try:
            while not self.stop:
                for key, _ in self.sel.select(5.0):
                    if key.data is None:
                        self._accept()
                    elif key.data == "wake":
                        wake_r.recv(64)
                    else:
                        self._readable(key.data)
        finally:
            signal.set_wakeup_fd(-1)
            for key in list(self.sel.get_map().values()):
                if isinstance(key.data, _Peer):
                    key.data.ch.close()
            self.sel.close()
            self.listener.close()
            wake_r.close()
            wake_w.close()

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.stop = True

    def _accept(self) -> None:
        try:
            sock, addr = self.listener.accept()
        except BlockingIOError:
            return
        sock.setblocking(False)
        peer = _Peer(SocketChannel(sock, f"{addr[0]}:{addr[1]}"), addr[0])
        self.sel.register(sock, selectors.EVENT_READ, peer)

    def _readable(self, peer: _Peer) -> None:
        try:
            data = peer.ch.sock.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError as err:
            self._drop(peer, f"connection lost: {err}")
            return
        if not data:
            self._drop(peer, "disconnected")
            return
        peer.buf += data
        try:
            while not peer.ch.closed and (message := self._next_message(peer)) is not None:
                self._handle(peer, message)
        except Exception as err:  # noqa: BLE001  (a bad peer is dropped, the tracker goes on)
            self._drop(peer, f"{type(err).__name__}: {err}")

    def _next_message(self, peer: _Peer) -> dict[str, Any] | None:
        if len(peer.buf) < HEADER_SIZE:
            return None
        kind, _, length = unpack_header(bytes(peer.buf[:HEADER_SIZE]), TRACKER_MAX_FRAME)
        if len(peer.buf) < HEADER_SIZE + length:
            return None
        payload = bytes(peer.buf[HEADER_SIZE:HEADER_SIZE + length])
        del peer.buf[:HEADER_SIZE + length]
        if kind != Kind.TRACKER:
            raise ProtocolError(f"expected a TRACKER frame, got {kind_name(kind)}")
        return parse_message(payload)

    def _send(self, peer: _Peer, message: dict[str, Any], reply: bool = True) -> bool:
        try:
            peer.ch.sock.setblocking(True)
            send_message(peer.ch, message, reply=reply, timeout=5.0)
            return True
        except RPCError as err:
            self._drop(peer, f"cannot send: {err}")
            return False
        finally:
            if not peer.ch.closed:
                peer.ch.sock.setblocking(False)

    # -- messages -------------------------------------------------------------------------------
    def _handle(self, peer: _Peer, message: dict[str, Any]) -> None:
        op = message.get("op")
        if peer.role is None:
            if op != "hello":
                raise ProtocolError(f"expected 'hello' first, got {op!r}")
            self._hello(peer, message)
        elif op == "put" and peer.role == "server":
            self._put(peer, message)
        elif op == "request" and peer.role == "client":
            self._request(peer, message)
        elif op == "cancel" and peer.role == "client":
            peer.requests.discard(get_field(message, "id", int))
        elif op == "summary" and peer.role == "client":
            self._send(peer, {"id": message.get("id"), "ok": True, "summary": self.summary()})
        else:
            raise ProtocolError(f"unexpected op {op!r} from a {peer.role}")

    def _hello(self, peer: _Peer, message: dict[str, Any]) -> None:
        version, role = message.get("version"), message.get("role")
        if version != TRACKER_VERSION or role not in ("server", "client"):
            self._send(peer, {"ok": False, "error": f"tracker protocol version {TRACKER_VERSION}"
                              f" with role server or client expected, got version {version!r}, "
                              f"role {role!r}"})
            raise ProtocolError(f"bad hello {message!r}")
        peer.role = role
        self._send(peer, {"ok": True, "version": TRACKER_VERSION})

    def _put(self, peer: _Peer, message: dict[str, Any]) -> None:
        key = get_field(message, "key", str)
        port = get_field(message, "port", int)
        matchkey = get_field(message, "matchkey", str)
        host = message.get("addr") or peer.host
        self._unregister(peer)
        peer.server = (key, str(host), port, matchkey)
        peer.registered = (key, str(host), port)
        self.free.setdefault(key, []).append(peer)
        log.info("server %s:%d free under key %r", host, port, key)
        self._match(key)

    def _request(self, peer: _Peer, message: dict[str, Any]) -> None:
        key = get_field(message, "key", str)
        rid = get_field(message, "id", int)
        priority = message.get("priority", 1)
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise ProtocolError(f"request: priority must be an int, got {priority!r}")
        peer.requests.add(rid)
        heapq.heappush(self.queue.setdefault(key, []), (-priority, next(self.seq), peer, rid))
        self._match(key)

    def _match(self, key: str) -> None:
        queue, free = self.queue.get(key, []), self.free.get(key, [])
        while queue and free:
            _, _, client, rid = heapq.heappop(queue)
            if rid not in client.requests or client.ch.closed:
                continue  # cancelled, or the client left
            client.requests.discard(rid)
            server = free.pop(0)
            _, host, port, matchkey = server.server  # type: ignore[misc]
            server.server = None
            if not self._send(client, {"id": rid, "ok": True, "host": host, "port": port,
                                       "matchkey": matchkey}):
                server.server = (key, host, port, matchkey)
                free.insert(0, server)
                continue
            self._send(server, {"event": "assigned", "matchkey": matchkey}, reply=False)
            log.info("request %d for key %r sent to %s:%d", rid, key, host, port)

    # -- state ----------------------------------------------------------------------------------
    def _unregister(self, peer: _Peer) -> None:
        if peer.server is not None:
            servers = self.free.get(peer.server[0], [])
            if peer in servers:
                servers.remove(peer)
            peer.server = None

    def _drop(self, peer: _Peer, reason: str) -> None:
        if peer.ch.closed:
            return
        log.info("%s %s: %s", peer.role or "peer", peer.ch.peer, reason)
        self._unregister(peer)
        peer.requests.clear()
        try:
            self.sel.unregister(peer.ch.sock)
        except (KeyError, ValueError):
            pass
        peer.ch.close()

    def summary(self) -> dict[str, Any]:
        """``{"queue_info": {key: {"free": n, "pending": m}}, "server_info": [...]}``."""
        keys = set(self.free) | set(self.queue)
        queue_info = {}
        for key in sorted(keys):
            pending = sum(1 for _, _, c, rid in self.queue.get(key, [])
                          if rid in c.requests and not c.ch.closed)
            queue_info[key] = {"free": len(self.free.get(key, [])), "pending": pending}
        peers = [k.data for k in self.sel.get_map().values() if isinstance(k.data, _Peer)]
        servers = [{"key": p.registered[0], "addr": [p.registered[1], p.registered[2]],
                    "free": p.server is not None}
                   for p in peers if p.registered is not None and not p.ch.closed]
        return {"queue_info": queue_info, "server_info": servers}

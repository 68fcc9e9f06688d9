"""Session slots: how a server shares its ``max_sessions`` slots among the clients that want one.

A new connection first takes one of ``max_handshakes`` handshake places, for at most the
handshake deadline (its process enforces it; the main process kills one that overstays by a
second). A client that has finished its handshake (and proved the secret, when the server has
one) asks the main process for a session slot before it gets WELCOME. When every slot is
taken, the main process frees one for it: it ends the session that has waited longest for its
next request, provided it has waited ``reclaim_idle`` seconds; failing that, a session between
two requests that has held its slot ``reclaim_age`` seconds. A session that is running a
request is never ended for another client. So a handful of idle, slow or chatty clients cannot
lock the others out, and a client that never finishes its handshake never holds a slot.

Each session process talks to the main process over a SOCK_SEQPACKET pair:

    session -> main   b"R" + u32 session timeout   handshake done: asks for a slot
    main -> session   b"G"                         the slot is granted: send WELCOME
    main -> session   b"X" + reason (UTF-8)        give the slot up at the next wait for a request

and shares an ``IdleClock`` with it: since when the session has waited for its next request,
which the main process reads to choose whom to end, at no cost per request. A request counts
from its last byte, so a client that dribbles a frame is idle all along.
"""
from __future__ import annotations

import enum
import logging
import mmap
import os
import selectors
import signal
import socket
import struct
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..errors import RPCError
from .protocol import ProtocolError, RPCConnectionError
from .transport import Channel, SocketChannel

log = logging.getLogger("ember.rpc.server")
REQUEST = struct.Struct("<cI")  # b"R", the session timeout the client asked for
GRANT, RECLAIM = b"G", b"X"
OVERSTAY = 1.0  # seconds past a limit its own process enforces before the main process kills it
_CLOCK = struct.Struct("<d")
_BUSY = 0.0


class IdleClock:
    """Since when a session has waited for its next request, in memory shared across fork."""

    def __init__(self) -> None:
        self._mem = mmap.mmap(-1, _CLOCK.size)  # anonymous and MAP_SHARED: the child's writes show

    def mark_idle(self, since: float | None = None) -> None:
        """Waiting for a request since ``since`` (default: now)."""
        _CLOCK.pack_into(self._mem, 0, time.monotonic() if since is None else since)

    def mark_busy(self) -> None:
        _CLOCK.pack_into(self._mem, 0, _BUSY)

    def idle_since(self) -> float | None:
        """The ``time.monotonic()`` the wait began; None while a request runs."""
        since = _CLOCK.unpack_from(self._mem, 0)[0]
        return None if since == _BUSY else since

    def close(self) -> None:
        self._mem.close()


# ---- in the session's process ---------------------------------------------------------------
class SlotLink:
    """A session process's end: ask for a slot, mark idle and busy, hear a reclaim."""

    def __init__(self, sock: socket.socket, clock: IdleClock) -> None:
        self.sock = sock
        self.clock = clock

    def request_slot(self, ch: SocketChannel, session_timeout: int) -> None:
        """Wait, as long as it takes, for the main process to grant a slot; RPCError when the
        client leaves (or speaks before WELCOME) or the server stops meanwhile."""
        self.sock.sendall(REQUEST.pack(b"R", session_timeout))
        with selectors.DefaultSelector() as sel:
            sel.register(self.sock, selectors.EVENT_READ, "main")
            sel.register(ch.sock, selectors.EVENT_READ, "client")
            while True:
                for key, _ in sel.select():
                    if key.data == "main":
                        message = self.sock.recv(64)
                        if message[:1] == GRANT:
                            return
                        if not message:
                            raise RPCError("the server is stopping")
                    elif _peek(ch.sock):
                        raise ProtocolError("the client sent a frame before WELCOME")
                    else:
                        raise RPCConnectionError(f"{ch.peer}: the client left while waiting "
                                                 "for a session slot")

    def reclaimed(self) -> str | None:
        """Why the main process wants the slot back (call when the link is readable)."""
        message = self.sock.recv(4096)
        if not message:
            return "the server stopped"
        return message[1:].decode(errors="replace") if message[:1] == RECLAIM else None


def _peek(sock: socket.socket) -> bool:
    """Whether a readable socket has bytes (False: end of stream, or reset)."""
    try:
        return bool(sock.recv(1, socket.MSG_PEEK))
    except OSError:
        return False


class RequestWaiter:
    """Waits for a session's next request: the client's first byte, an idle timeout, or the
    main process reclaiming the slot, whichever comes first."""

    def __init__(self, ch: Channel, idle_timeout: float | None, link: SlotLink | None) -> None:
        self.idle_timeout = idle_timeout or None
        self.link = link
        self.sel: selectors.BaseSelector | None = None
        fd = ch.fileno()
        if fd is not None and (self.idle_timeout or link):  # else read_frame's timeout bounds it
            self.sel = selectors.DefaultSelector()
            self.sel.register(fd, selectors.EVENT_READ, "client")
            if link is not None:
                self.sel.register(link.sock, selectors.EVENT_READ, "main")

    def wait(self) -> str | None:
        """None when a request starts, else why the session ends."""
        if self.link is not None:
            self.link.clock.mark_idle()
        if self.sel is None:
            return None
        until = None if self.idle_timeout is None else time.monotonic() + self.idle_timeout
        while True:
            left = None if until is None else until - time.monotonic()
            if left is not None and left <= 0:
                return f"no request for {self.idle_timeout:g} s (the server's idle timeout)"
            ready = {key.data for key, _ in self.sel.select(left)}
            if "main" in ready:  # first: a reclaimed session starts no new request
                reason = self.link.reclaimed()  # type: ignore[union-attr]
                if reason is not None:
                    return reason
            if "client" in ready:
                return None

    def started(self) -> None:
        """A whole request has arrived: the session is busy until its reply is sent."""
        if self.link is not None:
            self.link.clock.mark_busy()

    def close(self) -> None:
        if self.sel is not None:
            self.sel.close()


# ---- in the main process --------------------------------------------------------------------
class Phase(enum.Enum):
    HANDSHAKE = "handshake"  # connected, has not proved itself yet
    WAITING = "waiting"      # handshake done, waits for a slot
    SESSION = "session"      # holds a slot


@dataclass(eq=False)
class Child:
    """A session process as the main process sees it."""

    pid: int
    ctrl: socket.socket
    clock: IdleClock
    workdir: str
    peer: str
    accepted: float
    phase: Phase = Phase.HANDSHAKE
    session_timeout: int = 0
    granted: float = 0.0
    reclaim_sent: float | None = None
    killed: bool = False  # by the server (a limit, shutdown): already logged

    def kill(self, why: str, *args: object) -> None:
        if not self.killed:
            log.warning("session from %s " + why + "; ending it", self.peer, *args)
            self.killed = True
            kill_process(self.pid)

    def send(self, message: bytes) -> None:
        try:
            self.ctrl.send(message)
        except OSError:  # the process is gone: its end of file is on the way
            pass


@dataclass(frozen=True)
class SlotLimits:
    """The server options the slot table enforces (``ServerOptions`` has them all)."""

    max_sessions: int
    max_handshakes: int
    handshake_timeout: float
    reclaim_idle: float
    reclaim_age: float


def choose_victim(sessions: Iterable[Child], now: float, reclaim_idle: float,
                  reclaim_age: float) -> tuple[Child, str] | None:
    """The session to end for a client that waits, and why (None: every session is running
    a request, or waiting for one too briefly). Longest idle first; then, among sessions that
    keep themselves busy with small requests, the one that has held its slot longest."""
    best: tuple[tuple[int, float], Child, str] | None = None
    for child in sessions:
        since = child.clock.idle_since()
        if since is None:
            continue
        idle, held = now - since, now - child.granted
        if idle >= reclaim_idle:
            rank = (1, idle)
            why = f"another client needed the slot and this session was idle for {idle:.1f} s"
        elif reclaim_age and held >= reclaim_age:
            rank = (0, held)
            why = (f"another client needed the slot and this session had held it for "
                   f"{held:.0f} s (the server's reclaim age)")
        else:
            continue
        if best is None or rank > best[0]:
            best = (rank, child, why)
    return None if best is None else (best[1], best[2])


class SlotTable:
    """The main process's record of its session processes: who waits, who holds a slot, and
    the limits it enforces itself (the session timeout a client asked for, overstays)."""

    def __init__(self, limits: SlotLimits, on_start: Callable[[Child], None]) -> None:
        self.limits = limits
        self.on_start = on_start
        self.children: dict[int, Child] = {}  # by the main process's end of the pair
        self.waiting: deque[Child] = deque()

    def sessions(self) -> list[Child]:
        return [c for c in self.children.values() if c.phase is Phase.SESSION]

    def can_accept(self) -> bool:
        """Whether a new connection may start its handshake now."""
        pending = sum(c.phase is not Phase.SESSION for c in self.children.values())
        return pending < self.limits.max_handshakes

    def add(self, child: Child) -> None:
        self.children[child.ctrl.fileno()] = child

    def remove(self, child: Child) -> None:
        del self.children[child.ctrl.fileno()]
        if child in self.waiting:
            self.waiting.remove(child)
        child.ctrl.close()
        child.clock.close()

    def on_message(self, child: Child, message: bytes, now: float) -> None:
        if message[:1] == b"R" and len(message) >= REQUEST.size and child.phase is Phase.HANDSHAKE:
            child.phase = Phase.WAITING
            child.session_timeout = REQUEST.unpack_from(message)[1]
            self.waiting.append(child)
            self.step(now)
            if child.phase is Phase.WAITING:
                log.info("session from %s waits for a slot (all %d are taken)", child.peer,
                         self.limits.max_sessions)

    def step(self, now: float) -> None:
        """Grant free slots in arrival order, reclaim slots for the clients still waiting, and
        end the processes that overstay a limit."""
        while self.waiting and len(self.sessions()) < self.limits.max_sessions:
            self._grant(self.waiting.popleft(), now)
        if self.waiting:
            self._reclaim(now)
        self._enforce(now)

    def _grant(self, child: Child, now: float) -> None:
        child.phase, child.granted = Phase.SESSION, now
        child.send(GRANT)
        self.on_start(child)

    def _reclaim(self, now: float) -> None:
        candidates = [c for c in self.sessions() if c.reclaim_sent is None and not c.killed]
        owed = len(self.waiting) - sum(c.reclaim_sent is not None for c in self.sessions())
        for _ in range(owed):
            choice = choose_victim(candidates, now, self.limits.reclaim_idle,
                                   self.limits.reclaim_age)
            if choice is None:
                return
            child, why = choice
            log.info("session from %s: %s; ending it", child.peer, why)
            child.send(RECLAIM + why.encode())
            child.reclaim_sent = now
            candidates.remove(child)

    def _enforce(self, now: float) -> None:
        hs = self.limits.handshake_timeout
        for child in list(self.children.values()):
            if child.phase is Phase.HANDSHAKE and now >= child.accepted + hs + OVERSTAY:
                child.kill("did not end its handshake within %g s", hs)
            elif (child.phase is Phase.SESSION and child.session_timeout
                  and now >= child.granted + child.session_timeout):
                child.kill("passed its session timeout of %d s", child.session_timeout)
            elif (child.reclaim_sent is not None and now >= child.reclaim_sent + OVERSTAY
                  and child.clock.idle_since() is not None):
                child.kill("kept its reclaimed slot in the middle of a frame")

    def next_wake(self, now: float) -> float:
        """Seconds until ``step`` has something to do (at most 1)."""
        hs = self.limits.handshake_timeout
        times = [1.0, 0.1 if self.waiting else 1.0]  # idle times grow unseen: poll while some wait
        for child in self.children.values():
            if child.killed:
                continue
            if child.phase is Phase.HANDSHAKE:
                times.append(child.accepted + hs + OVERSTAY - now)
            elif child.phase is Phase.SESSION and child.session_timeout:
                times.append(child.granted + child.session_timeout - now)
            if child.reclaim_sent is not None:
                times.append(child.reclaim_sent + OVERSTAY - now)
        return max(0.0, min(times))


def kill_process(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass

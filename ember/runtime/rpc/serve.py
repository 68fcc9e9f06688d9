"""The RPC server process: listen, give every session a process of its own, register with a
tracker.

The main process never parses a client's bytes: it accepts a connection, creates the session's
directory, forks, and talks to the child over a socket pair (``slots.py``: the child asks for
a session slot once its handshake succeeded; end of file when it exits). The child runs the
handshake and the session; whatever the client sends, at worst that child ends. The parent
shares the slots out (``SlotTable``), removes the directory when the child is gone, kills
children that outstay their limits, and re-registers with the tracker when a session it
dispatched ends.
"""
from __future__ import annotations

import ctypes
import errno
import logging
import os
import platform
import selectors
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import RPCError
from .endpoint import ServerSession, serve
from .handshake import Hello, send_error, server_handshake
from .protocol import DEFAULT_MAX_FRAME, PROTOCOL_VERSION, ProtocolError
from .slots import Child, IdleClock, Phase, SlotLimits, SlotLink, SlotTable, kill_process
from .tracker_link import TrackerLink
from .transport import Channel, SocketChannel

log = logging.getLogger("ember.rpc.server")


@dataclass
class ServerOptions:
    """Everything ``python -m ember.exec.rpc_server`` can be told (see ``server.main``)."""

    host: str = "127.0.0.1"
    port: int = 9091
    port_end: int = 9199
    key: str = ""
    tracker_addr: tuple[str, int] | None = None
    custom_addr: str | None = None
    load_library: list[str] = field(default_factory=list)
    secret: bytes | None = None
    max_frame: int = DEFAULT_MAX_FRAME
    max_sessions: int = 4
    handshake_timeout: float = 10.0
    frame_timeout: float = 60.0
    idle_timeout: float = 300.0  # 0: none
    max_handshakes: int = 8
    reclaim_idle: float = 1.0
    reclaim_age: float = 600.0  # 0: never
    assign_timeout: float = 10.0

    def slot_limits(self) -> SlotLimits:
        return SlotLimits(self.max_sessions, self.max_handshakes, self.handshake_timeout,
                          self.reclaim_idle, self.reclaim_age)


def server_info() -> str:
    from ... import __version__

    return (f"ember {__version__} rpc/{PROTOCOL_VERSION} python {platform.python_version()} "
            f"{platform.system().lower()}-{platform.machine()}")


def bind_listener(host: str, port: int, port_end: int) -> socket.socket:
    """A listening socket on the first free port of ``[port, port_end)`` (``port`` 0: any)."""
    try:
        family = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror as err:
        raise RPCError(f"cannot resolve the host {host!r}: {err}") from None
    ports = [port] if port == 0 or port_end <= port else range(port, port_end)
    last: OSError | None = None
    for p in ports:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, p))
            sock.listen(16)
            return sock
        except OSError as err:
            sock.close()
            if err.errno not in (errno.EADDRINUSE, errno.EACCES):
                raise RPCError(f"cannot listen on {host}:{p}: {err}") from None
            last = err
    raise RPCError(f"no free port in [{port}, {port_end}) on {host}: {last}")


def load_libraries(paths: list[str]) -> None:
    """Open each library with its symbols global, for the libraries uploaded later."""
    for path in paths:
        try:
            ctypes.CDLL(os.path.abspath(path), mode=ctypes.RTLD_GLOBAL)
        except OSError as err:
            raise RPCError(f"--load-library {path}: {err}") from None


# ---- one session (in its own process) ---------------------------------------------------------
def run_session(ch: Channel, workdir: str, check_key: Callable[[str], str | None],
                opts: ServerOptions, link: SlotLink | None = None) -> int:
    """Handshake, then serve until the client leaves; returns the exit status (0: clean).
    With ``link`` (a forked session) the main process grants the slot before WELCOME and
    may reclaim it."""
    admit = None
    if link is not None and isinstance(ch, SocketChannel):
        def admit(hello: Hello) -> None:
            link.request_slot(ch, hello.session_timeout)  # type: ignore[union-attr]
    try:
        server_handshake(ch, check_key, opts.secret, opts.max_frame, opts.handshake_timeout,
                         server_info(), admit)
    except RPCError as err:
        log.warning("session from %s refused: %s", ch.peer, err)
        ch.close()
        return 2
    log.info("session from %s started", ch.peer)
    session = ServerSession(workdir, {"rpc.test.exit": lambda code=3: os._exit(int(code))})
    try:
        reason = serve(ch, session, opts.max_frame, opts.frame_timeout, opts.idle_timeout, link)
    except ProtocolError as err:
        send_error(ch, err)
        log.warning("session from %s closed: protocol error: %s", ch.peer, err)
        return 1
    finally:
        ch.close()
    log.info("session from %s ended: %s", ch.peer, reason)
    return 0


class ServerLoop:
    """The main process: accepts connections and forks one process per session."""

    def __init__(self, opts: ServerOptions, listener: socket.socket) -> None:
        self.opts = opts
        self.listener = listener
        self.port = listener.getsockname()[1]
        self.sel = selectors.DefaultSelector()
        self.slots = SlotTable(opts.slot_limits(), self._session_started)
        self.listening = False
        self.stopping = False
        self.tracker = (TrackerLink(opts.tracker_addr, opts.key, self.port, opts.custom_addr,
                                    opts.assign_timeout, self.sel)
                        if opts.tracker_addr else None)
        self._wake_r, self._wake_w = socket.socketpair()

    def run(self) -> None:
        """Serve until SIGTERM or SIGINT; then end every session and clean up."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        self._wake_w.setblocking(False)
        signal.set_wakeup_fd(self._wake_w.fileno())
        self.sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        opts = self.opts
        log.info("serving on %s:%d (key %r, authentication %s, up to %d sessions at once)",
                 opts.host, self.port, opts.key, "on" if opts.secret else "off",
                 opts.max_sessions)
        try:
            while not self.stopping:
                self._step()
        finally:
            self._shutdown()

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.stopping = True

    def _step(self) -> None:
        self._update_listening()
        if self.tracker is not None:
            self.tracker.maintain()
        for key, _ in self.sel.select(self._next_timeout()):
            try:
                self._dispatch(key.data)
            except Exception:
                log.exception("the server loop failed handling %r; serving on", key.data)
        self.slots.step(time.monotonic())

    def _dispatch(self, what: object) -> None:
        if what == "accept":
            self._accept()
        elif what == "wake":
            self._wake_r.recv(64)
        elif what == "tracker":
            self.tracker.on_readable()  # type: ignore[union-attr]
        else:
            self._child_event(what)  # type: ignore[arg-type]

    def _update_listening(self) -> None:
        want = self.slots.can_accept()
        if want and not self.listening:
            self.sel.register(self.listener, selectors.EVENT_READ, "accept")
        elif not want and self.listening:
            self.sel.unregister(self.listener)
        self.listening = want

    def _next_timeout(self) -> float:
        now = time.monotonic()
        times = [self.slots.next_wake(now)]
        if self.tracker is not None:
            times.append(self.tracker.next_timeout(now))
        return max(0.0, min(times))

    # -- sessions -------------------------------------------------------------------------------
    def _check_key(self) -> Callable[[str], str | None]:
        if self.tracker is not None:
            expected = self.tracker.expected_key()

            def check_tracked(key: str) -> str | None:
                if expected is None:
                    return "this server is busy with a session the tracker dispatched"
                return None if key == expected else ("this server is registered with a tracker: "
                                                     "request a session through the tracker")
            return check_tracked
        own = self.opts.key
        return lambda key: None if key == own else f"key {key!r} does not match the server's key"

    def _accept(self) -> None:
        try:
            conn, addr = self.listener.accept()
        except OSError as err:
            log.warning("accept failed: %s", err)
            return
        peer = f"{addr[0]}:{addr[1]}"
        workdir = tempfile.mkdtemp(prefix="ember_rpc_session_")
        check_key = self._check_key()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        clock = IdleClock()
        try:
            pid = os.fork()
        except OSError as err:
            log.error("cannot start a session for %s: %s", peer, err)
            for sock in (ours, theirs, conn):
                sock.close()
            clock.close()
            shutil.rmtree(workdir, ignore_errors=True)
            return
        if pid == 0:
            ours.close()
            self._in_child(conn, SlotLink(theirs, clock), workdir, check_key, peer)
        theirs.close()
        conn.close()
        child = Child(pid, ours, clock, workdir, peer, time.monotonic())
        self.slots.add(child)
        self.sel.register(ours, selectors.EVENT_READ, child)

    def _in_child(self, conn: socket.socket, link: SlotLink, workdir: str,
                  check_key: Callable[[str], str | None], peer: str) -> None:
        code = 1
        try:
            signal.set_wakeup_fd(-1)
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, signal.SIG_DFL)
            self.sel.close()
            for sock in (self.listener, self._wake_r, self._wake_w):
                sock.close()
            if self.tracker is not None:
                self.tracker.close_in_child()
            for other in self.slots.children.values():
                other.ctrl.close()
                other.clock.close()
            code = run_session(SocketChannel(conn, peer), workdir, check_key, self.opts, link)
        except BaseException:
            log.exception("session from %s failed", peer)
        finally:
            os._exit(code)

    def _child_event(self, child: Child) -> None:
        try:
            data = child.ctrl.recv(64)
        except OSError:
            data = b""
        if not data:
            self._reap(child)
            return
        self.slots.on_message(child, data, time.monotonic())

    def _session_started(self, child: Child) -> None:
        if self.tracker is not None:
            self.tracker.session_started()

    def _reap(self, child: Child) -> None:
        self.sel.unregister(child.ctrl)
        self.slots.remove(child)
        _, status = os.waitpid(child.pid, 0)
        shutil.rmtree(child.workdir, ignore_errors=True)
        if child.killed:
            pass
        elif os.WIFSIGNALED(status):
            log.warning("session from %s ended by signal %d", child.peer, os.WTERMSIG(status))
        elif os.WEXITSTATUS(status) not in (0, 1, 2):  # 1, 2: already logged by the child
            log.warning("session from %s exited with status %d", child.peer,
                        os.WEXITSTATUS(status))
        if child.phase is Phase.SESSION and self.tracker is not None:
            self.tracker.session_ended()
        if not self.stopping:
            self.slots.step(time.monotonic())  # the slot it held goes to the next in line

    def _shutdown(self) -> None:
        signal.set_wakeup_fd(-1)
        for child in list(self.slots.children.values()):
            log.info("stopping: ending the session from %s", child.peer)
            child.killed = True
            kill_process(child.pid)
            self._reap(child)
        if self.tracker is not None:
            self.tracker.close()
        self.listener.close()
        self.sel.close()

"""The tracker: servers register under a key, clients request a server of a key and queue
until one is free. ``Tracker(...)`` runs one in a subprocess (``python -m
ember.exec.rpc_tracker``); ``connect_tracker(host, port)`` gives a TrackerSession with
``request(key, priority, session_timeout)`` and ``summary()``.
"""
from __future__ import annotations

import argparse
import os
import socket
import sys
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import RPCError
from .client import RPCSession, connect
from .launch import (
    PARENT_FLAG,
    PARENT_FLAG_HELP,
    ManagedProcess,
    announce,
    announce_error,
    exit_with_parent,
    exposure_warning,
    setup_logging,
)
from .protocol import RPCConnectionError
from .serve import bind_listener
from .tracker_loop import TrackerLoop
from .tracker_proto import TRACKER_VERSION, read_message, send_message
from .transport import SocketChannel

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is Python 3.11+

NAME = "ember-rpc-tracker"


class Tracker(ManagedProcess):
    """A tracker in a subprocess, listening on ``host``/``port`` (``port=0``: any free)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 9190, port_end: int = 9199,
                 silent: bool = False, *, log_file: str | None = None,
                 startup_timeout: float = 60.0) -> None:
        argv = [sys.executable, "-m", "ember.exec.rpc_tracker", "--host", host, "--port",
                str(port), "--port-end", str(port_end)] + (["--silent"] if silent else [])
        if log_file:
            argv += ["--log-file", os.path.abspath(log_file)]
        super().__init__("RPC tracker", argv, None, startup_timeout)


class TrackerSession:
    """A connection to a tracker. One request at a time: ``request`` waits for a free server
    while holding the connection, so ask for ``summary`` on another TrackerSession meanwhile.
    """

    def __init__(self, addr: tuple[str, int], timeout: float = 10.0) -> None:
        self.addr = addr
        try:
            sock = socket.create_connection(addr, timeout=timeout)
        except OSError as err:
            raise RPCConnectionError(f"cannot connect to the tracker at {addr[0]}:{addr[1]}: "
                                     f"{err}") from None
        self._ch = SocketChannel(sock, f"tracker {addr[0]}:{addr[1]}")
        self._lock = threading.Lock()
        self._ids = 0
        send_message(self._ch, {"op": "hello", "version": TRACKER_VERSION, "role": "client"})
        reply = read_message(self._ch, timeout, expect_reply=True)
        if not reply.get("ok"):
            self.close()
            raise RPCError(f"the tracker refused the connection: {reply.get('error')}")

    def _ask(self, message: dict[str, Any], timeout: float | None) -> dict[str, Any]:
        self._ids += 1
        rid = self._ids
        send_message(self._ch, dict(message, id=rid))
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            try:
                reply = read_message(self._ch, left, expect_reply=True)
            except RPCConnectionError:
                if deadline is None or time.monotonic() < deadline:
                    raise  # the tracker went away
                if message.get("op") == "request":
                    send_message(self._ch, {"op": "cancel", "id": rid})
                raise RPCConnectionError(f"{self._ch.peer}: no answer within {timeout:g} s to "
                                         f"{message}") from None
            if reply.get("id") == rid:  # replies to cancelled requests are skipped
                if not reply.get("ok"):
                    raise RPCError(f"tracker: {reply.get('error')}")
                return reply

    def summary(self) -> dict[str, Any]:
        """``{"queue_info": {key: {"free": n, "pending": m}}, "server_info": [{"key",
        "addr": [host, port], "free"}]}``."""
        with self._lock:
            return self._ask({"op": "summary"}, 10.0)["summary"]  # type: ignore[no-any-return]

    def text_summary(self) -> str:
        """The summary as a table."""
        info = self.summary()
        lines = ["Server List", "-" * 40, f"{'server-address':<24} key"]
        for s in info["server_info"]:
            addr = f"{s['addr'][0]}:{s['addr'][1]}"
            lines.append(f"{addr:<24} {s['key']}" + ("" if s["free"] else " (busy)"))
        lines += ["", "Queue Status", "-" * 40, f"{'key':<20} {'free':>6} {'pending':>8}"]
        for key, q in sorted(info["queue_info"].items()):
            lines.append(f"{key:<20} {q['free']:>6} {q['pending']:>8}")
        return "\n".join(lines)

    def request(self, key: str, priority: int = 1, session_timeout: int = 0, max_retry: int = 5,
                *, timeout: float | None = None, secret: str | bytes | None = None,
                call_timeout: float | None = None) -> RPCSession:
        """A session with a server of ``key``, waiting (up to ``timeout`` s, default forever)
        in the tracker's queue until one is free; higher ``priority`` is served first."""
        last: Exception | None = None
        for _ in range(max(max_retry, 1)):
            with self._lock:
                reply = self._ask({"op": "request", "key": key, "priority": int(priority)},
                                  timeout)
            try:
                return connect(reply["host"], reply["port"], reply["matchkey"], session_timeout,
                               secret=secret, timeout=call_timeout)
            except RPCError as err:
                last = err
        raise RPCError(f"no session for key {key!r} after {max_retry} tries: {last}")

    def request_and_run(self, key: str, func: Any, priority: int = 1, session_timeout: int = 0,
                        max_retry: int = 2) -> Any:
        """``func(session)`` on a session requested for ``key``; the session is closed after."""
        with self.request(key, priority, session_timeout, max_retry) as sess:
            return func(sess)

    def close(self) -> None:
        self._ch.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect_tracker(url: str, port: int) -> TrackerSession:
    """A TrackerSession with the tracker at ``url:port``."""
    return TrackerSession((url, int(port)))


def main(argv: Sequence[str] | None = None, prog: str = "python -m ember.exec.rpc_tracker",
         epilog: str | None = None) -> int:
    """``python -m ember.exec.rpc_tracker``: run a tracker until interrupted. ``prog`` and
    ``epilog`` are for the help text of front ends (``ember rpc-tracker``)."""
    p = argparse.ArgumentParser(prog=prog, epilog=epilog,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                description="Queue RPC clients for the servers registered here.")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=9190, help="first port to try (0: any free)")
    p.add_argument("--port-end", type=int, default=9199, help="last port to try (exclusive)")
    p.add_argument("--silent", action="store_true", help="log warnings only")
    p.add_argument("--log-file", default=None, help="append the log to this file, not stderr")
    p.add_argument(PARENT_FLAG, action="store_true", help=PARENT_FLAG_HELP)
    args = p.parse_args(argv)
    if args.exit_with_parent:
        exit_with_parent()
    setup_logging(args.silent, args.log_file)
    try:
        listener = bind_listener(args.host, args.port, args.port_end)
    except RPCError as err:
        announce_error(NAME, str(err))
        return 1
    port = listener.getsockname()[1]
    banner = exposure_warning("RPC tracker", args.host, port,
                              "Anyone who can connect can register servers and take them.")
    if banner:
        print(banner, file=sys.stderr, flush=True)
    announce(NAME, args.host, port)
    TrackerLoop(listener).run()
    return 0

"""Helpers shared by the RPC tests: servers on free loopback ports with a log file to read."""
from __future__ import annotations

import time
from pathlib import Path

from ember import rpc


def start_server(log_dir: Path, **kwargs: object) -> rpc.Server:
    """A server on a free loopback port, logging into ``log_dir/server.log``."""
    log = log_dir / "server.log"
    kwargs.setdefault("handshake_timeout", 1.0)
    kwargs.setdefault("frame_timeout", 1.0)
    srv = rpc.Server(host="127.0.0.1", port=0, log_file=str(log), **kwargs)  # type: ignore
    srv.log_path = log  # type: ignore[attr-defined]
    return srv


def log_size(srv: rpc.Server) -> int:
    """The length of the server's log now (pass as ``since`` to ``wait_for_log``)."""
    path: Path = srv.log_path  # type: ignore[attr-defined]
    return path.stat().st_size if path.exists() else 0


def wait_for_log(srv: rpc.Server, text: str | tuple[str, ...], timeout: float = 10.0,
                 since: int | None = None) -> str:
    """The server's log (from byte ``since``, default ``srv.log_mark`` or 0) once it contains
    ``text`` (or one of several); AssertionError after ``timeout`` s."""
    texts = (text,) if isinstance(text, str) else text
    path: Path = srv.log_path  # type: ignore[attr-defined]
    start = getattr(srv, "log_mark", 0) if since is None else since
    deadline = time.monotonic() + timeout
    log = ""
    while time.monotonic() < deadline:
        log = path.read_bytes()[start:].decode(errors="replace") if path.exists() else ""
        if any(t in log for t in texts):
            return log
        time.sleep(0.05)
    raise AssertionError(f"none of {texts} in the server log:\n{log}")

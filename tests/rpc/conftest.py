"""Fixtures for the RPC tests: servers in subprocesses on free loopback ports, sessions over
them and in-process, and a hard time limit per test.

Every server or tracker is an ``ember.rpc.Server``/``Tracker`` (its own process group, bound
to 127.0.0.1, port chosen by the system); the fixture's finalizer terminates the group.
"""
from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember import rpc

TEST_TIMEOUT = 120  # seconds: a hang fails the test instead of stalling the run


@pytest.fixture(autouse=True)
def _watchdog() -> Iterator[None]:
    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"RPC test exceeded {TEST_TIMEOUT} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(TEST_TIMEOUT)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def start_server(log_dir: Path, **kwargs: object) -> rpc.Server:
    """A server on a free loopback port, logging into ``log_dir/server.log``."""
    log = log_dir / "server.log"
    kwargs.setdefault("handshake_timeout", 2.0)
    kwargs.setdefault("frame_timeout", 2.0)
    srv = rpc.Server(host="127.0.0.1", port=0, log_file=str(log), **kwargs)  # type: ignore
    srv.log_path = log  # type: ignore[attr-defined]
    return srv


def wait_for_log(srv: rpc.Server, text: str, timeout: float = 10.0) -> str:
    """The server's log once it contains ``text`` (AssertionError after ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    log = ""
    while time.monotonic() < deadline:
        log = srv.log_path.read_text() if srv.log_path.exists() else ""  # type: ignore
        if text in log:
            return log
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in the server log:\n{log}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[rpc.Server]:
    srv = start_server(tmp_path_factory.mktemp("rpc_server"))
    try:
        yield srv
    finally:
        srv.terminate()


@pytest.fixture(params=["server", "local"])
def session(request: pytest.FixtureRequest, server: rpc.Server) -> Iterator[rpc.RPCSession]:
    """The same API over a real loopback server and in-process."""
    sess = (rpc.connect(server.host, server.port, timeout=60) if request.param == "server"
            else rpc.LocalSession())
    try:
        yield sess
    finally:
        sess.close()

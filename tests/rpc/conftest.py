"""Fixtures for the RPC tests: servers in subprocesses on free loopback ports, sessions over
them and in-process, and a hard time limit per test.

Every server or tracker is an ``ember.rpc.Server``/``Tracker`` (its own process group, bound
to 127.0.0.1, port chosen by the system); the fixture's finalizer terminates the group.
"""
from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember import rpc

_folder = Path(__file__).parent
if str(_folder) not in sys.path:  # for ``from _rpc_util import ...`` (importlib import mode)
    sys.path.insert(0, str(_folder))

from _rpc_util import start_server

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


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[rpc.Server]:
    """One loopback server shared by the tests (faults end single sessions, never it)."""
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

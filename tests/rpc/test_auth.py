"""Shared-secret authentication: the right secret opens a session, a wrong or missing one is
refused with a clear error, a client with a secret refuses a server without one, and the
secret never crosses the wire."""
from __future__ import annotations

import socket
import threading

import pytest
from _rpc_util import start_server, wait_for_log

from ember import rpc
from ember.runtime.rpc.handshake import client_handshake, server_handshake
from ember.runtime.rpc.transport import SocketChannel

SECRET = "correct horse battery staple"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    srv = start_server(tmp_path_factory.mktemp("rpc_auth"), secret=SECRET)
    try:
        yield srv
    finally:
        srv.terminate()


def test_right_secret(secured):
    with rpc.connect(secured.host, secured.port, secret=SECRET, timeout=20) as sess:
        assert sess.get_function("rpc.test.addone")(1) == 2


def test_wrong_secret(secured):
    with pytest.raises(rpc.AuthenticationError, match="authentication failed: the client's "
                                                      "secret does not match"):
        rpc.connect(secured.host, secured.port, secret="wrong", timeout=20)
    wait_for_log(secured, "authentication failed")


def test_no_secret(secured):
    with pytest.raises(rpc.AuthenticationError, match="requires authentication; pass its shared "
                                                      r"secret \(secret=...\)"):
        rpc.connect(secured.host, secured.port, timeout=20)


def test_server_without_secret_is_refused_by_a_client_with_one(server):
    with pytest.raises(rpc.AuthenticationError, match="did not authenticate"):
        rpc.connect(server.host, server.port, secret=SECRET, timeout=20)


def test_popen_session_with_a_secret():
    with rpc.PopenSession(secret=SECRET, timeout=30) as sess:
        assert sess.get_function("rpc.test.strcat")("a", 1) == "a:1"


class _Recording(SocketChannel):
    def __init__(self, sock: socket.socket, log: list[bytes]) -> None:
        super().__init__(sock, "recorded")
        self.log = log

    def _send_all(self, data, timeout):  # type: ignore[no-untyped-def]
        self.log.append(bytes(data))
        super()._send_all(data, timeout)


def test_secret_never_crosses_the_wire():
    a, b = socket.socketpair()
    sent: list[bytes] = []
    result: dict[str, object] = {}

    def serve() -> None:
        result["hello"] = server_handshake(_Recording(b, sent), lambda key: None,
                                           SECRET.encode(), 1 << 20, 10.0, "test")

    thread = threading.Thread(target=serve)
    thread.start()
    welcome = client_handshake(_Recording(a, sent), "k", SECRET.encode(), 0, 10.0)
    thread.join(10)
    assert welcome.authenticated and result["hello"].key == "k"  # type: ignore[attr-defined]
    wire = b"".join(sent)
    assert SECRET.encode() not in wire and len(sent) == 4  # HELLO, CHALLENGE, AUTH, WELCOME

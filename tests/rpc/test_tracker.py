"""The tracker with two servers: registration, dispatch, queued requests served by priority
when a server frees up, summaries, and a server that leaves."""
from __future__ import annotations

import socket
import threading
import time

import pytest
from _rpc_util import start_server

from ember import rpc
from ember.rpc import tracker
from ember.runtime.rpc.protocol import Kind
from ember.runtime.rpc.tracker_proto import read_message, send_message
from ember.runtime.rpc.transport import SocketChannel, write_frame


def _wait(condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)


def _queue(client: rpc.TrackerSession, key: str) -> dict[str, int]:
    return client.summary()["queue_info"].get(key, {"free": 0, "pending": 0})


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """A tracker and two servers registered under key 'board'."""
    tmp = tmp_path_factory.mktemp("rpc_tracker")
    trk = tracker.Tracker(port=0, log_file=str(tmp / "tracker.log"))
    servers = []
    try:
        for i in range(2):
            servers.append(start_server(tmp_path_factory.mktemp(f"board{i}"), key="board",
                                        tracker_addr=(trk.host, trk.port)))
        with rpc.connect_tracker(trk.host, trk.port) as client:
            _wait(lambda: _queue(client, "board")["free"] == 2)
        yield trk, servers
    finally:
        for srv in servers:
            srv.terminate()
        trk.terminate()


def test_summary_lists_the_servers(fleet):
    trk, servers = fleet
    with rpc.connect_tracker(trk.host, trk.port) as client:
        info = client.summary()
        assert info["queue_info"]["board"] == {"free": 2, "pending": 0}
        ports = sorted(s["addr"][1] for s in info["server_info"] if s["key"] == "board")
        assert ports == sorted(s.port for s in servers)
        assert "board" in client.text_summary()


def test_queued_requests_are_served_by_priority(fleet):
    trk, _ = fleet
    watcher = rpc.connect_tracker(trk.host, trk.port)
    first = rpc.connect_tracker(trk.host, trk.port).request("board", timeout=30)
    second = rpc.connect_tracker(trk.host, trk.port).request("board", timeout=30)
    assert first.get_function("rpc.test.addone")(1) == 2
    assert _queue(watcher, "board") == {"free": 0, "pending": 0}
    order: list[str] = []
    got: dict[str, rpc.RPCSession] = {}

    def wait_for(name: str, priority: int) -> None:
        got[name] = rpc.connect_tracker(trk.host, trk.port).request("board", priority=priority,
                                                                    timeout=60)
        order.append(name)

    low = threading.Thread(target=wait_for, args=("low", 1))
    low.start()
    _wait(lambda: _queue(watcher, "board")["pending"] == 1)
    high = threading.Thread(target=wait_for, args=("high", 9))
    high.start()
    _wait(lambda: _queue(watcher, "board")["pending"] == 2)
    first.close()  # frees one server: the high-priority request gets it
    _wait(lambda: order == ["high"])
    assert got["high"].get_function("rpc.test.strcat")("high", 1) == "high:1"
    second.close()
    low.join(30)
    high.join(30)
    assert order == ["high", "low"]
    for sess in got.values():
        sess.close()
    _wait(lambda: _queue(watcher, "board") == {"free": 2, "pending": 0})
    watcher.close()


def test_dispatched_servers_take_only_tracker_clients(fleet):
    _, servers = fleet
    with pytest.raises(rpc.RPCError, match="registered with a tracker"):
        rpc.connect(servers[0].host, servers[0].port, key="board", timeout=10)


def test_request_times_out_without_servers(fleet):
    trk, _ = fleet
    with rpc.connect_tracker(trk.host, trk.port) as client:
        with pytest.raises(rpc.RPCConnectionError, match="no answer within 0.5 s"):
            client.request("no-such-key", timeout=0.5)
        assert client.summary()["queue_info"].get("no-such-key", {}).get("pending", 0) == 0


def test_server_that_leaves_is_unregistered(tmp_path):
    trk = tracker.Tracker(port=0, silent=True)
    try:
        srv = start_server(tmp_path, key="solo", tracker_addr=(trk.host, trk.port))
        with rpc.connect_tracker(trk.host, trk.port) as client:
            _wait(lambda: _queue(client, "solo")["free"] == 1)
            srv.terminate()
            _wait(lambda: _queue(client, "solo")["free"] == 0)
    finally:
        trk.terminate()


def test_tracker_errors():
    with pytest.raises(rpc.RPCConnectionError, match="cannot connect to the tracker"):
        rpc.connect_tracker("127.0.0.1", 1)


def test_hostile_peers_do_not_stop_the_tracker(fleet):
    trk, _ = fleet
    with socket.create_connection((trk.host, trk.port), timeout=10) as sock:
        sock.sendall(b"\x00garbage" * 10)
        assert sock.recv(100) == b""  # dropped
    ch = SocketChannel(socket.create_connection((trk.host, trk.port), timeout=10))
    send_message(ch, {"op": "hello", "version": 1, "role": "client"})
    assert read_message(ch, 10.0, expect_reply=True)["ok"]
    deep = b"[" * 200_000 + b"]" * 200_000
    write_frame(ch, Kind.TRACKER, 0, [deep])
    with pytest.raises(rpc.RPCConnectionError, match="connection closed"):
        read_message(ch, 10.0, expect_reply=True)
    with rpc.connect_tracker(trk.host, trk.port) as client:
        assert _queue(client, "board")["free"] == 2

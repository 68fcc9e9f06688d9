"""A server or tracker started with ``ember.rpc.Server``/``Tracker`` ends when the Python
process that started it is killed (SIGKILL: no finalizer runs), through the parent pipe."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from ember.runtime.rpc.server import main as server_main

EXIT_BOUND = 30.0  # seconds the orphan may take to notice (it takes well under one)
PARENT = """
import sys, time
from ember import rpc
proc = rpc.{cls}(host="127.0.0.1", port=0, silent=True)
print(proc.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("cls", ["Server", "Tracker"])
def test_killed_parent_takes_its_server_along(cls):
    parent = subprocess.Popen([sys.executable, "-c", PARENT.format(cls=cls)],
                              stdout=subprocess.PIPE, text=True)
    child = None
    try:
        child = int(parent.stdout.readline())
        assert _alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + EXIT_BOUND
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), f"the {cls} outlived its killed parent by {EXIT_BOUND} s"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        parent.stdout.close()
        if child is not None and _alive(child):
            os.killpg(child, signal.SIGKILL)  # its own group: the server and its sessions


def test_exit_with_parent_refuses_stdio(capsys):
    assert server_main(["--stdio", "--exit-with-parent"]) == 1
    assert "--stdio and --exit-with-parent both need stdin" in capsys.readouterr().out

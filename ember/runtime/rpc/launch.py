"""Starting server and tracker processes from Python and reading the port they chose.

The process prints one line on stdout once it listens, ``<name> listening on HOST:PORT``, or
``<name> error: MESSAGE`` and exits; ``start`` waits for that line (bounded), and
``ManagedProcess.terminate`` ends the process group it runs in.

A managed process also ends when the Python process that started it dies, even by SIGKILL
(no finalizer runs then): its stdin is a pipe whose write end only the parent holds, and with
``--exit-with-parent`` the process watches it (:func:`exit_with_parent`). A pipe rather than
Linux's PR_SET_PDEATHSIG, which fires when the starting *thread* exits and exists on Linux only.
"""
from __future__ import annotations

import ipaddress
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from typing import Any

from ..errors import RPCError


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` resolves to is a loopback address."""
    try:
        infos = socket.getaddrinfo(host or "0.0.0.0", None, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return False
    return all(ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_loopback for info in infos)


def exposure_warning(what: str, host: str, port: int, risk: str) -> str | None:
    """The loud start-up banner for a process reachable from other machines (None if not)."""
    if is_loopback(host):
        return None
    bar = "*" * 78
    return (f"{bar}\nWARNING: the ember {what} listens on {host}:{port}, which other machines "
            f"can reach.\n{risk}\nFirewall the port, or bind 127.0.0.1.\n{bar}")


def setup_logging(silent: bool, log_file: str | None) -> None:
    """The log of a server or tracker process: stderr (or ``log_file``), INFO unless silent."""
    handler: logging.Handler = (logging.FileHandler(log_file) if log_file
                                else logging.StreamHandler(sys.stderr))
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s"))
    root = logging.getLogger("ember.rpc")
    root.addHandler(handler)
    root.setLevel(logging.WARNING if silent else logging.INFO)


def announce(name: str, host: str, port: int) -> None:
    """Print the ready line, then point stdout at stderr so nothing else reaches the pipe."""
    sys.stdout.write(f"{name} listening on {host}:{port}\n")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())


def announce_error(name: str, message: str) -> None:
    sys.stdout.write(f"{name} error: {message}\n")
    sys.stdout.flush()


PARENT_FLAG = "--exit-with-parent"
PARENT_FLAG_HELP = ("end when stdin reaches end of file (the pipe ember.rpc.Server and Tracker "
                    "hold: the process ends with the Python process that started it)")


def exit_with_parent() -> None:
    """Send this process SIGTERM (the loop then ends its sessions and exits) once stdin reads
    end of file: the parent holding the pipe's write end closed it or died."""
    def watch() -> None:
        try:
            while os.read(0, 4096):
                pass
        except OSError:
            pass
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="ember-rpc-parent-watch", daemon=True).start()


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _stop(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """End ``proc`` and its process group: SIGTERM (the server ends its sessions, then
    itself), SIGKILL to the group if it is still there after ``timeout`` seconds."""
    if proc.stdin is not None:
        proc.stdin.close()  # the parent pipe: the process could tell it is no longer wanted
    if proc.poll() is not None:
        _signal_group(proc, signal.SIGKILL)  # sessions that outlived a crashed server
        return
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _signal_group(proc, signal.SIGKILL)
        proc.wait()


class ManagedProcess:
    """A server or tracker running in its own process group. It is ended by ``terminate``,
    by leaving a ``with`` block, when the object is collected, when Python exits, or when this
    process dies (``argv`` gets ``PARENT_FLAG``: the program must call ``exit_with_parent``)."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str] | None,
                 startup_timeout: float) -> None:
        self.name = name
        # stdin: the parent pipe (PARENT_FLAG), never written; the child sees end of file when
        # this process dies, however it dies
        self.proc = subprocess.Popen([*argv, PARENT_FLAG], stdout=subprocess.PIPE,
                                     stdin=subprocess.PIPE, start_new_session=True, env=env)
        self._stop = weakref.finalize(self, _stop, self.proc, 5.0)
        try:
            self.host, self.port = self._wait_ready(startup_timeout)
        except BaseException:
            self.terminate()
            raise

    def _wait_ready(self, timeout: float) -> tuple[str, int]:
        assert self.proc.stdout is not None, "stdout is a pipe"
        deadline = time.monotonic() + timeout
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                raise RPCError(f"{self.name} did not start within {timeout:g} s")
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            if not chunk:
                code = self.proc.wait()
                raise RPCError(f"{self.name} exited (status {code}) before listening")
            line += chunk
        self.proc.stdout.close()
        text = line.decode(errors="replace").strip()
        marker = " listening on "
        if marker not in text:
            raise RPCError(f"{self.name} failed to start: {text.partition(' error: ')[2] or text}")
        host, _, port = text.partition(marker)[2].rpartition(":")
        return host, int(port)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def terminate(self) -> None:
        """End the process and everything it started (its sessions); idempotent."""
        self._stop()

    def _signal_group(self, sig: int) -> None:
        _signal_group(self.proc, sig)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.terminate()

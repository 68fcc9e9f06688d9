"""The host "device": the project's program as a child process, and the transport over its
stdin and stdout.

The process runs in its own process group, writes its log (stderr) to a file of the project,
and is always reaped: when its transport closes (stdin closed, then SIGKILL if it has not
exited within a few seconds), when the project flashes again or stops it, when the object is
collected, and when the interpreter exits.
"""
from __future__ import annotations

import errno
import os
import select
import signal
import subprocess
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .transport import IoTimeoutError, SessionTerminatedError, Transport, TransportTimeouts

if TYPE_CHECKING:
    from .project import GeneratedProject

_EXIT_GRACE_SEC = 3.0  # a device told to stop (stdin closed) exits within this, or is killed
_LOG_LINES = 12


def _stop(proc: subprocess.Popen[bytes], grace: float) -> None:
    """Close the pipes, wait up to ``grace`` seconds, then SIGKILL the group; reap."""
    for stream in (proc.stdin, proc.stdout):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass
    try:
        proc.wait(timeout=max(grace, 0.001))
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()


class ProcessDevice:
    """One run of the device program (``program``), its log in ``log_path``."""

    def __init__(self, program: Path, log_path: Path) -> None:
        self.program = program
        self.log_path = log_path
        self.used = False
        self.unresponsive = False  # a read or write timed out: stop() does not wait for it
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen([str(program)], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=log, bufsize=0,
                                         start_new_session=True)
        self._finalizer = weakref.finalize(self, _stop, self.proc, 0.5)
        assert self.proc.stdin is not None and self.proc.stdout is not None, "pipes"
        self.read_fd, self.write_fd = self.proc.stdout.fileno(), self.proc.stdin.fileno()
        os.set_blocking(self.read_fd, False)
        os.set_blocking(self.write_fd, False)  # writes take what fits; select bounds the wait

    @property
    def pid(self) -> int:
        return self.proc.pid

    def describe(self) -> str:
        """'micro_host (pid 123)', with how it ended and its last log lines once it has."""
        text = f"the micro device process {self.program.name} (pid {self.pid})"
        code = self.proc.poll()
        if code is None:
            return text
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            text += f" was killed by {name}"
        else:
            text += f" exited with status {code}"
        return text + self._log_tail()

    def _log_tail(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()[-_LOG_LINES:]
        except OSError:
            return ""
        return "; its log ends:\n" + "\n".join(lines) if lines else "; its log is empty"

    def terminated(self, what: str) -> SessionTerminatedError:
        """The error for a link that ended: waits a moment for the exit status."""
        try:
            self.proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            pass
        return SessionTerminatedError(f"{self.describe()}: {what}")

    def read(self, n: int, timeout: float | None) -> bytes:
        while True:
            if not select.select([self.read_fd], [], [], timeout)[0]:
                self.unresponsive = True
                raise IoTimeoutError(f"{self.describe()} sent nothing for {timeout:.3g} s")
            try:
                data = os.read(self.read_fd, n)
            except BlockingIOError:  # select said readable, but another reader was first
                continue
            except OSError as err:
                raise self.terminated(f"reading its output failed: {err}") from None
            if not data:
                raise self.terminated("the device closed its output")
            return data

    def write(self, data: Any, timeout: float | None) -> int:
        while True:
            if not select.select([], [self.write_fd], [], timeout)[1]:
                self.unresponsive = True
                raise IoTimeoutError(f"{self.describe()} took no input for {timeout:.3g} s")
            try:
                return os.write(self.write_fd, memoryview(data)[:1 << 20])
            except BlockingIOError:
                continue
            except OSError as err:
                if err.errno in (errno.EPIPE, errno.EBADF):
                    raise self.terminated("it stopped reading its input") from None
                raise self.terminated(f"writing to it failed: {err}") from None

    def stop(self) -> None:
        """End the process (it is reaped); idempotent."""
        self._finalizer.detach()
        _stop(self.proc, 0.0 if self.unresponsive else _EXIT_GRACE_SEC)


class HostTransport(Transport):
    """The pipes of a project's device process. ``open`` takes the flashed process (or
    flashes one); ``close`` ends it."""

    def __init__(self, project: GeneratedProject, timeouts: TransportTimeouts) -> None:
        self.project = project
        self._timeouts = timeouts
        self.device: ProcessDevice | None = None

    def timeouts(self) -> TransportTimeouts:
        return self._timeouts

    def open(self) -> None:
        if self.device is None:
            self.device = self.project.take_device()

    def close(self) -> None:
        device, self.device = self.device, None
        if device is not None:
            device.stop()
            self.project.forget_device(device)

    def _open_device(self) -> ProcessDevice:
        if self.device is None:
            raise SessionTerminatedError("the host transport is not open (use it in a with "
                                         "block, or call open())")
        return self.device

    def read(self, n: int, timeout_sec: float | None) -> bytes:
        return self._open_device().read(n, timeout_sec)

    def write(self, data: bytes | bytearray | memoryview, timeout_sec: float | None) -> int:
        return self._open_device().write(data, timeout_sec)

    def __repr__(self) -> str:
        return f"HostTransport({self.device.describe() if self.device else 'closed'})"


__all__ = ["HostTransport", "ProcessDevice"]

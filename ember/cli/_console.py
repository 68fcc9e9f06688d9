"""What the ``ember`` command prints: errors with hints, aligned tables, a live status line.

Plain text on purpose: numpy is ember's only hard dependency, and a status line plus aligned
columns are a few dozen lines, so the CLI needs no rendering library (rich would be a second
code path to keep in step, or a dependency for everyone). The status line is drawn on stderr
only when stderr is a terminal; piped or captured output stays clean.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, TextIO


class CLIError(Exception):
    """A user-facing failure: ``message`` (one line), an optional ``hint``, the exit code."""

    def __init__(self, message: str, hint: str | None = None, code: int = 1) -> None:
        super().__init__(message)
        self.message, self.hint, self.code = message, hint, code


def fmt_bytes(n: float) -> str:
    """``1536`` -> ``"1.5 KiB"``; exact below 1 KiB."""
    if n < 1024:
        return f"{int(n)} B"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}"
    raise AssertionError("unreachable")


def fmt_seconds(s: float) -> str:
    """Seconds with a unit that keeps three significant digits (``12.3 us``, ``4.56 s``)."""
    if s < 1e-3:
        return f"{s * 1e6:.3g} us"
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    return f"{s:.3g} s"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]],
          right: Sequence[int] = ()) -> str:
    """An aligned text table; columns whose index is in ``right`` are right-aligned."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(row, widths))).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule] + [line(r) for r in cells[1:]])


class Status:
    """A one-line live status on a terminal: ``[2/5] lowering kernels  3.1s``.

    ``stage(text)`` starts a numbered stage; a background thread redraws the line every
    0.2 s so a long C compile shows its elapsed time. Disabled (silent) unless ``stream`` is a
    terminal; ``EMBER_PROGRESS=0`` disables it too, ``=1`` forces it.
    """

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        forced = os.environ.get("EMBER_PROGRESS", "")
        isatty = getattr(self.stream, "isatty", lambda: False)()
        self.enabled = forced == "1" or (forced != "0" and isatty)
        self.total, self.index = total, 0
        self.text, self.detail = "", ""
        self._started = time.perf_counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def stage(self, text: str) -> None:
        """Start the next stage."""
        with self._lock:
            self.index = min(self.index + 1, self.total)
            self.text, self.detail = text, ""
            self._started = time.perf_counter()
        self._draw()

    def note(self, detail: str) -> None:
        """A detail for the current stage (the pass running, the kernel count...)."""
        with self._lock:
            self.detail = detail
        self._draw()

    def _draw(self) -> None:
        if not self.enabled:
            return
        with self._lock:
            elapsed = time.perf_counter() - self._started
            line = f"[{self.index}/{self.total}] {self.text}"
            if self.detail:
                line += f" ({self.detail})"
            line = f"{line}  {elapsed:.1f}s"
            width = _terminal_width()
            self.stream.write("\r\x1b[K" + line[:width - 1])
            self.stream.flush()

    def _tick(self) -> None:
        while not self._stop.wait(0.2):
            self._draw()

    def __enter__(self) -> Status:  # noqa: PYI034  (typing.Self is Python 3.11+)
        if self.enabled:
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.enabled:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def _terminal_width() -> int:
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError):
        return 100

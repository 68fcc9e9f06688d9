"""Detecting two threads on one executor module: an error instead of mixed results.

A graph, AOT or VM executor module keeps one set of buffers: ``set_input`` writes the inputs,
``run`` the outputs, ``get_output`` returns a view of them. As in the Relay era, a module
serves one thread at a time (one module per thread: ``factory["default"](dev)`` makes as many
as needed; ``ember.compile``'s model may be shared by any number of threads). Misuse used to
return another thread's result, silently. :class:`UseGuard` turns it into a
:class:`ConcurrentUseError`, in three checks:

- **overlap**: a call that enters while another thread is inside one of the module's calls
  raises at once (a thread calling back into its own module from a kernel is not refused);
- **inputs**: ``run`` raises when an input that this thread set (since its last run) was set
  again by another thread before the run (``A.set_input; B.set_input; A.run``);
- **outputs**: ``get_output`` raises in a thread that ran the module when the last run was
  another thread's (``A.run; B.run; A.get_output``).

Handing a module to another thread stays legal: a thread may run inputs that another thread
set and read outputs of a run it did not make, as long as it did not start a sequence of its
own that the other thread broke. Each check is a few attribute reads per call.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from .errors import ConcurrentUseError

_ONE_THREAD = ("a module serves one thread at a time: make one module per thread "
               "(factory['default'](dev)), or use the model ember.compile returns, which "
               "threads may share")
F = TypeVar("F", bound=Callable[..., Any])


class UseGuard:
    """The use of one executor module by threads; see the module docstring."""

    __slots__ = ("_last_runner", "_lock", "_seq", "_settled", "_tls", "_where", "_writes",
                 "who")

    def __init__(self, who: str) -> None:
        self.who = who
        self._lock = threading.RLock()  # held by the thread inside a call (re-entrant)
        self._where = ""  # the call that holds it, for the message
        self._tls = threading.local()  # per thread: .start (first write since its run), .ran
        self._seq = 0  # set_input counter
        self._writes: dict[int, tuple[int, int]] = {}  # input slot -> (thread, seq)
        self._last_runner = 0
        # The thread whose next run needs no check (it made the last run and nobody set an
        # input since: run() would find nothing), 0 for none; saves a run its checks.
        self._settled = 0

    def enter(self, where: str) -> None:
        """Start call ``where``; ConcurrentUseError if another thread is inside a call."""
        if not self._lock.acquire(blocking=False):
            raise ConcurrentUseError(f"{self.who}: {where}() while another thread is in "
                                     f"{self._where or 'a call'}(); {_ONE_THREAD}")
        self._where = where

    def leave(self) -> None:
        self._lock.release()

    def wrote(self, slot: int) -> None:
        """This thread set input ``slot``."""
        self._seq += 1
        self._settled = 0
        tls = self._tls
        if getattr(tls, "start", None) is None:
            tls.start = self._seq
        self._writes[slot] = (threading.get_ident(), self._seq)

    def run(self) -> None:
        """Before a run that keeps its outputs: :meth:`inputs_intact`, then this thread is
        the one whose outputs the module holds."""
        if self._settled == threading.get_ident():  # the last run was this thread's, and
            self._tls.ran = True  # no input was set since (ran: the ident may be reused)
            return
        self.inputs_intact("run")
        self._tls.ran = True
        self._last_runner = self._settled = threading.get_ident()

    def inputs_intact(self, where: str) -> None:
        """Raise if another thread set an input after this thread's first set_input since
        its last run (then the run would mix both threads' inputs)."""
        tls, me = self._tls, threading.get_ident()
        start = getattr(tls, "start", None)
        if start is None:
            return
        tls.start = None  # checked once: a new set_input starts afresh
        for slot, (thread, seq) in self._writes.items():
            if thread != me and seq > start:
                raise ConcurrentUseError(
                    f"{self.who}: {where}(): input {slot} was set by another thread after "
                    f"this thread's set_input; {_ONE_THREAD}")

    def read(self, where: str) -> None:
        """Before reading outputs: raise if this thread ran and another thread ran since."""
        if self._last_runner != threading.get_ident() and getattr(self._tls, "ran", False):
            raise ConcurrentUseError(f"{self.who}: {where}(): another thread ran the module "
                                     f"after this thread's run, so its outputs are gone; "
                                     f"{_ONE_THREAD}")


def guarded(kind: str) -> Callable[[F], F]:
    """Method decorator of an executor with a ``_guard`` (UseGuard): ``kind`` "run" checks
    the inputs first, "read" the outputs; every kind refuses overlapping calls."""

    def wrap(method: F) -> F:
        name = method.__name__
        # One wrapper per kind, so a call makes no test of its kind.
        if kind == "run":
            def call(self: Any, *args: Any, **kwargs: Any) -> Any:
                guard: UseGuard = self._guard
                guard.enter(name)
                try:
                    guard.run()
                    return method(self, *args, **kwargs)
                finally:
                    guard._lock.release()
        elif kind == "read":
            def call(self: Any, *args: Any, **kwargs: Any) -> Any:
                guard: UseGuard = self._guard
                guard.enter(name)
                try:
                    guard.read(name)
                    return method(self, *args, **kwargs)
                finally:
                    guard._lock.release()
        else:
            def call(self: Any, *args: Any, **kwargs: Any) -> Any:
                guard: UseGuard = self._guard
                guard.enter(name)
                try:
                    return method(self, *args, **kwargs)
                finally:
                    guard._lock.release()

        return wraps(method)(call)  # type: ignore[return-value]

    return wrap


__all__ = ["ConcurrentUseError", "UseGuard", "guarded"]

"""Pass instruments: hooks that the pass manager calls around every pass.

An instrument is given to ``PassContext(instruments=[...])``. Its hooks are called when the
context is entered and left, before each pass (``should_run`` may veto the pass, then
``run_before_pass``) and after it (``run_after_pass``). ``pass_instrument`` turns any class
with some of these methods into an instrument, as TVM's ``tvm.ir.instrument`` does.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .module import IRModule
    from .transform import PassInfo


class PassInstrument:
    """Base of pass instruments; every hook does nothing by default."""

    def enter_pass_ctx(self) -> None:
        """Called when the PassContext holding this instrument is entered."""

    def exit_pass_ctx(self) -> None:
        """Called when the PassContext holding this instrument is left."""

    def should_run(self, mod: IRModule, info: PassInfo) -> bool:
        """Return False to skip the pass (the module is passed on unchanged)."""
        return True

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        """Called before a pass runs (after every instrument agreed that it should)."""

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        """Called with the pass's result."""

    @property
    def name(self) -> str:
        return type(self).__name__


def pass_instrument(pi_cls: type | None = None) -> Any:
    """Class decorator: make a class with (some of) the hook methods a PassInstrument.

    ``@pass_instrument class PrintBefore: def run_before_pass(self, mod, info): ...``;
    instances of the decorated class can be given to ``PassContext(instruments=...)``.
    """

    def wrap(cls: type) -> type:
        if not isinstance(cls, type):
            raise TypeError(f"pass_instrument: expected a class, got {cls!r}")
        if issubclass(cls, PassInstrument):
            return cls
        # cls first in the MRO: its hooks override the do-nothing defaults.
        new = type(cls.__name__, (cls, PassInstrument), {"__doc__": cls.__doc__})
        new.__qualname__ = cls.__qualname__
        new.__module__ = cls.__module__
        return new

    return wrap if pi_cls is None else wrap(pi_cls)


class PassTimingInstrument(PassInstrument):
    """Record how long each pass took; ``render()`` gives a table (nested passes indented)."""

    def __init__(self) -> None:
        self._stack: list[float] = []
        self.records: list[tuple[int, str, float]] = []  # (depth, pass name, seconds)

    def enter_pass_ctx(self) -> None:
        self._stack.clear()
        self.records.clear()

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        self._stack.append(time.perf_counter())

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        start = self._stack.pop()
        self.records.append((len(self._stack), info.name, time.perf_counter() - start))

    def render(self) -> str:
        """One line per pass run, in the order the passes finished."""
        return "\n".join(f"{'  ' * d}{name}: {sec * 1e6:.0f}us" for d, name, sec in self.records)

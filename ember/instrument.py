"""``tvm.instrument``: pass instruments, hooks the pass manager calls around every pass.

``PassInstrument``, ``pass_instrument`` and ``PassTimingInstrument`` are those of
``ember.ir.instrument``; the printing instruments are here:

    with tvm.transform.PassContext(opt_level=3, instruments=[PrintAfterAll()]):
        mod = relay.transform.FoldConstant()(mod)    # prints the module after each pass
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .ir.instrument import PassInstrument, PassTimingInstrument, pass_instrument

__all__ = ["PassInstrument", "PassPrintingInstrument", "PassTimingInstrument",
           "PrintAfterAll", "PrintBeforeAll", "pass_instrument"]


def _names(names: Iterable[str] | None, where: str) -> frozenset[str]:
    if names is None:
        return frozenset()
    if isinstance(names, str):  # a lone name, not its letters
        return frozenset((names,))
    out = frozenset(names)
    bad = sorted(repr(n) for n in out if not isinstance(n, str))
    if bad:
        raise TypeError(f"{where}: pass names must be str, got {', '.join(bad)}")
    return out


def _print(when: str, mod: Any, info: Any) -> None:
    print(f"{when} {info.name}:\n{mod.astext() if hasattr(mod, 'astext') else mod}")


class PassPrintingInstrument(PassInstrument):
    """Print the module before the passes named in ``print_before_pass_names`` and after
    those named in ``print_after_pass_names`` (pass names as ``PassInfo.name`` gives them)."""

    def __init__(self, print_before_pass_names: Iterable[str] | None = None,
                 print_after_pass_names: Iterable[str] | None = None) -> None:
        self.print_before = _names(print_before_pass_names, "PassPrintingInstrument")
        self.print_after = _names(print_after_pass_names, "PassPrintingInstrument")

    def run_before_pass(self, mod: Any, info: Any) -> None:
        if info.name in self.print_before:
            _print("Before Running Pass:", mod, info)

    def run_after_pass(self, mod: Any, info: Any) -> None:
        if info.name in self.print_after:
            _print("After Running Pass:", mod, info)


class PrintBeforeAll(PassInstrument):
    """Print the module before every pass."""

    def run_before_pass(self, mod: Any, info: Any) -> None:
        _print("Before Running Pass:", mod, info)


class PrintAfterAll(PassInstrument):
    """Print the module after every pass."""

    def run_after_pass(self, mod: Any, info: Any) -> None:
        _print("After Running Pass:", mod, info)

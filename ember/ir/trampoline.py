"""Recursive algorithms without Python recursion: write them as generators, run them here.

A step is a generator function. Where it would call itself (or another step) it yields the
call instead and receives the result::

    def depth(e):
        if not e.args:
            return 1
        kids = []
        for a in e.args:
            kids.append((yield depth(a)))
        return 1 + max(kids)

    run(depth(expr))

``run`` keeps the pending steps on a list, so the nesting depth is bounded by memory, not by
``sys.getrecursionlimit()``. An exception raised in a step is thrown into the step that
yielded it, exactly where a recursive call would have raised; ``try``/``finally`` work.
Never ``yield from`` a step: that nests the generators again.

Recursive descent (the text parser), nested blocks (the printer) and nested scopes (the VM's
allocation pass) are written this way; walks over expressions use ``ir.post_order`` instead.
"""
from __future__ import annotations

from collections.abc import Generator
from typing import Any, TypeVar

T = TypeVar("T")
Step = Generator[Any, Any, T]


def run(step: Step[T]) -> T:
    """The value ``step`` returns, running the steps it yields (and theirs) from a loop."""
    stack: list[Step[Any]] = [step]
    value: Any = None
    error: BaseException | None = None
    while True:
        top = stack[-1]
        try:
            if error is not None:
                exc, error = error, None
                child = top.throw(exc)
            else:
                child = top.send(value)
        except StopIteration as stop:
            stack.pop()
            if not stack:
                return stop.value  # type: ignore[no-any-return]
            value = stop.value
            continue
        except BaseException as exc:  # noqa: BLE001 - passed on to the caller's step
            stack.pop()
            if not stack:
                raise exc.with_traceback(_innermost(exc.__traceback__)) from exc.__cause__
            error = exc
            continue
        if not isinstance(child, Generator):
            raise TypeError(f"trampoline: a step yielded {type(child).__name__}, not a step "
                            "(call the step function and yield the generator it returns)")
        stack.append(child)
        value = None


def _innermost(tb: Any, keep: int = 48) -> Any:
    """The last ``keep`` entries of a traceback: an error thrown up through thousands of
    steps would otherwise carry (and print) one entry per step."""
    length, node = 0, tb
    while node is not None:
        length, node = length + 1, node.tb_next
    for _ in range(max(0, length - keep)):
        tb = tb.tb_next
    return tb

"""``match`` -> decision code: each clause's pattern is tested in order, with ``get_tag`` /
``load_consti`` / ``if`` for constructor patterns and ``get_field`` for their fields (and
for tuple patterns, which always match structurally); pattern variables are bound to the
registers of the values they match. A failed test jumps to the next clause; after the last
one, when it can fail, ``fatal`` (a ``match?`` with no matching clause, or an incomplete
``match``). The clause bodies each end with a ``move`` to the result register and a ``goto``
past the remaining clauses.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ....ir.adt import Match, Pattern, PatternConstructor, PatternTuple, PatternVar, PatternWildcard
from ....ir.trampoline import Step
from ....runtime.errors import TVMError
from ....runtime.vm import instructions as I

if TYPE_CHECKING:
    from ._codegen import FunctionCodegen


def _test(fc: FunctionCodegen, root: Pattern, root_reg: int, fails: list[int]) -> None:
    """Emit the test of ``root`` against register ``root_reg``; record the ``if``
    instructions that must jump to the next clause on failure. Depth first, left to right,
    from a stack of (pattern, register, next field) (patterns may nest deeply)."""
    stack: list[tuple[Pattern, int, int]] = [(root, root_reg, -1)]
    while stack:
        pat, reg, i = stack.pop()
        if i < 0:  # first visit: the pattern itself
            if isinstance(pat, PatternWildcard):
                continue
            if isinstance(pat, PatternVar):
                fc.var_reg[pat.var] = reg
                continue
            if isinstance(pat, PatternConstructor):
                tag = fc.new_reg()
                fc.emit(I.GetTag(reg, tag))
                fails.append(fc.emit(I.If(tag, fc.load_int(pat.constructor.tag), 1, 0)))
            elif not isinstance(pat, PatternTuple):
                raise TVMError(f"vm compiler: unsupported pattern {type(pat).__name__}")
            i = 0
        subs = pat.patterns  # type: ignore[attr-defined]
        while i < len(subs) and isinstance(subs[i], PatternWildcard):
            i += 1
        if i < len(subs):
            field = fc.new_reg()
            fc.emit(I.GetField(reg, i, field))
            stack.append((pat, reg, i + 1))
            stack.append((subs[i], field, -1))


def compile_match(fc: FunctionCodegen, e: Match) -> Step[int]:
    """The code of ``e``; the step's value is the register holding its value."""
    data = yield fc.compile(e.data)
    result = fc.new_reg()
    ends: list[int] = []
    can_fail = True
    for clause in e.clauses:
        saved = dict(fc.consti)
        fails: list[int] = []
        _test(fc, clause.lhs, data, fails)
        fc.emit(I.Move((yield fc.scoped(clause.rhs)), result))
        ends.append(fc.emit(I.Goto(0)))
        fc.consti = saved  # immediates loaded by the tests belong to this clause
        for at in fails:
            ins = fc.code[at]
            fc.code[at] = I.If(ins.test, ins.target, 1, len(fc.code) - at)  # type: ignore[attr-defined]
        if not fails:  # an irrefutable clause: the ones after it are unreachable
            can_fail = False
            break
    if can_fail:
        fc.emit(I.Fatal())
    end = len(fc.code)
    for at in ends:
        fc.code[at] = I.Goto(end - at)
    return result

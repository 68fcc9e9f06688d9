"""Loops as recursive functions: ``while_loop``."""
from __future__ import annotations

from typing import Callable, Sequence

from ..ir.expr import Call, Function, Let, RelayExpr, Tuple, Var
from ..runtime.errors import TVMError
from .scope_builder import ScopeBuilder


def while_loop(cond: Callable[..., RelayExpr], loop_vars: Sequence[RelayExpr],
               loop_bodies: Callable[..., Sequence[RelayExpr]]) -> RelayExpr:
    """A recursive function that runs ``loop_bodies`` while ``cond`` holds.

    ``cond(*vars)`` gives a 0-d bool expression and ``loop_bodies(*vars)`` the next values
    of the loop variables. The result is ``let %while_loop = fn (vars...) { if (cond)
    { %while_loop(bodies...) } else { (vars...) } }; %while_loop``: call it with the initial
    values to get the tuple of final values.
    """
    loop_vars = list(loop_vars)
    if not loop_vars:
        raise TVMError("while_loop: needs at least one loop variable")
    sb = ScopeBuilder()
    loop = Var("while_loop")
    fresh = []
    for i, lv in enumerate(loop_vars):
        name = lv.name_hint if isinstance(lv, Var) else f"arg{i}"
        fresh.append(Var(name, sb.type_of(lv), span=getattr(lv, "span", None)))
    bodies = list(loop_bodies(*fresh))
    if len(bodies) != len(fresh):
        raise TVMError(f"while_loop: loop_bodies returned {len(bodies)} value(s) for "
                       f"{len(fresh)} loop variable(s)")
    with sb.if_scope(cond(*fresh)):
        sb.ret(Call(loop, bodies))
    with sb.else_scope():
        sb.ret(Tuple(fresh))
    return Let(loop, Function(fresh, sb.get()), loop)

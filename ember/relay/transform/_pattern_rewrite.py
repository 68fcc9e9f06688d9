"""Local rewrites as a table of (op name, named rewrite function) pairs.

A rewrite receives a call of its op, rebuilt on already-rewritten (and typed) arguments, and
returns a replacement or None. Rewrites only fire on calls of the ops they name, run in table
order, and are retried on their own output; the whole walk repeats (with type inference in
between, so fresh nodes get types) until nothing changes. Every rewrite must keep the type of
the call it replaces.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from ...ir.expr import Call, Function, RelayExpr
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.visitor import set_type
from ._helpers import PassMutator, infer, map_functions

Rewrite = Callable[[Call], "RelayExpr | None"]
Rule = tuple[str, Rewrite]
MAX_ROUNDS = 8


class PatternRewriter(PassMutator):
    """Apply a rule table bottom-up once over an expression; ``changed`` tells if any fired."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        super().__init__()
        self.by_op: dict[str, list[Rewrite]] = {}
        for name, fn in rules:
            self.by_op.setdefault(name, []).append(fn)
        self.changed = False

    def visit_call(self, orig: Call) -> RelayExpr:
        out: RelayExpr = super().visit_call(orig)
        for _ in range(MAX_ROUNDS):
            if not (isinstance(out, Call) and isinstance(out.op, Op)):
                break
            for fn in self.by_op.get(out.op.name, ()):
                res = fn(out)
                if res is not None:
                    self.changed = True
                    # a node of the input stays as it is; a new one gets orig's type
                    out = res if res in self.memo_map else set_type(res, orig.checked_type_)
                    break
            else:
                break
        return out


def rewrite_module(mod: IRModule, rules: Sequence[Rule],
                   rewriter: type[PatternRewriter] = PatternRewriter) -> IRModule:
    """Apply ``rules`` to every Relay function of ``mod`` until none fires (``rewriter``: a
    subclass that also rewrites other nodes)."""
    mod = infer(mod)
    for _ in range(MAX_ROUNDS):
        changed = False

        def run(func: Function) -> Function:
            nonlocal changed
            rw = rewriter(rules)
            out = rw.visit(func)
            changed |= rw.changed
            return out  # type: ignore[return-value]

        mod = infer(map_functions(mod, run))
        if not changed:
            break
    return mod

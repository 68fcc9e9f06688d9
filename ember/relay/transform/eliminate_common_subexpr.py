"""EliminateCommonSubexpr: share operator calls that compute the same thing.

Walking children first, every operator call is rebuilt on its already-shared arguments, so
two calls are the same computation exactly when they call the same op with the same
attributes on the *same* argument nodes (constants compare by value); the later one is replaced by the earlier. Field
projections ``%t.i`` of the same tuple node are shared the same way. Calls of stateful ops
(``OpDef.extra["stateful"]``, e.g. random generators) are never merged, nor are calls for
which ``fskip(call)`` returns True, nor anything inside fused (Primitive) functions.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...ir.expr import Call, Constant, Function, RelayExpr, TupleGetItem
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.structural import structural_equal
from ...ir.transform import FunctionPass, PassContext, register_pass
from ._helpers import PassMutator, infer, map_functions

__all__ = ["EliminateCommonSubexpr"]


def _attrs_equal(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # attrs holding arrays: compare them structurally
        return structural_equal(a, b)


def _arg_key(e: RelayExpr) -> Any:
    # Constants are compared by value (two ``1f`` literals are the same argument).
    if isinstance(e, Constant):
        return ("const", str(e.data.dtype), tuple(e.data.shape))
    return id(e)


def _same_arg(a: RelayExpr, b: RelayExpr) -> bool:
    if a is b:
        return True
    return (isinstance(a, Constant) and isinstance(b, Constant)
            and bool(np.array_equal(a.data.numpy(), b.data.numpy())))


class _Eliminator(PassMutator):
    def __init__(self, fskip: Callable[[RelayExpr], bool] | None) -> None:
        super().__init__()
        self.fskip = fskip
        self.calls: dict[tuple[Any, ...], list[Call]] = {}
        self.items: dict[tuple[int, int], TupleGetItem] = {}

    def visit_call(self, orig: Call) -> RelayExpr:
        new: Call = super().visit_call(orig)
        op = new.op
        if not isinstance(op, Op) or op.op_def.extra.get("stateful"):
            return new
        if self.fskip is not None and self.fskip(new):
            return new
        key = (op.name, tuple(map(_arg_key, new.args)))
        for cand in self.calls.get(key, ()):
            if all(map(_same_arg, cand.args, new.args)) and _attrs_equal(cand.attrs, new.attrs):
                return cand
        self.calls.setdefault(key, []).append(new)
        return new

    def visit_tuple_getitem(self, orig: TupleGetItem) -> RelayExpr:
        new: TupleGetItem = super().visit_tuple_getitem(orig)
        key = (id(new.tuple_value), new.index)
        return self.items.setdefault(key, new)


@dataclass(frozen=True)
class EliminateCommonSubexpr(FunctionPass):
    """Merge structurally equal operator calls on the same arguments (see module docstring).

    ``fskip(call) -> bool`` names calls to leave alone.
    """

    name: ClassVar[str] = "EliminateCommonSubexpr"
    opt_level: ClassVar[int] = 3
    fskip: Callable[[RelayExpr], bool] | None = None

    def __post_init__(self) -> None:
        if self.fskip is not None and not callable(self.fskip):
            raise TypeError(f"EliminateCommonSubexpr: fskip must be callable, got {self.fskip!r}")

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        out = map_functions(mod, lambda f: self.transform_function(f, mod, ctx))
        return infer(out)

    def transform_function(self, func: Function, mod: IRModule, ctx: PassContext) -> Function:
        # The rewriter keeps ids of nodes it saw alive, so keys by id stay unique.
        return _Eliminator(self.fskip).visit(func)  # type: ignore[no-any-return]


register_pass("EliminateCommonSubexpr", EliminateCommonSubexpr)

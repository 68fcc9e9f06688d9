"""LazyGradientInit: make the ones and zeros of gradient code lazy, so most are never built.

Gradient programs (``relay.transform.gradient``) start every gradient at ``zeros_like`` and the
output's at ``ones_like``, then add and multiply them: tensors that a ``GradCell`` makes lazy.
Inside each global function every tensor value becomes a ``GradCell[T]`` (defined in
``ember.relay.prelude``, added to the module): ``zeros_like``/``zeros`` give
``Zero(fn () { ... })``, ``ones_like``/``ones`` give ``One(fn () { ... })`` (built only if
forced), ``add`` and ``multiply`` of same-shaped tensors go through ``@AddGradCell`` /
``@MultiplyGradCell`` (``x + 0``, ``x * 1`` and ``x * 0`` cost nothing), and every other
operator forces its arguments (``@FromGradCell``) and wraps its result (``Raw``). Tuples,
``let``, ``if``, closures and references carry GradCells inside them (their types change
accordingly); calls of global functions pass forced values. Each global function keeps its
type: its parameters are wrapped on entry and its result forced on exit.

Functions whose values include algebraic data types (``match``, constructors, ``List[...]``)
or type variables (polymorphic functions) are left as they are, and so are fused (Primitive)
functions.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ...ir.adt import Constructor, Match
from ...ir.expr import (Call, Constant, Function, GlobalVar, If, Let, RelayExpr, Tuple,
                        TupleGetItem, Var)
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.transform import ModulePass, PassContext, register_pass
from ...ir.types import FuncType, RelayRefType, TensorType, TupleType, Type, TypeCall
from ...ir.visitor import ExprMutator, is_primitive, post_order
from ...runtime.errors import TVMError
from ..prelude import GRAD_CELL_DEFS, with_grad_cell
from ._helpers import infer

__all__ = ["LazyGradientInit"]

_LAZY_CTOR = {"zeros_like": "Zero", "zeros": "Zero", "ones_like": "One", "ones": "One"}
_CELL_OPS = {"add": "AddGradCell", "multiply": "MultiplyGradCell"}
_WHERE = "LazyGradientInit"
_UNIT = TupleType([])


class _Cells:
    """The GradCell type, its constructors and functions in one module."""

    def __init__(self, mod: IRModule) -> None:
        self.gtv, *ctors = mod.get_type("GradCell")
        self.ctor = {c.name_hint: c for c in ctors}
        self.fn = {n: mod.get_global_var(n) for n in GRAD_CELL_DEFS[1:]}

    def lazy_type(self, ty: Type) -> Type:
        if isinstance(ty, TensorType):
            return TypeCall(self.gtv, (ty,))
        if isinstance(ty, TupleType):
            return TupleType([self.lazy_type(f) for f in ty.fields])
        if isinstance(ty, FuncType):
            return FuncType([self.lazy_type(a) for a in ty.arg_types],
                            self.lazy_type(ty.ret_type), ty.type_params)
        if isinstance(ty, RelayRefType):
            return RelayRefType(self.lazy_type(ty.value))
        raise TVMError(f"{_WHERE}: values of type {ty} are not supported")

    def wrap(self, e: RelayExpr, ty: Type) -> RelayExpr:
        """A plain value as its lazy form (tensors in Raw)."""
        return self._convert(e, ty, lambda x: Call(self.ctor["Raw"], (x,)))

    def force(self, e: RelayExpr, ty: Type) -> RelayExpr:
        """A lazy value as a plain one (tensors through @FromGradCell)."""
        return self._convert(e, ty, lambda x: Call(self.fn["FromGradCell"], (x,)))

    def _convert(self, e: RelayExpr, ty: Type, tensor: Any) -> RelayExpr:
        if isinstance(ty, TensorType):
            return tensor(e)
        if isinstance(ty, TupleType):
            v = e if isinstance(e, Var) else Var("t")
            out = Tuple(tuple(self._convert(TupleGetItem(v, i), f, tensor)
                              for i, f in enumerate(ty.fields)))
            return out if v is e else Let(v, e, out)  # type: ignore[arg-type]
        raise TVMError(f"{_WHERE}: cannot pass a value of type {ty} to or from a global "
                       "function or operator")


class _Lazy(ExprMutator):
    def __init__(self, cells: _Cells) -> None:
        super().__init__()
        self.cells = cells

    def _type(self, e: RelayExpr) -> Type:
        ty = e.checked_type_
        if ty is None and isinstance(e, Var):
            ty = e.type_annotation
        if ty is None:
            raise TVMError(f"{_WHERE}: untyped {type(e).__name__} (run InferType first)")
        return ty

    def visit_var(self, var: Var) -> RelayExpr:
        return Var(var.name_hint, self.cells.lazy_type(self._type(var)), span=var.span)

    def visit_constant(self, c: Constant) -> RelayExpr:
        return self.cells.wrap(c, self._type(c))

    def visit_constructor(self, c: Constructor) -> RelayExpr:
        raise TVMError(f"{_WHERE}: constructors are not supported ({c.name_hint})")

    def visit_match(self, m: Match) -> RelayExpr:
        raise TVMError(f"{_WHERE}: match is not supported")

    def visit_if(self, node: If) -> RelayExpr:
        cond = self.cells.force(self.visit(node.cond), self._type(node.cond))
        return If(cond, self.visit(node.true_branch), self.visit(node.false_branch),
                  span=node.span)

    def visit_function(self, func: Function) -> RelayExpr:
        params = tuple(self.visit(p) for p in func.params)
        return Function(params, self.visit(func.body), None, func.type_params, func.attrs,
                        span=func.span)

    def visit_call(self, call: Call) -> RelayExpr:
        args = [self.visit(a) for a in call.args]
        op, cells = call.op, self.cells
        if isinstance(op, (Op, GlobalVar)):
            if isinstance(op, Op) and op.name in _LAZY_CTOR and isinstance(
                    self._type(call), TensorType):
                forced = [cells.force(a, self._type(o)) for a, o in zip(args, call.args)]
                make = Function((), Call(op, tuple(forced), call.attrs))
                return Call(cells.ctor[_LAZY_CTOR[op.name]], (make,))
            if isinstance(op, Op) and op.name in _CELL_OPS and self._same_types(call):
                ty = self._type(call)
                a, b = Var("a", ty), Var("b", ty)
                fn = Function((a, b), Call(op, (a, b), call.attrs))
                return Call(cells.fn[_CELL_OPS[op.name]], (fn, *args))
            forced = [cells.force(a, self._type(o)) for a, o in zip(args, call.args)]
            return cells.wrap(Call(op, tuple(forced), call.attrs, call.type_args),
                              self._type(call))
        return Call(self.visit(op), tuple(args), call.attrs, span=call.span)

    def _same_types(self, call: Call) -> bool:
        ty = self._type(call)
        return isinstance(ty, TensorType) and all(self._type(a) == ty for a in call.args)


def _plain(ty: Type | None) -> bool:
    """Whether ``ty`` is built from tensors, tuples, functions and references only."""
    if isinstance(ty, TensorType):
        return True
    if isinstance(ty, TupleType):
        return all(map(_plain, ty.fields))
    if isinstance(ty, FuncType):
        return not ty.type_params and all(map(_plain, (*ty.arg_types, ty.ret_type)))
    return isinstance(ty, RelayRefType) and _plain(ty.value)


def _left_alone(func: Function) -> bool:
    """Functions with type parameters or algebraic data types anywhere are not converted."""
    return not _plain(func.checked_type_) or any(
        isinstance(e, (Match, Constructor)) or not _plain(e.checked_type_ or FuncType([], _UNIT))
        for e in post_order(func) if not isinstance(e, (Op, GlobalVar)))


def _lazy_function(func: Function, cells: _Cells) -> Function:
    lazy = _Lazy(cells)
    lets: list[tuple[Var, RelayExpr]] = []
    for p in func.params:
        ty = lazy._type(p)
        pv = Var(p.name_hint, cells.lazy_type(ty))
        lets.append((pv, cells.wrap(p, ty)))
        lazy.memo_map[p] = pv
    body: RelayExpr = cells.force(lazy.visit(func.body), func.body.checked_type)
    for var, value in reversed(lets):
        body = Let(var, value, body)
    return Function(func.params, body, func.ret_type, func.type_params, func.attrs,
                    span=func.span)


@dataclass(frozen=True)
class LazyGradientInit(ModulePass):
    """Make zeros and ones lazy through GradCell (see the module docstring)."""

    name: ClassVar[str] = "LazyGradientInit"
    opt_level: ClassVar[int] = 2

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        typed = infer(with_grad_cell(mod))
        cells = _Cells(typed)
        out = typed.copy()
        for gv, func in typed.functions.items():
            if (not isinstance(func, Function) or is_primitive(func)
                    or gv.name_hint in GRAD_CELL_DEFS or _left_alone(func)):
                continue
            out.add(gv, _lazy_function(func, cells))
        return infer(out)


register_pass("LazyGradientInit", LazyGradientInit)

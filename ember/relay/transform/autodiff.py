"""``relay.transform.gradient``: reverse-mode automatic differentiation.

``gradient(fn, mod=None, mode="higher_order")`` returns a function with ``fn``'s parameters
whose result is ``(fn's result, (d/dp1, d/dp2, ...))``: the gradient, for each tensor
parameter, of the sum of all elements of ``fn``'s result (every output element is seeded with
1, as ``ones_like``; a tuple result seeds every tensor in it). The operators' gradient rules
come from the op registry (``relay.op.register_gradient``, see ``ember.relay.op._tensor_grad``).

``mode="higher_order"`` handles any program built from operator calls, tuples, ``let``, ``if``,
closures (local functions, calls of them) and references: every tensor value ``v`` is paired
with a reference holding its gradient, ``(v, ref(zeros_like(v)))``, and each operator call
pushes onto a tape (a reference to a closure) a step that adds its arguments' gradients; the
result's gradients are set to ones, the tape is run, and the parameters' references are read.
The output is a higher-order program (closures and references): run it on the interpreter
(``relay.create_executor``), or remove them with PartialEvaluate / Defunctionalization.

``mode="first_order"`` (also the ``FirstOrderGradient`` pass) handles dataflow programs (calls
of operators, tuples, ``let``) and produces a program with neither closures nor references: the
forward graph, then each node's adjoint as a sum of its consumers' contributions, in reverse
order; it runs on every executor. Global function calls, ``match`` and constructors are not
supported by either mode; their errors say so.
"""
from __future__ import annotations

from typing import Any

from ...ir.adt import Constructor, Match
from ...ir.expr import (Call, Constant, Function, GlobalVar, If, Let, RefCreate, RefRead,
                        RefWrite, RelayExpr, Tuple, TupleGetItem, Var)
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.types import FuncType, RelayRefType, TensorType, TupleType, Type
from ...ir.visitor import ExprMutator
from ...runtime.errors import TVMError
from ..op._tensor_grad import get_gradient
from .to_a_normal_form import to_a_normal_form
from .type_infer import infer_type

__all__ = ["gradient", "grads_of", "is_float_tensor"]

_UNIT = TupleType([])


def is_float_tensor(ty: Type | None) -> bool:
    return isinstance(ty, TensorType) and str(ty.dtype).startswith(("float", "bfloat"))


def grads_of(op: Op, orig: Call, grad: RelayExpr, where: str) -> list[RelayExpr]:
    """The gradients of ``orig``'s arguments by ``op``'s registered rule, checked."""
    rule = get_gradient(op.name)
    if rule is None:
        raise TVMError(f"{where}: no gradient is registered for operator {op.name}; register "
                       "one with relay.op.register_gradient")
    grads = list(rule(orig, grad))
    if len(grads) != len(orig.args):
        raise TVMError(f"{where}: the gradient rule of {op.name} returned {len(grads)} "
                       f"gradient(s) for {len(orig.args)} argument(s)")
    return grads


def _op(name: str, *args: RelayExpr) -> Call:
    return Call(Op.get(name), args)


def ad_type(ty: Type, where: str) -> Type:
    """The type of a value in the higher-order program: tensors paired with a gradient ref."""
    if isinstance(ty, TensorType):
        return TupleType([ty, RelayRefType(ty)])
    if isinstance(ty, TupleType):
        return TupleType([ad_type(f, where) for f in ty.fields])
    if isinstance(ty, FuncType):
        return FuncType([ad_type(a, where) for a in ty.arg_types], ad_type(ty.ret_type, where),
                        ty.type_params)
    if isinstance(ty, RelayRefType):
        return RelayRefType(ad_type(ty.value, where))
    raise TVMError(f"{where}: cannot differentiate through a value of type {ty} (algebraic "
                   "data types and type variables are not supported)")


def _let_chain(bindings: list[tuple[Var, RelayExpr]], result: RelayExpr) -> RelayExpr:
    for var, value in reversed(bindings):
        result = Let(var, value, result)
    return result


class _ReverseAD(ExprMutator):
    """The higher-order transform of a typed A-normal-form body (module docstring)."""

    def __init__(self, bp: Var, where: str) -> None:
        super().__init__()
        self.bp, self.where = bp, where

    def _type(self, e: RelayExpr) -> Type:
        ty = e.checked_type_
        if ty is None and isinstance(e, Var):
            let = self._lets.get(e)
            ty = e.type_annotation if let is None else let.value.checked_type_
        if ty is None:
            raise TVMError(f"{self.where}: untyped {type(e).__name__} (run InferType first)")
        return ty

    def visit_var(self, var: Var) -> RelayExpr:
        return Var(var.name_hint, ad_type(self._type(var), self.where), span=var.span)

    def visit_constant(self, c: Constant) -> RelayExpr:
        return Tuple((c, RefCreate(_op("zeros_like", c))))

    def visit_global_var(self, gv: GlobalVar) -> RelayExpr:
        raise TVMError(f"{self.where}: calls of global functions (@{gv.name_hint}) are not "
                       "supported; inline them first (relay.transform.Inline)")

    def visit_constructor(self, c: Constructor) -> RelayExpr:
        raise TVMError(f"{self.where}: constructors ({c.name_hint}) are not supported")

    def visit_match(self, m: Match) -> RelayExpr:
        raise TVMError(f"{self.where}: match expressions are not supported")

    def visit_if(self, node: If) -> RelayExpr:
        cond = self.visit(node.cond)
        return If(TupleGetItem(cond, 0), self.visit(node.true_branch),
                  self.visit(node.false_branch), span=node.span)

    def visit_function(self, func: Function) -> RelayExpr:
        if int(func.get_attr("Primitive", 0) or 0):
            raise TVMError(f"{self.where}: fused (Primitive) functions are not supported; "
                           "differentiate before FuseOps")
        params = tuple(self.visit(p) for p in func.params)
        return Function(params, self.visit(func.body), None, func.type_params, func.attrs,
                        span=func.span)

    def visit_call(self, call: Call) -> RelayExpr:
        args = [self.visit(a) for a in call.args]
        if not isinstance(call.op, Op):
            return Call(self.visit(call.op), tuple(args), call.attrs, span=call.span)
        return self._op_call(call, args)

    def _op_call(self, call: Call, args: list[RelayExpr]) -> RelayExpr:
        op, out_ty = call.op, self._type(call)
        arg_tys = [self._type(a) for a in call.args]
        if not all(isinstance(t, TensorType) for t in arg_tys) or not isinstance(
                out_ty, TensorType):
            name = op.name  # type: ignore[union-attr]
            raise TVMError(f"{self.where}: {name} takes or returns a tuple; only operators on "
                           "tensors are supported")
        values = [TupleGetItem(a, 0, checked_type_=t) for a, t in zip(args, arg_tys)]
        y = Var("y", out_ty)
        r = Var("r", ad_type(out_ty, self.where))
        pair = Tuple((y, RefCreate(_op("zeros_like", y))))
        lets: list[tuple[Var, RelayExpr]] = [(y, Call(op, tuple(values), call.attrs)), (r, pair)]
        if is_float_tensor(out_ty) and any(map(is_float_tensor, arg_tys)):
            orig = Call(op, tuple(TupleGetItem(a, 0, checked_type_=t)
                                  for a, t in zip(args, arg_tys)), call.attrs,
                        checked_type_=out_ty)
            grads = grads_of(op, orig, RefRead(TupleGetItem(r, 1)), self.where)  # type: ignore
            prev = Var("prev", FuncType([], _UNIT))
            steps: list[tuple[Var, RelayExpr]] = []
            for a, t, g in zip(args, arg_tys, grads):
                if is_float_tensor(t):
                    ref = TupleGetItem(a, 1)
                    steps.append((Var("u", _UNIT), RefWrite(ref, _op("add", RefRead(ref), g))))
            back = Function((), _let_chain(steps, Call(prev, ())))
            lets += [(prev, RefRead(self.bp)), (Var("u", _UNIT), RefWrite(self.bp, back))]
        return _let_chain(lets, r)


def _seed(res: RelayExpr, ty: Type) -> list[RelayExpr]:
    """Writes of ones into the gradient refs of every tensor of the result."""
    if isinstance(ty, TensorType):
        return [RefWrite(TupleGetItem(res, 1), _op("ones_like", TupleGetItem(res, 0)))]
    fields = ty.fields  # type: ignore[attr-defined]
    return [w for i, f in enumerate(fields) for w in _seed(TupleGetItem(res, i), f)]


def _forward(res: RelayExpr, ty: Type) -> RelayExpr:
    if isinstance(ty, TensorType):
        return TupleGetItem(res, 0)
    return Tuple(tuple(_forward(TupleGetItem(res, i), f)
                       for i, f in enumerate(ty.fields)))  # type: ignore[attr-defined]


def _check_result(ty: Type, where: str) -> None:
    if isinstance(ty, TupleType):
        for f in ty.fields:
            _check_result(f, where)
    elif not isinstance(ty, TensorType):
        raise TVMError(f"{where}: the function must return tensors or tuples of tensors, "
                       f"got {ty}")


def typed_function(expr: Any, mod: IRModule | None, where: str) -> Function:
    """``expr`` (a Function, or a GlobalVar of ``mod``) as a typed function with tensor
    parameters."""
    if isinstance(expr, GlobalVar):
        if mod is None or expr.name_hint not in mod:
            raise TVMError(f"{where}: @{expr.name_hint} needs the module that defines it")
        expr = mod[expr.name_hint]
    if not isinstance(expr, Function):
        raise TypeError(f"{where}: expected a relay.Function, got {type(expr).__name__}")
    func = infer_type(expr, mod)
    for p in func.params:  # type: ignore[attr-defined]
        if not isinstance(p.checked_type_ or p.type_annotation, TensorType):
            raise TVMError(f"{where}: parameter %{p.name_hint} has type "
                           f"{p.checked_type_ or p.type_annotation}; only tensor parameters "
                           "are differentiated")
    _check_result(func.body.checked_type, where)  # type: ignore[attr-defined]
    return func  # type: ignore[return-value]


def higher_order_gradient(expr: Any, mod: IRModule | None = None) -> Function:
    """The higher-order gradient of ``expr`` (module docstring)."""
    where = "relay.transform.gradient"
    func = typed_function(expr, mod, where)
    anf = infer_type(to_a_normal_form(func), mod)
    assert isinstance(anf, Function), "ToANormalForm keeps a function a function"
    bp = Var("bp", RelayRefType(FuncType([], _UNIT)))
    ad = _ReverseAD(bp, where)
    lets: list[tuple[Var, RelayExpr]] = [(bp, RefCreate(Function((), Tuple(()))))]
    for old, new in zip(anf.params, func.params):
        pv = Var(new.name_hint, ad_type(new.checked_type_ or new.type_annotation, where))
        lets.append((pv, Tuple((new, RefCreate(_op("zeros_like", new))))))
        ad.memo_map[old] = pv
    res_ty = anf.body.checked_type
    res = Var("res", ad_type(res_ty, where))
    lets.append((res, ad.visit(anf.body)))
    lets += [(Var("u", _UNIT), w) for w in _seed(res, res_ty)]
    lets.append((Var("u", _UNIT), Call(RefRead(bp), ())))
    grads = Tuple(tuple(RefRead(TupleGetItem(pv, 1)) for pv, _ in lets[1:1 + len(func.params)]))
    body = _let_chain(lets, Tuple((_forward(res, res_ty), grads)))
    out = Function(func.params, body, None, func.type_params, func.attrs)
    return infer_type(out, mod)  # type: ignore[return-value]


def gradient(expr: Any, mod: IRModule | None = None, mode: str = "higher_order") -> Function:
    """Reverse-mode AD of a function: ``fn(params) -> (result, (grad of each param,))``.

    ``mode`` is ``"higher_order"`` (closures and references; any program of operators, lets,
    ifs, closures, references) or ``"first_order"`` (dataflow programs only, no closures or
    references in the output). See the module docstring.
    """
    if mode == "higher_order":
        return higher_order_gradient(expr, mod)
    if mode == "first_order":
        from .first_order_gradient import first_order_gradient

        return first_order_gradient(expr, mod)
    raise ValueError(f"relay.transform.gradient: mode must be 'higher_order' or "
                     f"'first_order', got {mode!r}")

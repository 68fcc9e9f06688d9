"""FirstOrderGradient: reverse-mode AD of dataflow functions, without closures or references.

Each global function ``fn(params) -> result`` becomes ``fn(params) -> (result, (d/dp, ...))``,
the gradients of the sum of the result's elements (``relay.transform.gradient`` documents the
contract; this is its ``mode="first_order"``). The function must be a dataflow program: calls
of operators, tuples and their fields, and ``let`` (inlined first). The output is a graph: the
forward nodes, each shared by the gradient expressions that read it, and for every node its
adjoint, the sum of the contributions of its consumers, built in reverse topological order
from one flat loop. A parameter that the result does not depend on gets ``zeros_like``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ...ir.expr import (Call, Constant, Function, RelayExpr, Tuple, TupleGetItem, Var)
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.transform import ModulePass, PassContext, register_pass
from ...ir.types import TensorType, TupleType, Type
from ...ir.visitor import is_primitive, post_order
from ...runtime.errors import TVMError
from .autodiff import grads_of, is_float_tensor, typed_function
from .to_graph_normal_form import to_graph_normal_form
from .type_infer import infer_type

__all__ = ["FirstOrderGradient", "first_order_gradient"]

Adjoint = Any  # an expression for a tensor node; a list (None = zero) for a tuple node


def _op(name: str, *args: RelayExpr) -> Call:
    return Call(Op.get(name), args)


def _check_dataflow(body: RelayExpr, where: str) -> list[RelayExpr]:
    nodes = list(post_order(body))
    for node in nodes:
        ok = isinstance(node, (Var, Constant, Op, Tuple, TupleGetItem)) or (
            isinstance(node, Call) and isinstance(node.op, Op))
        if not ok:
            kind = "a call of a function" if isinstance(node, Call) else type(node).__name__
            raise TVMError(f"{where}: the function uses {kind}; first-order AD handles "
                           "dataflow programs (operators, tuples, let) only: use "
                           "gradient(fn, mode='higher_order')")
    return nodes


class _Adjoints:
    """Accumulated adjoints per node (by id), tuples as lists of per-field adjoints."""

    def __init__(self) -> None:
        self.adj: dict[int, Adjoint] = {}

    def add(self, node: RelayExpr, g: Adjoint) -> None:
        if g is None:
            return
        old = self.adj.get(id(node))
        self.adj[id(node)] = g if old is None else _plus(old, g)

    def get(self, node: RelayExpr) -> Adjoint:
        return self.adj.get(id(node))


def _plus(a: Adjoint, b: Adjoint) -> Adjoint:
    if a is None or b is None:
        return b if a is None else a
    if isinstance(a, list):
        return [_plus(x, y) for x, y in zip(a, b)]
    return _op("add", a, b)


def _materialize(adj: Adjoint, node: RelayExpr, ty: Type) -> RelayExpr:
    """An adjoint as an expression (zeros where nothing flowed)."""
    if isinstance(ty, TupleType):
        parts = adj if isinstance(adj, list) else [None] * len(ty.fields)
        return Tuple(tuple(_materialize(p, TupleGetItem(node, i), f)
                           for i, (p, f) in enumerate(zip(parts, ty.fields))))
    return _op("zeros_like", node) if adj is None else adj


def _seed(ty: Type, node: RelayExpr) -> Adjoint:
    if isinstance(ty, TupleType):
        return [_seed(f, TupleGetItem(node, i)) for i, f in enumerate(ty.fields)]
    return _op("ones_like", node) if is_float_tensor(ty) else None


def _backward(node: RelayExpr, g: Adjoint, adj: _Adjoints, where: str) -> None:
    """Send the adjoint ``g`` of ``node`` to its children."""
    if isinstance(node, Tuple):
        for field, part in zip(node.fields, g):
            adj.add(field, part)
    elif isinstance(node, TupleGetItem):
        n = len(node.tuple_value.checked_type.fields)  # type: ignore[attr-defined]
        parts: list[Adjoint] = [None] * n
        parts[node.index] = g
        adj.add(node.tuple_value, parts)
    elif isinstance(node, Call):
        arg_tys = [a.checked_type_ for a in node.args]
        if not is_float_tensor(node.checked_type_) or not any(map(is_float_tensor, arg_tys)):
            return
        op: Op = node.op  # type: ignore[assignment]
        if not all(isinstance(t, TensorType) for t in arg_tys):
            raise TVMError(f"{where}: {op.name} takes a tuple; only operators on tensors are "
                           "supported")
        for arg, ty, grad in zip(node.args, arg_tys, grads_of(op, node, g, where)):
            if is_float_tensor(ty):
                adj.add(arg, grad)


def first_order_gradient(expr: Any, mod: IRModule | None = None) -> Function:
    """The first-order gradient of ``expr`` (a Function or a GlobalVar of ``mod``)."""
    where = "FirstOrderGradient"
    func = typed_function(expr, mod, where)
    graph = infer_type(to_graph_normal_form(func, mod), mod)
    assert isinstance(graph, Function), "ToGraphNormalForm keeps a function a function"
    nodes = _check_dataflow(graph.body, where)
    adj = _Adjoints()
    body_ty = graph.body.checked_type
    adj.add(graph.body, _seed(body_ty, graph.body))
    for node in reversed(nodes):
        g = adj.get(node)
        if g is not None and not isinstance(node, (Var, Constant, Op)):
            _backward(node, g, adj, where)
    grads = Tuple(tuple(_materialize(adj.get(p), p, p.checked_type_ or p.type_annotation)
                        for p in graph.params))
    out = Function(graph.params, Tuple((graph.body, grads)), None, graph.type_params,
                   graph.attrs)
    return infer_type(out, mod)  # type: ignore[return-value]


@dataclass(frozen=True)
class FirstOrderGradient(ModulePass):
    """Make every global function return ``(result, (gradients of its parameters))`` (module
    docstring); each function is differentiated on its own."""

    name: ClassVar[str] = "FirstOrderGradient"
    opt_level: ClassVar[int] = 0

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        out = mod.copy()
        for gv, func in mod.functions.items():
            if isinstance(func, Function) and not is_primitive(func):
                out.add(gv, first_order_gradient(func, mod))
        return out


register_pass("FirstOrderGradient", FirstOrderGradient)

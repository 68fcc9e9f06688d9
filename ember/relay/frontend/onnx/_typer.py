"""Typing and folding the expressions an import builds, one node's worth at a time.

Converters need the types of their inputs (a Conv's padding depends on the input's size), and
running ``InferType`` over the whole function after every node would cost O(n^2) on an
n-node model. ``Typer`` instead keeps a table of the types of the expressions already built;
``finish(expr)`` walks only the new nodes (children first, iteratively), applies each op's
type relation to its arguments' types and, when every argument of an operator call is a
constant, evaluates the call with the op's numpy reference so that shape computations
(``Shape -> Gather -> Concat -> Reshape``) become constants as they are imported.

Dimensions in these types may be ``ShapeVar``s standing for the model's symbolic axes (the IR
itself says ``?``); see ``_symbolic.py``.

Every new call gets ``span`` (set per ONNX node by the graph walk: ``node_span(name)``), so
passes, fused kernels and profiles can name the ONNX nodes a kernel came from.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ....ir.base import Span
from ....ir.expr import Call, Constant, Function, If, Let, RelayExpr, Tuple, TupleGetItem, Var
from ....ir.op import Op
from ....ir.types import FuncType, TensorType, TupleType, Type
from ....runtime.errors import InternalError

FOLD_LIMIT = 1 << 22  # largest result (elements) evaluated at import time


def _children(e: RelayExpr) -> list[RelayExpr]:
    if isinstance(e, Call):
        return list(e.args) if isinstance(e.op, Op) else [e.op, *e.args]
    if isinstance(e, Tuple):
        return list(e.fields)
    if isinstance(e, TupleGetItem):
        return [e.tuple_value]
    if isinstance(e, If):
        return [e.cond, e.true_branch, e.false_branch]
    if isinstance(e, Let):
        return [e.value, e.body]
    if isinstance(e, Function):
        return [e.body]
    return []


def _rebuild(e: RelayExpr, kids: list[RelayExpr]) -> RelayExpr:
    if isinstance(e, Call):
        if isinstance(e.op, Op):
            return dataclasses.replace(e, args=tuple(kids))
        return dataclasses.replace(e, op=kids[0], args=tuple(kids[1:]))
    if isinstance(e, Tuple):
        return Tuple(tuple(kids))
    if isinstance(e, TupleGetItem):
        return TupleGetItem(kids[0], e.index)
    if isinstance(e, If):
        return If(*kids)
    if isinstance(e, Let):
        return Let(e.var, kids[0], kids[1])
    if isinstance(e, Function):
        return dataclasses.replace(e, body=kids[0])
    raise InternalError(f"onnx import: cannot rebuild a {type(e).__name__} node")


def _numel(ty: Type) -> int | None:
    if isinstance(ty, TupleType):
        sizes = [_numel(f) for f in ty.fields]
        return None if None in sizes else sum(sizes)  # type: ignore[arg-type]
    if isinstance(ty, TensorType) and ty.is_static:
        return int(np.prod(ty.concrete_shape, dtype=np.int64))
    return None


def _const_value(e: RelayExpr) -> Any:
    """The value of a constant (a tuple of values for a tuple of constants), else None."""
    if isinstance(e, Constant):
        return e.data.numpy()
    if isinstance(e, Tuple) and e.fields and all(isinstance(f, Constant) for f in e.fields):
        return tuple(f.data.numpy() for f in e.fields)  # type: ignore[attr-defined]
    return None


class Typer:
    """The types of built expressions (by identity), with constant folding on the way."""

    def __init__(self) -> None:
        self.types: dict[RelayExpr, Type] = {}
        self._done: dict[RelayExpr, RelayExpr] = {}
        self.span: Span | None = None  # given to the new calls (the node being converted)

    def declare(self, expr: RelayExpr, ty: Type) -> None:
        """Give ``expr`` (a variable, or a node typed by its converter) its type."""
        self.types[expr] = ty
        self._done[expr] = expr

    def type_of(self, expr: RelayExpr) -> Type:
        """The type of ``expr`` (typing its new nodes first)."""
        expr = self.finish(expr)
        return self.types[expr]

    def finish(self, expr: RelayExpr) -> RelayExpr:
        """``expr`` with its new nodes typed and its all-constant op calls folded."""
        if expr in self._done:
            return self._done[expr]
        stack: list[tuple[RelayExpr, bool]] = [(expr, False)]
        while stack:
            node, expanded = stack.pop()
            if node in self._done:
                continue
            kids = _children(node)
            if not expanded and any(k not in self._done for k in kids):
                stack.append((node, True))
                stack.extend((k, False) for k in reversed(kids) if k not in self._done)
                continue
            new_kids = [self._done[k] for k in kids]
            new = node if all(a is b for a, b in zip(kids, new_kids)) else _rebuild(node, new_kids)
            if isinstance(new, Call) and new.span is None and self.span is not None:
                new = dataclasses.replace(new, span=self.span)
            new = self._settle(new)
            self._done[node] = new
            self._done[new] = new
        return self._done[expr]

    def _settle(self, node: RelayExpr) -> RelayExpr:
        """Type ``node`` (children done) and fold it when it is constant."""
        if isinstance(node, TupleGetItem) and isinstance(node.tuple_value, Tuple):
            return self._done[node.tuple_value.fields[node.index]]
        ty = self._rule(node)
        if isinstance(node, Call) and isinstance(node.op, Op):
            folded = self._fold(node, ty)
            if folded is not None:
                return folded
        self.types[node] = ty
        return node

    def _rule(self, e: RelayExpr) -> Type:
        if isinstance(e, Constant):
            return TensorType(tuple(e.data.shape), str(e.data.dtype))
        if isinstance(e, Var):
            if e.type_annotation is None:
                raise InternalError(f"onnx import: variable %{e.name_hint} has no type")
            return e.type_annotation
        if isinstance(e, Call):
            args = [self.types[a] for a in e.args]
            if isinstance(e.op, Op):
                od = e.op.op_def
                return od.type_rel(args, e.attrs)  # type: ignore[misc]
            fty = self.types[e.op]
            if not isinstance(fty, FuncType):
                raise InternalError("onnx import: calling a non-function")
            return fty.ret_type
        if isinstance(e, Tuple):
            return TupleType(tuple(self.types[f] for f in e.fields))
        if isinstance(e, TupleGetItem):
            tup = self.types[e.tuple_value]
            return tup.fields[e.index]  # type: ignore[union-attr]
        if isinstance(e, If):
            return self.types[e.true_branch]
        if isinstance(e, Let):
            return self.types[e.body]
        if isinstance(e, Function):
            params = [self.types.get(p) or p.type_annotation for p in e.params]
            return FuncType(tuple(params), self.types[e.body])  # type: ignore[arg-type]
        raise InternalError(f"onnx import: cannot type a {type(e).__name__} node")

    def _fold(self, call: Call, ty: Type) -> RelayExpr | None:
        args = [_const_value(a) for a in call.args]
        if any(a is None for a in args):
            return None
        n = _numel(ty)
        if n is None or n > FOLD_LIMIT:
            return None
        od = call.op.op_def  # type: ignore[attr-defined]
        try:
            out = od.reference(*args, attrs=call.attrs)
        except Exception:  # noqa: BLE001  (left for run time, where errors carry context)
            return None
        outs, tys = (out, ty.fields) if isinstance(ty, TupleType) else ((out,), (ty,))
        consts = []
        for value, t in zip(outs, tys):
            value = np.asarray(value)
            if not isinstance(t, TensorType) or tuple(value.shape) != t.shape:
                return None
            const = Constant(value.astype(t.dtype, copy=False))
            self.declare(const, t)
            consts.append(const)
        if isinstance(ty, TupleType):
            result: RelayExpr = Tuple(tuple(consts))
            self.declare(result, ty)
            return result
        return consts[0]

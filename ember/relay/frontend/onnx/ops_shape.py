"""Converters of the shape-computing operators: Shape, Size, Constant, ConstantOfShape,
Range, Reshape, Expand.

Known values fold to constants as they are imported; with symbolic sizes the values are
followed as ``SymShape``s (see ``_symbolic.py``) so that Reshape/Expand/ConstantOfShape/Range
still produce tensors whose shapes derive from the inputs' shapes. A shape that is neither
(read from a graph input, or computed in ways the importer does not follow) is passed at run
time to the op's dynamic form (``dyn.reshape``, ``dyn.broadcast_to``, ``dyn.full``, an
``arange`` of run-time bounds; ``_runtime_values.py``).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ....ir.expr import Constant, RelayExpr
from ....ir.types import TensorType
from ... import op as _op
from ._node import Node
from ._symbolic import SymShape
from . import _runtime_values as rt
from ._util import check_constant_size, product, scalar, static


def shape(node: Node) -> RelayExpr:
    """Shape (``start``/``end`` from opset 15): a constant when the sizes are static."""
    x, ty = node.input(0), node.type(0)
    rank = ty.ndim
    start = _clamp_index(node.attr("start", 0), rank)
    end = _clamp_index(node.attr("end", rank), rank)
    dims = ty.shape[start:end]
    if static(dims):
        return node.const(list(dims), "int64")
    whole = (start, end) == (0, rank)
    node.set_sym(SymShape(node.scope.importer.sizes.elems_of(x, ty)[start:end],
                          of=x if whole else None))
    full = _op.shape_of(x, "int64")
    if (start, end) == (0, rank):
        return full
    return _op.strided_slice(full, [start], [max(end, start)])


def _clamp_index(i: int, rank: int) -> int:
    i = i + rank if i < 0 else i
    return min(max(i, 0), rank)


def size(node: Node) -> RelayExpr:
    x, ty = node.input(0), node.type(0)
    if static(ty.shape):
        return node.const(product(ty.shape), "int64")
    return _op.prod(_op.shape_of(x, "int64"))


def constant(node: Node) -> RelayExpr:
    for name, dtype in (("value_float", "float32"), ("value_floats", "float32"),
                        ("value_int", "int64"), ("value_ints", "int64")):
        if node.has_attr(name):
            return node.const(node.attr(name), dtype)
    if node.has_attr("value"):
        return Constant(node.attr("value"))
    for name in ("sparse_value", "value_string", "value_strings"):
        if node.has_attr(name):
            raise node.unsupported(f"attribute {name} (sparse and string constants) is not "
                                   "supported")
    raise node.fail("needs one of the attributes value, value_float(s), value_int(s)")


def _fill_value(node: Node) -> np.ndarray:
    value = node.attr("value", None)
    if value is None:
        return np.zeros((), "float32")
    if value.size != 1:
        raise node.invalid_attr("value", value.tolist(), "a one-element tensor")
    return value.reshape(())


def constant_of_shape(node: Node) -> RelayExpr:
    value = _fill_value(node)
    dtype = str(value.dtype)
    target = node.sym(0)
    if target is None:  # a shape known only at run time
        return _op.dyn.full(scalar(value, dtype), rt.int64(node, 0, "shape"), dtype,
                            where=node.label)
    if target.is_static:
        dims = [int(d) for d in target.elems]
        if any(d < 0 for d in dims):
            raise node.fail(f"shape {dims} has a negative size")
        return _op.full(scalar(value, dtype), dims, dtype)
    tmpl = node.scope.importer.sizes.template(target.elems)
    return _symbolic_result(node, _op.full_like(_op.cast(tmpl, dtype), scalar(value, dtype)),
                            target.elems, dtype)


def _symbolic_result(node: Node, expr: RelayExpr, elems: tuple[Any, ...], dtype: str
                     ) -> RelayExpr:
    """``expr`` typed with its symbolic sizes (the op relations would only say ``?``), so
    that later Reshapes can match them."""
    expr = node.finish(expr)
    node.declare(expr, TensorType(elems, dtype))
    return expr


def range_(node: Node) -> RelayExpr:
    """Range: constant when start/limit/delta are known; ``0..n`` for a symbolic n."""
    values = [node.value(i) for i in range(3)]
    dtype = node.dtype(0)
    if all(v is not None for v in values):
        start, limit, delta = (np.asarray(v).reshape(()) for v in values)
        if delta == 0:
            raise node.fail("delta must not be 0")
        span = (float(limit) - float(start)) / float(delta)
        if not math.isfinite(span):
            raise node.fail(f"Range({start}, {limit}, {delta}) has no finite length")
        n = max(math.ceil(span), 0)
        check_constant_size(node, [n], f"Range({start}, {limit}, {delta})")
        return node.const(start + np.arange(n, dtype=dtype) * delta, dtype)
    limit_sym = node.sym(1)
    start, delta = values[0], values[2]
    if (limit_sym is not None and limit_sym.scalar and start is not None and delta is not None
            and float(start) == 0 and float(delta) == 1):
        tmpl = node.scope.importer.sizes.template(limit_sym.elems)
        ones = _op.ones_like(_op.cast(tmpl, dtype))
        out = _op.subtract(_op.cumsum(ones, axis=0), scalar(1, dtype))
        return _symbolic_result(node, out, limit_sym.elems, dtype)
    # bounds known at run time: arange sizes its result from their values
    bounds = [node.input(i) for i in range(3)]
    for i, what in enumerate(("start", "limit", "delta")):
        if node.type(i).shape not in ((), (1,)):
            raise node.fail(f"{what} must be a scalar, got shape {node.type(i).shape}")
    return _op.arange(*(rt.scalar(b) if node.type(i).ndim else b
                        for i, b in enumerate(bounds)), dtype=dtype)


# ---------------------------------------------------------------- Reshape, Expand
def reshape(node: Node) -> RelayExpr:
    x, ty = node.input(0, "data"), node.type(0)
    allowzero = bool(node.attr("allowzero", 0))
    target = node.sym(1)
    out = None if target is None else _reshape_known(node, x, ty, target, allowzero)
    if out is None:  # a shape known only at run time
        return _op.dyn.reshape(x, rt.int64(node, 1, "shape"), allowzero, where=node.label)
    return out


def _reshape_known(node: Node, x: RelayExpr, ty: TensorType, target: SymShape,
                   allowzero: bool) -> RelayExpr | None:
    """reshape to a shape followed at import (ints, and the input's own symbolic sizes or one
    -1 in their places); None when the shape needs run-time values."""
    elems = list(target.elems)
    if allowzero and 0 in elems:  # a literal 0: the result is empty
        if -1 in elems or not target.is_static or not static(ty.shape) or product(ty.shape):
            return None
        return _op.zeros(tuple(int(e) for e in elems), ty.dtype)
    newshape: list[Any] = []
    unknown = []
    for i, e in enumerate(elems):
        if isinstance(e, int):
            newshape.append(e)
        elif i < ty.ndim and ty.shape[i] is e:
            newshape.append(0)
        else:
            newshape.append(None)
            unknown.append(e)
    if unknown:
        if len(unknown) > 1 or -1 in newshape:
            return None
        newshape[newshape.index(None)] = -1
    _propagate_sym(node, target)
    return _op.reshape(x, newshape)


def _propagate_sym(node: Node, target: SymShape) -> None:
    """A reshaped symbolic shape value stays one (e.g. a 1-element shape made a scalar)."""
    sym = node.sym(0)
    if sym is not None and len(target.elems) <= 1:
        node.set_sym(SymShape(sym.elems, scalar=len(target.elems) == 0))


def expand(node: Node) -> RelayExpr:
    """Expand: bidirectional broadcasting to the given shape."""
    x, ty = node.input(0), node.type(0)
    target = node.sym(1)
    if target is None:  # a shape known only at run time
        return _expand_run_time(node, x, ty.ndim)
    elems = target.elems
    if target.is_static and static(ty.shape):
        out = np.broadcast_shapes(ty.concrete_shape, tuple(int(e) for e in elems))
        return _op.broadcast_to(x, out) if out != ty.concrete_shape else x
    if target.of is not None:  # Expand(x, Shape(t)): the sizes are t's
        if _broadcasts_into(ty.shape, elems):
            return _op.broadcast_to_like(x, target.of)
        # (where sizes may also grow x into t's, broadcast both ways against t's shape)
        return _op.where(_op.cast(_op.zeros_like(target.of), "bool"), x, x)
    if target.is_static:
        tmpl = _op.zeros(tuple(int(e) for e in elems), "bool")
    else:
        tmpl = node.scope.importer.sizes.template(elems)
    return _op.where(tmpl, x, x)


def _broadcasts_into(shape: tuple, elems: tuple) -> bool:
    """Whether a tensor of ``shape`` broadcasts to exactly ``elems`` (each of its sizes is 1
    or the same size there), so that Expand's bidirectional result is ``elems``."""
    if len(shape) > len(elems):
        return False
    tail = elems[len(elems) - len(shape):]
    return all(d is e or isinstance(d, int) and (d == 1 or d == e) for d, e in zip(shape, tail))


def _expand_run_time(node: Node, x: RelayExpr, ndim: int) -> RelayExpr:
    """Bidirectional broadcasting to a run-time shape: each size is the shape's, or the
    input's where the shape says 1 (dyn.broadcast_to then checks the rest)."""
    shape = rt.int64(node, 1, "shape")
    n = rt.length(node, 1, "shape")
    rank = max(n, ndim)
    dims = _op.shape_of(x, rt.I64)
    if rank > ndim:
        dims = _op.concatenate([rt.vector([1] * (rank - ndim)), dims], 0)
    if rank > n:
        shape = _op.concatenate([rt.vector([1] * (rank - n)), shape], 0)
    target = _op.where(_op.equal(shape, rt.vector([1])), dims, shape)
    return _op.dyn.broadcast_to(x, target, where=node.label)

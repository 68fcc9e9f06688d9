"""Tensor expressions: placeholders, compute and extern stages, iteration variables, reducers.

A tensor is an output of an operation; indexing it (``A[i, j]`` or ``A(i, j)``) builds a
ProducerLoad that lowering turns into a buffer load (or inlines).
"""
from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..runtime.errors import OpError
from ..runtime.object import Object
from ..tir import op as _op
from ..tir.expr import CommReducer, PrimExpr, ProducerLoad, Reduce, SizeVar, Var
from ..tir.functor import post_order
from ..tir.stmt import Buffer, Evaluate, Stmt


@dataclass(eq=False)
class Range(Object):
    """``[min, min + extent)``."""

    min: PrimExpr
    extent: PrimExpr

    @staticmethod
    def from_min_extent(mn: Any, extent: Any) -> Range:
        return Range(_op.convert(mn), _op.convert(extent))


class IterVar(Object):
    """An iteration axis: a Var with a domain. Behaves as its Var inside expressions."""

    DataPar, ThreadIndex, CommReduce, Ordered = 0, 1, 2, 3

    def __init__(self, dom: Range | None, var: Var, iter_type: int = 0, tag: str = "") -> None:
        self.dom, self.var, self.iter_type, self.thread_tag = dom, var, iter_type, tag

    def asobject(self) -> Var:
        return self.var

    def __repr__(self) -> str:
        return f"IterVar({self.var.name}, {self.dom and self.dom.extent})"


def _delegate(name: str) -> Callable:
    return lambda self, *a: getattr(self.var, name)(*a)


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
              "__floordiv__", "__rfloordiv__", "__mod__", "__lt__", "__le__", "__gt__", "__ge__",
              "__neg__", "astype", "equal"):
    setattr(IterVar, _name, _delegate(_name))


class Operation(Object):
    """Base of te operations; ``output(i)`` gives the i-th result tensor."""

    name: str
    tag: str = ""
    attrs: dict[str, Any]
    _outputs: list[Tensor]

    def output(self, i: int) -> Tensor:
        return self._outputs[i]

    @property
    def num_outputs(self) -> int:
        return len(self._outputs)

    @property
    def input_tensors(self) -> list[Tensor]:
        return []

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"


class PlaceholderOp(Operation):
    """An input tensor of the function."""

    def __init__(self, name: str, shape: tuple[PrimExpr, ...], dtype: str) -> None:
        self.name, self.shape, self.dtype, self.tag, self.attrs = name, shape, dtype, "", {}
        self._outputs = [Tensor(self, 0, shape, dtype)]


class ComputeOp(Operation):
    """``out[axis] = body[i]`` for every point of the iteration domain."""

    def __init__(self, name: str, tag: str, attrs: dict, axis: list[IterVar],
                 reduce_axis: list[IterVar], body: list[PrimExpr]) -> None:
        self.name, self.tag, self.attrs = name, tag, dict(attrs or {})
        self.axis, self.reduce_axis, self.body = axis, reduce_axis, body
        shape = tuple(iv.dom.extent for iv in axis)
        self._outputs = [Tensor(self, i, shape, b.dtype) for i, b in enumerate(body)]

    @property
    def input_tensors(self) -> list[Tensor]:
        seen: dict[int, Tensor] = {}
        for b in self.body:
            for n in post_order(b):
                if isinstance(n, ProducerLoad) and id(n.producer) not in seen:
                    seen[id(n.producer)] = n.producer
        return list(seen.values())


class ExternOp(Operation):
    """A stage whose body is given as a statement over buffers (e.g. a call_packed)."""

    def __init__(self, name: str, tag: str, attrs: dict, inputs: list[Tensor],
                 in_bufs: list[Buffer], out_bufs: list[Buffer], body: Stmt) -> None:
        self.name, self.tag, self.attrs = name, tag, dict(attrs or {})
        self.inputs, self.input_placeholders, self.output_placeholders = inputs, in_bufs, out_bufs
        self.body = body
        self._outputs = [Tensor(self, i, b.shape, b.dtype) for i, b in enumerate(out_bufs)]

    @property
    def input_tensors(self) -> list[Tensor]:
        return list(self.inputs)


class Tensor(Object):
    """The ``value_index``-th output of ``op``, of ``shape`` and ``dtype``."""

    def __init__(self, op: Operation, value_index: int, shape: tuple[PrimExpr, ...],
                 dtype: str) -> None:
        self.op, self.value_index, self.shape, self.dtype = op, value_index, tuple(shape), dtype

    @property
    def name(self) -> str:
        return self.op.name if self.op.num_outputs == 1 else f"{self.op.name}.v{self.value_index}"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __call__(self, *indices: Any) -> PrimExpr:
        if len(indices) == 1 and isinstance(indices[0], (tuple, list)):
            indices = tuple(indices[0])
        if len(indices) != self.ndim:
            raise OpError(f"{self.name}: expected {self.ndim} indices, got {len(indices)}")
        return ProducerLoad(self, tuple(_op.convert(i) for i in indices), self.dtype)

    def __getitem__(self, idx: Any) -> Any:
        idx = idx if isinstance(idx, tuple) else (idx,)
        return self(*idx) if len(idx) == self.ndim else TensorSlice(self, idx)

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:  # type: ignore[override]
        return self is other

    def __repr__(self) -> str:
        return f"Tensor({self.name}, {[str(s) for s in self.shape]}, {self.dtype})"

    def _topi(self, name: str, other: Any, swap: bool = False) -> Tensor:
        from .. import topi

        return getattr(topi, name)(other, self) if swap else getattr(topi, name)(self, other)

    def __add__(self, o: Any) -> Tensor:
        return self._topi("add", o)

    def __radd__(self, o: Any) -> Tensor:
        return self._topi("add", o, True)

    def __sub__(self, o: Any) -> Tensor:
        return self._topi("subtract", o)

    def __rsub__(self, o: Any) -> Tensor:
        return self._topi("subtract", o, True)

    def __mul__(self, o: Any) -> Tensor:
        return self._topi("multiply", o)

    def __rmul__(self, o: Any) -> Tensor:
        return self._topi("multiply", o, True)

    def __truediv__(self, o: Any) -> Tensor:
        return self._topi("divide", o)


class TensorSlice:
    """A partly indexed tensor (``A[i]`` of a 2-d ``A``); index it further."""

    def __init__(self, tensor: Tensor, indices: tuple) -> None:
        self.tensor, self.indices = tensor, indices

    def __getitem__(self, idx: Any) -> Any:
        idx = idx if isinstance(idx, tuple) else (idx,)
        return self.tensor[self.indices + idx]

    def asobject(self) -> PrimExpr:
        raise OpError(f"{self.tensor.name}: indexed with {len(self.indices)} of "
                      f"{self.tensor.ndim} indices")


# -- constructors -----------------------------------------------------------------------------
def var(name: str = "tindex", dtype: str = "int32") -> Var:
    """A scalar variable."""
    return Var(name, dtype)


def size_var(name: str = "size", dtype: str = "int32") -> SizeVar:
    """A non-negative variable, for symbolic dimensions."""
    return SizeVar(name, dtype)


def _shape(shape: Any) -> tuple[PrimExpr, ...]:
    if isinstance(shape, (int, PrimExpr)):
        shape = (shape,)
    return tuple(_op.convert(s) if not isinstance(s, int) else _op.const(s, "int32")
                 for s in shape)


def placeholder(shape: Any, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor of ``shape`` (ints or size vars) and ``dtype``."""
    return PlaceholderOp(name, _shape(shape), str(dtype)).output(0)


def _arg_names(fcompute: Callable, n: int) -> list[str]:
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        params = []
    if len(params) == n and all(p.kind == p.POSITIONAL_OR_KEYWORD for p in params):
        return [p.name for p in params]
    return [f"i{k}" for k in range(n)]


def compute(shape: Any, fcompute: Callable[..., Any], name: str = "compute", tag: str = "",
            attrs: dict | None = None) -> Any:
    """A tensor whose element at ``idx`` is ``fcompute(*idx)``.

    ``fcompute`` may return a tuple (one tensor per element, e.g. argmax's index and value).
    A reduction (``te.sum``...) must be the whole of the body, not part of it.
    """
    shape = _shape(shape)
    axis = [IterVar(Range(_op.const(0), s), Var(nm, "int32"), IterVar.DataPar)
            for nm, s in zip(_arg_names(fcompute, len(shape)), shape)]
    body = fcompute(*[iv.var for iv in axis])
    multi = isinstance(body, (tuple, list))
    bodies = [_op.convert(b) for b in (body if multi else [body])]
    reduce_axis = _check_reduce(name, bodies)
    op = ComputeOp(name, tag, attrs or {}, axis, reduce_axis, bodies)
    return op._outputs if multi else op.output(0)


def _check_reduce(name: str, bodies: list[PrimExpr]) -> list[IterVar]:
    tops = [b for b in bodies if isinstance(b, Reduce)]
    if tops and len(tops) != len(bodies):
        raise OpError(f"te.compute {name}: all outputs must be reductions or none")
    for b in bodies:
        inner = b.source + (b.condition,) if isinstance(b, Reduce) else (b,)
        for e in inner:
            if any(isinstance(n, Reduce) for n in post_order(e)):
                raise OpError(f"te.compute {name}: a reduction must be the whole body of the "
                              "compute, not nested inside another expression")
    return list(tops[0].axis) if tops else []


def reduce_axis(dom: Any, name: str = "rv") -> IterVar:
    """A reduction axis over ``(lo, hi)`` (or a Range)."""
    if isinstance(dom, Range):
        rng = dom
    else:
        lo, hi = dom
        rng = Range(_op.convert(lo), _op.convert(hi) - _op.convert(lo))
    return IterVar(rng, Var(name, "int32"), IterVar.CommReduce)


def comm_reducer(fcombine: Callable, fidentity: Callable, name: str = "reduce") -> Callable:
    """A reducer from ``fcombine(x, y)`` and ``fidentity(*dtypes)`` (tuples for multi-value)."""

    def reducer(expr: Any, axis: Any, where: Any = None, init: Any = None) -> Any:
        multi = isinstance(expr, (tuple, list))
        exprs = tuple(_op.convert(e) for e in (expr if multi else [expr]))
        dtypes = [e.dtype for e in exprs]
        lhs = tuple(Var(f"x{i}" if multi else "x", d) for i, d in enumerate(dtypes))
        rhs = tuple(Var(f"y{i}" if multi else "y", d) for i, d in enumerate(dtypes))
        res = fcombine(lhs, rhs) if multi else fcombine(lhs[0], rhs[0])
        ident = fidentity(*dtypes)
        res, ident = (res, ident) if multi else ((res,), (ident,))
        combiner = CommReducer(lhs, rhs, tuple(_op.cast(r, d) for r, d in zip(res, dtypes)),
                               tuple(_op.cast(i, d) for i, d in zip(ident, dtypes)), name)
        axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
        cond = _op.const(True) if where is None else _op.convert(where)
        inits = () if init is None else tuple(_op.convert(i) for i in (
            init if isinstance(init, (tuple, list)) else [init]))
        outs = tuple(Reduce(combiner, exprs, axes, cond, i, d, inits)
                     for i, d in enumerate(dtypes))
        return outs if multi else outs[0]

    reducer.__name__ = name
    return reducer


def _lowest(dtype: str) -> PrimExpr:
    return _op.infinity(dtype) * -1 if _op.is_float(dtype) else _op.min_value(dtype)


def _highest(dtype: str) -> PrimExpr:
    return _op.infinity(dtype) if _op.is_float(dtype) else _op.max_value(dtype)


sum = comm_reducer(lambda x, y: x + y, lambda t: _op.const(0, t), "sum")
max = comm_reducer(lambda x, y: _op.max(x, y), _lowest, "max")
min = comm_reducer(lambda x, y: _op.min(x, y), _highest, "min")
prod = comm_reducer(lambda x, y: x * y, lambda t: _op.const(1, t), "prod")


def extern(shape: Any, inputs: Sequence[Tensor], fcompute: Callable, name: str = "extern",
           dtype: Any = None, in_buffers: Any = None, out_buffers: Any = None, tag: str = "",
           attrs: dict | None = None) -> Any:
    """A stage computed by ``fcompute(ins, outs)`` over buffers (usually a call_packed).

    ``shape`` is one shape or a list of shapes (one per output).
    """
    multi = isinstance(shape, (list, tuple)) and len(shape) > 0 and isinstance(
        shape[0], (list, tuple))
    shapes = [_shape(s) for s in (shape if multi else [shape])]
    dtypes = dtype if isinstance(dtype, (list, tuple)) else [dtype or inputs[0].dtype] * len(
        shapes)
    ins = list(in_buffers) if in_buffers else [
        Buffer(f"{t.op.name}_buf", t.shape, t.dtype) for t in inputs]
    outs = list(out_buffers) if out_buffers else [
        Buffer(f"{name}_out{i}", s, d) for i, (s, d) in enumerate(zip(shapes, dtypes))]
    body = fcompute(ins, outs)
    body = body if isinstance(body, Stmt) else Evaluate(_op.convert(body))
    op = ExternOp(name, tag, attrs or {}, list(inputs), ins, outs, body)
    return op._outputs if multi else op.output(0)

"""Helpers shared by the compute rules: shapes from types, run-time requirements, safe
broadcasting.

A compute rule is ``compute(attrs, inputs, out_type) -> list[te.Tensor]``, given to ``defop``
as ``compute=`` next to the op's other rules: ``attrs`` is the op's attrs record (defaults
filled in), ``inputs`` the te tensors of the arguments (a tuple argument is flattened into its
fields, as for concatenate), ``out_type`` the call's checked type (a TensorType, or a TupleType
for ops with several results, e.g. split or nn.batch_norm). Rules translate Relay attrs into
``ember.topi`` parameters, and write the expression themselves where topi has no matching
compute or where Relay's semantics differ from topi's (documented in place).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ... import topi
from ...ir.types import TensorType, TupleType, Type
from ...runtime.errors import OpNotImplemented
from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import IntImm, PrimExpr

Compute = Callable[[Any, list[te.Tensor], Type], list[te.Tensor]]


# -- run-time requirements: what the sizes of ``?`` dimensions must satisfy ---------------------
Requirement = tuple[PrimExpr, str]
_REQUIRED: ContextVar[list[Requirement] | None] = ContextVar("ember_required", default=None)


def require(cond: PrimExpr, message: str) -> None:
    """A condition on run-time sizes (``?`` dimensions) that the op needs, such as broadcast
    compatibility or matching reduction lengths. The kernel (and the VM's shape function)
    check it before reading anything and fail with ``message``; a condition that is true at
    compile time is dropped."""
    if isinstance(cond, IntImm) and cond.value:
        return
    sink = _REQUIRED.get()
    if sink is not None:
        sink.append((cond, message))


@contextmanager
def collect_requirements() -> Iterator[list[Requirement]]:
    """The requirements that compute rules make inside the block."""
    sink: list[Requirement] = []
    token = _REQUIRED.set(sink)
    try:
        yield sink
    finally:
        _REQUIRED.reset(token)


def require_equal(a: PrimExpr, b: PrimExpr, message: str) -> None:
    """``require(a == b)`` unless both are static (the type relation compared those)."""
    if as_int(a) is None or as_int(b) is None:
        require(tir.convert(a).equal(b), message)


def not_implemented(op: str, what: str) -> OpNotImplemented:
    """The error for a case a rule does not lower: ``<op>: <what> has no lowering``."""
    return OpNotImplemented(f"{op}: {what} has no lowering to C yet")


def tensor_types(ty: Type) -> list[TensorType]:
    """The tensor types of a (possibly nested tuple) type, flattened in order."""
    out: list[TensorType] = []
    stack = [ty]
    while stack:
        t = stack.pop()
        if isinstance(t, TupleType):
            stack.extend(reversed(t.fields))
        elif isinstance(t, TensorType):
            out.append(t)
        else:
            raise TypeError(f"expected a tensor or tuple type, got {ty}")
    return out


def as_int(d: Any) -> int | None:
    """The value of a static dimension (int or IntImm), else None."""
    if isinstance(d, int):
        return d
    return d.value if isinstance(d, IntImm) else None


def all_static(*tensors: te.Tensor) -> bool:
    """True when every dimension of every tensor is a compile-time constant."""
    return all(as_int(d) is not None for t in tensors for d in t.shape)


def is_one(d: Any) -> bool:
    return as_int(d) == 1


def same_dim(a: PrimExpr, b: PrimExpr) -> bool:
    """True when two te dimensions are provably equal (same value or same variable)."""
    va, vb = as_int(a), as_int(b)
    if va is not None and vb is not None:
        return va == vb
    return a is b


def out_dims(out_type: TensorType, fallback: Sequence[PrimExpr]) -> tuple[PrimExpr, ...]:
    """The output shape: the type's static dims, ``fallback``'s expression where it has ``?``."""
    if len(fallback) != out_type.ndim:
        raise AssertionError(f"rank mismatch: type {out_type} vs computed {len(fallback)} dims")
    return tuple(tir.const(d) if isinstance(d, int) else f for d, f in zip(out_type.shape,
                                                                          fallback))


def broadcast_dims(*shapes: Sequence[PrimExpr]) -> tuple[PrimExpr, ...]:
    """numpy broadcasting of te shapes; two different symbolic sizes give their maximum."""
    n = max((len(s) for s in shapes), default=0)
    out: list[PrimExpr] = []
    for i in range(n):
        dims = [s[len(s) - n + i] for s in shapes if len(s) - n + i >= 0]
        static = [as_int(d) for d in dims if as_int(d) is not None and as_int(d) != 1]
        sym = [d for d in dims if as_int(d) is None]
        if static:
            out.append(tir.const(static[0]))
        elif not sym:
            out.append(tir.const(1))
            continue
        else:
            acc = sym[0]
            for d in sym[1:]:
                acc = acc if d is acc else tir.max(acc, d)
            out.append(acc)
        for d in sym:  # each run-time size is 1 or the broadcast size
            if d is not out[-1]:
                require(tir.any(d.equal(out[-1]), d.equal(1)), f"cannot broadcast the operands: at "
                        f"dimension {i} of the result each must have size 1 or the same size")
    return tuple(out)


def broadcast_load(t: te.Tensor, idx: Sequence[PrimExpr], out_shape: Sequence[PrimExpr]
                   ) -> PrimExpr:
    """``t`` read at output point ``idx`` under numpy broadcasting.

    A static 1 reads index 0. A symbolic dimension that is not the output's own dimension
    might be 1 at run time (``?`` broadcast against ``?``), so it reads ``d == 1 ? 0 : i``.
    """
    off = len(idx) - t.ndim
    src = []
    for k, d in enumerate(t.shape):
        i, od = idx[off + k], out_shape[off + k]
        if is_one(d):
            src.append(tir.const(0))
        elif as_int(d) is not None or same_dim(d, od):
            src.append(i)
        else:
            src.append(tir.Select_(d == 1, tir.const(0), i))
    return t(*src)


def value_of(x: Any, idx: Sequence[PrimExpr], out_shape: Sequence[PrimExpr]) -> PrimExpr:
    return broadcast_load(x, idx, out_shape) if isinstance(x, te.Tensor) else tir.convert(x)


def scalar(t: te.Tensor) -> PrimExpr:
    """The single element of a 0-d (or all-ones shaped) tensor."""
    return t(*[tir.const(0)] * t.ndim)


def cast_to(t: te.Tensor, dtype: str, name: str = "T_cast") -> te.Tensor:
    """``t`` in ``dtype`` (the same tensor when it already is)."""
    if t.dtype == dtype:
        return t
    return te.compute(t.shape, lambda *i: tir.cast(t(*i), dtype), name=name, tag="elemwise")


def identity(t: te.Tensor, name: str = "T_copy") -> te.Tensor:
    """A copy of ``t`` as a new elementwise stage."""
    return te.compute(t.shape, lambda *i: t(*i), name=name, tag="elemwise")


def norm_axis(axis: int, ndim: int) -> int:
    return axis % ndim if ndim else 0


def prod(dims: Sequence[PrimExpr]) -> PrimExpr:
    out: PrimExpr = tir.const(1)
    for d in dims:
        out = out * d
    return out


def reshape_to(x: te.Tensor, out_type: TensorType, dims: Sequence[PrimExpr]) -> te.Tensor:
    """``x`` reshaped to ``out_type`` (``dims`` where it has ``?``); with symbolic sizes the
    kernel checks that the element counts agree."""
    shape = list(out_dims(out_type, dims))
    if any(as_int(d) is None for d in (*x.shape, *shape)):
        require(prod(x.shape).equal(prod(shape)),
                "the new shape must hold as many elements as the input")
    return topi.reshape(x, shape)

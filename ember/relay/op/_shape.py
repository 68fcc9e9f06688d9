"""Dimension arithmetic shared by the type relations.

A dimension is an ``int``, ``Any()`` (unknown until run time) or a ``ShapeVar`` (a named
symbolic size, compared by identity). Arithmetic on anything but two ints gives ``Any()``:
ember does not keep symbolic expressions, so ``n + 1`` is simply unknown.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from ...ir.types import Any, Dim, ShapeVar, TensorType, TupleType, Type
from ...runtime.errors import TypeInferenceError

Shape = tuple[Dim, ...]


def fail(op: str, msg: str) -> TypeInferenceError:
    """The error to raise from a type relation: ``<op>: <msg>``."""
    return TypeInferenceError(f"{op}: {msg}")


def fmt_dim(d: Dim) -> str:
    if isinstance(d, ShapeVar):
        return d.name
    return "?" if isinstance(d, Any) else str(d)


def fmt_shape(shape: Sequence[Dim]) -> str:
    """``(2, 3)``, ``(4,)``, ``(?, n)``: Python tuple spelling with ``?`` for Any."""
    inner = ", ".join(fmt_dim(d) for d in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


def fmt_type(ty: Type) -> str:
    """``float32[2, 3]`` for tensors, ``(float32[2], int32[])`` for tuples."""
    if isinstance(ty, TensorType):
        return f"{ty.dtype}[{', '.join(fmt_dim(d) for d in ty.shape)}]"
    if isinstance(ty, TupleType):
        return "(" + ", ".join(fmt_type(f) for f in ty.fields) + ")"
    return type(ty).__name__


def known(*dims: Dim) -> bool:
    return all(isinstance(d, int) for d in dims)


def may_equal(a: Dim, b: Dim) -> bool:
    """False only when the two sizes are provably different (two different ints)."""
    return not known(a, b) or a == b


def unify_dim(a: Dim, b: Dim) -> Dim:
    """The more precise of two dimensions that must be equal (caller checked may_equal)."""
    if isinstance(a, int):
        return a
    if isinstance(b, int) or (isinstance(a, Any) and isinstance(b, ShapeVar)):
        return b
    return a if a is b or isinstance(b, Any) else Any()


def dim_add(a: Dim, b: Dim) -> Dim:
    return a + b if known(a, b) else Any()  # type: ignore[operator]


def dim_mul(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and a == 1:
        return b
    if isinstance(b, int) and b == 1:
        return a
    return a * b if known(a, b) else Any()  # type: ignore[operator]


def dim_prod(dims: Iterable[Dim]) -> Dim:
    out: Dim = 1
    for d in dims:
        out = dim_mul(out, d)
    return out


def broadcast_dim(a: Dim, b: Dim) -> Dim | None:
    """numpy broadcasting of two sizes; None when they cannot broadcast.

    ``?`` with 3 is 3 (a run-time 1 would broadcast to 3), ``?`` with 1 stays ``?``, a ShapeVar
    with itself is itself, and two different symbolic sizes are ``?``.
    """
    if known(a, b):
        if a == b or b == 1:
            return a
        return b if a == 1 else None
    if isinstance(a, int):
        return b if a == 1 else a
    if isinstance(b, int):
        return a if b == 1 else b
    return a if a is b else Any()


def broadcast_shapes(op: str, lhs: Shape, rhs: Shape) -> Shape:
    """Right-aligned numpy broadcasting; raises naming the first dimension that disagrees."""
    n = max(len(lhs), len(rhs))
    a = (1,) * (n - len(lhs)) + tuple(lhs)
    b = (1,) * (n - len(rhs)) + tuple(rhs)
    out = []
    for i, (x, y) in enumerate(zip(a, b)):
        d = broadcast_dim(x, y)
        if d is None:
            raise fail(op, f"cannot broadcast {fmt_shape(lhs)} with {fmt_shape(rhs)}: "
                           f"dimension {i - n} is {fmt_dim(x)} vs {fmt_dim(y)}")
        out.append(d)
    return tuple(out)


def norm_axis(op: str, axis: int, ndim: int, what: str = "axis") -> int:
    """``axis`` in ``[-ndim, ndim)`` made non-negative, or a TypeInferenceError."""
    if not -ndim <= axis < ndim:
        valid = f"{-ndim}..{ndim - 1}" if ndim else "none: the input is a scalar"
        raise fail(op, f"{what} {axis} is out of range for rank {ndim} (valid {valid})")
    return axis % ndim


def norm_axes(op: str, axes: Sequence[int], ndim: int) -> list[int]:
    """Several axes, each normalised; a repeated axis is an error."""
    out = [norm_axis(op, a, ndim) for a in axes]
    if len(set(out)) != len(out):
        raise fail(op, f"axis {tuple(axes)} names an axis twice (rank {ndim})")
    return out


def tensor_of(shape: Iterable[Dim], dtype: str) -> TensorType:
    return TensorType(tuple(shape), dtype)


def is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


def same_dtype(op: str, types: Sequence[TensorType], names: Sequence[str]) -> str:
    """The common dtype of ``types``; raises naming the first argument that differs."""
    first = types[0].dtype
    for ty, name in zip(types[1:], names[1:]):
        if ty.dtype != first:
            raise fail(op, f"{names[0]} is {first} but {name} is {ty.dtype}; "
                           "the arguments must have the same dtype")
    return first

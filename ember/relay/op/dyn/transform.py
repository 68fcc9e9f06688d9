"""``dyn.reshape``, ``dyn.broadcast_to``, ``dyn.tile``, ``dyn.strided_slice``: the forms of
reshape, broadcast_to, tile and strided_slice whose shape, repetitions or slice bounds are
tensors (known only at run time). ``relay.reshape(x, newshape=<expr>)`` and the other
builders dispatch here; ``DynamicToStatic`` turns each back into the static op once the
values are known.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from .... import topi
from ....ir.expr import Call
from ....ir.types import Any as AnyDim
from ....ir.types import TensorType, Type
from ....te import tensor as te
from ....tir import op as tir
from ....tir.expr import PrimExpr
from .._attrs_base import OpAttrs, attrs_class
from .._compute_common import broadcast_load, out_dims
from .._reg import BROADCAST, INJECTIVE, call, defop
from .._shape import fail, fmt_shape, norm_axis, tensor_of
from .._value_dims import INT64, check_value, dim64, product, read, value_dim
from ..indexing import _slice_axis
from ._common import DynAttrs, ints, label, require, sizes_ok, vector_length

__all__ = ["broadcast_to", "reshape", "strided_slice", "tile"]


# ---------------------------------------------------------------- dyn.reshape
@attrs_class("DynReshapeAttrs")
class DynReshapeAttrs(OpAttrs):
    """dyn.reshape: ``allowzero`` (a 0 in newshape is a 0, not "copy the input's size") and
    ``where`` the op came from (named by its run-time errors)."""

    allowzero: bool = False
    where: str = ""
    _op: ClassVar[str] = "dyn.reshape"

    def __post_init__(self) -> None:
        self._bool("allowzero")
        self._set("where", str(self.where))


def _reshape_rel(args: list[TensorType], attrs: DynReshapeAttrs) -> TensorType:
    data, n = args[0], vector_length("dyn.reshape", args[1], "newshape")
    if n == 0 and data.is_static and int(np.prod(data.concrete_shape)) != 1:
        raise fail("dyn.reshape", f"cannot reshape {fmt_shape(data.shape)} to a scalar")
    return tensor_of([AnyDim()] * n, data.dtype)


def resolve_newshape(shape: Sequence[int], newshape: Sequence[int], allowzero: bool,
                     where: str) -> list[int]:
    """ONNX/Relay reshape values: 0 copies the input's size (unless allowzero), one -1 is
    inferred; ArgumentError naming ``where`` for anything else."""
    require(all(v >= -1 for v in newshape), where, f"newshape {list(newshape)} has a "
            "negative size other than -1")
    require(list(newshape).count(-1) <= 1, where, f"newshape {list(newshape)} has more than "
            "one -1")
    out = []
    for k, v in enumerate(newshape):
        if v == 0 and not allowzero:
            require(k < len(shape), where, f"newshape {list(newshape)} copies dimension {k} "
                    f"(a 0), but the input has rank {len(shape)}")
            v = shape[k]
        out.append(v)
    count = int(np.prod(shape, dtype=np.int64))
    if -1 in out:
        rest = int(np.prod([v for v in out if v != -1], dtype=np.int64))
        out[out.index(-1)] = count // rest if rest else 0
    require(int(np.prod(out, dtype=np.int64)) == count, where,
            f"cannot reshape {fmt_shape(shape)} ({count} elements) to newshape "
            f"{list(newshape)}: the new shape does not hold as many elements as the input")
    return out


def _reshape_ref(x: np.ndarray, newshape: np.ndarray, attrs: DynReshapeAttrs) -> np.ndarray:
    where = label("dyn.reshape", attrs)
    return x.reshape(resolve_newshape(x.shape, ints(newshape), attrs.allowzero, where))


def _reshape_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x, ns = inputs
    what = label("dyn.reshape", attrs)
    n = ns.shape[0].value
    vals = [read(ns, k) for k in range(n)]
    count = product([dim64(d) for d in x.shape])
    base = []
    for k, v in enumerate(vals):
        copied = dim64(x.shape[k]) if k < x.ndim else tir.const(0, INT64)
        base.append(v if attrs.allowzero else tir.Select_(v.equal(0), copied, v))
        check_value(v >= -1, f"{what}: newshape has a negative size other than -1")
        if k >= x.ndim and not attrs.allowzero:
            check_value(~v.equal(0), f"{what}: newshape copies dimension {k} (a 0), but the "
                        f"input has rank {x.ndim}")
    infer = [v.equal(-1) for v in vals]
    known = [tir.Select_(i, tir.const(1, INT64), b) for i, b in zip(infer, base)]
    dims = []
    for k in range(n):
        rest = product([known[j] for j in range(n) if j != k])
        dims.append(tir.Select_(infer[k], tir.floordiv(count, tir.max(rest, 1)), base[k]))
    check_value(_sum([tir.cast(i, INT64) for i in infer]) <= 1,
                f"{what}: newshape has more than one -1")
    check_value(product(dims).equal(count), f"{what}: the new shape does not hold as many "
                "elements as the input")
    shape = [value_dim(f"reshape_dim{k}", d, what) for k, d in enumerate(dims)]
    return [topi.reshape(x, shape)]


def _sum(terms: list[PrimExpr]) -> PrimExpr:
    out: PrimExpr = tir.const(0, INT64)
    for t in terms:
        out = out + t
    return out


defop("dyn.reshape", _reshape_rel, _reshape_ref, INJECTIVE, args=("data", "newshape"),
      attrs=DynReshapeAttrs, doc="reshape to a shape given as a 1-D tensor (0 copies, one "
      "-1 inferred).", level=10, compute=_reshape_compute, shape_data=("newshape",))


def reshape(data: Any, newshape: Any, allowzero: bool = False, where: str = "") -> Call:
    """``data`` reshaped to the values of the 1-D integer tensor ``newshape``."""
    return call("dyn.reshape", data, newshape, attrs=DynReshapeAttrs(allowzero, where))


# ---------------------------------------------------------------- dyn.broadcast_to
def _broadcast_rel(args: list[TensorType], attrs: DynAttrs) -> TensorType:
    data = args[0]
    n = vector_length("dyn.broadcast_to", args[1], "shape")
    if n < data.ndim:
        raise fail("dyn.broadcast_to", f"cannot broadcast {fmt_shape(data.shape)} to a shape "
                   f"of rank {n}")
    # A static size other than 1 is the size of the result (later ops need it: a Squeeze
    # with no axes). The shape function checks the target against it, so a target that
    # disagrees fails at run time, unless every size is static: then there is nothing to
    # compute and the result is the input's shape whatever the target says.
    lead = [AnyDim()] * (n - data.ndim)
    return tensor_of(lead + [d if isinstance(d, int) and d != 1 else AnyDim()
                             for d in data.shape], data.dtype)


def _broadcast_ref(x: np.ndarray, shape: np.ndarray, attrs: DynAttrs) -> np.ndarray:
    where, target = label("dyn.broadcast_to", attrs), ints(shape)
    sizes_ok(where, target, "shape")
    aligned = target[len(target) - x.ndim:]
    require(all(d in (1, t) for d, t in zip(x.shape, aligned)), where,
            f"cannot broadcast {fmt_shape(x.shape)} to {fmt_shape(target)}")
    return np.broadcast_to(x, target).copy()


def _broadcast_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x, target = inputs
    what = label("dyn.broadcast_to", attrs)
    n = target.shape[0].value
    lead = n - x.ndim
    vals = [read(target, k) for k in range(n)]
    for k, d in enumerate(x.shape):
        check_value(tir.any(dim64(d).equal(1), dim64(d).equal(vals[lead + k])),
                    f"{what}: cannot broadcast the input: its dimension {k} must be 1 or the "
                    "target size")
    dims = [value_dim(f"broadcast_dim{k}", v, what) for k, v in enumerate(vals)]
    shape = out_dims(out_type, dims)  # type: ignore[arg-type]
    return [te.compute(shape, lambda *i: broadcast_load(x, i, shape), name="T_broadcast_to",
                       tag="broadcast")]


defop("dyn.broadcast_to", _broadcast_rel, _broadcast_ref, BROADCAST, args=("data", "shape"),
      attrs=DynAttrs, doc="broadcast_to a shape given as a 1-D tensor.", level=10,
      compute=_broadcast_compute, shape_data=("shape",))


def broadcast_to(data: Any, shape: Any, where: str = "") -> Call:
    """``data`` broadcast (numpy rules) to the values of the 1-D integer tensor ``shape``."""
    return call("dyn.broadcast_to", data, shape, attrs=DynAttrs(where))


# ---------------------------------------------------------------- dyn.tile
def _tile_rel(args: list[TensorType], attrs: DynAttrs) -> TensorType:
    n = vector_length("dyn.tile", args[1], "reps")
    return tensor_of([AnyDim()] * max(n, args[0].ndim), args[0].dtype)


def _tile_ref(x: np.ndarray, reps: np.ndarray, attrs: DynAttrs) -> np.ndarray:
    values = ints(reps)
    sizes_ok(label("dyn.tile", attrs), values, "reps")
    return np.tile(x, values)


def _tile_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x, reps = inputs
    what = label("dyn.tile", attrs)
    nr = reps.shape[0].value
    n = max(nr, x.ndim)
    sizes = [tir.const(1, INT64)] * (n - x.ndim) + [dim64(d) for d in x.shape]
    times = [tir.const(1, INT64)] * (n - nr) + [read(reps, k) for k in range(nr)]
    for t in times[n - nr:]:
        check_value(t >= 0, f"{what}: reps must not be negative")
    shape = [value_dim(f"tile_dim{k}", s * t, what) for k, (s, t) in enumerate(zip(sizes, times))]
    off = n - x.ndim
    return [te.compute(shape, lambda *o: x(*[tir.floormod(o[off + j], d)
                                             for j, d in enumerate(x.shape)]),
                       name="T_tile", tag="broadcast")]


defop("dyn.tile", _tile_rel, _tile_ref, BROADCAST, args=("data", "reps"), attrs=DynAttrs,
      doc="tile by repetitions given as a 1-D tensor (numpy.tile rules).", level=10,
      compute=_tile_compute, shape_data=("reps",))


def tile(data: Any, reps: Any, where: str = "") -> Call:
    """``data`` repeated along each axis by the values of the 1-D integer tensor ``reps``."""
    return call("dyn.tile", data, reps, attrs=DynAttrs(where))


# ---------------------------------------------------------------- dyn.strided_slice
@attrs_class("DynStridedSliceAttrs")
class DynStridedSliceAttrs(OpAttrs):
    """dyn.strided_slice: the axes begin/end/strides refer to (None: the first ones), the
    slice mode ("end" or "size", as strided_slice) and ``where`` the op came from."""

    axes: tuple[int, ...] | None = None
    slice_mode: str = "end"
    where: str = ""
    _op: ClassVar[str] = "dyn.strided_slice"

    def __post_init__(self) -> None:
        self._ints("axes", optional=True)
        self._choice("slice_mode", ("end", "size"))
        self._set("where", str(self.where))


def _slice_axes(op: str, ndim: int, n: int, attrs: DynStridedSliceAttrs) -> list[int]:
    axes = attrs.axes if attrs.axes is not None else tuple(range(n))
    if len(axes) != n:
        raise fail(op, f"axes {list(axes)} must name one axis per begin value ({n})")
    if n > ndim:
        raise fail(op, f"begin has {n} values but data has rank {ndim}")
    out = [norm_axis(op, a, ndim) for a in axes]
    if len(set(out)) != len(out):
        raise fail(op, f"axes {list(axes)} names an axis twice")
    return out


def _slice_rel(args: list[TensorType], attrs: DynStridedSliceAttrs) -> TensorType:
    op, (data, begin, end, strides) = "dyn.strided_slice", args
    n = vector_length(op, begin, "begin")
    if vector_length(op, end, "end") != n:
        raise fail(op, f"end has {end.shape[0]} values but begin has {n}")
    if vector_length(op, strides, "strides") not in (1, n):
        raise fail(op, f"strides has {strides.shape[0]} values; expected 1 or {n}")
    shape = list(data.shape)
    for a in _slice_axes(op, data.ndim, n, attrs):
        shape[a] = AnyDim()
    return tensor_of(shape, data.dtype)


def _slice_ref(x: np.ndarray, begin: np.ndarray, end: np.ndarray, strides: np.ndarray,
               attrs: DynStridedSliceAttrs) -> np.ndarray:
    b, e, s = ints(begin), ints(end), ints(strides)
    s = s * len(b) if len(s) == 1 else s
    require(0 not in s, label("dyn.strided_slice", attrs), f"strides {s} has a 0")
    for a, bk, ek, sk in zip(_slice_axes("dyn.strided_slice", x.ndim, len(b), attrs), b, e, s):
        lo, hi, st = _slice_axis(x.shape[a], bk, ek, sk, attrs.slice_mode == "size")
        x = np.take(x, np.arange(lo, hi, st), axis=a)
    return x.copy()


BIG = 2**62  # values beyond it slice as it does (no int64 overflow in the arithmetic)


def _canonical(d: PrimExpr, b: PrimExpr, e: PrimExpr, s: PrimExpr, size_mode: bool
               ) -> tuple[PrimExpr, PrimExpr, PrimExpr]:
    """(first index, extent, stride) of one axis, as ``indexing._slice_axis`` computes them,
    from run-time int64 values."""
    def clamp(v: PrimExpr, lo: Any, hi: Any) -> PrimExpr:
        return tir.min(tir.max(v, lo), hi)

    b, e = clamp(b, -BIG, BIG), clamp(e, -BIG, BIG)
    b = tir.Select_(b < 0, b + d, b)
    if size_mode:
        e, s = tir.Select_(e < 0, d, b + e), tir.const(1, INT64)
    else:
        e = tir.Select_(e < 0, e + d, e)
    pos = s > 0
    lo = tir.Select_(pos, tir.const(0, INT64), tir.const(-1, INT64))
    hi = tir.Select_(pos, d, d - 1)
    b, e = clamp(b, lo, hi), clamp(e, lo, hi)
    span, step = tir.Select_(pos, e - b, b - e), tir.Select_(pos, s, 0 - s)
    extent = tir.floordiv(span + step - 1, tir.max(step, 1))
    return b, tir.max(extent, tir.const(0, INT64)), s


def _slice_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x, begin, end, strides = inputs
    what = label("dyn.strided_slice", attrs)
    n = begin.shape[0].value
    one_stride = strides.shape[0].value == 1
    starts: list[PrimExpr] = [tir.const(0, INT64)] * x.ndim
    steps: list[PrimExpr] = [tir.const(1, INT64)] * x.ndim
    shape: list[PrimExpr] = list(x.shape)
    for k, a in enumerate(_slice_axes("dyn.strided_slice", x.ndim, n, attrs)):
        s = read(strides, 0 if one_stride else k)
        check_value(~s.equal(0), f"{what}: strides must not be 0")
        starts[a], extent, steps[a] = _canonical(dim64(x.shape[a]), read(begin, k),
                                                 read(end, k), s, attrs.slice_mode == "size")
        shape[a] = value_dim(f"slice_dim{a}", extent, what)

    def at(*i: PrimExpr) -> PrimExpr:
        return x(*[tir.cast(b + tir.cast(j, INT64) * s, "int32")
                   for b, j, s in zip(starts, i, steps)])

    return [te.compute(tuple(shape), at, name="T_strided_slice", tag="injective")]


defop("dyn.strided_slice", _slice_rel, _slice_ref, INJECTIVE,
      args=("data", "begin", "end", "strides"), attrs=DynStridedSliceAttrs,
      doc="strided_slice with begin/end/strides given as 1-D tensors.", level=10,
      compute=_slice_compute, shape_data=("begin", "end", "strides"))


def strided_slice(data: Any, begin: Any, end: Any, strides: Any, axes: Sequence[int] | None
                  = None, slice_mode: str = "end", where: str = "") -> Call:
    """``data`` sliced by the values of the 1-D integer tensors ``begin``, ``end`` and
    ``strides`` (one value, or one per axis), with strided_slice's rules."""
    return call("dyn.strided_slice", data, begin, end, strides,
                attrs=DynStridedSliceAttrs(None if axes is None else tuple(axes), slice_mode,
                                           where))

"""``dyn.nn.pad``: pad with widths given as a (rank, 2) tensor, known only at run time.

A negative width removes elements (ONNX's Pad crops so); out[o] reads input o - before on
each axis: constant mode gives the pad value outside the input, edge the nearest edge
element, reflect the mirror image (each width must then be smaller than the axis).
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ....ir.expr import Call
from ....ir.types import Any as AnyDim
from ....ir.types import TensorType, Type
from ....te import tensor as te
from ....tir import op as tir
from ....tir.expr import PrimExpr
from .._attrs_base import OpAttrs, attrs_class
from .._compute_common import scalar
from .._reg import INJECTIVE, call, defop
from .._shape import fail, fmt_shape, fmt_type, tensor_of
from .._value_dims import INT64, check_value, dim64, read, value_dim
from ._common import is_int, label, require

__all__ = ["pad"]


@attrs_class("DynPadAttrs")
class DynPadAttrs(OpAttrs):
    """dyn.nn.pad: the mode (constant, edge, reflect) and ``where`` the op came from."""

    pad_mode: str = "constant"
    where: str = ""
    _op: ClassVar[str] = "dyn.nn.pad"

    def __post_init__(self) -> None:
        self._choice("pad_mode", ("constant", "edge", "reflect"))
        self._set("where", str(self.where))


def _rel(args: list[TensorType], attrs: DynPadAttrs) -> TensorType:
    op, (data, width, value) = "dyn.nn.pad", args
    if width.shape != (data.ndim, 2) or not is_int(width.dtype):
        raise fail(op, f"pad_width must be an integer tensor of shape ({data.ndim}, 2) for data "
                       f"of shape {fmt_shape(data.shape)}, got {fmt_type(width)}")
    if value.ndim != 0:
        raise fail(op, f"pad_value must be a scalar, got {fmt_type(value)}")
    return tensor_of([AnyDim()] * data.ndim, data.dtype)


def _source(j: Any, d: Any, mode: str, ops: Any) -> Any:
    """The input index read at (unclamped) index ``j`` of an axis of size ``d``."""
    if mode == "edge":
        return ops.min(ops.max(j, 0), d - 1)
    if mode == "reflect":
        j = ops.select(j < 0, 0 - j, j)
        return ops.select(j >= d, (d - 1) * 2 - j, j)
    return ops.min(ops.max(j, 0), ops.max(d - 1, 0))


class _Np:
    min, max, select = staticmethod(np.minimum), staticmethod(np.maximum), staticmethod(np.where)


class _Tir:
    min, max, select = staticmethod(tir.min), staticmethod(tir.max), staticmethod(tir.Select_)


def _ref(x: np.ndarray, width: np.ndarray, value: np.ndarray, attrs: DynPadAttrs) -> np.ndarray:
    where, pads = label("dyn.nn.pad", attrs), np.asarray(width, np.int64).reshape(-1, 2)
    out, inside = x, np.ones((), bool)
    for axis, (d, (b, a)) in enumerate(zip(x.shape, pads.tolist())):
        n = d + b + a
        require(n >= 0, where, f"pads remove more than the {d} elements of axis {axis}")
        if attrs.pad_mode == "reflect":
            require(b < d and a < d, where, f"reflect padding of ({b}, {a}) needs axis {axis} "
                    f"to be larger, got size {d}")
        if attrs.pad_mode == "edge":
            require(d > 0 or n == 0, where, f"edge padding of the empty axis {axis}")
        j = np.arange(n) - b
        line = [1] * x.ndim
        line[axis] = n
        inside = inside & ((j >= 0) & (j < d)).reshape(line)
        out = np.take(out, _source(j, d, attrs.pad_mode, _Np), axis=axis) if d else \
            np.zeros(out.shape[:axis] + (n,) + out.shape[axis + 1:], x.dtype)
    if attrs.pad_mode == "constant":
        out = np.where(inside, out, value.astype(x.dtype))
    return np.ascontiguousarray(out)


def _compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x, width, value = inputs
    what, mode = label("dyn.nn.pad", attrs), attrs.pad_mode
    before = [read(width, i, 0) for i in range(x.ndim)]
    shape = []
    for i, (d, b) in enumerate(zip(x.shape, before)):
        a, d64 = read(width, i, 1), dim64(d)
        if mode == "reflect":
            check_value(tir.all(b < d64, a < d64), f"{what}: reflect padding needs each width "
                        f"to be smaller than the axis (axis {i})")
        if mode == "edge":
            check_value(tir.any(d64 > 0, (b + a).equal(0)),
                        f"{what}: edge padding of an empty axis (axis {i})")
        shape.append(value_dim(f"pad_dim{i}", d64 + b + a, what))
    pad_value = tir.cast(scalar(value), x.dtype)

    def f(*o: PrimExpr) -> PrimExpr:
        js = [tir.cast(i, INT64) - b for i, b in zip(o, before)]
        src = x(*[tir.cast(_source(j, dim64(d), mode, _Tir), "int32")
                  for j, d in zip(js, x.shape)])
        if mode != "constant":
            return src
        inside = tir.all(*[tir.all(j >= 0, j < dim64(d)) for j, d in zip(js, x.shape)])
        return tir.if_then_else(inside, src, pad_value)  # no read outside the input

    return [te.compute(tuple(shape), f, name=f"T_pad_{mode}", tag="injective")]


defop("dyn.nn.pad", _rel, _ref, INJECTIVE, args=("data", "pad_width", "pad_value"),
      attrs=DynPadAttrs, doc="Pad with widths given as a (rank, 2) tensor (negative widths "
      "crop).", level=10, compute=_compute, shape_data=("pad_width",))


def pad(data: Any, pad_width: Any, pad_value: Any = 0.0, pad_mode: str = "constant",
        where: str = "") -> Call:
    """``data`` padded by the (before, after) pairs of the (rank, 2) integer tensor
    ``pad_width``."""
    from ....ir.expr import RelayExpr, const

    if not isinstance(pad_value, RelayExpr):
        pad_value = const(pad_value)
    return call("dyn.nn.pad", data, pad_width, pad_value, attrs=DynPadAttrs(pad_mode, where))

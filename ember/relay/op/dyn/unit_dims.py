"""``dyn.squeeze`` and ``dyn.expand_dims``: removing or inserting size-1 axes named by a
tensor (``relay.squeeze(x, axis=<expr>)``, ``relay.expand_dims(x, axis=<expr>)``).

Both only relabel the dimensions, so each kernel is a reshape to sizes computed from the
axis values (``op/_value_dims.py``). The output's rank is static (the input's rank less the
number of axes, or plus ``num_newaxis``); its sizes are ``?`` until ``DynamicToStatic`` or the
VM's shape function knows the axes.
"""
from __future__ import annotations

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
from ..attrs import check_num_newaxis
from .._reg import INJECTIVE, call, defop
from .._shape import fail, tensor_of
from .._value_dims import INT64, check_value, dim64, read, value_dim
from ._common import DynAttrs, int_scalar, ints, label, require, vector_length

__all__ = ["expand_dims", "squeeze"]


def _size_at(dims: list[PrimExpr], axis: PrimExpr) -> PrimExpr:
    """``dims[axis]`` for an axis known only at run time (0 when out of range)."""
    out: PrimExpr = tir.const(0, INT64)
    for j, d in enumerate(dims):
        out = tir.Select_(axis.equal(j), d, out)
    return out


# ---------------------------------------------------------------- dyn.squeeze
def _squeeze_rel(args: list[TensorType], attrs: DynAttrs) -> TensorType:
    data, n = args[0], vector_length("dyn.squeeze", args[1], "axis")
    if n > data.ndim:
        raise fail("dyn.squeeze", f"axis has {n} values but data has rank {data.ndim}")
    return tensor_of([AnyDim()] * (data.ndim - n), data.dtype)


def _squeeze_axes(where: str, shape: tuple[int, ...], axis: np.ndarray) -> tuple[int, ...]:
    nd = len(shape)
    values = ints(axis)
    require(all(-nd <= a < nd for a in values), where,
            f"axis {values} is out of range for rank {nd}")
    norm = [a % nd for a in values]
    require(len(set(norm)) == len(norm), where, f"axis {values} names an axis twice")
    require(all(shape[a] == 1 for a in norm), where,
            f"cannot squeeze axes {values} of shape {list(shape)}: their sizes are not 1")
    return tuple(norm)


def _squeeze_ref(x: np.ndarray, axis: np.ndarray, attrs: DynAttrs) -> np.ndarray:
    return np.squeeze(x, _squeeze_axes(label("dyn.squeeze", attrs), x.shape, axis))


def _squeeze_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x, axis = inputs
    what, nd = label("dyn.squeeze", attrs), x.ndim
    values = [read(axis, k) for k in range(axis.shape[0].value)]
    norm = [tir.Select_(a < 0, a + nd, a) for a in values]
    dims = [dim64(d) for d in x.shape]
    for k, a in enumerate(norm):
        check_value(tir.all(a >= 0, a < nd), f"{what}: axis is out of range for rank {nd}")
        check_value(_size_at(dims, a).equal(1), f"{what}: a squeezed axis has a size other "
                    "than 1")
        for b in norm[k + 1:]:
            check_value(~a.equal(b), f"{what}: axis names an axis twice")
    kept = [tir.all(*[~a.equal(j) for a in norm]) if norm else tir.const(True)
            for j in range(nd)]
    sizes, position = [], tir.const(0, INT64)  # position: kept axes before axis j
    for j in range(nd):
        sizes.append((kept[j], position, dims[j]))
        position = position + tir.cast(kept[j], INT64)
    shape = []
    for k in range(nd - len(values)):
        size: PrimExpr = tir.const(0, INT64)
        for keep, pos, d in sizes:
            size = tir.Select_(tir.all(keep, pos.equal(k)), d, size)
        shape.append(value_dim(f"squeeze_dim{k}", size, what))
    return [topi.reshape(x, shape)]


defop("dyn.squeeze", _squeeze_rel, _squeeze_ref, INJECTIVE, args=("data", "axis"),
      attrs=DynAttrs, doc="drop the size-1 axes named by a 1-D integer tensor.", level=10,
      compute=_squeeze_compute, shape_data=("axis",))


def squeeze(data: Any, axis: Any, where: str = "") -> Call:
    """``data`` without the size-1 axes named by the 1-D integer tensor ``axis``."""
    return call("dyn.squeeze", data, axis, attrs=DynAttrs(where))


# ---------------------------------------------------------------- dyn.expand_dims
@attrs_class("DynExpandDimsAttrs")
class DynExpandDimsAttrs(OpAttrs):
    """dyn.expand_dims: how many size-1 axes to insert, and ``where`` the op came from."""

    num_newaxis: int = 1
    where: str = ""
    _op: ClassVar[str] = "dyn.expand_dims"

    def __post_init__(self) -> None:
        check_num_newaxis(self)
        self._set("where", str(self.where))


def _expand_rel(args: list[TensorType], attrs: DynExpandDimsAttrs) -> TensorType:
    int_scalar("dyn.expand_dims", args[1], "axis")
    return tensor_of([AnyDim()] * (args[0].ndim + attrs.num_newaxis), args[0].dtype)


def _expand_ref(x: np.ndarray, axis: np.ndarray, attrs: DynExpandDimsAttrs) -> np.ndarray:
    (a,) = ints(axis)
    nd = x.ndim
    require(-nd - 1 <= a <= nd, label("dyn.expand_dims", attrs),
            f"axis {a} is out of range for rank {nd} (valid {-nd - 1}..{nd})")
    a = a % (nd + 1)
    return x.reshape(x.shape[:a] + (1,) * attrs.num_newaxis + x.shape[a:])


def _expand_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x, axis = inputs
    what, nd, m = label("dyn.expand_dims", attrs), x.ndim, attrs.num_newaxis
    a = read(axis) if axis.ndim == 0 else read(axis, 0)
    check_value(tir.all(a >= -nd - 1, a <= nd),
                f"{what}: axis is out of range for rank {nd} (valid {-nd - 1}..{nd})")
    a = tir.Select_(a < 0, a + nd + 1, a)
    dims = [dim64(d) for d in x.shape]
    one = tir.const(1, INT64)
    shape = []
    for k in range(nd + m):
        before = dims[k] if k < nd else one  # (k < a implies k < nd)
        after = dims[k - m] if k >= m else one  # (k >= a + m implies k >= m)
        size = tir.Select_(k < a, before, tir.Select_(k < a + m, one, after))
        shape.append(value_dim(f"expand_dim{k}", size, what))
    return [topi.reshape(x, shape)]


defop("dyn.expand_dims", _expand_rel, _expand_ref, INJECTIVE, args=("data", "axis"),
      attrs=DynExpandDimsAttrs, doc="insert num_newaxis size-1 axes at a position given as "
      "an integer scalar tensor.", level=10, compute=_expand_compute, shape_data=("axis",))


def expand_dims(data: Any, axis: Any, num_newaxis: int = 1, where: str = "") -> Call:
    """``data`` with ``num_newaxis`` size-1 axes inserted at the value of the integer scalar
    tensor ``axis`` (in ``[-ndim-1, ndim]``)."""
    return call("dyn.expand_dims", data, axis, attrs=DynExpandDimsAttrs(num_newaxis, where))

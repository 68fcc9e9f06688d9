"""``dyn.topk``: topk whose k is a tensor (known only at run time)."""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ....ir.types import Any as AnyDim
from ....ir.types import TensorType, TupleType, Type
from ....te import tensor as te
from .._attrs_base import OpAttrs, attrs_class
from .._reg import OPAQUE, call, defop
from .._shape import norm_axis, tensor_of
from .._tuple import TupleWrapper
from .._value_dims import check_value, dim64, read, value_dim
from ..algorithm import TopKAttrs, _topk_ref, topk_tensors
from ._common import int_scalar, ints, label, require

__all__ = ["topk"]


@attrs_class("DynTopKAttrs")
class DynTopKAttrs(OpAttrs):
    """dyn.topk: topk's attrs but k (the second argument), and ``where`` the op came from."""

    axis: int = -1
    ret_type: str = "both"
    is_ascend: bool = False
    dtype: str = "int32"
    where: str = ""
    _op: ClassVar[str] = "dyn.topk"

    def __post_init__(self) -> None:
        self._int("axis")
        self._choice("ret_type", ("both", "values", "indices"))
        self._bool("is_ascend")
        self._dtype("dtype")
        self._set("where", str(self.where))


def _rel(args: list[TensorType], attrs: DynTopKAttrs) -> Type:
    data, k = args
    int_scalar("dyn.topk", k, "k")
    shape = list(data.shape)
    shape[norm_axis("dyn.topk", attrs.axis, data.ndim)] = AnyDim()
    values, indices = tensor_of(shape, data.dtype), tensor_of(shape, attrs.dtype)
    if attrs.ret_type == "values":
        return values
    return indices if attrs.ret_type == "indices" else TupleType((values, indices))


def static_attrs(attrs: DynTopKAttrs, k: int) -> TopKAttrs:
    """The attrs of the static topk for ``k``."""
    return TopKAttrs(k, attrs.axis, attrs.ret_type, attrs.is_ascend, attrs.dtype)


def _ref(data: np.ndarray, k: np.ndarray, attrs: DynTopKAttrs) -> Any:
    n, kv = data.shape[attrs.axis % data.ndim], ints(k)[0]
    require(0 <= kv <= n, label("dyn.topk", attrs), f"k={kv} is out of range for an axis of "
            f"size {n}")
    return _topk_ref(data, static_attrs(attrs, kv))


def _compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x, k = inputs
    what = label("dyn.topk", attrs)
    kv = read(k, *[0] * k.ndim)
    check_value(kv <= dim64(x.shape[attrs.axis % x.ndim]),
                f"{what}: k is larger than the size of the axis")
    return topk_tensors(x, value_dim("topk_k", kv, what), attrs)


defop("dyn.topk", _rel, _ref, OPAQUE, args=("data", "k"), attrs=DynTopKAttrs,
      doc="topk with k given as a tensor.", level=10, compute=_compute, shape_data=("k",))


def topk(data: Any, k: Any, axis: int = -1, ret_type: str = "both", is_ascend: bool = False,
         dtype: str = "int32", where: str = "") -> Any:
    """topk whose k is the value of the integer scalar tensor ``k``."""
    out = call("dyn.topk", data, k, attrs=DynTopKAttrs(axis, ret_type, is_ascend, dtype, where))
    return TupleWrapper(out, 2) if ret_type == "both" else out

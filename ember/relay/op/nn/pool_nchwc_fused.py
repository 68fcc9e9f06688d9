"""nn.contrib_max_pool2d_NCHWc_fused: a max pool in NCHW[L]c with a per-channel epilogue
``relu?(pool * scale + shift)`` inside the pool kernel (``ember/kernels/pool_nchwc.h``).

``relay.transform.FusePoolEpilogue`` makes it from a blocked max pool and the multiply, add
and relu after it (resnet's stem: the pool, then the next unit's batch norm and relu), so the
pool's result is written once instead of written, read and written again. Arguments: data
``[N, C/L, H, W, L]``, scale and shift ``[C]`` float32; attrs: the max pool's, with a
blocked ``layout``, and ``relu``.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ....ir.expr import Call
from ....ir.types import TensorType, Type
from ....te import tensor as te
from ....tir import op as tir
from ....topi.nn.pool_nchwc import blocked_lanes, pool2d_nchwc
from .._attrs_base import attrs_class
from .._compute_common import out_dims
from .._reg import OPAQUE, call, defop
from .._shape import fail, fmt_shape
from ._attrs import _Pool2DAttrs
from .pooling import _out_size, _pool_compute, _pool_rel, pool2d_ref

__all__ = ["contrib_max_pool2d_nchwc_fused"]

OP = "nn.contrib_max_pool2d_NCHWc_fused"


@attrs_class("MaxPool2DNCHWcFusedAttrs")
class MaxPool2DNCHWcFusedAttrs(_Pool2DAttrs):
    """The max pool's attributes and ``relu`` (the epilogue ends with max(y, 0))."""

    relu: bool = False
    _op: ClassVar[str] = OP

    def __post_init__(self) -> None:
        _Pool2DAttrs.__post_init__(self)  # (no zero-argument super() in a slotted dataclass)
        self._bool("relu")


def _rel(args: list[TensorType], attrs: MaxPool2DNCHWcFusedAttrs) -> TensorType:
    data, scale, shift = args
    lanes = blocked_lanes(attrs.layout)
    if lanes is None or data.ndim != 5 or data.shape[4] != lanes:
        raise fail(OP, f"data must be NCHW[L]c with L in 4, 8, 16 (layout {attrs.layout!r}), "
                       f"got shape {fmt_shape(data.shape)}")
    channels = data.shape[1] * lanes if isinstance(data.shape[1], int) else None
    for name, vec in (("scale", scale), ("shift", shift)):
        if vec.ndim != 1 or vec.dtype != data.dtype or (
                channels is not None and vec.shape[0] != channels):
            raise fail(OP, f"{name} must be a {data.dtype} vector of the {channels} channels, "
                           f"got {vec.dtype}{fmt_shape(vec.shape)}")
    return _pool_rel(OP)([data], attrs)


def _ref(x: np.ndarray, scale: np.ndarray, shift: np.ndarray,
         attrs: MaxPool2DNCHWcFusedAttrs) -> np.ndarray:
    lanes = x.shape[4]
    y = pool2d_ref(x, attrs, "max")
    y = y * scale.reshape(1, -1, 1, 1, lanes) + shift.reshape(1, -1, 1, 1, lanes)
    return np.maximum(y, 0).astype(x.dtype) if attrs.relu else y.astype(x.dtype)


def _compute(attrs: MaxPool2DNCHWcFusedAttrs, inputs: list[te.Tensor],
             out_type: Type) -> list[te.Tensor]:
    x, scale, shift = inputs
    (kh, kw), (sh, sw), (dh, dw) = attrs.pool_size, attrs.strides, attrs.dilation
    pt, pl, pb, pr = attrs.padding
    dims = list(x.shape)  # the batch may be a run-time one
    dims[2] = _out_size(x.shape[2], kh, sh, dh, pt + pb, attrs.ceil_mode)
    dims[3] = _out_size(x.shape[3], kw, sw, dw, pl + pr, attrs.ceil_mode)
    shape = out_dims(out_type, dims)  # type: ignore[arg-type]
    fused = pool2d_nchwc(x, "max", shape, attrs, scale, shift, attrs.relu)
    if fused is not None:
        return [fused]
    # the kernel does not take it (a ? channel count): the generic pool and the epilogue
    (pool,) = _pool_compute(OP, "max")(attrs, [x], out_type)
    lanes = int(x.shape[4])

    def epilogue(n: Any, cb: Any, y: Any, w: Any, lane: Any) -> Any:
        v = pool[n, cb, y, w, lane] * scale[cb * lanes + lane] + shift[cb * lanes + lane]
        return tir.max(v, tir.const(0.0, x.dtype)) if attrs.relu else v

    return [te.compute(shape, epilogue, name="T_pool_epilogue", tag="elemwise")]


defop(OP, _rel, _ref, OPAQUE, args=("data", "scale", "shift"),
      attrs=MaxPool2DNCHWcFusedAttrs, level=10, compute=_compute,
      doc="2-D max pooling in NCHW[L]c with a per-channel scale, shift and relu.")


def contrib_max_pool2d_nchwc_fused(data: Any, scale: Any, shift: Any, **attrs: Any) -> Call:
    """The fused blocked max pool (see the module docstring)."""
    return call(OP, data, scale, shift, attrs=MaxPool2DNCHWcFusedAttrs(**attrs))

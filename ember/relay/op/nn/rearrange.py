"""Moving data between channels and space: ``nn.depth_to_space`` and ``nn.space_to_depth``
(NCHW): attrs, type relation, numpy reference, compute rule and builder.

depth_to_space splits each channel group of block_size**2 channels into a block of pixels:
mode "DCR" (depth-column-row) takes the block position from the outer part of the channel
index, "CRD" from the inner part. space_to_depth is the inverse of "DCR".
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
from .._reg import INJECTIVE, call, defop
from .._shape import dim_mul, fail, fmt_shape, known, tensor_of

__all__ = ["depth_to_space", "space_to_depth"]


@attrs_class("SubPixelAttrs")
class SubPixelAttrs(OpAttrs):
    """nn.depth_to_space / nn.space_to_depth: block size, layout (NCHW) and mode."""

    block_size: int = 1
    layout: str = "NCHW"
    mode: str = "DCR"
    _op: ClassVar[str] = "nn.depth_to_space"

    def __post_init__(self) -> None:
        self._int("block_size")
        self._positive("block_size")
        self._choice("layout", ("NCHW",))
        self._choice("mode", ("DCR", "CRD"))


def _nchw(op: str, data: TensorType) -> None:
    if data.ndim != 4:
        raise fail(op, f"data must be NCHW (rank 4), got {fmt_shape(data.shape)}")


def _d2s_rel(args: list[TensorType], attrs: SubPixelAttrs) -> TensorType:
    data, b = args[0], attrs.block_size
    _nchw("nn.depth_to_space", data)
    n, c, h, w = data.shape
    if known(c) and c % (b * b):  # type: ignore[operator]
        raise fail("nn.depth_to_space", f"{c} channels do not divide by block_size**2 = {b * b}")
    c_out = c // (b * b) if known(c) else AnyDim()  # type: ignore[operator]
    return tensor_of((n, c_out, dim_mul(h, b), dim_mul(w, b)), data.dtype)


def _s2d_rel(args: list[TensorType], attrs: SubPixelAttrs) -> TensorType:
    data, b = args[0], attrs.block_size
    _nchw("nn.space_to_depth", data)
    n, c, h, w = data.shape
    for d, name in ((h, "height"), (w, "width")):
        if known(d) and d % b:  # type: ignore[operator]
            raise fail("nn.space_to_depth", f"{name} {d} does not divide by block_size {b}")
    h_out = h // b if known(h) else AnyDim()  # type: ignore[operator]
    w_out = w // b if known(w) else AnyDim()  # type: ignore[operator]
    return tensor_of((n, dim_mul(c, b * b), h_out, w_out), data.dtype)


def _d2s_ref(x: np.ndarray, attrs: SubPixelAttrs) -> np.ndarray:
    b = attrs.block_size
    n, c, h, w = x.shape
    if attrs.mode == "DCR":
        t = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(n, c // (b * b), h * b, w * b)


def _s2d_ref(x: np.ndarray, attrs: SubPixelAttrs) -> np.ndarray:
    b = attrs.block_size
    n, c, h, w = x.shape
    t = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return t.reshape(n, c * b * b, h // b, w // b)


def _d2s_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x, b = inputs[0], attrs.block_size
    n, c, h, w = x.shape
    c_out = tir.floordiv(c, b * b)

    def f(i: PrimExpr, k: PrimExpr, y: PrimExpr, z: PrimExpr) -> PrimExpr:
        blk = tir.floormod(y, b) * b + tir.floormod(z, b)
        ch = blk * c_out + k if attrs.mode == "DCR" else k * (b * b) + blk
        return x(i, ch, tir.floordiv(y, b), tir.floordiv(z, b))

    return [te.compute((n, c_out, h * b, w * b), f, name="T_depth_to_space", tag="injective")]


defop("nn.depth_to_space", _d2s_rel, _d2s_ref, INJECTIVE, attrs=SubPixelAttrs,
      doc="Rearrange channel groups into spatial blocks (DCR or CRD order).", level=5,
      compute=_d2s_compute)


def _s2d_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x, b = inputs[0], attrs.block_size
    n, c, h, w = x.shape

    def f(i: PrimExpr, k: PrimExpr, y: PrimExpr, z: PrimExpr) -> PrimExpr:
        blk, ch = tir.floordiv(k, c), tir.floormod(k, c)
        return x(i, ch, y * b + tir.floordiv(blk, b), z * b + tir.floormod(blk, b))

    shape = (n, c * (b * b), tir.floordiv(h, b), tir.floordiv(w, b))
    return [te.compute(shape, f, name="T_space_to_depth", tag="injective")]


defop("nn.space_to_depth", _s2d_rel, _s2d_ref, INJECTIVE, attrs=SubPixelAttrs,
      doc="Rearrange spatial blocks into channels.", level=5, compute=_s2d_compute)


def depth_to_space(data: Any, block_size: int, layout: str = "NCHW", mode: str = "DCR") -> Call:
    """(N, C, H, W) -> (N, C / b**2, H * b, W * b) with b = block_size."""
    return call("nn.depth_to_space", data, attrs=SubPixelAttrs(block_size, layout, mode))


def space_to_depth(data: Any, block_size: int, layout: str = "NCHW") -> Call:
    """(N, C, H, W) -> (N, C * b**2, H / b, W / b) with b = block_size."""
    return call("nn.space_to_depth", data, attrs=SubPixelAttrs(block_size, layout, "DCR"))

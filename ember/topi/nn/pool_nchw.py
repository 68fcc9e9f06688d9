"""Max, average and global pooling of plain NCHW float32 tensors as calls of ember's C kernels
(``ember/include/ember/kernels/pool_nchw.h``): vectors along each output row through a row
buffer whose padding holds the reduction's identity (small planes: a padded copy of each),
any channel count, rows or planes split over threads for large pools. Batch, channels and image sizes may be run-time ones (``?``): the
kernels take them as arguments and decide about threads at each call, as a static build of
that shape does."""
from __future__ import annotations

from typing import Any

from ...te import tensor as te
from ...tir import op as tir
from .conv2d_nchwc import PARALLEL_MACS
from .sizes import dims, i64, static_or_expr, succeeds

HEADER = "ember/kernels/pool_nchw.h"


def _plain_f32(data: te.Tensor, layout: str) -> bool:
    return layout == "NCHW" and data.dtype == "float32" and len(data.shape) == 4


def _threads(work: Any, items: Any) -> Any:
    """1 when ``work`` (taps read) pays for a parallel launch and there are items to split."""
    return static_or_expr(tir.cast(tir.all(work >= tir.const(PARALLEL_MACS, "int64"),
                                           tir.convert(items) >= 2), "int32"))


def pool2d_nchw(data: te.Tensor, kind: str, out_shape: Any, attrs: Any) -> te.Tensor | None:
    """The ``kind`` ("max" or "avg") pool of ``data`` (NCHW, float32) through the C kernel with
    ``attrs``' window, strides, dilation, padding and count_include_pad (ceil_mode is in
    ``out_shape``); None for other layouts and dtypes (then the generic reduction is used)."""
    if not _plain_f32(data, attrs.layout):
        return None
    n, c, h, w = dims(data.shape)
    oh, ow = dims(out_shape)[2:]
    (kh, kw), (sh, sw), (dh, dw) = attrs.pool_size, attrs.strides, attrs.dilation
    pt, pl, pb, pr = attrs.padding
    include = int(kind == "avg" and bool(attrs.count_include_pad))
    threads = _threads(i64(n) * i64(c) * i64(oh) * i64(ow) * (kh * kw), i64(n) * i64(c) * oh)
    ints = [n, c, h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, int(kind == "avg"),
            include, threads]

    def body(ins: list, outs: list) -> Any:
        return succeeds(tir.call_extern("int32", "ember_pool2d_nchw", ins[0].data, outs[0].data,
                                        *ints, header=HEADER),
                        "ember_pool2d_nchw failed (parallel launch)")

    return te.extern(tuple(out_shape), [data], body, name=f"T_pool_{kind}_nchw",
                     tag="pool_nchw")


def global_pool_nchw(data: te.Tensor, kind: str, out_shape: Any, layout: str
                     ) -> te.Tensor | None:
    """The max or mean of each H x W plane of ``data`` (NCHW, float32) through the C kernel,
    a streaming reduction; None for other layouts and dtypes."""
    if not _plain_f32(data, layout):
        return None
    n, c, h, w = dims(data.shape)
    threads = _threads(i64(n) * i64(c) * i64(h) * i64(w), i64(n) * i64(c))
    ints = [n, c, h, w, int(kind == "avg"), threads]

    def body(ins: list, outs: list) -> Any:
        return succeeds(tir.call_extern("int32", "ember_global_pool_nchw", ins[0].data,
                                        outs[0].data, *ints, header=HEADER),
                        "ember_global_pool_nchw failed (parallel launch)")

    return te.extern(tuple(out_shape), [data], body, name=f"T_global_{kind}_pool_nchw",
                     tag="pool_nchw")

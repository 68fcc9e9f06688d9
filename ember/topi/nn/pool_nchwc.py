"""Max and average pooling in NCHW[L]c as calls of ember's C kernel
(``ember/include/ember/kernels/pool_nchwc.h``): one vector per output pixel, window taps in
the padding skipped (never a padded copy), rows split over threads for large pools. The batch
and image sizes may be run-time ones (``?``): the kernel takes them as arguments and decides
about threads at each call, as a static build of that shape does."""
from __future__ import annotations

import re
from typing import Any

from ...te import tensor as te
from ...tir import op as tir
from .conv2d_nchwc import LANES, PARALLEL_MACS
from .sizes import dims, i64, static_or_expr, succeeds

HEADER = "ember/kernels/pool_nchwc.h"
_BLOCKED = re.compile(r"^NCHW(\d+)c$")


def blocked_lanes(layout: str) -> int | None:
    """L of an ``NCHW[L]c`` layout the kernel takes (4, 8 or 16), else None."""
    m = _BLOCKED.match(layout)
    return int(m.group(1)) if m and int(m.group(1)) in LANES else None


def pool2d_nchwc(data: te.Tensor, kind: str, out_shape: Any, attrs: Any,
                 scale: te.Tensor | None = None, shift: te.Tensor | None = None,
                 relu: bool = False) -> te.Tensor | None:
    """The pool of ``data`` (NCHW[L]c, float32, static channels) through the C kernel; None
    when the kernel does not apply (then the generic reduction is used). The epilogue
    ``pool * scale + shift``, then relu, runs in the kernel: ``scale``/``shift`` are [C]
    float32 vectors (None: 1 and 0)."""
    lanes = blocked_lanes(attrs.layout)
    shape, out = dims(data.shape), dims(out_shape)
    if lanes is None or data.dtype != "float32" or len(shape) != 5 or shape[4] != lanes or (
            not isinstance(shape[1], int)):
        return None
    n, cb, h, w, _ = shape
    oh, ow = out[2], out[3]
    (kh, kw), (sh, sw), (dh, dw) = attrs.pool_size, attrs.strides, attrs.dilation
    pt, pl, pb, pr = attrs.padding
    include = int(kind == "avg" and bool(attrs.count_include_pad))
    taps = i64(n) * i64(oh) * i64(ow) * (cb * lanes * kh * kw)
    threads = static_or_expr(tir.cast(tir.all(taps >= tir.const(PARALLEL_MACS, "int64"),
                                              tir.convert(n * cb * oh) >= 2), "int32"))
    ints = [n, cb, h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, int(kind == "avg"),
            include, threads]

    inputs = [data, *(t for t in (scale, shift) if t is not None)]

    def body(ins: list, outs: list) -> Any:
        given = iter(ins[1:])  # the epilogue's vectors that are there, NULL for the others
        epi = [next(given).data if t is not None else tir.const(0, "int32")
               for t in (scale, shift)]
        return succeeds(tir.call_extern("int32", f"ember_pool2d_nchwc_x{lanes}", ins[0].data,
                                        outs[0].data, *ints, *epi, int(relu), header=HEADER),
                        f"ember_pool2d_nchwc_x{lanes} failed (parallel launch)")

    return te.extern(tuple(out_shape), inputs, body, name=f"T_pool_{kind}_nchwc",
                     tag="pool_nchwc")

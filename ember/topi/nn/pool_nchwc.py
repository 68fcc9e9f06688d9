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
# window taps (floats read) from which a pool splits its rows over threads: a tap is one
# vector add of a row in the L2, far cheaper than a conv's multiply-add, and the taps of a
# 7x7 global pool over 1280 channels (62720, mobilenet_v2's) ran 4 us on one thread, the
# whole model's serial work on 16 threads' 0.3 ms critical path (below PARALLEL_MACS)
PARALLEL_TAPS = PARALLEL_MACS // 2


def blocked_lanes(layout: str) -> int | None:
    """L of an ``NCHW[L]c`` layout the kernel takes (4, 8 or 16), else None."""
    m = _BLOCKED.match(layout)
    return int(m.group(1)) if m and int(m.group(1)) in LANES else None


def pool_threads(n: Any, cblocks: int, lanes: int, oh: Any, ow: Any, kh: int, kw: int) -> Any:
    """1 where the pool's rows go to threads (at least PARALLEL_TAPS window taps and two rows
    of blocks), else 0; an int32 expression for run-time sizes."""
    taps = i64(n) * i64(oh) * i64(ow) * (cblocks * lanes * kh * kw)
    return static_or_expr(tir.cast(tir.all(taps >= tir.const(PARALLEL_TAPS, "int64"),
                                           tir.convert(n * cblocks * oh) >= 2), "int32"))


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
    threads = pool_threads(n, cb, lanes, oh, ow, kh, kw)
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

"""conv2d of a plain NCHW input to few output channels as a call of
``ember_conv2d_nchw_small`` (``ember/include/ember/kernels/conv_nchw_small.h``).

A conv whose output channels fill no channel block stays plain NCHW (AlterOpLayout gives it
no blocked form: the synthetic model's 3 -> 3 3x3 conv, a head to 1 to 7 channels), and the te
template vectorises it over those few channels: 3 lanes of 16. This kernel runs its vectors
along the output row instead, every tap of a buffered, zero-padded input row a contiguous
load, with up to 4 channels x 4 rows of accumulators. :func:`nchw_small_applies` is the
selection, which ``nn.conv2d``'s compute asks first; the kernel takes any padding, stride and
dilation.
"""
from __future__ import annotations

from typing import Any

from ...runtime.errors import OpError
from ...te import tensor as te
from ...tir import op as tir
from .conv2d import _geometry
from .sizes import dims, i64, is_static, prod, static_or_expr, succeeds

HEADER = "ember/kernels/conv_nchw_small.h"
# Output channels up to which the kernel takes a conv: from 8 on the te template's register
# tile is at least half a vector of channels wide (3x3 8 -> 8 on 32x32: as fast as this one).
MAX_OUT_CHANNELS = 7
# Output columns from which it does (half an AVX-512 vector: a narrower row leaves most lanes
# idle, and the te template's tile of the few channels is as fast).
MIN_OUT_WIDTH = 8
# Multiply-adds from which a call launches threads (~40 us on one core: a launch costs ~1 us).
PARALLEL_MACS = 1 << 20


def nchw_small_applies(data: te.Tensor, kernel: te.Tensor, strides: Any, padding: Any,
                       dilation: Any, groups: int, out_dtype: str) -> bool:
    """Whether an NCHW x OIHW conv runs on this kernel: float32 throughout, ungrouped, static
    channels and weight, at most :data:`MAX_OUT_CHANNELS` output channels, a window larger
    than 1x1 (a 1x1 conv to few channels over wide rows, YOLOv8's DFL head, runs faster on
    the template), at least :data:`MIN_OUT_WIDTH` output columns when the width is static.
    The batch, height and width may be run-time sizes: the kernel takes them as arguments."""
    if not (groups == 1 and data.dtype == kernel.dtype == out_dtype == "float32"
            and is_static(data.shape[1], *kernel.shape)):
        return False
    _, _, h, w = dims(data.shape)
    oc, _, kh, kw = dims(kernel.shape)
    ow = _geometry("nn.conv2d", h, w, kh, kw, strides, padding, dilation)[-1]
    return oc <= MAX_OUT_CHANNELS and kh * kw > 1 and (
        not isinstance(ow, int) or ow >= MIN_OUT_WIDTH)


def conv2d_nchw_small(data: te.Tensor, kernel: te.Tensor, strides: Any = 1, padding: Any = 0,
                      dilation: Any = 1) -> te.Tensor:
    """The conv of float32 NCHW ``data`` with OIHW ``kernel`` (groups 1; the batch, height
    and width may be run-time sizes, whose window the caller checks)."""
    where = "nn.conv2d"
    n, ic, h, w = dims(data.shape)
    oc, kic, kh, kw = dims(kernel.shape)
    if kic != ic:
        raise OpError(f"{where}: data has {ic} channels but the weight expects {kic}")
    # (static sizes: a window larger than the padded input raises here)
    sh, sw, dh, dw, (pt, pl, pb, pr), oh, ow = _geometry(where, h, w, kh, kw, strides, padding,
                                                          dilation)
    macs = prod([n, oc, oh, ow, ic * kh * kw])
    parallel = int(macs >= PARALLEL_MACS) if isinstance(macs, int) else static_or_expr(
        tir.cast(i64(macs) >= tir.const(PARALLEL_MACS, "int64"), "int32"))
    sizes = [d if isinstance(d, int) else tir.cast(d, "int32") for d in (n, h, w, oh, ow)]

    def body(ins, outs):
        n32, h32, w32, oh32, ow32 = sizes
        call = tir.call_extern("int32", "ember_conv2d_nchw_small", ins[0].data, ins[1].data,
                               outs[0].data, n32, ic, h32, w32, oc, oh32, ow32, kh, kw, sh, sw,
                               dh, dw, pt, pl, parallel, header=HEADER)
        return succeeds(call, f"{where}: ember_conv2d_nchw_small failed (parallel launch)")

    return te.extern((n, oc, oh, ow), [data, kernel], body, name="T_conv2d_nchw_small",
                     dtype="float32", tag="conv2d_nchw_small")

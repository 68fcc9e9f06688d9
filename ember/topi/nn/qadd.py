"""The sum of two quantized tensors, requantized, through the C kernel of
``ember/include/ember/kernels/qadd.h``.

:func:`ratios` computes the two float32 multipliers as onnxruntime does; :func:`reference` is
the numpy oracle, bit for bit the kernel's (float32, no fused multiply-add: see qadd.h).
"""
from __future__ import annotations

import numpy as np

from ...te import tensor as te
from ...tir import op as tir
from .sizes import dims, prod, succeeds

QADD_HEADER = "ember/kernels/qadd.h"
RANGES = {"uint8": (0, 255), "int8": (-128, 127)}
PARALLEL_MIN = 1 << 15  # elements from which the kernel splits its chunks over threads


def ratios(a_scale: float, b_scale: float, y_scale: float) -> tuple[float, float]:
    """a_scale / y_scale and b_scale / y_scale in float32 (onnxruntime's QLinearAdd)."""
    ys = np.float32(y_scale)
    return float(np.float32(a_scale) / ys), float(np.float32(b_scale) / ys)


def reference(a: np.ndarray, b: np.ndarray, *, ra: float, rb: float, a_zp: int, b_zp: int,
              y_zp: int, y_range: tuple[int, int], out_dtype: str) -> np.ndarray:
    """What ``ember_qadd`` computes, in float32 (products rounded, then the sum):
    clamp(rint((a - a_zp) ra + (b - b_zp) rb) + y_zp)."""
    f32 = np.float32
    pa = (a.astype(np.int32) - a_zp).astype(f32) * f32(ra)
    pb = (b.astype(np.int32) - b_zp).astype(f32) * f32(rb)
    lo, hi = y_range
    v = np.clip(pa + pb, f32(lo - y_zp), f32(hi - y_zp))
    return (np.rint(v).astype(np.int32) + y_zp).astype(out_dtype)


def qadd(a: te.Tensor, b: te.Tensor, *, ra: float, rb: float, a_zp: int, b_zp: int, y_zp: int,
         y_range: tuple[int, int], out_dtype: str) -> te.Tensor:
    """The ``ember_qadd`` stage: a's shape, ``out_dtype``."""
    n = prod(dims(a.shape))
    parallel = int(not isinstance(n, int) or n >= PARALLEL_MIN)

    def body(ins, outs):
        call = tir.call_extern(
            "int32", "ember_qadd", ins[0].data, ins[1].data, outs[0].data, n,
            tir.const(ra, "float32"), tir.const(rb, "float32"), a_zp, b_zp, y_zp, y_range[0],
            y_range[1], int(a.dtype == "int8"), int(b.dtype == "int8"), parallel,
            header=QADD_HEADER)
        return succeeds(call, "nn.contrib_qadd: ember_qadd failed (parallel launch)")

    return te.extern(tuple(a.shape), [a, b], body, name="T_qadd", dtype=out_dtype,
                     tag="qadd_kernel")

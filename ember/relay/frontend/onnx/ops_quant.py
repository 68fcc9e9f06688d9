"""Converters of the quantization operators: QuantizeLinear, DequantizeLinear,
DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv, and
onnxruntime's com.microsoft QLinear operators (QLinearAdd, QGemm, ...: :func:`contrib_table`).

The int8 kernels take what they can: QLinearConv by constant weights with constant scales and
zero points becomes one nn.contrib_qconv2d (requantization fused; :func:`_qconv2d`), and so
does QDQ's DequantizeLinear -> Conv [-> Relu | Clip] -> QuantizeLinear (:func:`_qdq_conv`);
MatMulInteger and QLinearMatMul by a constant right operand run their product on
nn.contrib_qdense (:func:`_qdense`); QLinearAdd of two operands of one shape is one
nn.contrib_qadd (:func:`_qadd`); DynamicQuantizeLinear finds its range with one
nn.contrib_minmax. Everything else is decomposed.

There the integer products run in int32 on the zero-point-shifted operands (``cast(a, int32) -
a_zero_point``), so dense, batch_matmul and conv2d see plain int32 tensors; requantizing
multiplies by ``a_scale * b_scale / y_scale`` in float32, rounds half to even (ONNX's
rounding), adds ``y_zero_point`` and saturates to the output type. 8- and 16-bit integer
types; the float8 and 4-bit types are not supported.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ....ir.expr import RelayExpr
from ... import op as _op
from ._node import Node
from ._util import expand_to_rank, norm_axis, scalar
from .ops_conv import _ints, conv_expr, window_pads
from .ops_nn import matmul_expr

# the integer types a quantized tensor may have -> (lowest, highest)
RANGES = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535),
          "int16": (-32768, 32767)}
I32, F32 = "int32", "float32"


def _check_int_type(node: Node, dtype: str, what: str) -> None:
    if dtype not in RANGES:
        raise node.unsupported(f"{what} of type {dtype}; ember quantizes to "
                               f"{', '.join(RANGES)}")


def saturate(x: RelayExpr, dtype: str) -> RelayExpr:
    """Float ``x`` (already rounded) clamped into ``dtype``'s range and cast to it."""
    lo, hi = RANGES[dtype]
    return _op.cast(_op.clip(x, float(lo), float(hi)), dtype)


def _along_axis(node: Node, param: RelayExpr, x_ndim: int, what: str) -> RelayExpr:
    """A scale or zero point shaped to broadcast against the input: a scalar (or one value)
    as is; a vector along ``axis``; with ``block_size``, a tensor repeated along ``axis``."""
    pt = node.type_of(param)
    if pt.ndim == 0 or (pt.ndim == 1 and pt.shape[0] == 1 and x_ndim != 1):
        return _op.reshape(param, ()) if pt.ndim else param
    block = node.attr("block_size", 0)
    if x_ndim == 1 and not node.has_attr("axis") and not block:
        axis = 0  # a 1-D tensor (a bias of quantize_static's QDQ models): onnxruntime's axis
    else:
        axis = norm_axis(node, node.attr("axis", 1), x_ndim)
    if block:
        if pt.ndim != x_ndim:
            raise node.fail(f"blocked {what} must have the input's rank {x_ndim}, got "
                            f"{pt.ndim}")
        shape = node.type(0).shape
        repeated = _op.repeat(param, block, axis)
        return _op.strided_slice(repeated, [0], [shape[axis]], axes=[axis])
    if pt.ndim != 1:
        raise node.fail(f"{what} must be a scalar or a vector along axis {axis}, got shape "
                        f"{tuple(pt.shape)}")
    return expand_to_rank(param, x_ndim, axis)


def _shifted(node: Node, i: int, zp_index: int, what: str) -> RelayExpr:
    """Input ``i`` minus its zero point (input ``zp_index``, optional), as int32."""
    x = node.input(i, what)
    _check_int_type(node, node.dtype(i), what)
    out = _op.cast(x, I32)
    if node.has_input(zp_index):
        zp = _along_axis(node, node.input(zp_index), node.ndim(i), f"{what}'s zero point")
        out = _op.subtract(out, _op.cast(zp, I32))
    return out


def _output_type(node: Node, zp_index: int) -> str:
    from ._proto import dtype_of

    if node.has_input(zp_index):
        dtype = node.dtype(zp_index)
    elif node.attr("output_dtype", 0):
        dtype = dtype_of(node.attr("output_dtype"), f"{node.label}: attribute output_dtype")
    else:
        dtype = "uint8"
    _check_int_type(node, dtype, "output")
    return dtype


def _requantize(value: RelayExpr, scale: RelayExpr | None, zp: RelayExpr | None,
                dtype: str) -> RelayExpr:
    """saturate(round(value / scale) + zp): ``value`` float32 (already scaled: None)."""
    y = _op.round_half_even(value if scale is None else _op.divide(value, scale))
    if zp is not None:
        y = _op.add(y, _op.cast(zp, F32))
    return saturate(y, dtype)


def _as_f32(node: Node, i: int) -> RelayExpr:
    x = node.input(i)
    return x if node.dtype(i) == F32 else _op.cast(x, F32)


# ---------------------------------------------------------------- linear (de)quantization
def quantize_linear(node: Node) -> RelayExpr:
    fused = _qdq_conv(node)
    if fused is None:
        fused = _qdq_add(node)
    if fused is None:
        fused = _qdq_dense(node)
    if fused is not None:
        return fused
    x, ndim = node.input(0, "x"), node.ndim(0)
    if not node.dtype(0).startswith("float"):
        raise node.fail(f"x must be a floating-point tensor, got {node.dtype(0)}")
    if node.attr("saturate", 1) != 1:
        raise node.unsupported_attr("saturate", node.attr("saturate"), "1")
    dtype = _output_type(node, 2)
    scale = _along_axis(node, _as_f32(node, 1), ndim, "y_scale")
    zp = _along_axis(node, node.input(2), ndim, "y_zero_point") if node.has_input(2) else None
    return _requantize(_op.cast(x, F32) if node.dtype(0) != F32 else x, scale, zp, dtype)


def dequantize_linear(node: Node) -> RelayExpr:
    """(x - x_zero_point) * x_scale (see :func:`_dequantize_linear`), remembered for the QDQ
    rewrite when x is 8-bit (or an int32 bias) with constant scalar or per-axis parameters."""
    out = node.finish(_dequantize_linear(node))
    scale, zp = node.value(1), node.value(2) if node.has_input(2) else np.zeros((), np.int64)
    if scale is not None and zp is not None and node.dtype(1) == F32 and \
            node.dtype(0) in ("uint8", "int8", I32) and not node.attr("block_size", 0):
        axis = node.attr("axis", 1)
        _qdq_table(node)[out] = _Dequantized(node.input(0), node.value(0), node.dtype(0),
                                             scale, zp, axis)
    return out


def _dequantize_linear(node: Node) -> RelayExpr:
    """(x - x_zero_point) * x_scale, in x_scale's type (or ``output_dtype``); x of an 8- or
    16-bit type, or int32 (a bias)."""
    ndim = node.ndim(0)
    if node.dtype(0) == I32:  # a bias quantized with x_scale * w_scale (zero point 0)
        shifted = _op.cast(node.input(0, "x"), F32)
        if node.has_input(2):
            zp = _along_axis(node, node.input(2), ndim, "x's zero point")
            shifted = _op.subtract(shifted, _op.cast(zp, F32))
    else:
        shifted = _op.cast(_shifted(node, 0, 2, "x"), F32)
    scale = _along_axis(node, _as_f32(node, 1), ndim, "x_scale")
    out = _op.multiply(shifted, scale)
    dtype = node.dtype(1)
    return out if dtype == F32 else _op.cast(out, dtype)


def dynamic_quantize_linear(node: Node) -> list[RelayExpr]:
    """uint8 quantization with the scale and zero point that map [min(x, 0), max(x, 0)] onto
    [0, 255]; outputs y, y_scale, y_zero_point."""
    x = node.input(0, "x")
    if node.dtype(0) != F32:
        raise node.fail(f"x must be float32, got {node.dtype(0)}")
    zero = scalar(0.0, F32)
    if _static_nonempty(node.type(0).shape):  # both reductions in one pass (minmax.h)
        bounds = _op.nn.contrib_minmax(x)
        x_min, x_max = (_op.reshape(_op.strided_slice(bounds, [i], [i + 1]), ())
                        for i in (0, 1))
    else:
        x_min, x_max = _op.min(x), _op.max(x)
    lo = _op.minimum(x_min, zero)
    hi = _op.maximum(x_max, zero)
    span = _op.subtract(hi, lo)
    # an all-zero x has no range: scale 1 (onnxruntime's choice; the spec's 0 would divide
    # 0 by 0 below), so y and the zero point are 0
    scale = _op.where(_op.equal(span, zero), scalar(1.0, F32),
                      _op.divide(span, scalar(255.0, F32)))
    zp = saturate(_op.round_half_even(_op.divide(_op.negative(lo), scale)), "uint8")
    # |x / scale| <= 255 (the range holds x), so the rounded quotient converts to int32 exactly
    # and the zero point and clamp run in int32: half the time of the float form
    q = _op.cast(_op.round_half_even(_op.divide(x, scale)), I32)
    y = _op.cast(_op.clip(_op.add(q, _op.cast(zp, I32)), 0.0, 255.0), "uint8")
    return [y, scale, zp]


def _static_nonempty(shape: Any) -> bool:
    return all(isinstance(d, int) and d > 0 for d in shape)


# ---------------------------------------------------------------- integer products
def matmul_integer(node: Node) -> RelayExpr:
    """int32 matmul of the zero-point-shifted operands (per-row a / per-column b zero points
    broadcast along their axis): one nn.contrib_qdense where :func:`_qdense` can make one."""
    fast = _qdense(node)
    if fast is not None:
        return fast
    a = _shifted_operand(node, 0, 2, "A", row=True)
    b = _shifted_operand(node, 1, 3, "B", row=False)
    return matmul_expr(node, a, b)


def _shifted_operand(node: Node, i: int, zp_index: int, what: str, row: bool) -> RelayExpr:
    """A matmul operand minus its zero point: a scalar, or a vector per row of A / per
    column of B."""
    x = node.input(i, what)
    _check_int_type(node, node.dtype(i), what)
    out = _op.cast(x, I32)
    if not node.has_input(zp_index):
        return out
    zp, zt = _op.cast(node.input(zp_index), I32), node.type(zp_index)
    if zt.ndim == 1 and zt.shape[0] != 1:
        zp = _op.expand_dims(zp, -1) if row else zp  # A: one per row (M, 1); B: per column
    elif zt.ndim == 1:
        zp = _op.reshape(zp, ())
    return _op.subtract(out, zp)


def conv_integer(node: Node) -> RelayExpr:
    x = _shifted(node, 0, 2, "x")
    w = _shifted_weight(node, 1, 3)
    return conv_expr(node, x, w, None)


def _shifted_weight(node: Node, i: int, zp_index: int) -> RelayExpr:
    """A conv weight minus its zero point: a scalar, or one per output channel."""
    w = node.input(i, "w")
    _check_int_type(node, node.dtype(i), "w")
    out = _op.cast(w, I32)
    if not node.has_input(zp_index):
        return out
    zp, zt = _op.cast(node.input(zp_index), I32), node.type(zp_index)
    if zt.ndim == 1 and zt.shape[0] != 1:
        zp = expand_to_rank(zp, node.ndim(i), 0)
    elif zt.ndim == 1:
        zp = _op.reshape(zp, ())
    return _op.subtract(out, zp)


def _per_channel(node: Node, i: int, ndim: int, axis: int) -> RelayExpr:
    """Scale input ``i`` as float32: a scalar, or a vector along ``axis`` of the result."""
    s, st = _as_f32(node, i), node.type(i)
    if st.ndim == 1 and st.shape[0] != 1:
        return expand_to_rank(s, ndim, axis)
    return _op.reshape(s, ()) if st.ndim else s


def qlinear_matmul(node: Node) -> RelayExpr:
    """(a - a_zp) @ (b - b_zp) in int32 (nn.contrib_qdense for a constant b), requantized by
    a_scale * b_scale / y_scale."""
    product = _qdense(node, 0, 2, 3, 5)
    if product is None:
        a = _shifted_operand(node, 0, 2, "a", row=True)
        b = _shifted_operand(node, 3, 5, "b", row=False)
        product = matmul_expr(node, a, b)
    acc = _op.cast(product, F32)
    ndim = node.type_of(acc).ndim
    scale = _op.multiply(_per_channel(node, 1, ndim, ndim - 2),
                         _per_channel(node, 4, ndim, ndim - 1))
    y_scale = _per_channel(node, 6, ndim, ndim - 1)
    out = _op.multiply(acc, _op.divide(scale, y_scale))
    dtype = node.dtype(7) if node.has_input(7) else node.dtype(0)
    _check_int_type(node, dtype, "y")
    return _requantize(out, None, node.optional(7), dtype)


def qlinear_conv(node: Node) -> Any:
    """Conv of the zero-point-shifted x and w in int32 (+ the int32 bias B), requantized by
    x_scale * w_scale (per output channel or one) / y_scale: one nn.contrib_qconv2d where
    :func:`_qconv2d` can make one, else the decomposition."""
    fast = _qconv2d(node)
    if fast is not None:
        return fast
    x = _shifted(node, 0, 2, "x")
    w = _shifted_weight(node, 3, 5)
    acc = _op.cast(conv_expr(node, x, w, node.optional(8)), F32)
    ndim = node.type_of(acc).ndim
    scale = _op.multiply(_per_channel(node, 1, ndim, 1), _per_channel(node, 4, ndim, 1))
    out = _op.multiply(acc, _op.divide(scale, _per_channel(node, 6, ndim, 1)))
    dtype = node.dtype(7) if node.has_input(7) else node.dtype(0)
    _check_int_type(node, dtype, "y")
    return _requantize(out, None, node.optional(7), dtype)


# ---------------------------------------------------------------- the int8 kernel's form
def _scalar_or_vector(v: np.ndarray | None, n: int) -> bool:
    return v is None or v.size == 1 and v.ndim <= 1 or v.shape == (n,)


def _qconv2d(node: Node) -> RelayExpr | None:
    """QLinearConv as nn.contrib_qconv2d (the int8 kernel, requantization fused): a 2-D conv
    of u8/s8 data by a constant u8/s8 weight, with constant scales and zero points (one, or
    per output channel for the weight's) and a constant bias. None for anything else (the
    decomposition then also reports any bad input)."""
    from ....topi.nn import qconv as kernel

    if not all(node.has_input(i) for i in (1, 2, 4, 6)) or node.ndim(0) != 4 or \
            node.ndim(3) != 4:
        return None
    types = [node.dtype(0), node.dtype(3)] + [node.dtype(i) for i in (2, 5, 7)
                                              if node.has_input(i)]
    if any(t not in kernel.RANGES for t in types):
        return None
    if node.dtype(2) != node.dtype(0) or (node.has_input(5) and node.dtype(5) != node.dtype(3)):
        return None
    values = {i: node.value(i) for i in (1, 2, 3, 4, 5, 6, 7, 8) if node.has_input(i)}
    if any(v is None for v in values.values()):
        return None
    w = values[3]
    o = w.shape[0]
    c = node.type(0).shape[1]
    groups = node.attr("group", 1)
    if not isinstance(c, int) or not all(isinstance(d, int) for d in node.type(0).shape[2:]):
        return None
    if groups <= 0 or c % groups or o % groups or w.shape[1] != c // groups:
        return None
    scalars = [values[i] for i in (1, 2, 6) if i in values] + [values.get(7)]
    if not all(_scalar_or_vector(v, 1) for v in scalars):
        return None
    if not all(_scalar_or_vector(values.get(i), o) for i in (4, 5, 8)):
        return None
    if any(values[i].dtype != np.float32 for i in (1, 4, 6)):
        return None
    bias = values.get(8)
    if bias is not None and bias.dtype != np.int32:
        return None
    out_dtype = node.dtype(7) if node.has_input(7) else node.dtype(0)
    y_zp = int(values[7].reshape(-1)[0]) if 7 in values else 0
    w_zp = values.get(5, np.zeros((), w.dtype))
    try:
        folded = kernel.fold(w, w_zp, int(values[2].reshape(-1)[0]), node.dtype(0) == "int8",
                             float(values[1].reshape(-1)[0]), values[4],
                             float(values[6].reshape(-1)[0]), bias)
    except OverflowError:
        return None
    kh, kw = w.shape[2:]
    strides, dilations = _ints(node, "strides", 2, 1), _ints(node, "dilations", 2, 1)
    pads = window_pads(node, node.type(0).shape[2:], [kh, kw], strides, dilations)
    if node.has_attr("kernel_shape") and list(node.attr("kernel_shape")) != [kh, kw]:
        return None
    return _op.nn.contrib_qconv2d(
        node.input(0, "x"), node.const(kernel.pack_weight(folded.weight, groups), "int8"),
        node.const(folded.bias, I32), node.const(folded.w_zp, I32),
        node.const(folded.scale, F32), channels=o, kernel_size=(kh, kw),
        strides=tuple(strides), padding=tuple(pads), dilation=tuple(dilations),
        groups=groups, x_zp=folded.x_zp, has_w_zp=folded.has_w_zp, y_zp=y_zp,
        out_dtype=out_dtype)


def _qdense(node: Node, ia: int = 0, ia_zp: int = 2, ib: int = 1,
            ib_zp: int = 3, trans_b: bool = False) -> RelayExpr | None:
    """MatMulInteger (inputs A, B and their zero points at ia, ib, ia_zp, ib_zp; QLinearMatMul
    and QGemm have others) as nn.contrib_qdense (the int8 kernel): u8/s8 A with one zero point
    (a constant or a run-time value) by a constant 2-D B (given as (N, K) when ``trans_b``)
    whose zero-point-shifted values fit int8. None for anything else (the decomposition)."""
    from ....topi.nn import qdense as kernel

    a_type = node.dtype(ia)
    if a_type not in ("uint8", "int8") or node.ndim(ib) != 2 or node.ndim(ia) < 1:
        return None
    b = node.value(ib)
    b_zp = node.value(ib_zp) if node.has_input(ib_zp) else np.zeros((), b.dtype if b is not
                                                                    None else np.int8)
    if b is None or b_zp is None or node.dtype(ib) not in ("uint8", "int8"):
        return None
    b = b.T if trans_b else b
    k, n = b.shape
    if node.type(ia).shape[-1] != k or not _scalar_or_vector(b_zp, n):
        return None
    if node.has_input(ia_zp):
        zt = node.type(ia_zp)
        if node.dtype(ia_zp) != a_type or zt.ndim > 1 or (zt.ndim == 1 and zt.shape[0] != 1):
            return None
        a_zp = node.input(ia_zp)
    else:
        a_zp = node.const(np.zeros((), a_type), a_type)
    shifted = b.astype(np.int64) - np.broadcast_to(b_zp.astype(np.int64).reshape(-1), (n,))
    if shifted.min(initial=0) < -128 or shifted.max(initial=0) > 127:
        return None
    packed, colsum = kernel.pack_weight(np.ascontiguousarray(shifted.T).astype(np.int8))
    return _op.nn.contrib_qdense(node.input(ia, "A"), node.const(packed, "int8"),
                                 node.const(colsum, I32), a_zp, units=n)


# ---------------------------------------------------------------- com.microsoft QLinear ops
# onnxruntime's quantize_static (QOperator format) writes these around the QLinearConvs:
# each is imported as dequantize -> the float op -> quantize (per-tensor scales and zero
# points), within one unit of onnxruntime's integer/table implementations.
def _deq(node: Node, i: int, what: str = "x") -> RelayExpr:
    """Input ``i`` dequantized with the scale and zero point that follow it (i + 1, i + 2)."""
    x = node.input(i, what)
    _check_int_type(node, node.dtype(i), what)
    out = _op.cast(x, F32)
    if node.has_input(i + 2):
        out = _op.subtract(out, _op.cast(_scalar_param(node, i + 2, f"{what}'s zero point"),
                                         F32))
    return _op.multiply(out, _scalar_param(node, i + 1, f"{what}'s scale", F32))


def _scalar_param(node: Node, i: int, what: str, dtype: str | None = None) -> RelayExpr:
    t = node.type(i)
    if t.ndim > 1 or (t.ndim == 1 and t.shape[0] != 1):
        raise node.fail(f"{what} must be a scalar (per-tensor), got shape {tuple(t.shape)}")
    p = node.input(i)
    p = _op.reshape(p, ()) if t.ndim else p
    return p if dtype is None or node.dtype(i) == dtype else _op.cast(p, dtype)


def _quant_out(node: Node, value: RelayExpr, s: int, zp: int, like: int) -> RelayExpr:
    """``value`` (float32) quantized with scale input ``s`` and zero point input ``zp``, to
    the zero point's type (or input ``like``'s)."""
    dtype = node.dtype(zp) if node.has_input(zp) else node.dtype(like)
    _check_int_type(node, dtype, "y")
    zero = _scalar_param(node, zp, "y's zero point") if node.has_input(zp) else None
    return _requantize(value, _scalar_param(node, s, "y's scale", F32), zero, dtype)


def qlinear_binary(fn: Any) -> Any:
    def convert(node: Node) -> RelayExpr:
        value = fn(_deq(node, 0, "A"), _deq(node, 3, "B"))
        return _quant_out(node, value, 6, 7, 0)
    return convert


def qlinear_add(node: Node) -> RelayExpr:
    fused = _qadd(node)
    return fused if fused is not None else qlinear_binary(_op.add)(node)


def _qadd(node: Node) -> RelayExpr | None:
    """QLinearAdd as nn.contrib_qadd (one int8 kernel): u8/s8 operands of one static shape,
    constant per-tensor float32 scales and zero points of the operands' types, a u8/s8
    output. None for anything else (broadcasting adds keep the decomposition)."""
    from ....topi.nn import qadd as kernel

    if not all(node.has_input(i) for i in (1, 4, 6)):
        return None
    a_ty, b_ty = node.type(0), node.type(3)
    if tuple(a_ty.shape) != tuple(b_ty.shape) or \
            not all(isinstance(d, int) for d in a_ty.shape):
        return None
    out_dtype = node.dtype(7) if node.has_input(7) else node.dtype(0)
    zps = {0: 2, 3: 5, None: 7}
    if any(t not in kernel.RANGES for t in (node.dtype(0), node.dtype(3), out_dtype)):
        return None
    values = {i: node.value(i) for i in (1, 2, 4, 5, 6, 7) if node.has_input(i)}
    if any(v is None or v.size != 1 for v in values.values()):
        return None
    if any(values[i].dtype != np.float32 for i in (1, 4, 6)):
        return None
    for x, zp in zps.items():
        want = out_dtype if x is None else node.dtype(x)
        if zp in values and values[zp].dtype != want:
            return None
    ra, rb = kernel.ratios(*(float(values[i].reshape(-1)[0]) for i in (1, 4, 6)))
    if not (np.isfinite(ra) and np.isfinite(rb)):
        return None
    zp = {i: int(values[i].reshape(-1)[0]) if i in values else 0 for i in (2, 5, 7)}
    return _op.nn.contrib_qadd(node.input(0, "A"), node.input(3, "B"), ra=ra, rb=rb,
                               a_zp=zp[2], b_zp=zp[5], y_zp=zp[7], out_dtype=out_dtype)


def qlinear_unary(fn: Any) -> Any:
    def convert(node: Node) -> RelayExpr:
        return _quant_out(node, fn(node, _deq(node, 0, "X")), 3, 4, 0)
    return convert


def _channels_first(node: Node) -> None:
    if node.attr("channels_last", 0):
        raise node.unsupported_attr("channels_last", node.attr("channels_last"), "0")


def _global_average(node: Node, x: RelayExpr) -> RelayExpr:
    _channels_first(node)
    return _op.mean(x, axis=list(range(2, node.ndim(0))), keepdims=True)


def qlinear_global_average(node: Node) -> RelayExpr:
    """The mean over space as onnxruntime takes it: the int32 sum of the values less their
    zero point (exact), times x_scale / size, then quantized. A float mean of the dequantized
    values took 5x onnxruntime's time in mobilenet_v2 (1280 means of 49 values: 19 us, now
    5 us). Spatial sizes unknown: that float mean."""
    spatial = node.type(0).shape[2:]
    if not all(isinstance(d, int) for d in spatial):
        return qlinear_unary(_global_average)(node)
    _channels_first(node)
    size = int(np.prod(spatial, dtype=np.int64))
    total = _op.sum(_shifted(node, 0, 2, "X"), axis=list(range(2, node.ndim(0))),
                    keepdims=True)
    scale = _op.divide(_scalar_param(node, 1, "X's scale", F32), scalar(float(size), F32))
    return _quant_out(node, _op.multiply(_op.cast(total, F32), scale), 3, 4, 0)


def _average_pool(node: Node, x: RelayExpr) -> RelayExpr:
    from .ops_conv import _pool

    _channels_first(node)
    include = bool(node.attr("count_include_pad", 0))
    return _pool(node, _op.nn.avg_pool2d, {"count_include_pad": include}, x)


def _softmax(node: Node, x: RelayExpr) -> RelayExpr:
    return _op.nn.softmax(x, norm_axis(node, node.attr("axis", -1), node.ndim(0)))


def _sigmoid(node: Node, x: RelayExpr) -> RelayExpr:
    return _op.sigmoid(x)


def _leaky_relu(node: Node, x: RelayExpr) -> RelayExpr:
    return _op.nn.leaky_relu(x, float(node.attr("alpha", 0.01)))


def qlinear_concat(node: Node) -> RelayExpr:
    """Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input."""
    count = (len(node.proto.input) - 2) // 3
    if count < 1 or len(node.proto.input) != 2 + 3 * count:
        raise node.fail("takes Y_scale, Y_zero_point, then triples (X, X_scale, X_zero_point)")
    parts = [_deq(node, 2 + 3 * k, f"X{k}") for k in range(count)]
    value = _op.concatenate(parts, norm_axis(node, node.attr("axis"), node.ndim(2)))
    return _quant_out(node, value, 0, 1, 2)


def qgemm(node: Node) -> RelayExpr:
    """alpha * (A - a_zp) @ (B - b_zp) (+ C, int32) * a_scale * b_scale; quantized with
    y_scale / y_zero_point when given, else float32. The product is one nn.contrib_qdense
    for a constant B (as quantize_static writes the classifier of a CNN)."""
    acc = None if node.attr("transA", 0) else _qdense(node, 0, 2, 3, 5,
                                                       trans_b=bool(node.attr("transB", 0)))
    if acc is None:
        a = _shifted_operand(node, 0, 2, "A", row=True)
        b = _shifted_operand(node, 3, 5, "B", row=False) if not node.attr("transB", 0) else \
            _op.transpose(_shifted_weight_rows(node), (1, 0))
        if node.attr("transA", 0):
            a = _op.transpose(a, (1, 0))
        acc = _op.nn.dense(a, _op.transpose(b, (1, 0)))
    if node.has_input(6):
        acc = _op.add(acc, _op.cast(node.input(6), I32))
    scale = _op.multiply(_scalar_param(node, 1, "a_scale", F32),
                         _per_channel(node, 4, 2, 1))
    alpha = float(node.attr("alpha", 1.0))
    if alpha != 1.0:
        scale = _op.multiply(scale, scalar(alpha, F32))
    value = _op.multiply(_op.cast(acc, F32), scale)
    if not node.has_input(7):
        return value
    return _quant_out(node, value, 7, 8, 0)


def _shifted_weight_rows(node: Node) -> RelayExpr:
    """B given as (N, K) (transB): minus its zero point, one per row N."""
    b = node.input(3, "B")
    _check_int_type(node, node.dtype(3), "B")
    out = _op.cast(b, I32)
    if not node.has_input(5):
        return out
    zp, zt = _op.cast(node.input(5), I32), node.type(5)
    if zt.ndim == 1 and zt.shape[0] != 1:
        zp = _op.expand_dims(zp, -1)
    elif zt.ndim == 1:
        zp = _op.reshape(zp, ())
    return _op.subtract(out, zp)


def contrib_table() -> dict[str, Any]:
    """The com.microsoft quantized operators (read into ops_contrib's table)."""
    from ._table import _e

    note = "dequantized, {} in float32, quantized (per-tensor)"
    return {
        "QGemm": _e(qgemm, "int32 product of the zero-point-shifted operands (+ C), scaled; "
                    "quantized when y_scale is given, else float32; a constant B on the int8 "
                    "GEMM (nn.contrib_qdense)"),
        "QLinearAdd": _e(qlinear_add, "one int8 kernel (qadd.h) for operands of one shape "
                         "with constant per-tensor scales and zero points; else "
                         + note.format("added")),
        "QLinearAveragePool": _e(qlinear_unary(_average_pool), note.format("average pool "
                                                                          "(NCHW)")),
        "QLinearConcat": _e(qlinear_concat, note.format("concatenated")),
        "QLinearGlobalAveragePool": _e(qlinear_global_average,
                                       note.format("mean over space (NCHW)")),
        "QLinearLeakyRelu": _e(qlinear_unary(_leaky_relu), note.format("leaky relu")),
        "QLinearMul": _e(qlinear_binary(_op.multiply), note.format("multiplied")),
        "QLinearSigmoid": _e(qlinear_unary(_sigmoid), note.format("sigmoid")),
        "QLinearSoftmax": _e(qlinear_unary(_softmax), note.format("softmax along axis")),
    }


# ---------------------------------------------------------------- QDQ: DQ -> Conv -> Q
# quantize_static's QDQ format writes DequantizeLinear -> Conv [-> Relu] -> QuantizeLinear
# with constant int8 weights and an int32 bias; onnxruntime fuses it into its int8 conv. Each
# DequantizeLinear's result is remembered (per import) with what it dequantized; a
# QuantizeLinear of such a conv becomes nn.contrib_qconv2d where that is exact: the bias was
# quantized with x_scale * w_scale (so its int32 values are the kernel's), scalar activation
# parameters, NCHW 2-D conv. The result is onnxruntime's fused kernel's up to float rounding
# of the requantization scale (x_scale * w_scale / y_scale, computed alike).
class _Dequantized:
    """A DequantizeLinear's input (and its value when constant), type, scale, zero point."""

    __slots__ = ("x", "value", "dtype", "scale", "zp", "axis")

    def __init__(self, x: RelayExpr, value: np.ndarray | None, dtype: str, scale: np.ndarray,
                 zp: np.ndarray, axis: int) -> None:
        self.x, self.value, self.dtype = x, value, dtype
        self.scale, self.zp, self.axis = scale, zp, axis


def _qdq_table(node: Node) -> dict[RelayExpr, _Dequantized]:
    importer = node.scope.importer
    table = getattr(importer, "qdq_dequantized", None)
    if table is None:
        table = importer.qdq_dequantized = {}
    return table


def _call_of(expr: RelayExpr, name: str) -> Any:
    from ....ir.expr import Call

    return expr if isinstance(expr, Call) and getattr(expr.op, "name", "") == name else None


def _qdq_output(node: Node, ranges: dict[str, tuple[int, int]]
                ) -> tuple[dict, str, tuple[int, int], int, np.float32] | None:
    """The QuantizeLinear ``node`` that ends a QDQ pattern, when a float32 value is quantized
    with a constant scalar float32 scale and zero point to a dtype of ``ranges``: the table of
    the pattern's dequantized inputs (``_qdq_table``), the output dtype, its range, the zero
    point and the scale."""
    table = _qdq_table(node)
    if not table or node.dtype(0) != F32:
        return None
    y_scale, y_zp = node.value(1), node.value(2) if node.has_input(2) else np.zeros((), "uint8")
    if y_scale is None or y_zp is None or y_scale.size != 1 or y_zp.size != 1 or \
            node.dtype(1) != F32:
        return None
    out_dtype = _output_type(node, 2)
    if out_dtype not in ranges:
        return None
    return (table, out_dtype, ranges[out_dtype], int(y_zp.reshape(-1)[0]),
            np.float32(y_scale.reshape(-1)[0]))


def _qdq_conv(node: Node) -> RelayExpr | None:
    from ....topi.nn import qconv as kernel

    out = _qdq_output(node, kernel.RANGES)
    if out is None:
        return None
    table, out_dtype, (lo, hi), zy, sy = out
    expr, y_range = node.input(0), (lo, hi)
    relu, clip = _call_of(expr, "nn.relu"), _call_of(expr, "clip")
    if relu is not None:
        expr, y_range = relu.args[0], (max(lo, zy), hi)
    elif clip is not None and clip.attrs.a_min == 0.0 and sy > 0:
        top = int(np.rint(np.float32(clip.attrs.a_max) / sy)) + zy
        expr, y_range = clip.args[0], (max(lo, zy), min(hi, top))
    bias_add = _call_of(expr, "nn.bias_add")
    conv = _call_of(bias_add.args[0] if bias_add is not None else expr, "nn.conv2d")
    if conv is None or (bias_add is not None and bias_add.attrs.axis != 1):
        return None
    a = conv.attrs
    if a.data_layout != "NCHW" or a.kernel_layout != "OIHW" or a.out_dtype not in ("", F32):
        return None
    dx, dw = table.get(conv.args[0]), table.get(conv.args[1])
    db = table.get(bias_add.args[1]) if bias_add is not None else None
    if dx is None or dw is None or dx.value is not None or dw.value is None or \
            dx.dtype not in kernel.RANGES or dw.dtype not in kernel.RANGES or \
            dx.scale.size != 1 or dx.zp.size != 1 or dx.zp.dtype.name != dx.dtype:
        return None
    if (bias_add is not None) and (db is None or db.value is None or db.dtype != I32 or
                                   np.any(db.zp)):
        return None
    w = dw.value
    o = w.shape[0]
    if w.ndim != 4 or (dw.scale.size != 1 and (dw.scale.shape != (o,) or dw.axis != 0)) or \
            dw.zp.size not in (1, o):
        return None
    sx = np.float32(dx.scale.reshape(-1)[0])
    ws = dw.scale.astype(np.float32).reshape(-1)
    if db is not None:  # the bias' scale must be x_scale * w_scale: its values are the kernel's
        if db.value.size != o or not np.array_equal(
                np.broadcast_to(db.scale.astype(np.float32).reshape(-1), (o,)),
                np.broadcast_to(sx * ws, (o,))):
            return None
    c = node.type_of(conv.args[0]).shape[1]
    if not isinstance(c, int) or w.shape[1] * a.groups != c:
        return None
    try:
        folded = kernel.fold(w, dw.zp, int(dx.zp.reshape(-1)[0]), dx.dtype == "int8", sx,
                             dw.scale.astype(np.float32), sy,
                             None if db is None else db.value.reshape(o).astype(np.int32))
    except OverflowError:
        return None
    return _op.nn.contrib_qconv2d(
        dx.x, node.const(kernel.pack_weight(folded.weight, a.groups), "int8"),
        node.const(folded.bias, I32), node.const(folded.w_zp, I32),
        node.const(folded.scale, F32), channels=o, kernel_size=tuple(w.shape[2:]),
        strides=a.strides, padding=a.padding, dilation=a.dilation, groups=a.groups,
        x_zp=folded.x_zp, has_w_zp=folded.has_w_zp, y_zp=zy, out_dtype=out_dtype,
        y_min=y_range[0] if y_range[0] != lo else None,
        y_max=y_range[1] if y_range[1] != hi else None)


def _qdq_add(node: Node) -> RelayExpr | None:
    """QDQ's DequantizeLinear x 2 -> Add [-> Relu] -> QuantizeLinear as nn.contrib_qadd (what
    onnxruntime fuses into QLinearAdd): 8-bit operands of one static shape, each dequantized
    with a constant scalar scale and zero point, a scalar output scale and zero point."""
    from ....topi.nn import qadd as kernel

    out = _qdq_output(node, kernel.RANGES)
    if out is None:
        return None
    table, out_dtype, (lo, hi), zy, sy = out
    expr, y_min = node.input(0), None
    relu = _call_of(expr, "nn.relu")
    if relu is not None:
        expr, y_min = relu.args[0], max(lo, zy)
    add = _call_of(expr, "add")
    if add is None:
        return None
    da, db = (table.get(arg) for arg in add.args)
    for d in (da, db):
        if d is None or d.value is not None or d.dtype not in kernel.RANGES or \
                d.scale.size != 1 or d.zp.size != 1 or d.zp.dtype.name != d.dtype:
            return None
    a_ty, b_ty = node.type_of(da.x), node.type_of(db.x)
    if tuple(a_ty.shape) != tuple(b_ty.shape) or \
            not all(isinstance(d, int) for d in a_ty.shape):
        return None
    ra, rb = kernel.ratios(float(da.scale.reshape(-1)[0]), float(db.scale.reshape(-1)[0]),
                           float(sy))
    if not (np.isfinite(ra) and np.isfinite(rb)):
        return None
    return _op.nn.contrib_qadd(da.x, db.x, ra=ra, rb=rb, a_zp=int(da.zp.reshape(-1)[0]),
                               b_zp=int(db.zp.reshape(-1)[0]), y_zp=zy, out_dtype=out_dtype,
                               y_min=y_min)


def _qdq_dense(node: Node) -> RelayExpr | None:
    """QDQ's DequantizeLinear x 2 -> Gemm or MatMul [+ int32 bias] -> QuantizeLinear (a CNN's
    classifier, which onnxruntime fuses into QGemm) as nn.contrib_qdense and a requantization
    by (x_scale * w_scale) / y_scale: an 8-bit activation with a scalar scale and zero point,
    a constant 2-D 8-bit weight with one scale or one per output column, a bias quantized with
    x_scale * w_scale (so its int32 values add to the product as they are)."""
    from ....topi.nn import qdense as kernel
    from ....topi.nn.qconv import RANGES

    out = _qdq_output(node, RANGES)
    if out is None:
        return None
    table, out_dtype, _, zy, sy = out
    expr, db = node.input(0), None
    add = _call_of(expr, "add")
    if add is not None:
        expr, db = add.args[0], table.get(add.args[1])
        if db is None or db.value is None or db.dtype != I32 or np.any(db.zp):
            return None
    dense = _call_of(expr, "nn.dense")
    if dense is None:
        return None
    dx, w_arg = table.get(dense.args[0]), dense.args[1]
    dw, transposed = table.get(w_arg), False
    if dw is None:  # a (K, N) weight: its transpose into dense's (N, K), folded at import
        dw, transposed = _folded_transpose_of(table, w_arg), True
    if dx is None or dw is None or dx.value is not None or dw.value is None or \
            dx.dtype not in RANGES or dw.dtype not in RANGES or dx.scale.size != 1 or \
            dx.zp.size != 1 or dx.zp.dtype.name != dx.dtype or dw.value.ndim != 2:
        return None
    # the weight as dense's (N, K), its parameters per row N
    w, axis = (dw.value.T, 1) if transposed else (dw.value, 0)
    n = w.shape[0]
    if (dw.scale.size != 1 and (dw.scale.size != n or dw.axis % 2 != axis)) or \
            dw.zp.size not in (1, n):
        return None
    shifted = w.astype(np.int64) - np.broadcast_to(dw.zp.astype(np.int64).reshape(-1), (n,))[
        :, None]
    if shifted.min(initial=0) < -128 or shifted.max(initial=0) > 127:
        return None
    sx = np.float32(dx.scale.reshape(-1)[0])
    ws = np.broadcast_to(dw.scale.astype(np.float32).reshape(-1), (n,))
    if db is not None and (db.value.size != n or not np.array_equal(
            np.broadcast_to(db.scale.astype(np.float32).reshape(-1), (n,)), sx * ws)):
        return None
    packed, colsum = kernel.pack_weight(shifted.astype(np.int8))
    x_zp = node.const(dx.zp.reshape(()), dx.dtype)
    acc = _op.nn.contrib_qdense(dx.x, node.const(packed, "int8"), node.const(colsum, I32),
                                x_zp, units=n)
    if db is not None:
        acc = _op.add(acc, node.const(db.value.reshape(n).astype(np.int32), I32))
    scale = (sx * ws) / sy  # onnxruntime: A_scale * B_scale[n] / Y_scale in float32
    value = _op.multiply(_op.cast(acc, F32), node.const(scale.astype(np.float32), F32))
    return _requantize(value, None, node.const(np.array(zy, out_dtype), out_dtype), out_dtype)


def _folded_transpose_of(table: dict[RelayExpr, _Dequantized], w: RelayExpr
                         ) -> _Dequantized | None:
    """The dequantized constant whose transpose ``w`` is (Gemm without transB and MatMul give
    nn.dense a transposed weight, which the import folds into a new constant)."""
    from ....ir.expr import Constant

    if not isinstance(w, Constant) or len(w.data.shape) != 2:
        return None
    data = w.data.numpy()
    for expr, d in table.items():
        if isinstance(expr, Constant) and d.value is not None and d.value.ndim == 2 and \
                d.value.shape == data.shape[::-1] and np.array_equal(expr.data.numpy().T, data):
            return d
    return None

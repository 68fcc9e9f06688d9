"""Relay operator -> ONNX nodes, one small function per operator (see ``onnx_export``).

Each translation gets the Exporter, the typed Call and its arguments' ONNX values (names, or
lists of names for tuples) and returns the call's value. Layout-carrying ops accept any layout
of the letters N, C, H, W (O, I, H, W for kernels) by transposing to ONNX's NCHW / OIHW and
back; ONNX Runtime folds the transposes of initializers.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ...ir.expr import Call
from ...runtime.errors import OpNotImplemented
from .onnx_export import Exporter, onnx_dtype

Translation = Callable[[Exporter, Call, list[Any]], Any]
_TABLE: dict[str, Translation] = {}

_UNARY = {"nn.relu": "Relu", "tanh": "Tanh", "sigmoid": "Sigmoid", "exp": "Exp", "log": "Log",
          "sqrt": "Sqrt", "erf": "Erf", "abs": "Abs", "negative": "Neg", "floor": "Floor",
          "ceil": "Ceil", "sin": "Sin", "cos": "Cos", "copy": "Identity"}
_BINARY = {"add": "Add", "subtract": "Sub", "multiply": "Mul", "divide": "Div",
           "power": "Pow", "maximum": "Max", "minimum": "Min"}


def translate(ex: Exporter, call: Call, args: list[Any], index: int) -> Any:
    """The ONNX value of ``call`` (the ``index``-th call of main, for error messages)."""
    name = call.op.name
    if name in _UNARY:
        return ex.node(_UNARY[name], args)
    if name in _BINARY:
        return ex.node(_BINARY[name], args)
    rule = _TABLE.get(name)
    if rule is None:
        raise OpNotImplemented(f"onnx export: operator {name!r} (call {index} of main) has no "
                               "ONNX translation")
    try:
        return rule(ex, call, args)
    except OpNotImplemented as err:
        raise OpNotImplemented(f"{err} (call {index} of main)") from None


def rule(*names: str) -> Callable[[Translation], Translation]:
    def register(fn: Translation) -> Translation:
        for n in names:
            _TABLE[n] = fn
        return fn

    return register


def _refuse(call: Call, what: str) -> OpNotImplemented:
    return OpNotImplemented(f"onnx export: {call.op.name}: {what} is not supported")


def _shape(expr: Any) -> list[int]:
    dims = expr.checked_type.shape
    if not all(isinstance(d, int) for d in dims):
        raise OpNotImplemented(f"onnx export: dynamic shape {tuple(map(str, dims))} is not "
                               "supported")
    return list(dims)


def _transposed(ex: Exporter, value: str, src: str, dst: str) -> str:
    """``value`` with its axes reordered from layout ``src`` to ``dst`` (same letters)."""
    return value if src == dst else ex.node("Transpose", [value],
                                            perm=[src.index(a) for a in dst])


def _check_dtype(call: Call, out_dtype: str) -> None:
    if out_dtype and out_dtype != call.args[0].checked_type.dtype:
        raise _refuse(call, f"out_dtype {out_dtype!r} different from the input's")


def _window(attrs: Any) -> dict[str, Any]:
    pt, pl, pb, pr = attrs.padding
    return {"strides": list(attrs.strides), "pads": [pt, pl, pb, pr],
            "dilations": list(attrs.dilation)}


# ---------------------------------------------------------------- convolution, dense
@rule("nn.conv2d")
def _conv2d(ex: Exporter, call: Call, args: list[Any]) -> Any:
    a = call.attrs
    _check_dtype(call, a.out_dtype)
    if a.out_layout not in ("", a.data_layout):
        raise _refuse(call, f"out_layout {a.out_layout!r}")
    data = _transposed(ex, args[0], a.data_layout, "NCHW")
    weight = _transposed(ex, args[1], a.kernel_layout, "OIHW")
    kernel = [_shape(call.args[1])[a.kernel_layout.index(c)] for c in "HW"]
    out = ex.node("Conv", [data, weight], group=a.groups, kernel_shape=kernel, **_window(a))
    return _transposed(ex, out, "NCHW", a.data_layout)


@rule("nn.conv2d_transpose")
def _conv2d_transpose(ex: Exporter, call: Call, args: list[Any]) -> Any:
    a = call.attrs
    _check_dtype(call, a.out_dtype)
    if a.out_layout not in ("", a.data_layout):
        raise _refuse(call, f"out_layout {a.out_layout!r}")
    data = _transposed(ex, args[0], a.data_layout, "NCHW")
    # Relay's IOHW (in, out / groups, h, w) is ONNX ConvTranspose's weight layout.
    weight = _transposed(ex, args[1], a.kernel_layout, "IOHW")
    kernel = [_shape(call.args[1])[a.kernel_layout.index(c)] for c in "HW"]
    out = ex.node("ConvTranspose", [data, weight], group=a.groups, kernel_shape=kernel,
                  output_padding=list(a.output_padding), **_window(a))
    return _transposed(ex, out, "NCHW", a.data_layout)


@rule("nn.dense")
def _dense(ex: Exporter, call: Call, args: list[Any]) -> Any:
    _check_dtype(call, call.attrs.out_dtype)
    if len(_shape(call.args[0])) == 2:
        return ex.node("Gemm", args, transB=1)
    return ex.node("MatMul", [args[0], ex.node("Transpose", [args[1]], perm=[1, 0])])


def _swap_last(ex: Exporter, value: str, rank: int) -> str:
    return ex.node("Transpose", [value], perm=[*range(rank - 2), rank - 1, rank - 2])


@rule("nn.matmul", "nn.batch_matmul")
def _matmul(ex: Exporter, call: Call, args: list[Any]) -> Any:
    a = call.attrs
    _check_dtype(call, a.out_dtype)
    x = _swap_last(ex, args[0], len(_shape(call.args[0]))) if a.transpose_a else args[0]
    y = _swap_last(ex, args[1], len(_shape(call.args[1]))) if a.transpose_b else args[1]
    return ex.node("MatMul", [x, y])


@rule("nn.bias_add")
def _bias_add(ex: Exporter, call: Call, args: list[Any]) -> Any:
    rank = len(_shape(call.args[0]))
    axis = call.attrs.axis % rank
    conv = _conv_taking_bias(ex, call, args[0], axis)
    if conv is not None:
        conv.input.append(args[1])
        return args[0]
    bias = args[1]
    if axis != rank - 1:  # (C,) -> (C, 1, ..., 1) to broadcast along ``axis``
        tail = [_shape(call.args[1])[0]] + [1] * (rank - 1 - axis)
        bias = ex.node("Reshape", [bias, ex.const(tail, "shape", "int64")])
    return ex.node("Add", [args[0], bias])


def _conv_taking_bias(ex: Exporter, call: Call, value: Any, axis: int) -> Any:
    """The Conv/ConvTranspose node (NCHW, no bias yet) whose only reader is ``call``, which
    adds a bias along its channels; else None."""
    src = call.args[0]
    if axis != 1 or not isinstance(src, Call) or ex.uses.get(src) != 1 or not isinstance(
            value, str) or getattr(src.op, "name", "") not in ("nn.conv2d", "nn.conv2d_transpose"):
        return None
    node = ex.producer(value)
    if node is None or node.op_type not in ("Conv", "ConvTranspose") or len(node.input) != 2:
        return None
    return node


# ---------------------------------------------------------------- normalisation
def _channel_first(rank: int, axis: int) -> list[int]:
    """A permutation moving ``axis`` to position 1."""
    rest = [i for i in range(rank) if i != axis]
    return [rest[0], axis, *rest[1:]] if rank > 1 else [0]


@rule("nn.batch_norm")
def _batch_norm(ex: Exporter, call: Call, args: list[Any]) -> Any:
    a, shape = call.attrs, _shape(call.args[0])
    rank, dtype = len(shape), call.args[0].checked_type.dtype
    axis = a.axis % rank
    c = shape[axis]
    gamma = args[1] if a.scale else ex.const([1.0] * c, "ones", dtype)
    beta = args[2] if a.center else ex.const([0.0] * c, "zeros", dtype)
    perm = _channel_first(rank, axis)
    data = args[0] if axis == 1 else ex.node("Transpose", [args[0]], perm=perm)
    out = ex.node("BatchNormalization", [data, gamma, beta, args[3], args[4]],
                  epsilon=float(a.epsilon))
    if axis != 1:
        out = ex.node("Transpose", [out], perm=[perm.index(i) for i in range(rank)])
    return [out, None, None]  # the running statistics are not outputs at inference


@rule("nn.layer_norm")
def _layer_norm(ex: Exporter, call: Call, args: list[Any]) -> Any:
    a, shape = call.attrs, _shape(call.args[0])
    rank, dtype = len(shape), call.args[0].checked_type.dtype
    axis = a.axis % rank
    gamma = args[1] if a.scale else ex.const([1.0] * shape[axis], "ones", dtype)
    beta = args[2] if a.center else ex.const([0.0] * shape[axis], "zeros", dtype)
    perm = [i for i in range(rank) if i != axis] + [axis]
    data = args[0] if axis == rank - 1 else ex.node("Transpose", [args[0]], perm=perm)
    if ex.opset >= 17:
        out = ex.node("LayerNormalization", [data, gamma, beta], axis=-1,
                      epsilon=float(a.epsilon))
    else:
        out = _layer_norm_decomposed(ex, data, gamma, beta, float(a.epsilon), dtype)
    if axis != rank - 1:
        out = ex.node("Transpose", [out], perm=[perm.index(i) for i in range(rank)])
    return out


def _layer_norm_decomposed(ex: Exporter, x: str, gamma: str, beta: str, eps: float,
                           dtype: str) -> str:
    """(x - mean) / sqrt(var + eps) * gamma + beta over the last axis (opset < 17)."""
    mean = ex.node("ReduceMean", [x], axes=[-1], keepdims=1)
    centered = ex.node("Sub", [x, mean])
    var = ex.node("ReduceMean", [ex.node("Mul", [centered, centered])], axes=[-1], keepdims=1)
    std = ex.node("Sqrt", [ex.node("Add", [var, ex.const(eps, "eps", dtype)])])
    return ex.node("Add", [ex.node("Mul", [ex.node("Div", [centered, std]), gamma]), beta])


# ---------------------------------------------------------------- activations
@rule("clip")
def _clip(ex: Exporter, call: Call, args: list[Any]) -> Any:
    dtype = call.args[0].checked_type.dtype
    lo = ex.const(call.attrs.a_min, "clip_min", dtype)
    hi = ex.const(call.attrs.a_max, "clip_max", dtype)
    return ex.node("Clip", [args[0], lo, hi])


@rule("nn.softmax", "nn.log_softmax")
def _softmax(ex: Exporter, call: Call, args: list[Any]) -> Any:
    op_type = "Softmax" if call.op.name == "nn.softmax" else "LogSoftmax"
    return ex.node(op_type, args, axis=call.attrs.axis)


@rule("nn.leaky_relu")
def _leaky_relu(ex: Exporter, call: Call, args: list[Any]) -> Any:
    return ex.node("LeakyRelu", args, alpha=float(call.attrs.alpha))


@rule("rsqrt")
def _rsqrt(ex: Exporter, call: Call, args: list[Any]) -> Any:
    return ex.node("Reciprocal", [ex.node("Sqrt", args)])


@rule("nn.silu")
def _silu(ex: Exporter, call: Call, args: list[Any]) -> Any:
    return ex.node("Mul", [args[0], ex.node("Sigmoid", args)])


@rule("nn.hardsigmoid")
def _hardsigmoid(ex: Exporter, call: Call, args: list[Any]) -> Any:
    return ex.node("HardSigmoid", args, alpha=call.attrs.alpha, beta=call.attrs.beta)


@rule("nn.hardswish")
def _hardswish(ex: Exporter, call: Call, args: list[Any]) -> Any:
    if ex.opset >= 14:
        return ex.node("HardSwish", args)
    return ex.node("Mul", [args[0], ex.node("HardSigmoid", args, alpha=1 / 6, beta=0.5)])


@rule("nn.mish")
def _mish(ex: Exporter, call: Call, args: list[Any]) -> Any:
    if ex.opset >= 18:
        return ex.node("Mish", args)
    return ex.node("Mul", [args[0], ex.node("Tanh", [ex.node("Softplus", args)])])


@rule("nn.gelu")
def _gelu(ex: Exporter, call: Call, args: list[Any]) -> Any:
    approximate = call.attrs.approximate
    if ex.opset >= 20:
        return ex.node("Gelu", args, approximate=approximate)
    dtype, x = call.args[0].checked_type.dtype, args[0]
    if approximate == "none":
        cdf = ex.node("Erf", [ex.node("Div", [x, ex.const(math.sqrt(2), "sqrt2", dtype)])])
    else:
        cube = ex.node("Mul", [ex.node("Mul", [x, x]), x])
        poly = ex.node("Add", [x, ex.node("Mul", [cube, ex.const(0.044715, "c", dtype)])])
        cdf = ex.node("Tanh", [ex.node("Mul", [poly, ex.const(math.sqrt(2 / math.pi), "c",
                                                                dtype)])])
    gate = ex.node("Add", [cdf, ex.const(1.0, "one", dtype)])
    return ex.node("Mul", [ex.node("Mul", [x, gate]), ex.const(0.5, "half", dtype)])


@rule("nn.dropout")
def _dropout(ex: Exporter, call: Call, args: list[Any]) -> Any:
    return [ex.node("Dropout", args), None]  # inference: the identity; no mask output


@rule("cast")
def _cast(ex: Exporter, call: Call, args: list[Any]) -> Any:
    return ex.node("Cast", args, to=onnx_dtype(ex.onnx, call.checked_type.dtype))


# ---------------------------------------------------------------- pooling
def _pool_layout(ex: Exporter, call: Call, value: str) -> str:
    return _transposed(ex, value, call.attrs.layout, "NCHW")


@rule("nn.max_pool2d", "nn.avg_pool2d")
def _pool2d(ex: Exporter, call: Call, args: list[Any]) -> Any:
    a = call.attrs
    if a.out_layout not in ("", a.layout):
        raise _refuse(call, f"out_layout {a.out_layout!r}")
    window = dict(_window(a), kernel_shape=list(a.pool_size), ceil_mode=int(a.ceil_mode))
    data = _pool_layout(ex, call, args[0])
    if call.op.name == "nn.max_pool2d":
        out = ex.node("MaxPool", [data], **window)
    else:
        dilations = window.pop("dilations")
        if ex.opset >= 19:
            window["dilations"] = dilations
        elif dilations != [1, 1]:
            raise _refuse(call, f"dilation {tuple(dilations)} below opset 19")
        out = ex.node("AveragePool", [data], count_include_pad=int(a.count_include_pad),
                      **window)
    return _transposed(ex, out, "NCHW", a.layout)


@rule("nn.global_avg_pool2d", "nn.global_max_pool2d")
def _global_pool2d(ex: Exporter, call: Call, args: list[Any]) -> Any:
    op_type = "GlobalAveragePool" if "avg" in call.op.name else "GlobalMaxPool"
    out = ex.node(op_type, [_pool_layout(ex, call, args[0])])
    return _transposed(ex, out, "NCHW", call.attrs.layout)


# ---------------------------------------------------------------- shapes and indexing
@rule("reshape", "reshape_like", "squeeze", "expand_dims", "contrib_reverse_reshape")
def _reshape(ex: Exporter, call: Call, args: list[Any]) -> Any:
    # The inferred output shape says what every special value (0, -1, -2, ...) meant.
    target = ex.const(_shape(call), "shape", "int64")
    return ex.node("Reshape", [args[0], target])


@rule("broadcast_to")
def _broadcast_to(ex: Exporter, call: Call, args: list[Any]) -> Any:
    return ex.node("Expand", [args[0], ex.const(_shape(call), "shape", "int64")])


@rule("broadcast_to_like")
def _broadcast_to_like(ex: Exporter, call: Call, args: list[Any]) -> Any:
    # the like tensor's shape at run time: a symbolic batch stays symbolic in the ONNX model
    return ex.node("Expand", [args[0], ex.node("Shape", [args[1]])])


@rule("nn.batch_flatten")
def _batch_flatten(ex: Exporter, call: Call, args: list[Any]) -> Any:
    return ex.node("Flatten", args, axis=1)


@rule("transpose")
def _transpose(ex: Exporter, call: Call, args: list[Any]) -> Any:
    rank = len(_shape(call.args[0]))
    axes = call.attrs.axes
    perm = list(reversed(range(rank))) if axes is None else [ax % rank for ax in axes]
    return ex.node("Transpose", args, perm=perm)


@rule("concatenate")
def _concatenate(ex: Exporter, call: Call, args: list[Any]) -> Any:
    if not isinstance(args[0], list):
        raise _refuse(call, "a tuple that is not a tuple literal")
    return ex.node("Concat", args[0], axis=call.attrs.axis)


@rule("take")
def _take(ex: Exporter, call: Call, args: list[Any]) -> Any:
    a = call.attrs
    if a.batch_dims != 0:
        raise _refuse(call, f"batch_dims={a.batch_dims}")
    data, axis = args[0], a.axis
    if axis is None:  # over the flattened data
        data, axis = ex.node("Reshape", [data, ex.const([-1], "shape", "int64")]), 0
    return ex.node("Gather", [data, args[1]], axis=axis)


@rule("split")
def _split(ex: Exporter, call: Call, args: list[Any]) -> Any:
    rank = len(_shape(call.args[0]))
    axis = call.attrs.axis % rank
    sizes = [int(f.shape[axis]) for f in call.checked_type.fields]
    outs = ex.node("Split", [args[0], ex.const(sizes, "split", "int64")],
                   num_outputs=len(sizes), axis=axis)
    return outs if isinstance(outs, list) else [outs]


@rule("strided_slice")
def _strided_slice(ex: Exporter, call: Call, args: list[Any]) -> Any:
    a = call.attrs
    if a.slice_mode != "end":
        raise _refuse(call, f"slice_mode {a.slice_mode!r}")
    rank = len(_shape(call.args[0]))
    axes = list(a.axes) if a.axes is not None else list(range(len(a.begin)))
    steps = list(a.strides) if len(a.strides) == len(axes) else [a.strides[0]] * len(axes)
    inputs = [args[0], ex.const(list(a.begin), "starts", "int64"),
              ex.const(list(a.end), "ends", "int64"),
              ex.const([ax % rank for ax in axes], "axes", "int64"),
              ex.const(steps, "steps", "int64")]
    return ex.node("Slice", inputs)


@rule("where")
def _where(ex: Exporter, call: Call, args: list[Any]) -> Any:
    return ex.node("Where", args)


@rule("nn.upsampling")
def _upsampling(ex: Exporter, call: Call, args: list[Any]) -> Any:
    a = call.attrs
    if a.method != "nearest_neighbor":
        raise _refuse(call, f"method {a.method!r}")
    data = _transposed(ex, args[0], a.layout, "NCHW")
    scales = ex.const([1.0, 1.0, a.scale_h, a.scale_w], "scales", "float32")
    out = ex.node("Resize", [data, "", scales], mode="nearest",
                  coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    return _transposed(ex, out, "NCHW", a.layout)


_RESIZE_MODES = {"nearest_neighbor": "nearest", "linear": "linear", "cubic": "cubic"}
_NEAREST_MODES = {"round_prefer_floor": "round_prefer_floor", "round_prefer_ceil":
                  "round_prefer_ceil", "floor": "floor", "ceil": "ceil"}


@rule("image.resize2d")
def _resize2d(ex: Exporter, call: Call, args: list[Any]) -> Any:
    a = call.attrs
    if a.layout != "NCHW":
        raise _refuse(call, f"layout {a.layout!r}")
    extra: dict[str, Any] = {}
    if a.method == "nearest_neighbor":
        if a.rounding_method not in _NEAREST_MODES:
            raise _refuse(call, f"rounding_method {a.rounding_method!r}")
        extra["nearest_mode"] = _NEAREST_MODES[a.rounding_method]
    elif a.method == "cubic":
        extra.update(cubic_coeff_a=float(a.cubic_alpha), exclude_outside=int(a.cubic_exclude))
    n, c = _shape(call.args[0])[:2]
    if a.scales is not None:  # the scales drive the coordinate transform
        inputs = [args[0], "", ex.const([1.0, 1.0, *a.scales], "scales", "float32")]
    else:
        inputs = [args[0], "", "", ex.const([n, c, *a.size], "sizes", "int64")]
    return ex.node("Resize", inputs, mode=_RESIZE_MODES[a.method],
                   coordinate_transformation_mode=a.coordinate_transformation_mode, **extra)


_REDUCE = {"mean": "ReduceMean", "sum": "ReduceSum", "max": "ReduceMax", "min": "ReduceMin"}


@rule(*_REDUCE)
def _reduce(ex: Exporter, call: Call, args: list[Any]) -> Any:
    a = call.attrs
    rank = len(_shape(call.args[0]))
    axes = list(range(rank)) if a.axis is None else [ax % rank for ax in a.axis]
    if a.exclude:
        axes = [ax for ax in range(rank) if ax not in axes]
    op_type, keep = _REDUCE[call.op.name], int(bool(a.keepdims))
    # ReduceSum takes its axes as an input from opset 13, the others from opset 18
    if op_type == "ReduceSum" or ex.opset >= 18:
        return ex.node(op_type, [args[0], ex.const(axes, "axes", "int64")], keepdims=keep)
    return ex.node(op_type, args, axes=axes, keepdims=keep)

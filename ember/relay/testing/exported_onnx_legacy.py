"""ONNX files the way older converters and other exporters write them (``exported_onnx``'s
kind, its ``_Builder``; random weights; small sizes):

- :func:`tiny_yolov2_head`: the ONNX Model Zoo's tiny-yolov2 (opset 8): ``ImageScaler``,
  Conv without bias, ``BatchNormalization`` (version 7, ``spatial=1``), ``LeakyRelu(0.1)``,
  2x2 MaxPools with the last one stride 1 and ``auto_pad=SAME_UPPER``; a 1x1 head with bias.
- :func:`squeezenet10_block`: squeezenet 1.0 / AlexNet conventions at opset 6: ``LRN``, a
  fire module (``Concat`` of the expand convs), ``Dropout`` with ``is_test``, ``Softmax`` over
  a 4-D map at ``axis=1`` (before version 13: flattened from the axis on), ``Sum``/``Max``/
  ``Mean`` of three inputs, ``Reshape`` to a shape from an initializer, ``Gemm`` with
  ``broadcast=1``, ``Pad`` with its ``pads`` attribute, ``Slice`` with attributes,
  ``Upsample`` with a ``scales`` attribute, ``Flatten(axis=2)``, ``Constant`` with ``value``.
- :func:`tf_mobilenet_block`: a tf2onnx MobileNet block (opset 11 or 13): NHWC input with a
  symbolic batch, ``Transpose`` around every Conv, ``auto_pad`` SAME_UPPER / SAME_LOWER on
  odd sizes with stride 2, BiasAdd as ``Add`` of a (C,) bias in NHWC, FusedBatchNorm as
  ``Mul``/``Add``, Relu6 as ``Clip``, mean over axes 1, 2 (``keepdims=0``), ``Squeeze`` axes
  as attribute (11) or input (13), a classifier head whose reshape comes from
  ``Shape -> Slice -> Concat``, ``Cast`` chains, a ``Greater``/``Where`` mask, ``ArgMax``.
- :func:`tf_resize`: tf2onnx's resizes: ``Resize`` at opset 10 (scales input) and at 11 with
  ``tf_half_pixel_for_nn`` and ``tf_crop_and_resize`` (roi input).
- :func:`paddle_head`: Paddle2ONNX conventions at opset 14: ``HardSwish``, ``HardSigmoid``,
  ``Clip`` with an empty-named min, ``Pad`` mode reflect, ``Resize`` to sizes from
  ``Shape``/``Slice``/``Concat``, ``ArgMax`` with ``select_last_index``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .exported_onnx import _Builder, _i64, _w

__all__ = ["paddle_head", "squeezenet10_block", "tf_mobilenet_block", "tf_resize",
           "tiny_yolov2_head"]

F = 1  # TensorProto.FLOAT


def _input(b: _Builder, name: str, shape: list[Any], elem: int = F) -> Any:
    return b.helper.make_tensor_value_info(name, elem, shape)


def _out(b: _Builder, name: str, rank: int, elem: int = F) -> Any:
    """An output of known rank, sizes left for the importer to infer."""
    return b.helper.make_tensor_value_info(name, elem, [f"{name}_{k}" for k in range(rank)])


def _bn(b: _Builder, rng: np.random.Generator, x: str, c: int, **attrs: Any) -> str:
    stats = [_w(rng, c, scale=0.3) + 1, _w(rng, c, scale=0.1), _w(rng, c, scale=0.1),
             np.abs(_w(rng, c, scale=0.3)) + 0.5]
    return b.node("BatchNormalization", [x, *(b.const(s) for s in stats)], epsilon=1e-5,
                  **attrs)


def tiny_yolov2_head(seed: int = 0, image: int = 32, channels: tuple[int, ...] = (8, 16, 24),
                     anchors: int = 5, classes: int = 3) -> Any:
    """``image`` (1, 3, S, S) -> ``grid`` (1, anchors * (5 + classes), S/4, S/4)."""
    b = _Builder()
    rng = np.random.default_rng(seed)
    x = b.node("ImageScaler", ["image"], scale=1 / 255, bias=[0.1, -0.2, 0.3])
    ci = 3
    for k, co in enumerate(channels):
        x = b.node("Conv", [x, b.const(_w(rng, co, ci, 3, 3, scale=0.3))], kernel_shape=[3, 3],
                   pads=[1, 1, 1, 1])
        x = b.node("LeakyRelu", [_bn(b, rng, x, co, spatial=1)], alpha=0.1)
        last = k == len(channels) - 1
        x = b.node("MaxPool", [x], kernel_shape=[2, 2], strides=[1, 1] if last else [2, 2],
                   **({"auto_pad": "SAME_UPPER"} if last else {}))
        ci = co
    co = anchors * (5 + classes)
    y = b.node("Conv", [x, b.const(_w(rng, co, ci, 1, 1, scale=0.3)), b.const(_w(rng, co))],
               kernel_shape=[1, 1])
    side = image // (2 ** (len(channels) - 1))
    return b.model("tiny_yolov2", [_input(b, "image", [1, 3, image, image])],
                   [b.helper.make_tensor_value_info(y, F, [1, co, side, side])], opset=8)


def squeezenet10_block(seed: int = 0, batch: int = 2, image: int = 12, opset: int = 6) -> Any:
    """``data`` (batch, 3, S, S) -> ``prob`` (softmax over a 4-D map), ``logits``
    (batch, 10) and ``up`` (an upsampled, sliced, padded map)."""
    b = _Builder()
    rng = np.random.default_rng(seed)
    n, const = b.node, b.const
    test = {"is_test": 1} if opset < 7 else {}
    x = n("Conv", ["data", const(_w(rng, 16, 3, 3, 3, scale=0.3)), const(_w(rng, 16))],
          kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    x = n("LRN", [n("Relu", [x])], size=5, alpha=1e-4 * 100, beta=0.75, bias=1.0)
    x = n("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1])
    sq = n("Relu", [n("Conv", [x, const(_w(rng, 4, 16, 1, 1, scale=0.4)), const(_w(rng, 4))],
                      kernel_shape=[1, 1])])
    e1 = n("Relu", [n("Conv", [sq, const(_w(rng, 8, 4, 1, 1, scale=0.5)), const(_w(rng, 8))],
                      kernel_shape=[1, 1])])
    e3 = n("Relu", [n("Conv", [sq, const(_w(rng, 8, 4, 3, 3, scale=0.3)), const(_w(rng, 8))],
                      kernel_shape=[3, 3], pads=[1, 1, 1, 1])])
    fire = n("Concat", [e1, e3], axis=1)
    drop = n("Dropout", [fire], ratio=0.5, **test)
    bn = _bn(b, rng, drop, 16, spatial=1, **test) if opset < 9 else drop
    both = n("Sum", [bn, fire, n("Concat", [fire], axis=1)])
    hi = n("Max", [both, fire, drop])
    mean = n("Mean", [hi, both, fire])
    prob = n("Softmax", [n("Conv", [mean, const(_w(rng, 5, 16, 1, 1, scale=0.3))],
                           kernel_shape=[1, 1])], axis=1)
    shape = const(_i64([batch, -1]))
    flat = n("Reshape", [mean, shape]) if opset >= 5 else n("Reshape", [mean], shape=[batch, -1])
    side = (image + 1) // 2
    flat_width = 16 * side * side
    gemm_attrs = {"broadcast": 1} if opset < 7 else {}
    logits = n("Gemm", [flat, const(_w(rng, 10, flat_width)), const(_w(rng, 10))],
               transB=1, alpha=1.0, beta=1.0, **gemm_attrs)
    scale = n("Constant", [], value=b.numpy_helper.from_array(np.float32(2.0), "scale"))
    logits = n("Mul", [logits, scale], **({"broadcast": 1} if opset < 7 else {}))
    twice = const(np.array([1, 1, 2, 2], "float32"))
    if opset < 7:  # Upsample-1 (height_scale/width_scale) is not written by converters
        up = fire
    elif opset < 9:
        up = n("Upsample", [fire], scales=[1.0, 1.0, 2.0, 2.0], mode="nearest")
    else:
        up = n("Upsample" if opset == 9 else "Resize", [fire, twice], mode="nearest")
    up = n("Slice", [up], starts=[1, 2], ends=[5, 100], axes=[1, 3]) if opset < 10 else up
    up = n("Pad", [up], pads=[0, 0, 1, 0, 0, 0, 0, 2], mode="constant", value=0.5) \
        if opset < 11 else up
    up = n("Flatten", [up], axis=2)
    outs = [_out(b, prob, 4), _out(b, logits, 2), _out(b, up, 2)]
    return b.model("squeezenet10", [_input(b, "data", [batch, 3, image, image])], outs, opset)


def _tf_conv(b: _Builder, rng: np.random.Generator, x: str, ci: int, co: int, k: int,
             stride: int, group: int, pad: str) -> str:
    """An NHWC conv as tf2onnx writes it: Transpose, Conv (no bias), Transpose, then BiasAdd
    as ``Add`` of a (C,) bias and FusedBatchNorm as ``Mul``/``Add``."""
    n, const = b.node, b.const
    w = _w(rng, co, ci // group, k, k, scale=float(np.sqrt(2 / (ci // group * k * k))))
    y = n("Conv", [n("Transpose", [x], perm=[0, 3, 1, 2]), const(w)], kernel_shape=[k, k],
          strides=[stride, stride], group=group, auto_pad=pad, dilations=[1, 1])
    y = n("Add", [n("Transpose", [y], perm=[0, 2, 3, 1]), const(_w(rng, co))])
    return n("Add", [n("Mul", [y, const(_w(rng, co, scale=0.2) + 1)]), const(_w(rng, co))])


def tf_mobilenet_block(seed: int = 0, image: int = 11, opset: int = 13, classes: int = 6,
                       pads: tuple[str, str] = ("SAME_UPPER", "SAME_UPPER")) -> Any:
    """``input`` (N, S, S, 3) NHWC, N symbolic -> ``probs`` (N, classes), ``label`` (N,)
    int64 and ``masked`` (N, classes)."""
    b = _Builder()
    rng = np.random.default_rng(seed)
    n, const = b.node, b.const

    def relu6(v: str) -> str:
        if opset < 11:
            return n("Clip", [v], min=0.0, max=6.0)
        return n("Clip", [v, const(np.float32(0)), const(np.float32(6))])

    x = relu6(_tf_conv(b, rng, "input", 3, 16, 3, 2, 1, pads[0]))
    x = relu6(_tf_conv(b, rng, x, 16, 16, 3, 2, 16, pads[1]))
    x = relu6(_tf_conv(b, rng, x, 16, 24, 1, 1, 1, "VALID"))
    pooled = n("ReduceMean", [x], axes=[1, 2], keepdims=1)
    if opset < 13:
        pooled = n("Squeeze", [pooled], axes=[1, 2])
    else:
        pooled = n("Squeeze", [pooled, const(_i64([1, 2]))])
    batch = n("Slice", [n("Shape", [pooled]), const(_i64([0])), const(_i64([1])),
                        const(_i64([0]))])
    shape = n("Concat", [batch, const(_i64([-1]))], axis=0)
    flat = n("Reshape", [pooled, shape])
    logits = n("Add", [n("MatMul", [flat, const(_w(rng, 24, classes, scale=0.3))]),
                       const(_w(rng, classes))])
    probs = n("Softmax", [logits], axis=-1 if opset >= 13 else 1)
    label = n("Cast", [n("Cast", [n("ArgMax", [probs], axis=-1, keepdims=0)], to=6)], to=7)
    keep = n("Greater", [probs, const(np.float32(1.0 / classes))])
    masked = n("Where", [keep, probs, const(np.float32(0))])
    outs = [b.helper.make_tensor_value_info(probs, F, ["unk__0", classes]),
            b.helper.make_tensor_value_info(label, 7, ["unk__0"]),
            b.helper.make_tensor_value_info(masked, F, ["unk__0", classes])]
    return b.model("tf_mobilenet", [_input(b, "input", ["unk__0", image, image, 3])], outs,
                   opset)


def tf_resize(opset: int = 11, mode: str = "tf_half_pixel_for_nn", image: int = 7) -> Any:
    """``input`` (N, C, S, S), N symbolic -> ``out`` resized to (N, C, 2S-1, 2S+1) (opset 11)
    or 2x (opset 10), nearest (or bilinear for ``tf_crop_and_resize``)."""
    b = _Builder()
    n, const = b.node, b.const
    if opset < 11:
        out = n("Resize", ["input", const(np.array([1, 1, 2, 2], "float32"))], mode="nearest")
    else:
        crop = mode == "tf_crop_and_resize"
        roi = const(np.array([0, 0, 0.1, 0.2, 1, 1, 0.8, 0.9], "float32") if crop
                    else np.zeros(0, "float32"))
        sizes = n("Concat", [n("Slice", [n("Shape", ["input"]), const(_i64([0])),
                                         const(_i64([2]))]),
                             const(_i64([2 * image - 1, 2 * image + 1]))], axis=0)
        out = n("Resize", ["input", roi, const(np.zeros(0, "float32")), sizes],
                mode="linear" if crop else "nearest", coordinate_transformation_mode=mode,
                nearest_mode="round_prefer_ceil", extrapolation_value=-1.0)
    return b.model("tf_resize", [_input(b, "input", ["N", 3, image, image])],
                   [_out(b, out, 4)], opset)


def paddle_head(seed: int = 0, image: int = 9, channels: int = 8) -> Any:
    """``x`` (N, 3, S, S), N, S symbolic -> ``y`` (N, channels, S, S), ``idx`` (N, S, S)."""
    b = _Builder()
    rng = np.random.default_rng(seed)
    n, const = b.node, b.const
    pad = n("Pad", ["x", const(_i64([0, 0, 1, 1, 0, 0, 1, 1]))], mode="reflect")
    y = n("Conv", [pad, const(_w(rng, channels, 3, 3, 3, scale=0.5)), const(_w(rng, channels))],
          kernel_shape=[3, 3])
    y = n("HardSwish", [y])
    g = n("HardSigmoid", [n("GlobalAveragePool", [y])], alpha=0.2, beta=0.5)
    y = n("Clip", [n("Mul", [y, g]), "", const(np.float32(0.3))])
    half = n("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)
    hw = n("Slice", [n("Shape", ["x"]), const(_i64([2])), const(_i64([4])), const(_i64([0]))])
    nc = n("Slice", [n("Shape", [half]), const(_i64([0])), const(_i64([2])), const(_i64([0]))])
    up = n("Resize", [half, "", "", n("Concat", [nc, hw], axis=0)], mode="linear",
           coordinate_transformation_mode="half_pixel")
    out = n("Add", [up, y])
    idx = n("ArgMax", [n("Round", [n("Mul", [out, const(np.float32(4))])])], axis=1, keepdims=0,
            select_last_index=1)
    return b.model("paddle_head", [_input(b, "x", ["N", 3, "H", "W"])],
                   [_out(b, out, 4), _out(b, idx, 3, elem=7)], opset=14)


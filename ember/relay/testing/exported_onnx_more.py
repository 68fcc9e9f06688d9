"""More ONNX models written the way exporters write them (``exported_onnx``'s kind, its
``_Builder``): families whose exports found slow spots the zoo never shows. Random weights,
symbolic dimensions where the exporter puts them:

- :func:`deeplabv3plus`: DeepLabV3+ on a MobileNetV2 backbone at output stride 16, as
  torch.onnx (opset 13) writes the common PyTorch port: batch norms folded, ReLU6 as ``Clip``,
  the last two stages dilated, ASPP (1x1, 3x3 at dilations 6, 12 and 18, an image pooling
  branch: GlobalAveragePool, 1x1, bilinear ``Resize`` back to the map's ``Shape``), the
  decoder's bilinear resizes to the low-level map and to the input (``Shape -> Slice ->
  Concat`` sizes; ``align_corners`` or half-pixel); batch, height and width symbolic.
- :func:`hrnet_small`: an HRNet-W18-small-style pose network (torch.onnx, opset 11):
  parallel branches of 18, 36, 72 and 144 channels (no multiple of 16 for the first two),
  fuse layers of 1x1 convs with nearest 2x/4x/8x ``Resize`` upsampling and chains of
  strided 3x3 convs, summed and relu'd; a 1x1 head to 17 heatmaps; batch, height and width
  symbolic.
- :func:`whisper_encoder`: Whisper-tiny's audio encoder as optimum / torch.onnx (opset 14)
  writes it: two Conv1d + GELU (erf form), sinusoidal positions added, pre-LN layers with
  LayerNorm spelled out (ReduceMean, Sub, Pow, ...), q and k each scaled by head_dim ** -0.25,
  head reshapes whose shapes come from ``Shape -> Gather -> Unsqueeze -> Concat``; attention
  over 1500 frames at full size; batch symbolic.
- :func:`efficientdet`: an EfficientDet-D0-style detector (zylo117's PyTorch port, opset 13):
  a light EfficientNet-like backbone (swish as ``x * Sigmoid(x)``), P6/P7 from TF-SAME max
  pools (explicit ``Pad`` + ``MaxPool``), BiFPN layers with fast normalised fusion
  (``Relu(w) / (ReduceSum(Relu(w)) + eps)``, ``Gather`` per input, left unfolded as exporters
  leave it), depthwise-separable convs, nearest 2x ``Resize``; class and box heads shared
  over the five levels, ``Transpose(0, 2, 3, 1)``, ``Reshape``, ``Concat``; static size.

They need the ``onnx`` package (``pip install ember[onnx]``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .exported_onnx import _Builder, _i64, _w

__all__ = ["deeplabv3plus", "efficientdet", "hrnet_small", "whisper_encoder"]


def _conv(b: _Builder, rng: np.random.Generator, x: str, ci: int, co: int, k: int = 1,
          stride: int = 1, groups: int = 1, dilation: int = 1, bias: bool = True,
          gain: float = 2.0) -> str:
    """A Conv with its batch norm folded (He-scaled random weights, ``gain``)."""
    w = _w(rng, co, ci // groups, k, k, scale=float(np.sqrt(gain / (ci // groups * k * k))))
    ins = [x, b.const(w)] + ([b.const(_w(rng, co, scale=0.01))] if bias else [])
    return b.node("Conv", ins, kernel_shape=[k, k], strides=[stride, stride],
                  pads=[dilation * (k // 2)] * 4, group=groups, dilations=[dilation, dilation])


def _resize_like(b: _Builder, x: str, like: str, align_corners: bool) -> str:
    """``F.interpolate(x, size=like.shape[-2:], mode="bilinear")`` as torch.onnx writes it."""
    n, const = b.node, b.const
    hw = n("Slice", [n("Shape", [like]), const(_i64([2])), const(_i64([4])), const(_i64([0]))])
    nc = n("Slice", [n("Shape", [x]), const(_i64([0])), const(_i64([2])), const(_i64([0]))])
    return n("Resize", [x, "", "", n("Concat", [nc, hw], axis=0)], mode="linear",
             coordinate_transformation_mode="align_corners" if align_corners
             else "pytorch_half_pixel", cubic_coeff_a=-0.75, nearest_mode="floor")


def _nearest_up(b: _Builder, x: str, factor: int) -> str:
    return b.node("Resize", [x, b.const(np.zeros(0, "float32")),
                             b.const(np.array([1, 1, factor, factor], "float32"))],
                  mode="nearest", coordinate_transformation_mode="asymmetric",
                  nearest_mode="floor")


def deeplabv3plus(seed: int = 0, classes: int = 21, align_corners: bool = False,
                  aspp: int = 256) -> Any:
    """DeepLabV3+ (module docstring): ``input`` (N, 3, H, W) -> ``out`` (N, classes, H, W)
    (H and W multiples of 16)."""
    b = _Builder()
    rng = np.random.default_rng(seed)
    n, const = b.node, b.const
    six = (const(np.float32(0)), const(np.float32(6)))

    def conv(x: str, ci: int, co: int, k: int = 1, s: int = 1, g: int = 1, d: int = 1,
             act: str | None = "relu6") -> str:
        y = _conv(b, rng, x, ci, co, k, s, g, d)
        if act == "relu6":
            return n("Clip", [y, *six])
        return n("Relu", [y]) if act == "relu" else y

    def inverted(x: str, ci: int, co: int, t: int, s: int, d: int) -> str:
        h = conv(x, ci, ci * t) if t != 1 else x
        h = conv(conv(h, ci * t, ci * t, 3, s, ci * t, d), ci * t, co, act=None)
        return n("Add", [x, h]) if s == 1 and ci == co else h

    x, ci, low = conv("input", 3, 32, 3, 2), 32, ""
    for t, co, reps, s, d in ((1, 16, 1, 1, 1), (6, 24, 2, 2, 1), (6, 32, 3, 2, 1),
                              (6, 64, 4, 2, 1), (6, 96, 3, 1, 1), (6, 160, 3, 1, 2),
                              (6, 320, 1, 1, 2)):
        for r in range(reps):
            x, ci = inverted(x, ci, co, t, s if r == 0 else 1, d), co
        low = x if co == 24 else low
    branches = [conv(x, 320, aspp, act="relu")]
    branches += [conv(x, 320, aspp, 3, d=r, act="relu") for r in (6, 12, 18)]
    pool = conv(n("GlobalAveragePool", [x]), 320, aspp, act="relu")
    branches.append(_resize_like(b, pool, x, align_corners))
    y = conv(n("Concat", branches, axis=1), 5 * aspp, aspp, act="relu")
    low = conv(low, 24, 48, act="relu")
    y = n("Concat", [low, _resize_like(b, y, low, align_corners)], axis=1)
    y = conv(conv(y, aspp + 48, aspp, 3, act="relu"), aspp, classes, act=None)
    _resize_like(b, y, "input", align_corners)
    b.nodes[-1].output[0] = "out"
    vi, TP = b.helper.make_tensor_value_info, b.TP
    return b.model("deeplabv3plus", [vi("input", TP.FLOAT, ["batch", 3, "height", "width"])],
                   [vi("out", TP.FLOAT, ["batch", classes, "height", "width"])], 13)


def hrnet_small(seed: int = 0, width: int = 18, joints: int = 17,
                modules: tuple[int, ...] = (1, 3, 2), blocks: int = 2) -> Any:
    """The HRNet-style pose network (module docstring): ``input`` (N, 3, H, W) ->
    ``heatmaps`` (N, joints, H / 4, W / 4) (H and W multiples of 32)."""
    b = _Builder()
    rng = np.random.default_rng(seed)
    n = b.node

    def conv(x: str, ci: int, co: int, k: int = 3, s: int = 1, relu: bool = True) -> str:
        y = _conv(b, rng, x, ci, co, k, s, gain=1.0)
        return n("Relu", [y]) if relu else y

    def basic(x: str, c: int) -> str:
        return n("Relu", [n("Add", [conv(conv(x, c, c), c, c, relu=False), x])])

    def bottleneck(x: str, ci: int, c: int) -> str:
        h = conv(conv(conv(x, ci, c, 1), c, c), c, 4 * c, 1, relu=False)
        skip = x if ci == 4 * c else conv(x, ci, 4 * c, 1, relu=False)
        return n("Relu", [n("Add", [h, skip])])

    def fused(xs: list[str], ws: list[int], i: int) -> str:
        """Branch ``i`` of a fuse layer: every branch brought to its resolution, summed."""
        terms = []
        for j, (x, c) in enumerate(zip(xs, ws)):
            if j > i:  # coarser: 1x1 conv, nearest upsampling
                x = _nearest_up(b, conv(x, c, ws[i], 1, relu=False), 2 ** (j - i))
            for k in range(i - j):  # finer: strided 3x3 convs, relu but the last
                last = k == i - j - 1
                x = conv(x, c, ws[i] if last else c, 3, 2, relu=not last)
            terms.append(x)
        total = terms[0]
        for t in terms[1:]:
            total = n("Add", [total, t])
        return n("Relu", [total])

    x = conv(conv("input", 3, 64, 3, 2), 64, 64, 3, 2)
    x = bottleneck(bottleneck(x, 64, 64), 256, 64)
    ws = [width * 2 ** i for i in range(len(modules) + 1)]
    xs = [conv(x, 256, ws[0]), conv(x, 256, ws[1], 3, 2)]
    for stage, count in enumerate(modules):
        for m in range(count):
            for i in range(len(xs)):
                for _ in range(blocks):
                    xs[i] = basic(xs[i], ws[i])
            last = stage == len(modules) - 1 and m == count - 1
            xs = [fused(xs, ws, i) for i in range(1 if last else len(xs))]
        if stage + 1 < len(modules):
            xs.append(conv(xs[-1], ws[stage + 1], ws[stage + 2], 3, 2))
    conv(xs[0], ws[0], joints, 1, relu=False)
    b.nodes[-1].output[0] = "heatmaps"
    vi, TP = b.helper.make_tensor_value_info, b.TP
    return b.model("hrnet_small", [vi("input", TP.FLOAT, ["batch", 3, "height", "width"])],
                   [vi("heatmaps", TP.FLOAT, ["batch", joints, "rows", "cols"])], 11)


def whisper_encoder(seed: int = 0, mels: int = 80, frames: int = 3000, width: int = 384,
                    heads: int = 6, layers: int = 4) -> Any:
    """Whisper's encoder (module docstring): ``input_features`` (N, mels, frames) ->
    ``last_hidden_state`` (N, frames / 2, width)."""
    b = _Builder()
    rng = np.random.default_rng(seed)
    n, const = b.node, b.const
    hd = width // heads

    def f(v: float) -> str:
        return const(np.float32(v))

    def gelu(x: str) -> str:
        e = n("Erf", [n("Div", [x, f(1.4142135381698608)])])
        return n("Mul", [n("Mul", [x, n("Add", [e, f(1.0)])]), f(0.5)])

    def layer_norm(x: str) -> str:
        d = n("Sub", [x, n("ReduceMean", [x], axes=[-1])])
        v = n("ReduceMean", [n("Pow", [d, f(2.0)])], axes=[-1])
        y = n("Div", [d, n("Sqrt", [n("Add", [v, f(1e-5)])])])
        return n("Add", [n("Mul", [y, const(1 + _w(rng, width, scale=0.1))]),
                         const(_w(rng, width, scale=0.1))])

    def linear(x: str, ci: int, co: int, bias: bool = True) -> str:
        y = n("MatMul", [x, const(_w(rng, ci, co, scale=float(ci ** -0.5)))])
        return n("Add", [const(_w(rng, co, scale=0.02)), y]) if bias else y

    def dim(x: str, k: int) -> str:
        return n("Unsqueeze", [n("Gather", [n("Shape", [x]), const(_i64(k))], axis=0),
                               const(_i64([0]))])

    def split_heads(x: str, perm: list[int]) -> str:
        shape = n("Concat", [dim(x, 0), dim(x, 1), const(_i64([heads])), const(_i64([hd]))],
                  axis=0)
        return n("Transpose", [n("Reshape", [x, shape])], perm=perm)

    def attention(x: str) -> str:
        scale = f(hd ** -0.25)
        q = split_heads(n("Mul", [linear(x, width, width), scale]), [0, 2, 1, 3])
        k = split_heads(n("Mul", [linear(x, width, width, bias=False), scale]), [0, 2, 3, 1])
        v = split_heads(linear(x, width, width), [0, 2, 1, 3])
        o = n("MatMul", [n("Softmax", [n("MatMul", [q, k])], axis=-1), v])
        o = n("Transpose", [o], perm=[0, 2, 1, 3])
        shape = n("Concat", [dim(x, 0), dim(x, 1), const(_i64([width]))], axis=0)
        return linear(n("Reshape", [o, shape]), width, width)

    def conv1d(x: str, ci: int, co: int, stride: int) -> str:
        w = _w(rng, co, ci, 3, scale=float((ci * 3) ** -0.5))
        return gelu(n("Conv", [x, const(w), const(_w(rng, co, scale=0.02))], kernel_shape=[3],
                          strides=[stride], pads=[1, 1], dilations=[1], group=1))

    x = conv1d(conv1d("input_features", mels, width, 1), width, width, 2)
    x = n("Transpose", [x], perm=[0, 2, 1])
    t = frames // 2
    inv = np.exp(-np.log(10000) / (width // 2 - 1) * np.arange(width // 2))
    angle = np.arange(t)[:, None] * inv[None]
    x = n("Add", [x, const(np.concatenate([np.sin(angle), np.cos(angle)], 1)
                           .astype("float32"))])
    for _ in range(layers):
        x = n("Add", [x, attention(layer_norm(x))])
        x = n("Add", [x, linear(gelu(linear(layer_norm(x), width, 4 * width)), 4 * width,
                                width)])
    layer_norm(x)
    b.nodes[-1].output[0] = "last_hidden_state"
    vi, TP = b.helper.make_tensor_value_info, b.TP
    return b.model("whisper_encoder",
                   [vi("input_features", TP.FLOAT, ["batch", mels, frames])],
                   [vi("last_hidden_state", TP.FLOAT, ["batch", t, width])], 14)


def efficientdet(seed: int = 0, image: int = 512, width: int = 64, layers: int = 3,
                 classes: int = 90, anchors: int = 9, head_depth: int = 3) -> Any:
    """The EfficientDet-style detector (module docstring): ``input`` (1, 3, image, image) ->
    ``scores`` (1, boxes, classes) after a sigmoid and ``boxes`` (1, boxes, 4)."""
    b = _Builder()
    rng = np.random.default_rng(seed)
    n, const = b.node, b.const

    def swish(x: str) -> str:
        return n("Mul", [x, n("Sigmoid", [x])])

    def separable(x: str, c: int) -> str:
        return _conv(b, rng, _conv(b, rng, x, c, c, 3, groups=c, bias=False, gain=1.0), c, c,
                     gain=1.0)

    def down(x: str) -> str:  # MaxPool2dStaticSamePadding(3, 2): TF's SAME as an explicit Pad
        return n("MaxPool", [n("Pad", [x, const(_i64([0, 0, 0, 0, 0, 0, 1, 1]))])],
                 kernel_shape=[3, 3], strides=[2, 2])

    def fuse(xs: list[str]) -> str:
        w = n("Relu", [const(np.ones(len(xs), "float32"))])
        w = n("Div", [w, n("Add", [n("ReduceSum", [w], keepdims=1), const(np.float32(1e-4))])])
        terms = [n("Mul", [n("Gather", [w, const(_i64(i))], axis=0), x])
                 for i, x in enumerate(xs)]
        total = terms[0]
        for t in terms[1:]:
            total = n("Add", [total, t])
        return separable(swish(total), width)

    x, c, feats = swish(_conv(b, rng, "input", 3, 32, 3, 2, gain=1.0)), 32, []
    for co, s, e in ((16, 1, 1), (24, 2, 6), (40, 2, 6), (80, 2, 6), (112, 1, 6), (320, 2, 6)):
        h = swish(_conv(b, rng, x, c, c * e, gain=1.0)) if e > 1 else x
        h = swish(_conv(b, rng, h, c * e, c * e, 3, s, c * e, gain=1.0))
        x, c = _conv(b, rng, h, c * e, co, gain=1.0), co
        if co in (40, 112, 320):
            feats.append((x, co))
    levels = [_conv(b, rng, f, cf, width, gain=1.0) for f, cf in feats]
    levels.append(down(_conv(b, rng, feats[2][0], 320, width, gain=1.0)))
    levels.append(down(levels[-1]))
    for _ in range(layers):
        top = [""] * 4 + [levels[4]]
        for i in (3, 2, 1, 0):  # top-down
            top[i] = fuse([levels[i], _nearest_up(b, top[i + 1], 2)])
        out = [top[0]]
        for i in (1, 2, 3, 4):  # bottom-up
            out.append(fuse([levels[i], top[i], down(out[-1])] if i < 4
                            else [levels[i], down(out[-1])]))
        levels = out
    heads: dict[str, list[str]] = {"scores": [], "boxes": []}
    for name, k in (("scores", classes), ("boxes", 4)):
        shared = [(const(_w(rng, width, 1, 3, 3, scale=0.3)),
                   const(_w(rng, width, width, 1, 1, scale=width ** -0.5)),
                   const(_w(rng, width, scale=0.01))) for _ in range(head_depth)]
        last_dw = const(_w(rng, width, 1, 3, 3, scale=0.3))
        last = (const(_w(rng, anchors * k, width, 1, 1, scale=width ** -0.5)),
                const(np.zeros(anchors * k, "float32")))
        for level in levels:
            h = level
            for dw, pw, bias in shared:
                h = n("Conv", [h, dw], kernel_shape=[3, 3], pads=[1] * 4, group=width)
                h = swish(n("Conv", [h, pw, bias], kernel_shape=[1, 1]))
            h = n("Conv", [h, last_dw], kernel_shape=[3, 3], pads=[1] * 4, group=width)
            h = n("Conv", [h, *last], kernel_shape=[1, 1])
            heads[name].append(n("Reshape", [n("Transpose", [h], perm=[0, 2, 3, 1]),
                                             const(_i64([1, -1, k]))]))
    n("Sigmoid", [n("Concat", heads["scores"], axis=1)])
    b.nodes[-1].output[0] = "scores"
    n("Concat", heads["boxes"], axis=1)
    b.nodes[-1].output[0] = "boxes"
    vi, TP = b.helper.make_tensor_value_info, b.TP
    return b.model("efficientdet", [vi("input", TP.FLOAT, [1, 3, image, image])],
                   [vi("scores", TP.FLOAT, [1, "boxes", classes]),
                    vi("boxes", TP.FLOAT, [1, "boxes", 4])], 13)

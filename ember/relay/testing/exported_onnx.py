"""ONNX models written the way exporters write them, for tests and benchmarks that must see
what users import (the zoo's ONNX twins are cleaner than real exports). Each builder returns an
``onnx.ModelProto`` with random weights and symbolic dimensions where the exporter puts them
(transformers: ``exported_transformers``):

- :func:`paddle_text_detector`: a PaddleOCR-style DB text detector as paddle2onnx writes it
  (opset 11): BatchNormalization kept, hardswish as ``x * HardSigmoid(x, 1/6, 0.5)``, SE blocks
  with ``HardSigmoid(0.2, 0.5)``, an FPN of Resize-11 nearest 2x upsamplings (constant scales),
  a ConvTranspose head and sigmoid; batch, height and width symbolic.
- :func:`vad_lstm`: a Silero-VAD-style voice activity model as torch.onnx writes it (opset 16):
  an STFT as a Conv1d over a fixed cos/sin basis after reflect padding, magnitude, a conv
  encoder, an LSTM whose state comes in (``h``, ``c``) and goes out (``hn``, ``cn``), a 1x1
  conv head, sigmoid and a mean over time; batch and sample count symbolic.
- :func:`blazeface`: MediaPipe's BlazeFace detector as its PyTorch ports export it (opset 13):
  TensorFlow's SAME padding of strided convs as an explicit ``Pad`` before them, BlazeBlocks
  of a depthwise 3x3 and a 1x1 conv plus a skip (max pooled when strided) whose channels a
  ``Pad`` widens (24 -> 28 -> 32 -> 36 -> 42 ...: no multiple of a vector width), Relu;
  classifier and regressor heads transposed to channels-last and concatenated; static
  128x128 input.
- :func:`diffusion_unet`: a diffusion UNet's blocks as torch.onnx writes diffusers' (opset
  14): GroupNorm as ``Reshape(N, G, -1)`` -> InstanceNormalization -> ``Reshape`` back (to
  the ``Shape`` of its input) -> Mul -> Add, SiLU as ``x * Sigmoid(x)``, 3x3 convs, a
  timestep embedding (Gemm, two Unsqueeze) added per channel, self-attention over the H x W
  tokens (Reshape, Transpose, MatMul q/k/v, scaled scores, Softmax), a nearest 2x Resize and
  a skip Concat; batch, height and width symbolic (height and width multiples of 2).
- :func:`shufflenet_v2`: torchvision's ShuffleNetV2 as torch.onnx writes it (opset 13, batch
  norm folded): units that ``Split`` the channels in two, a branch of 1x1, depthwise 3x3 and
  1x1 convs, ``Concat``, and the channel shuffle as ``Reshape(N, 2, C/2, H, W)`` (its shape
  computed from ``Shape``, ``Gather``, ``Div``), ``Transpose(0, 2, 1, 3, 4)``, ``Reshape``
  back; stage widths of 116, 232 and 464 channels (58 and 116 per branch: no multiple of a
  vector width); batch symbolic.
- :func:`yolo_post_nms`: YOLOv8-style post-processing exported with NMS in the graph (opset
  13): preds [batch, 4 + classes, anchors] to corner boxes and class scores,
  NonMaxSuppression, GatherND of the kept boxes and scores.
- :func:`score_threshold`: torchvision-style score thresholding as torch.onnx writes
  ``keep = torch.where(scores > t)[0]; boxes[keep], scores[keep]`` (opset 13): Greater,
  NonZero, Transpose, Squeeze and two Gathers; the box count fixed (as torch.onnx writes it
  without ``dynamic_axes``; ember's NonZero takes only inputs of static shape), the kept
  count depends on the data.

They need the ``onnx`` package (``pip install ember[onnx]``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["blazeface", "diffusion_unet", "paddle_text_detector", "score_threshold",
           "shufflenet_v2", "vad_lstm", "yolo_post_nms"]


def _onnx() -> tuple[Any, Any, Any]:
    from ..frontend.onnx._proto import require_onnx

    onnx = require_onnx()
    return onnx.helper, onnx.numpy_helper, onnx.TensorProto


def _model(graph: Any, opset: int) -> Any:
    helper, _, _ = _onnx()
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8  # what onnxruntime releases of the last years all read
    return model


def _w(rng: np.random.Generator, *shape: int, scale: float = 0.05) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype("float32")


def _i64(v: Any) -> np.ndarray:
    return np.array(v, "int64")


class _Builder:
    """Nodes and initialisers of a graph being written: ``const`` names a constant, ``node``
    adds a node named after its op and returns its output (or outputs)."""

    def __init__(self) -> None:
        self.helper, self.numpy_helper, self.TP = _onnx()
        self.inits: dict[str, np.ndarray] = {}
        self.nodes: list[Any] = []

    def const(self, v: np.ndarray) -> str:
        self.inits[f"c{len(self.inits)}"] = v
        return f"c{len(self.inits) - 1}"

    def node(self, op: str, ins: list[str], outs: int = 1, **attrs: Any) -> Any:
        name = f"{op.lower()}_{len(self.nodes)}"
        out = [f"{name}_{k}" for k in range(outs)] if outs > 1 else [name]
        self.nodes.append(self.helper.make_node(op, ins, out, name=name, **attrs))
        return out if outs > 1 else out[0]

    def model(self, name: str, inputs: list[Any], outputs: list[Any], opset: int) -> Any:
        graph = self.helper.make_graph(
            self.nodes, name, inputs, outputs,
            [self.numpy_helper.from_array(np.asarray(v), k) for k, v in self.inits.items()])
        return _model(graph, opset)


def paddle_text_detector(seed: int = 0, channels: tuple[int, ...] = (16, 24, 40, 96),
                         head: int = 64) -> Any:
    """The DB detector (module docstring), MobileNetV3-style backbone of ``channels``."""
    helper, numpy_helper, TP = _onnx()
    rng = np.random.default_rng(seed)
    inits: dict[str, np.ndarray] = {}
    nodes: list[Any] = []

    def n(op: str, ins: list[str], **attrs: Any) -> str:
        out = f"{op.lower()}_{len(nodes)}"
        nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    def const(v: np.ndarray) -> str:
        name = f"c{len(inits)}"
        inits[name] = np.asarray(v)
        return name

    def bn(x: str, c: int, unit: bool = False) -> str:
        stats = [np.ones(c), np.zeros(c), np.zeros(c), np.ones(c)] if unit else [
            1 + 0.1 * rng.standard_normal(c), 0.1 * rng.standard_normal(c),
            0.1 * rng.standard_normal(c), 1 + 0.1 * rng.random(c)]
        return n("BatchNormalization", [x] + [const(s.astype("float32")) for s in stats],
                 epsilon=1e-5, momentum=0.9)

    def conv(x: str, ci: int, co: int, k: int = 3, s: int = 1, g: int = 1,
             act: str | None = None, norm: bool = True) -> str:
        w = const(_w(rng, co, ci // g, k, k, scale=float(np.sqrt(2 / (ci // g * k * k)))))
        y = n("Conv", [x, w], kernel_shape=[k, k], strides=[s, s], pads=[k // 2] * 4, group=g,
              dilations=[1, 1])
        y = bn(y, co) if norm else y
        if act == "relu":
            y = n("Relu", [y])
        elif act == "hswish":
            y = n("Mul", [y, n("HardSigmoid", [y], alpha=1 / 6, beta=0.5)])
        return y

    def se(x: str, c: int) -> str:
        r = max(c // 4, 8)
        y = n("GlobalAveragePool", [x])
        y = n("Relu", [n("Conv", [y, const(_w(rng, r, c, 1, 1, scale=0.1)),
                                  const(np.zeros(r, "float32"))], kernel_shape=[1, 1])])
        y = n("Conv", [y, const(_w(rng, c, r, 1, 1, scale=0.1)), const(np.zeros(c, "float32"))],
              kernel_shape=[1, 1])
        return n("Mul", [x, n("HardSigmoid", [y], alpha=0.2, beta=0.5)])

    def block(x: str, ci: int, co: int, expand: int, s: int, act: str, use_se: bool) -> str:
        y = conv(conv(x, ci, expand, 1, act=act), expand, expand, 3, s, g=expand, act=act)
        y = conv(se(y, expand) if use_se else y, expand, co, 1)
        return n("Add", [x, y]) if s == 1 and ci == co else y

    def up(x: str) -> str:
        return n("Resize", [x, const(np.zeros(0, "float32")),
                            const(np.array([1, 1, 2, 2], "float32"))], mode="nearest",
                 coordinate_transformation_mode="asymmetric", nearest_mode="floor")

    x, c, feats = conv("x", 3, 16, 3, 2, act="hswish"), 16, []
    for i, co in enumerate(channels):
        act = "hswish" if i > 1 else "relu"
        x = block(x, c, co, c * 4, 2 if i else 1, act, i > 1)
        x = block(x, co, co, co * 3, 1, act, i > 1)
        c = co
        feats.append(x)
    lateral = [conv(f, cf, head, 1, norm=False) for f, cf in zip(feats, channels)]
    top, levels = lateral[-1], [lateral[-1]]
    for lat in reversed(lateral[:-1]):  # top-down: upsample and add
        top = n("Add", [lat, up(top)])
        levels.insert(0, top)
    maps = []
    for i, level in enumerate(levels):
        y = conv(level, head, head // 4, 3, norm=False)
        for _ in range(i):
            y = up(y)
        maps.append(y)
    y = conv(n("Concat", maps, axis=1), head, head // 4, 3, act="relu")
    y = n("ConvTranspose", [y, const(_w(rng, head // 4, head // 4, 2, 2, scale=0.1))],
          kernel_shape=[2, 2], strides=[2, 2])
    y = n("Relu", [bn(y, head // 4, unit=True)])
    y = n("ConvTranspose", [y, const(_w(rng, head // 4, 1, 2, 2, scale=0.1))],
          kernel_shape=[2, 2], strides=[2, 2])
    nodes.append(helper.make_node("Sigmoid", [y], ["maps"], name="maps"))
    dims = ["p2o.DynamicDimension.0", 3, "p2o.DynamicDimension.1", "p2o.DynamicDimension.2"]
    graph = helper.make_graph(
        nodes, "paddle_det", [helper.make_tensor_value_info("x", TP.FLOAT, dims)],
        [helper.make_tensor_value_info("maps", TP.FLOAT, [dims[0], 1, dims[2], dims[3]])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return _model(graph, 11)


def vad_lstm(seed: int = 0, nfft: int = 256, hop: int = 128, hidden: int = 64) -> Any:
    """The voice activity model (module docstring)."""
    helper, numpy_helper, TP = _onnx()
    rng = np.random.default_rng(seed)
    bins = nfft // 2 + 1
    angle = 2 * np.pi * np.arange(bins)[:, None] * np.arange(nfft) / nfft
    window = np.hanning(nfft)
    inits = {"basis": np.concatenate([np.cos(angle) * window, -np.sin(angle) * window])[:, None],
             "ax1": _i64([1]), "two": np.float32(2), "eps": np.float32(1e-9),
             "split": _i64([bins, bins]), "pad": _i64([0, 0, nfft // 2, 0, 0, nfft // 2]),
             "W": _w(rng, 1, 4 * hidden, hidden, scale=0.1),
             "R": _w(rng, 1, 4 * hidden, hidden, scale=0.1),
             "B": np.zeros((1, 8 * hidden), "float32"),
             "wd": _w(rng, 1, hidden, 1, scale=0.1), "bd": np.zeros(1, "float32")}
    inits["basis"] = inits["basis"].astype("float32")
    nodes: list[Any] = []

    def n(op: str, ins: list[str], out: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    n("Unsqueeze", ["input", "ax1"], "x1")
    n("Pad", ["x1", "pad"], "xp", mode="reflect")
    n("Conv", ["xp", "basis"], "spec", strides=[hop], kernel_shape=[nfft])
    nodes.append(helper.make_node("Split", ["spec", "split"], ["re", "im"], name="split", axis=1))
    n("Pow", ["re", "two"], "re2")
    n("Pow", ["im", "two"], "im2")
    n("Sqrt", [n("Add", [n("Add", ["re2", "im2"], "pw"), "eps"], "pwe")], "mag")
    x, ch = "mag", bins
    for i, (co, stride) in enumerate(((64, 1), (64, 2), (64, 2), (hidden, 1))):
        inits[f"w{i}"] = _w(rng, co, ch, 3, scale=float(np.sqrt(2 / (3 * ch))))
        inits[f"b{i}"] = np.zeros(co, "float32")
        x = n("Relu", [n("Conv", [x, f"w{i}", f"b{i}"], f"cv{i}", kernel_shape=[3],
                         strides=[stride], pads=[1, 1])], f"r{i}")
        ch = co
    n("Transpose", [x], "seq", perm=[2, 0, 1])  # (time, batch, channels)
    nodes.append(helper.make_node("LSTM", ["seq", "W", "R", "B", "", "h", "c"],
                                  ["Y", "hn", "cn"], name="lstm", hidden_size=hidden))
    n("Relu", [n("Transpose", [n("Squeeze", ["Y", "ax1"], "Ys")], "Yt", perm=[1, 2, 0])], "Yr")
    n("Sigmoid", [n("Conv", ["Yr", "wd", "bd"], "head", kernel_shape=[1])], "prob")
    nodes.append(helper.make_node("ReduceMean", ["prob"], ["p1"], name="mean", axes=[2],
                                  keepdims=0))
    n("Squeeze", ["p1", "ax1"], "output")
    state = [1, "batch", hidden]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes, "vad", [vi("input", TP.FLOAT, ["batch", "samples"]), vi("h", TP.FLOAT, state),
                       vi("c", TP.FLOAT, state)],
        [vi("output", TP.FLOAT, ["batch"]), vi("hn", TP.FLOAT, state), vi("cn", TP.FLOAT, state)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return _model(graph, 16)


def blazeface(seed: int = 0, image: int = 128) -> Any:
    """The BlazeFace detector (module docstring): ``input`` (1, 3, image, image) -> ``scores``
    (1, anchors, 1) and ``boxes`` (1, anchors, 16)."""
    b = _Builder()
    rng = np.random.default_rng(seed)
    const, n = b.const, b.node

    def pad(x: str, channels: int = 0, bottom_right: int = 0, top_left: int = 0) -> str:
        return n("Pad", [x, const(_i64([0, 0, top_left, top_left, 0, channels,
                                         bottom_right, bottom_right]))])

    def conv(x: str, ci: int, co: int, k: int, stride: int = 1, groups: int = 1,
             same: bool = True) -> str:
        w = _w(rng, co, ci // groups, k, k, scale=float(np.sqrt(2 / (ci // groups * k * k))))
        return n("Conv", [x, const(w), const(_w(rng, co))], kernel_shape=[k, k],
                 strides=[stride, stride], pads=[k // 2 if same else 0] * 4, group=groups)

    def block(x: str, ci: int, co: int, stride: int = 1) -> str:
        if stride == 2:  # SAME for a stride-2 3x3: pad the bottom and right by 2
            h = conv(pad(x, bottom_right=2), ci, ci, 3, 2, ci, same=False)
            x = n("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
        else:
            h = conv(x, ci, ci, 3, 1, ci)
        skip = pad(x, channels=co - ci) if co > ci else x
        return n("Relu", [n("Add", [conv(h, ci, co, 1), skip])])

    x = n("Relu", [conv(pad("input", bottom_right=2, top_left=1), 3, 24, 5, 2, same=False)])
    for ci, co, stride in ((24, 24, 1), (24, 28, 1), (28, 32, 2), (32, 36, 1), (36, 42, 1),
                           (42, 48, 2), (48, 56, 1), (56, 64, 1), (64, 72, 1), (72, 80, 1),
                           (80, 88, 1)):
        x = block(x, ci, co, stride)
    maps = [(x, 88, 2)]
    x = block(x, 88, 96, 2)
    for _ in range(4):
        x = block(x, 96, 96)
    maps.append((x, 96, 6))
    heads: dict[int, list[str]] = {1: [], 16: []}
    for feature, channels, anchors in maps:
        for width in heads:
            y = n("Transpose", [conv(feature, channels, anchors * width, 1)], perm=[0, 2, 3, 1])
            heads[width].append(n("Reshape", [y, const(_i64([1, -1, width]))]))
    for width, name in ((1, "scores"), (16, "boxes")):
        n("Concat", heads[width], axis=1)
        b.nodes[-1].output[0] = name
    vi, TP = b.helper.make_tensor_value_info, b.TP
    return b.model("blazeface", [vi("input", TP.FLOAT, [1, 3, image, image])],
                   [vi("scores", TP.FLOAT, None), vi("boxes", TP.FLOAT, None)], 13)


def diffusion_unet(seed: int = 0, channels: tuple[int, int] = (64, 128), groups: int = 32,
                   embed: int = 128) -> Any:
    """The diffusion UNet blocks (module docstring): inputs ``sample`` (N, 4, H, W) and
    ``temb`` (N, ``embed``), output ``out`` (N, 4, H, W)."""
    b = _Builder()
    rng = np.random.default_rng(seed)
    const, n = b.const, b.node

    def group_norm(x: str, ch: int) -> str:
        y = n("Reshape", [x, const(_i64([0, groups, -1]))])
        y = n("InstanceNormalization", [y, const(np.ones(groups, "float32")),
                                        const(np.zeros(groups, "float32"))], epsilon=1e-5)
        y = n("Reshape", [y, n("Shape", [x])])
        return n("Add", [n("Mul", [y, const(_w(rng, ch, 1, 1, scale=1.0))]),
                         const(_w(rng, ch, 1, 1))])

    def silu(x: str) -> str:
        return n("Mul", [x, n("Sigmoid", [x])])

    def conv(x: str, ci: int, co: int, k: int = 3, stride: int = 1) -> str:
        return n("Conv", [x, const(_w(rng, co, ci, k, k)), const(_w(rng, co))],
                 kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride, stride])

    def res_block(x: str, ci: int, co: int) -> str:
        h = conv(silu(group_norm(x, ci)), ci, co)
        t = n("Gemm", [silu("temb"), const(_w(rng, co, embed)), const(_w(rng, co))], transB=1)
        h = n("Add", [h, n("Unsqueeze", [n("Unsqueeze", [t, const(_i64([2]))]),
                                          const(_i64([3]))])])
        h = conv(silu(group_norm(h, co)), co, co)
        return n("Add", [x if ci == co else conv(x, ci, co, 1), h])

    def attention(x: str, ch: int) -> str:
        h = group_norm(x, ch)
        h = n("Transpose", [n("Reshape", [h, const(_i64([0, ch, -1]))])], perm=[0, 2, 1])
        q, k, v = (n("Add", [n("MatMul", [h, const(_w(rng, ch, ch))]), const(_w(rng, ch))])
                   for _ in range(3))
        scores = n("Mul", [n("MatMul", [q, n("Transpose", [k], perm=[0, 2, 1])]),
                           const(np.float32(ch ** -0.5))])
        o = n("MatMul", [n("Softmax", [scores], axis=-1), v])
        o = n("Add", [n("MatMul", [o, const(_w(rng, ch, ch))]), const(_w(rng, ch))])
        return n("Add", [x, n("Reshape", [n("Transpose", [o], perm=[0, 2, 1]),
                                          n("Shape", [x])])])

    c0, c1 = channels
    skip = x = res_block(conv("sample", 4, c0), c0, c0)
    x = attention(res_block(conv(x, c0, c0, 3, 2), c0, c1), c1)
    x = n("Resize", [res_block(x, c1, c1), "", const(np.array([1, 1, 2, 2], "float32"))],
          mode="nearest")
    x = res_block(n("Concat", [x, skip], axis=1), c1 + c0, c0)
    conv(silu(group_norm(x, c0)), c0, 4)
    b.nodes[-1].output[0] = "out"
    vi, TP, image = b.helper.make_tensor_value_info, b.TP, ["batch", 4, "height", "width"]
    return b.model("diffusion_unet", [vi("sample", TP.FLOAT, image),
                                      vi("temb", TP.FLOAT, ["batch", embed])],
                   [vi("out", TP.FLOAT, image)], 14)


def shufflenet_v2(seed: int = 0, stages: tuple[int, ...] = (116, 232, 464),
                  repeats: tuple[int, ...] = (4, 8, 4), classes: int = 1000,
                  image: int = 224) -> Any:
    """ShuffleNetV2 (module docstring): ``input`` (N, 3, image, image) -> ``logits``."""
    b = _Builder()
    rng = np.random.default_rng(seed)
    const, n = b.const, b.node

    def conv(x: str, ci: int, co: int, k: int = 1, stride: int = 1, groups: int = 1,
             relu: bool = True) -> str:
        w = _w(rng, co, ci // groups, k, k, scale=float(np.sqrt(2 / (ci // groups * k * k))))
        y = n("Conv", [x, const(w), const(_w(rng, co, scale=0.01))], kernel_shape=[k, k],
              strides=[stride, stride], pads=[k // 2] * 4, group=groups)
        return n("Relu", [y]) if relu else y

    def shuffle(x: str) -> str:
        shape = n("Shape", [x])
        n_, c_, h_, w_ = (n("Unsqueeze", [n("Gather", [shape, const(_i64(k))], axis=0),
                                          const(_i64([0]))]) for k in range(4))
        half = n("Div", [c_, const(_i64([2]))])
        y = n("Reshape", [x, n("Concat", [n_, const(_i64([2])), half, h_, w_], axis=0)])
        y = n("Transpose", [y], perm=[0, 2, 1, 3, 4])
        return n("Reshape", [y, n("Concat", [n_, c_, h_, w_], axis=0)])

    def unit(x: str, ci: int, co: int, stride: int) -> str:
        half = co // 2
        if stride == 1:
            keep, x = n("Split", [x, const(_i64([half, half]))], outs=2, axis=1)
        else:
            keep = conv(conv(x, ci, ci, 3, 2, ci, relu=False), ci, half)
        y = conv(conv(conv(x, ci if stride > 1 else half, half), half, half, 3, stride, half,
                      relu=False), half, half)
        return shuffle(n("Concat", [keep, y], axis=1))

    x = n("MaxPool", [conv("input", 3, 24, 3, 2)], kernel_shape=[3, 3], strides=[2, 2],
          pads=[1, 1, 1, 1])
    ci = 24
    for co, count in zip(stages, repeats):
        for k in range(count):
            x, ci = unit(x, ci, co, 2 if k == 0 else 1), co
    x = n("ReduceMean", [conv(x, ci, 1024)], axes=[2, 3], keepdims=0)
    n("Gemm", [x, const(_w(rng, classes, 1024, scale=0.01)), const(np.zeros(classes, "float32"))],
      transB=1)
    b.nodes[-1].output[0] = "logits"
    vi, TP = b.helper.make_tensor_value_info, b.TP
    return b.model("shufflenet_v2", [vi("input", TP.FLOAT, ["batch", 3, image, image])],
                   [vi("logits", TP.FLOAT, ["batch", classes])], 13)


def yolo_post_nms(classes: int = 8, limit: int = 20, iou: float = 0.5,
                  score: float = 0.3) -> Any:
    """The post-processing graph (module docstring); outputs kept boxes, their scores and the
    selected (batch, class, box) triples."""
    helper, _, TP = _onnx()
    nodes: list[Any] = []
    inits = [helper.make_tensor(name, dtype, [1], [v]) for name, dtype, v in (
        ("s0", TP.INT64, 0), ("s2", TP.INT64, 2), ("s4", TP.INT64, 4), ("end", TP.INT64, 1 << 30),
        ("ax2", TP.INT64, 2), ("limit", TP.INT64, limit), ("half", TP.FLOAT, 0.5),
        ("iou", TP.FLOAT, iou), ("thr", TP.FLOAT, score))]
    inits.append(helper.make_tensor("cols", TP.INT64, [2], [0, 2]))

    def n(op: str, ins: list[str], out: str, **attrs: Any) -> None:
        nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))

    n("Transpose", ["preds"], "pt", perm=[0, 2, 1])
    n("Slice", ["pt", "s0", "s2", "ax2"], "xy")
    n("Slice", ["pt", "s2", "s4", "ax2"], "wh")
    n("Slice", ["pt", "s4", "end", "ax2"], "cls")
    n("Mul", ["wh", "half"], "hw")
    n("Sub", ["xy", "hw"], "p1")
    n("Add", ["xy", "hw"], "p2")
    n("Concat", ["p1", "p2"], "boxes", axis=2)
    n("Transpose", ["cls"], "scores", perm=[0, 2, 1])
    n("NonMaxSuppression", ["boxes", "scores", "limit", "iou", "thr"], "sel")
    n("Gather", ["sel", "cols"], "bi", axis=1)
    n("GatherND", ["boxes", "bi"], "kept")
    n("GatherND", ["scores", "sel"], "kept_scores")
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes, "yolo_post", [vi("preds", TP.FLOAT, ["batch", 4 + classes, "anchors"])],
        [vi("kept", TP.FLOAT, ["kept", 4]), vi("kept_scores", TP.FLOAT, ["kept"]),
         vi("sel", TP.INT64, ["kept", 3])], inits)
    return _model(graph, 13)


def score_threshold(boxes: int = 1000, score: float = 0.5) -> Any:
    """Boxes [boxes, 4] and scores [boxes] to those whose score passes ``score`` (module docstring):
    outputs the kept boxes [kept, 4], their scores [kept] and their indices [kept]."""
    helper, _, TP = _onnx()
    inits = [helper.make_tensor("thr", TP.FLOAT, [], [score]),
             helper.make_tensor("ax1", TP.INT64, [1], [1])]
    nodes = [helper.make_node("Greater", ["scores", "thr"], ["mask"], name="mask"),
             helper.make_node("NonZero", ["mask"], ["nz"], name="nz"),
             helper.make_node("Transpose", ["nz"], ["nzt"], name="nzt", perm=[1, 0]),
             helper.make_node("Squeeze", ["nzt", "ax1"], ["keep"], name="keep"),
             helper.make_node("Gather", ["boxes", "keep"], ["kept"], name="kept", axis=0),
             helper.make_node("Gather", ["scores", "keep"], ["kept_scores"],
                              name="kept_scores", axis=0)]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes, "score_threshold",
        [vi("boxes", TP.FLOAT, [boxes, 4]), vi("scores", TP.FLOAT, [boxes])],
        [vi("kept", TP.FLOAT, ["kept", 4]), vi("kept_scores", TP.FLOAT, ["kept"]),
         vi("keep", TP.INT64, ["kept"])], inits)
    return _model(graph, 13)

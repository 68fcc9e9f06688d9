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

__all__ = ["paddle_text_detector", "score_threshold", "vad_lstm", "yolo_post_nms"]


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

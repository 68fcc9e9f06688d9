"""ONNX models written the way exporters write them, for tests and benchmarks that must see
what users import (the zoo's ONNX twins are cleaner than real exports). Each builder returns an
``onnx.ModelProto`` with random weights and symbolic dimensions where the exporter puts them:

- :func:`gpt2_kv_decoder`: a GPT-2 decoder step with a KV cache as optimum/transformers export
  it (opset 14): ``input_ids`` [batch, seq], ``attention_mask`` [batch, past + seq],
  ``past_key_values.<l>.key/value`` [batch, heads, past, head_dim] in; logits and
  ``present.<l>.key/value`` out. Positions are a Range from the cache's length, the causal mask
  is sliced from a constant tril buffer at run-time starts, the padding mask becomes
  ``(1 - mask) * finfo.min``, LayerNorm and tanh-GELU are spelled out. In generation every step
  is a new signature (the past grows by one). :func:`kv_cache_feeds` makes its inputs.
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

They need the ``onnx`` package (``pip install ember[onnx]``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["gpt2_kv_decoder", "kv_cache_feeds", "paddle_text_detector", "vad_lstm",
           "yolo_post_nms"]


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


def gpt2_kv_decoder(hidden: int = 256, heads: int = 4, layers: int = 2, vocab: int = 1000,
                    max_pos: int = 256, seed: int = 0) -> Any:
    """The decoder step (module docstring: GPT-2 with a KV cache)."""
    helper, numpy_helper, TP = _onnx()
    rng = np.random.default_rng(seed)
    hd = hidden // heads
    inits = {"wte": _w(rng, vocab, hidden), "wpe": _w(rng, max_pos, hidden),
             "bias": np.tril(np.ones((max_pos, max_pos), bool))[None, None],
             "i0": _i64(0), "i1": _i64(1), "i2": _i64(2), "ax0": _i64([0]), "ax2": _i64([2]),
             "ax3": _i64([3]), "ax12": _i64([1, 2]), "zero": _i64([0]),
             "hh": _i64([heads, hd]), "hid": _i64([hidden]),
             "onef": np.float32(1.0), "fmin": np.float32(np.finfo(np.float32).min),
             "sqrt_hd": np.float32(np.sqrt(hd)), "eps": np.float32(1e-5),
             "two": np.float32(2.0), "three": np.float32(3.0), "c044": np.float32(0.044715),
             "s2pi": np.float32(np.sqrt(2 / np.pi)), "half": np.float32(0.5)}
    nodes = []

    def n(op, ins, outs, **attrs):
        nodes.append(helper.make_node(op, ins, outs, name=f"/{outs[0]}", **attrs))

    def chain(x, p, steps):  # (op, other operand or None, output suffix): x op other -> x
        for op, other, out in steps:
            n(op, [x] + ([other] if other else []), [f"{p}_{out}"])
            x = f"{p}_{out}"
        return x

    def ln(x, p):
        inits[f"{p}_g"], inits[f"{p}_b"] = (1 + _w(rng, hidden)), _w(rng, hidden)
        n("ReduceMean", [x], [f"{p}_mu"], axes=[-1])
        d = chain(x, p, [("Sub", f"{p}_mu", "d"), ("Pow", "two", "sq")])
        n("ReduceMean", [d], [f"{p}_var"], axes=[-1])
        sd = chain(f"{p}_var", p, [("Add", "eps", "ve"), ("Sqrt", None, "sd")])
        return chain(f"{p}_d", p, [("Div", sd, "nrm"), ("Mul", f"{p}_g", "sc"),
                                   ("Add", f"{p}_b", "out")])

    def lin(x, p, i, o):  # GPT-2's Conv1D: x @ W + b
        inits[f"{p}_w"], inits[f"{p}_bias"] = _w(rng, i, o), _w(rng, o)
        n("MatMul", [x, f"{p}_w"], [f"{p}_mm"])
        n("Add", [f"{p}_bias", f"{p}_mm"], [f"{p}_y"])
        return f"{p}_y"

    n("Shape", ["input_ids"], ["shp"])
    n("Gather", ["shp", "i0"], ["bat"], axis=0)
    n("Gather", ["shp", "i1"], ["seq"], axis=0)
    n("Shape", ["past_key_values.0.key"], ["pshp"])
    n("Gather", ["pshp", "i2"], ["past"], axis=0)
    n("Add", ["past", "seq"], ["total"])
    n("Range", ["past", "total", "i1"], ["pos"])
    n("Unsqueeze", ["pos", "ax0"], ["pos2"])
    n("Gather", ["wte", "input_ids"], ["te"], axis=0)
    n("Gather", ["wpe", "pos2"], ["pe"], axis=0)
    n("Add", ["te", "pe"], ["h0"])
    n("Unsqueeze", ["attention_mask", "ax12"], ["m4"])  # (1 - mask[:, None, None]) * min
    n("Cast", ["m4"], ["m4f"], to=TP.FLOAT)
    n("Sub", ["onef", "m4f"], ["minv"])
    n("Mul", ["minv", "fmin"], ["mbias"])
    for name in ("total", "past", "bat", "seq"):
        n("Unsqueeze", [name, "ax0"], [f"{name}1"])
    n("Slice", ["bias", "past1", "total1", "ax2"], ["cz"])  # bias[:, :, past:total, :total]
    n("Slice", ["cz", "zero", "total1", "ax3"], ["causal"])
    n("Concat", ["bat1", "seq1", "hh"], ["hshape"], axis=0)
    n("Concat", ["bat1", "seq1", "hid"], ["oshape"], axis=0)
    h, outs = "h0", []
    for layer in range(layers):
        p, key, value = f"l{layer}", f"present.{layer}.key", f"present.{layer}.value"
        qkv = lin(ln(h, f"{p}_ln1"), f"{p}_attn", hidden, 3 * hidden)
        n("Split", [qkv], [f"{p}_q", f"{p}_k", f"{p}_v"], axis=2)
        for t in "qkv":
            n("Reshape", [f"{p}_{t}", "hshape"], [f"{p}_{t}r"])
            n("Transpose", [f"{p}_{t}r"], [f"{p}_{t}t"], perm=[0, 2, 1, 3])
        n("Concat", [f"past_key_values.{layer}.key", f"{p}_kt"], [key], axis=2)
        n("Concat", [f"past_key_values.{layer}.value", f"{p}_vt"], [value], axis=2)
        outs += [key, value]
        n("Transpose", [key], [f"{p}_kT"], perm=[0, 1, 3, 2])
        n("MatMul", [f"{p}_qt", f"{p}_kT"], [f"{p}_s0"])
        n("Div", [f"{p}_s0", "sqrt_hd"], [f"{p}_s1"])
        n("Where", ["causal", f"{p}_s1", "fmin"], [f"{p}_s2"])
        n("Add", [f"{p}_s2", "mbias"], [f"{p}_s3"])
        n("Softmax", [f"{p}_s3"], [f"{p}_pr"], axis=-1)
        n("MatMul", [f"{p}_pr", value], [f"{p}_ctx"])
        n("Transpose", [f"{p}_ctx"], [f"{p}_ctxt"], perm=[0, 2, 1, 3])
        n("Reshape", [f"{p}_ctxt", "oshape"], [f"{p}_ctxr"])
        n("Add", [h, lin(f"{p}_ctxr", f"{p}_proj", hidden, hidden)], [f"{p}_h1"])
        f1 = lin(ln(f"{p}_h1", f"{p}_ln2"), f"{p}_fc", hidden, 4 * hidden)
        inner = chain(f1, p, [("Pow", "three", "c"), ("Mul", "c044", "c2")])
        n("Add", [f1, inner], [f"{p}_c3"])  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        gate = chain(f"{p}_c3", p, [("Mul", "s2pi", "c4"), ("Tanh", None, "c5"),
                                    ("Add", "onef", "c6")])
        gelu = chain(f1, p, [("Mul", "half", "c7"), ("Mul", gate, "gelu")])
        n("Add", [f"{p}_h1", lin(gelu, f"{p}_fc2", 4 * hidden, hidden)], [f"{p}_h2"])
        h = f"{p}_h2"
    inits["lm"] = np.ascontiguousarray(inits["wte"].T)
    n("MatMul", [ln(h, "lnf"), "lm"], ["logits"])
    ins = [helper.make_tensor_value_info("input_ids", TP.INT64, ["batch", "seq"]),
           helper.make_tensor_value_info("attention_mask", TP.INT64, ["batch", "total"])]
    ins += [helper.make_tensor_value_info(f"past_key_values.{layer}.{kv}", TP.FLOAT,
                                          ["batch", heads, "past", hd])
            for layer in range(layers) for kv in ("key", "value")]
    outputs = [helper.make_tensor_value_info("logits", TP.FLOAT, ["batch", "seq", vocab])]
    outputs += [helper.make_tensor_value_info(o, TP.FLOAT, None) for o in outs]
    graph = helper.make_graph(nodes, "gpt2_kv", ins, outputs,
                              [numpy_helper.from_array(np.asarray(v), k)
                               for k, v in inits.items()])
    return _model(graph, 14)


def kv_cache_feeds(model: Any, batch: int, seq: int, past: int, rng: np.random.Generator,
                   pad: int = 0) -> dict[str, np.ndarray]:
    """Inputs of a :func:`gpt2_kv_decoder` step: ``seq`` new tokens after ``past`` cached
    ones; rows after the first have ``pad`` masked (left padding) positions."""
    dims = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input}
    vocab = next(i for i in model.graph.initializer if i.name == "wte").dims[0]
    heads, hd = dims["past_key_values.0.key"][1], dims["past_key_values.0.key"][3]
    feeds = {"input_ids": rng.integers(0, vocab, (batch, seq)).astype("int64"),
             "attention_mask": np.ones((batch, past + seq), "int64")}
    feeds["attention_mask"][1:, :pad] = 0
    for name in dims:
        if name.startswith("past_key_values."):
            feeds[name] = rng.standard_normal((batch, heads, past, hd)).astype("float32")
    return feeds


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

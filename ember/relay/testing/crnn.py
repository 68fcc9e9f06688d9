"""A CRNN-style text recogniser (Shi et al. 2015; PaddleOCR's ``rec`` models: conv backbone,
bidirectional LSTM neck, CTC head), written as an exporter writes it.

- Backbone: 3x3 convs + ReLU (batch norms folded into the conv biases) with strides (2, 2),
  (2, 2), then the asymmetric (2, 1) of text recognisers (the height shrinks, the width, which
  becomes time, keeps a step per 4 pixels); a max pool of (H / 16, 1) leaves a map of height 1.
- Neck: the map's columns as a time-major sequence (T = W / 4, N, C) into one bidirectional
  LSTM layer of ``hidden`` units per direction (ONNX's gate order i, o, f, c; ``W``, ``R`` and
  the two biases per direction), outputs of both directions concatenated (T, N, 2 * hidden).
- Head (CTC): a dense layer to ``num_classes`` (blank included) and a softmax over them, per
  time step: (N, T, num_classes).

The Relay model runs the LSTM as one ``nn.lstm`` (what ember's ONNX importer makes of an
``LSTM`` node: one kernel for the whole sequence); its ONNX twin (``export_onnx`` here, called by ``onnx_twin``) holds the
backbone as ``onnx_export`` writes it and then the one ``LSTM`` node that torch and
paddle2onnx write, with the same weights. Input ``data`` (batch_size, 3, 48, 320) by default,
H a multiple of 16 and W of 4.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ... import relay
from ...ir.expr import Function, RelayExpr
from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from . import layers
from .init import create_workload
from .onnx_export import DEFAULT_OPSET
from .onnx_export import export_onnx as export_dataflow

# (channels, (stride_h, stride_w)) of each 3x3 conv at width 1
BACKBONE = ((32, (2, 2)), (64, (2, 2)), (128, (2, 1)), (128, (1, 1)), (256, (2, 1)),
            (256, (1, 1)))
DIRECTIONS = ("fw", "bw")


def backbone(data: RelayExpr, image_shape: Sequence[int],
             channels: Sequence[int]) -> RelayExpr:
    """The conv stack and the height-collapsing max pool: (N, C, 1, W / 4)."""
    x, height = data, image_shape[1]
    for i, (width, (_, strides)) in enumerate(zip(channels, BACKBONE)):
        conv = layers.conv2d(x, channels=width, kernel_size=(3, 3), strides=strides,
                             padding=(1, 1), name=f"conv{i}")
        x = relay.nn.relu(relay.nn.bias_add(conv, relay.var(f"conv{i}_bias"), axis=1))
        height //= strides[0]
    return relay.nn.max_pool2d(x, pool_size=(height, 1), strides=(height, 1))


def bidirectional_lstm(seq: RelayExpr, inputs: int, hidden: int) -> RelayExpr:
    """One bidirectional LSTM over ``seq`` (T, N, inputs) as one ``nn.lstm`` (one kernel for
    the whole sequence): (T, N, 2 * hidden), the directions' outputs concatenated.

    Weights per direction ``lstm_<d>_W_weight`` (4H, inputs), ``lstm_<d>_R_weight`` (4H, H),
    ``lstm_<d>_Wb_bias`` and ``lstm_<d>_Rb_bias`` (4H,), gates in ONNX's order i, o, f, c; zero
    initial states."""
    shapes = {"W_weight": (4 * hidden, inputs), "R_weight": (4 * hidden, hidden),
              "Wb_bias": (4 * hidden,), "Rb_bias": (4 * hidden,)}
    w = {k: relay.stack([relay.var(f"lstm_{d}_{k}", shape=s, dtype="float32")
                         for d in DIRECTIONS], axis=0) for k, s in shapes.items()}
    out = relay.nn.lstm(seq, w["W_weight"], w["R_weight"], relay.add(w["Wb_bias"], w["Rb_bias"]),
                        hidden_size=hidden, direction="bidirectional")
    y = relay.transpose(out[0], (0, 2, 1, 3))  # (T, N, 2, H)
    return relay.reshape(y, (0, 0, 2 * hidden))


def get_net(batch_size: int = 1, image_shape: tuple[int, int, int] = (3, 48, 320),
            width: float = 1.0, hidden: int = 96, num_classes: int = 97,
            dtype: str = "float32") -> Function:
    """The recogniser Function of ``data`` (batch_size, *image_shape)."""
    if len(image_shape) != 3 or image_shape[1] % 16 or image_shape[2] % 4 or \
            min(image_shape[1:]) < 16:
        raise ValueError(f"crnn: image_shape must be (C, H, W) with H a multiple of 16 and W "
                         f"of 4, got {image_shape}")
    if width <= 0 or min(batch_size, hidden, num_classes) < 1:
        raise ValueError(f"crnn: width, batch_size, hidden and num_classes must be positive, "
                         f"got width={width}, batch_size={batch_size}, hidden={hidden}, "
                         f"num_classes={num_classes}")
    channels = [max(4, int(c * width)) for c, _ in BACKBONE]
    data = relay.var("data", shape=(batch_size, *image_shape), dtype=dtype)
    steps, feats = image_shape[2] // 4, channels[-1]
    seq = relay.transpose(relay.reshape(backbone(data, image_shape, channels),
                                        (batch_size, feats, steps)), (2, 0, 1))
    y = relay.transpose(bidirectional_lstm(seq, feats, hidden), (1, 0, 2))  # (N, T, 2H)
    logits = relay.nn.bias_add(relay.nn.dense(y, relay.var("head_weight"), num_classes),
                               relay.var("head_bias"), axis=-1)
    out = relay.nn.softmax(logits, axis=-1)
    weights = [v for v in relay.analysis.free_vars(out) if v is not data]
    return relay.Function([data, *weights], out)


def get_workload(batch_size: int = 1, image_shape: tuple[int, int, int] = (3, 48, 320),
                 width: float = 1.0, hidden: int = 96, num_classes: int = 97,
                 dtype: str = "float32") -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of the recogniser with He-scaled weights (seed 0)."""
    net = get_net(batch_size, tuple(image_shape), width, hidden, num_classes,  # type: ignore
                  dtype)
    return create_workload(net)


def export_onnx(mod: IRModule, params: Mapping[str, Any], opset: int = DEFAULT_OPSET,
                graph_name: str = "crnn") -> Any:
    """The ONNX twin of a ``get_workload`` model: the backbone as ``onnx_export`` writes it,
    then Reshape/Transpose to (T, N, C), one bidirectional ``LSTM`` node, and the CTC head
    (MatMul, Add, Softmax), all with the weights in ``params``."""
    from .onnx_export import require_onnx, workload_weights

    onnx = require_onnx()
    arrays, weights, shape = workload_weights(mod, params, "crnn", "lstm_fw_R_weight")
    batch, image_shape = shape[0], shape[1:]
    channels = [arrays[f"conv{i}_weight"].shape[0] for i in range(len(BACKBONE))]
    hidden = arrays["lstm_fw_R_weight"].shape[1]
    classes = arrays["head_weight"].shape[0]
    data = relay.var("data", shape=shape, dtype="float32")
    feats = backbone(data, image_shape, channels)
    net = relay.Function(relay.analysis.free_vars(feats), feats)
    model = export_dataflow(IRModule.from_expr(net), arrays, opset, graph_name)
    graph, helper = model.graph, onnx.helper
    steps = image_shape[2] // 4

    def init(name: str, value: np.ndarray) -> str:
        graph.initializer.append(onnx.numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(op: str, inputs: list[str], out: str, **attrs: Any) -> str:
        graph.node.append(helper.make_node(op, inputs, [out], name=f"node_{out}", **attrs))
        return out

    def stacked(kind: str) -> np.ndarray:
        return np.stack([arrays[f"lstm_{d}_{kind}"] for d in DIRECTIONS])

    seq = node("Reshape", [graph.output[0].name, init("seq_shape", np.array(
        [batch, channels[-1], steps], "int64"))], "seq")
    seq = node("Transpose", [seq], "seq_time_major", perm=[2, 0, 1])
    bias = np.concatenate([stacked("Wb_bias"), stacked("Rb_bias")], axis=1)
    lstm = helper.make_node("LSTM", [seq, init("lstm_W", stacked("W_weight")),
                                     init("lstm_R", stacked("R_weight")), init("lstm_B", bias)],
                            ["lstm_Y"], name="node_lstm", hidden_size=int(hidden),
                            direction="bidirectional")
    graph.node.append(lstm)
    y = node("Transpose", ["lstm_Y"], "lstm_Y_t", perm=[2, 0, 1, 3])  # (N, T, 2, H)
    y = node("Reshape", [y, init("y_shape", np.array([batch, steps, 2 * hidden], "int64"))],
             "rnn_out")
    y = node("MatMul", [y, init("head_weight_t", arrays["head_weight"].T)], "head_matmul")
    y = node("Add", [y, init("head_bias", arrays["head_bias"])], "head_logits")
    y = node("Softmax", [y], "probs", axis=-1)
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info(y, onnx.TensorProto.FLOAT,
                                                      [batch, steps, classes]))
    return model

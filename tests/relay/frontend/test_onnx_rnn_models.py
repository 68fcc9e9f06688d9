"""Recurrent models shaped the way torch.onnx exports them, against onnxruntime, through
``ember.compile`` without ``input_shapes`` (symbolic sequence and batch: the VM, with the
recurrence as a loop) and with them (static: unrolled, AOT) at several batch and sequence
lengths:

- a bidirectional LSTM tagger with ``sequence_lens`` (embedding, BiLSTM, per-token scores);
- a CRNN text recogniser: convolutions over a text line, then two stacked bidirectional LSTMs
  over the width axis, initial states made of zeros from the batch size (Shape -> Gather ->
  Concat -> ConstantOfShape, as torch writes an omitted h0/c0);
- a Silero-style voice-activity detector: two one-step LSTM layers whose h/c states are model
  inputs and outputs, run as a stream (each chunk's states fed back).

Tolerance 1e-4 (``SUMS``): these models add matrix products of 16-64 terms to the recurrence.
"""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import SUMS, compare, run_ort
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import ember
from ember.contrib import cc

pytestmark = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def _init(rng: np.random.Generator, name: str, *shape: int, scale: float = 0.5) -> object:
    return numpy_helper.from_array(rng.uniform(-scale, scale, shape).astype("float32"), name)


def _lstm_weights(rng, prefix: str, inputs: int, hidden: int, dirs: int = 2) -> list[object]:
    return [_init(rng, f"{prefix}_W", dirs, 4 * hidden, inputs),
            _init(rng, f"{prefix}_R", dirs, 4 * hidden, hidden),
            _init(rng, f"{prefix}_B", dirs, 8 * hidden)]


def _model(nodes, inputs, outputs, inits, opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)
    return model


def _vi(name, elem=TP.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def _both_directions_to_features(y: str, out: str, tag: str) -> list[object]:
    """Y (seq, 2, batch, hidden) -> (seq, batch, 2 * hidden), as torch writes it."""
    return [helper.make_node("Transpose", [y], [f"{tag}_t"], perm=[0, 2, 1, 3]),
            helper.make_node("Reshape", [f"{tag}_t", "shape_00m1"], [out])]


def _shape_00m1() -> object:
    return numpy_helper.from_array(np.array([0, 0, -1], "int64"), "shape_00m1")


def _check(model, feeds_list, input_shapes, static):
    """Every feed through ember.compile without input_shapes (the VM), or the one feed of
    ``input_shapes`` with them (static: AOT), against onnxruntime."""
    if static:
        compiled = ember.compile(model, input_shapes=input_shapes)
        feeds_list = [f for f in feeds_list
                      if {k: v.shape for k, v in f.items()} == input_shapes]
    else:
        compiled = ember.compile(model)
    assert compiled.executor == ("aot" if static else "vm")
    for feeds in feeds_list:
        sizes = {k: v.shape for k, v in feeds.items()}
        compare(f"{sizes} ({compiled.executor})", _as_list(compiled(**feeds)),
                run_ort(model, feeds), SUMS)


def _as_list(out):
    return out if isinstance(out, list) else [out]


# ---------------------------------------------------------------- BiLSTM tagger
def _tagger(vocab=20, emb=8, hidden=6, tags=5):
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Gather", ["table", "tokens"], ["emb"]),
             helper.make_node("LSTM", ["emb", "l_W", "l_R", "l_B", "lens"], ["y", "", ""],
                              hidden_size=hidden, direction="bidirectional"),
             *_both_directions_to_features("y", "feat", "y"),
             helper.make_node("MatMul", ["feat", "proj"], ["mm"]),
             helper.make_node("Add", ["mm", "proj_b"], ["scores"]),
             helper.make_node("ArgMax", ["scores"], ["tags"], axis=2, keepdims=0)]
    inits = [_init(rng, "table", vocab, emb, scale=1.0),
             *_lstm_weights(rng, "l", emb, hidden), _init(rng, "proj", 2 * hidden, tags),
             _init(rng, "proj_b", tags), _shape_00m1()]
    inputs = [_vi("tokens", TP.INT64, ["seq", "batch"]), _vi("lens", TP.INT32, ["batch"])]
    return _model(nodes, inputs, [_vi("scores"), _vi("tags", TP.INT64)], inits)


@pytest.mark.parametrize("static", [False, True], ids=["vm", "aot"])
def test_bidirectional_lstm_tagger_with_sequence_lens(static):
    model = _tagger()
    rng = np.random.default_rng(1)
    feeds = []
    for seq, batch in [(7, 3), (1, 1), (12, 4)]:
        lens = rng.integers(1, seq + 1, batch).astype("int32")
        lens[0] = seq
        feeds.append({"tokens": rng.integers(0, 20, (seq, batch)).astype("int64"),
                      "lens": lens})
    _check(model, feeds, {"tokens": (7, 3), "lens": (3,)}, static)


# ---------------------------------------------------------------- CRNN text recogniser
def _zeros_state(x: str, name: str, dirs: int, hidden: int) -> list[object]:
    """h0 = zeros(dirs, batch, hidden), batch read from x (seq, batch, features)."""
    return [helper.make_node("Shape", [x], [f"{name}_shape"]),
            helper.make_node("Gather", [f"{name}_shape", "one"], [f"{name}_batch"], axis=0),
            helper.make_node("Unsqueeze", [f"{name}_batch", "zero_axis"], [f"{name}_b1"]),
            helper.make_node("Concat", [f"dirs{dirs}", f"{name}_b1", f"hid{hidden}"],
                             [f"{name}_dims"], axis=0),
            helper.make_node("ConstantOfShape", [f"{name}_dims"], [name])]


def _crnn(hidden=6, classes=7):
    rng = np.random.default_rng(2)
    nodes = [helper.make_node("Conv", ["img", "c1_w", "c1_b"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p1", "c2_w", "c2_b"], ["c2"]),  # height 4 -> 1
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Squeeze", ["r2", "two_axis"], ["sq"]),  # (batch, 8, width)
             helper.make_node("Transpose", ["sq"], ["seq"], perm=[2, 0, 1]),
             *_zeros_state("seq", "h0", 2, hidden), *_zeros_state("seq", "c0", 2, hidden),
             helper.make_node("LSTM", ["seq", "a_W", "a_R", "a_B", "", "h0", "c0"],
                              ["ya", "", ""], hidden_size=hidden, direction="bidirectional"),
             *_both_directions_to_features("ya", "fa", "ya"),
             helper.make_node("LSTM", ["fa", "b_W", "b_R", "b_B", "", "h0", "c0"],
                              ["yb", "", ""], hidden_size=hidden, direction="bidirectional"),
             *_both_directions_to_features("yb", "fb", "yb"),
             helper.make_node("MatMul", ["fb", "cls"], ["logits"]),
             helper.make_node("LogSoftmax", ["logits"], ["logp"], axis=2)]
    ints = {"one": 1, "zero_axis": [0], "two_axis": [2], "dirs2": [2], f"hid{hidden}": [hidden]}
    inits = [_init(rng, "c1_w", 4, 1, 3, 3), _init(rng, "c1_b", 4),
             _init(rng, "c2_w", 8, 4, 4, 1), _init(rng, "c2_b", 8),
             *_lstm_weights(rng, "a", 8, hidden), *_lstm_weights(rng, "b", 2 * hidden, hidden),
             _init(rng, "cls", 2 * hidden, classes), _shape_00m1(),
             *[numpy_helper.from_array(np.array(v, "int64"), k) for k, v in ints.items()]]
    return _model(nodes, [_vi("img", shape=["batch", 1, 8, "width"])], [_vi("logp")], inits)


@pytest.mark.parametrize("static", [False, True], ids=["vm", "aot"])
def test_crnn_recogniser_ends_with_a_bidirectional_lstm_over_the_width(static):
    model = _crnn()
    rng = np.random.default_rng(3)
    feeds = [{"img": rng.uniform(0, 1, (b, 1, 8, w)).astype("float32")}
             for b, w in [(2, 16), (1, 6), (3, 24)]]
    _check(model, feeds, {"img": (2, 1, 8, 16)}, static)


# ---------------------------------------------------------------- Silero-style VAD
def _vad(features=16, hidden=8):
    rng = np.random.default_rng(4)
    nodes = [helper.make_node("MatMul", ["x", "enc"], ["e"]),
             helper.make_node("Relu", ["e"], ["er"]),
             helper.make_node("Unsqueeze", ["er", "zero_axis"], ["step"])]  # (1, batch, h)
    for k in range(2):
        nodes += [helper.make_node("Slice", ["h", f"at{k}", f"at{k + 1}"], [f"h{k}"]),
                  helper.make_node("Slice", ["c", f"at{k}", f"at{k + 1}"], [f"c{k}"]),
                  helper.make_node("LSTM", [["step", "y0s"][k], f"l{k}_W", f"l{k}_R", f"l{k}_B",
                                            "", f"h{k}", f"c{k}"], [f"y{k}", f"hn{k}", f"cn{k}"],
                                   hidden_size=hidden),
                  helper.make_node("Squeeze", [f"y{k}", "one_axis"], [f"y{k}s"])]
    nodes += [helper.make_node("Squeeze", ["y1s", "zero_axis"], ["last"]),
              helper.make_node("MatMul", ["last", "dec"], ["d"]),
              helper.make_node("Sigmoid", ["d"], ["prob"]),
              helper.make_node("Concat", ["hn0", "hn1"], ["hn"], axis=0),
              helper.make_node("Concat", ["cn0", "cn1"], ["cn"], axis=0)]
    ints = {"zero_axis": [0], "one_axis": [1], "at0": [0], "at1": [1], "at2": [2]}
    inits = [_init(rng, "enc", features, hidden), _init(rng, "dec", hidden, 1),
             *[w for k in range(2) for w in _lstm_weights(rng, f"l{k}", hidden, hidden, 1)],
             *[numpy_helper.from_array(np.array(v, "int64"), k) for k, v in ints.items()]]
    state = [2, "batch", hidden]
    inputs = [_vi("x", shape=["batch", features]), _vi("h", shape=state), _vi("c", shape=state)]
    return _model(nodes, inputs, [_vi("prob"), _vi("hn"), _vi("cn")], inits)


@pytest.mark.parametrize("static", [False, True], ids=["vm", "aot"])
def test_silero_style_vad_streams_its_states(static):
    model = _vad()
    rng = np.random.default_rng(5)
    shapes = {"x": (1, 16), "h": (2, 1, 8), "c": (2, 1, 8)}
    compiled = ember.compile(model, input_shapes=shapes if static else None)
    for batch in ([1] if static else [3, 1]):
        h = c = np.zeros((2, batch, 8), "float32")
        ref_h, ref_c = h, c
        for chunk in range(4):  # each chunk's states are the next one's inputs
            x = rng.uniform(-1, 1, (batch, 16)).astype("float32")
            prob, h, c = compiled(x=x, h=h, c=c)
            want = run_ort(model, {"x": x, "h": ref_h, "c": ref_c})
            compare(f"vad batch {batch} chunk {chunk} ({compiled.executor})", [prob, h, c],
                    want, SUMS)
            ref_h, ref_c = want[1], want[2]

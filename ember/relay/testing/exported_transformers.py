"""Transformers written the way transformers' torch.onnx export and optimum write them, for
tests and benchmarks (random weights; batch and sequence symbolic):

- :func:`bert`: a BERT encoder (opset 14: LayerNorm and the erf GELU spelled out, the padding
  mask scaled by float32's lowest value, positions sliced out of a buffer by the sequence
  length, head shapes concatenated from ``Shape``); :func:`token_feeds` makes its inputs;
- :func:`t5`: a T5 encoder (RMS norm spelled out, no attention scale, relative-position
  buckets computed from ``Range`` over the run-time length: Sub, Greater, Abs, Less, Log, Min,
  Where, a Gather of the bias table per head);
- :func:`gpt2_kv_decoder`: a GPT-2 decoder step with a KV cache as optimum exports it:
  ``input_ids`` [batch, seq], ``attention_mask`` [batch, past + seq],
  ``past_key_values.<l>.key/value`` [batch, heads, past, head_dim] in; logits and
  ``present.<l>.key/value`` out. Positions are a Range from the cache's length, the causal mask
  is sliced from a constant tril buffer at run-time starts, LayerNorm and tanh-GELU are spelled
  out. In generation every step is a new signature (the past grows by one).
  :func:`kv_cache_feeds` makes its inputs.

They need the ``onnx`` package (``pip install ember[onnx]``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .exported_onnx import _i64, _model, _onnx, _w

__all__ = ["bert", "gpt2_kv_decoder", "kv_cache_feeds", "t5", "token_feeds"]


def _layer_norm(n: Any, inits: dict[str, np.ndarray], rng: np.random.Generator, x: str, p: str,
                dim: int) -> str:
    """LayerNorm over the last axis as torch writes nn.LayerNorm below opset 17 (the
    initializers ``two`` and ``eps`` are the model's): the output's name."""
    inits[f"{p}_g"] = (1 + _w(rng, dim)).astype("float32")
    inits[f"{p}_b"] = _w(rng, dim)
    for op, ins, out, attrs in (
            ("ReduceMean", [x], "mu", {"axes": [-1]}), ("Sub", [x, f"{p}_mu"], "d", {}),
            ("Pow", [f"{p}_d", "two"], "sq", {}),
            ("ReduceMean", [f"{p}_sq"], "var", {"axes": [-1]}),
            ("Add", [f"{p}_var", "eps"], "ve", {}), ("Sqrt", [f"{p}_ve"], "sd", {}),
            ("Div", [f"{p}_d", f"{p}_sd"], "nrm", {}), ("Mul", [f"{p}_nrm", f"{p}_g"], "sc", {}),
            ("Add", [f"{p}_sc", f"{p}_b"], "out", {})):
        n(op, ins, [f"{p}_{out}"], **attrs)
    return f"{p}_out"


def _linear(n: Any, inits: dict[str, np.ndarray], rng: np.random.Generator, x: str, p: str,
            i: int, o: int) -> str:
    """x @ W + b with the bias first, as the exporter writes Linear's Add: the output's name."""
    inits[f"{p}_w"], inits[f"{p}_bias"] = _w(rng, i, o), _w(rng, o)
    n("MatMul", [x, f"{p}_w"], [f"{p}_mm"])
    n("Add", [f"{p}_bias", f"{p}_mm"], [f"{p}_y"])
    return f"{p}_y"


def bert(hidden: int = 256, heads: int = 4, layers: int = 2, inter: int = 1024, vocab: int = 1000,
         max_pos: int = 512, seed: int = 0) -> Any:
    """input_ids, attention_mask, token_type_ids (batch, sequence) int64 ->
    last_hidden_state (batch, sequence, hidden), pooler_output (batch, hidden)."""
    helper, numpy_helper, TP = _onnx()
    rng = np.random.default_rng(seed)
    hd = hidden // heads
    inits = {"word": _w(rng, vocab, hidden), "pos": _w(rng, max_pos, hidden),
             "type": _w(rng, 2, hidden), "pos_ids": np.arange(max_pos, dtype="int64")[None],
             "i0": _i64(0), "i1": _i64(1), "ax0": _i64([0]), "ax1": _i64([1]),
             "ax12": _i64([1, 2]), "zero": _i64([0]), "hid": _i64([hidden]),
             "hh": _i64([heads, hd]), "onef": np.float32(1.0),
             "fmin": np.float32(np.finfo(np.float32).min), "sqrt_hd": np.float32(np.sqrt(hd)),
             "eps": np.float32(1e-12), "two": np.float32(2.0),
             "sqrt2": np.float32(1.4142135381698608), "half": np.float32(0.5)}
    nodes = []

    def n(op, ins, outs, **attrs):
        nodes.append(helper.make_node(op, ins, outs, name=f"/{outs[0]}", **attrs))

    def layer_norm(x, p):
        return _layer_norm(n, inits, rng, x, p, hidden)

    def linear(x, p, i, o):
        return _linear(n, inits, rng, x, p, i, o)

    n("Shape", ["input_ids"], ["shp"])
    n("Gather", ["shp", "i1"], ["seq"], axis=0)
    n("Gather", ["shp", "i0"], ["bat"], axis=0)
    n("Unsqueeze", ["seq", "ax0"], ["seq1"])
    n("Unsqueeze", ["bat", "ax0"], ["bat1"])
    n("Slice", ["pos_ids", "zero", "seq1", "ax1"], ["pids"])
    n("Gather", ["word", "input_ids"], ["we"], axis=0)
    n("Gather", ["type", "token_type_ids"], ["te"], axis=0)
    n("Add", ["we", "te"], ["e1"])
    n("Gather", ["pos", "pids"], ["pe"], axis=0)
    n("Add", ["e1", "pe"], ["e2"])
    h = layer_norm("e2", "emb")
    # the extended mask: (1 - mask[:, None, None, :]) * finfo(float32).min
    n("Unsqueeze", ["attention_mask", "ax12"], ["m4"])
    n("Cast", ["m4"], ["m4f"], to=TP.FLOAT)
    n("Sub", ["onef", "m4f"], ["minv"])
    n("Mul", ["minv", "fmin"], ["mbias"])
    n("Concat", ["bat1", "seq1", "hh"], ["hshape"], axis=0)
    n("Concat", ["bat1", "seq1", "hid"], ["oshape"], axis=0)
    for layer in range(layers):
        p = f"l{layer}"
        for t in "qkv":
            n("Reshape", [linear(h, f"{p}_{t}", hidden, hidden), "hshape"], [f"{p}_{t}r"])
        n("Transpose", [f"{p}_qr"], [f"{p}_qt"], perm=[0, 2, 1, 3])
        n("Transpose", [f"{p}_kr"], [f"{p}_kt"], perm=[0, 2, 3, 1])
        n("Transpose", [f"{p}_vr"], [f"{p}_vt"], perm=[0, 2, 1, 3])
        n("MatMul", [f"{p}_qt", f"{p}_kt"], [f"{p}_s0"])
        n("Div", [f"{p}_s0", "sqrt_hd"], [f"{p}_s1"])
        n("Add", [f"{p}_s1", "mbias"], [f"{p}_s2"])
        n("Softmax", [f"{p}_s2"], [f"{p}_pr"], axis=-1)
        n("MatMul", [f"{p}_pr", f"{p}_vt"], [f"{p}_c0"])
        n("Transpose", [f"{p}_c0"], [f"{p}_c1"], perm=[0, 2, 1, 3])
        n("Reshape", [f"{p}_c1", "oshape"], [f"{p}_c2"])
        n("Add", [linear(f"{p}_c2", f"{p}_o", hidden, hidden), h], [f"{p}_r1"])
        h1 = layer_norm(f"{p}_r1", f"{p}_ln1")
        f = linear(h1, f"{p}_f1", hidden, inter)
        # GELU, erf form: x * (1 + erf(x / sqrt 2)) * 0.5
        n("Div", [f, "sqrt2"], [f"{p}_g0"])
        n("Erf", [f"{p}_g0"], [f"{p}_g1"])
        n("Add", [f"{p}_g1", "onef"], [f"{p}_g2"])
        n("Mul", [f, f"{p}_g2"], [f"{p}_g3"])
        n("Mul", [f"{p}_g3", "half"], [f"{p}_g4"])
        n("Add", [linear(f"{p}_g4", f"{p}_f2", inter, hidden), h1], [f"{p}_r2"])
        h = layer_norm(f"{p}_r2", f"{p}_ln2")
    n("Identity", [h], ["last_hidden_state"])
    n("Gather", [h, "i0"], ["cls"], axis=1)
    n("Tanh", [linear("cls", "pool", hidden, hidden)], ["pooler_output"])
    ins = [helper.make_tensor_value_info(name, TP.INT64, ["batch", "sequence"])
           for name in ("input_ids", "attention_mask", "token_type_ids")]
    outs = [helper.make_tensor_value_info("last_hidden_state", TP.FLOAT,
                                          ["batch", "sequence", hidden]),
            helper.make_tensor_value_info("pooler_output", TP.FLOAT, ["batch", hidden])]
    graph = helper.make_graph(nodes, "bert", ins, outs,
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return _model(graph, 14)


def t5(d: int = 256, heads: int = 4, dkv: int = 64, ff: int = 1024, layers: int = 2,
       vocab: int = 1000, buckets: int = 32, max_dist: int = 128, seed: int = 0) -> Any:
    """input_ids, attention_mask (batch, sequence) int64 -> (batch, sequence, d)."""
    helper, numpy_helper, TP = _onnx()
    rng = np.random.default_rng(seed)
    half, f32 = buckets // 2, np.float32
    exact = half // 2
    inits = {"emb": _w(rng, vocab, d), "relb": _w(rng, buckets, heads), "i0": _i64(0),
             "i1": _i64(1), "ax0": _i64([0]), "ax1": _i64([1]), "ax12": _i64([1, 2]),
             "two": f32(2), "eps": f32(1e-6), "onef": f32(1),
             "fmin": f32(np.finfo(np.float32).min), "zero": _i64(0), "half": _i64(half),
             "exact": _i64(exact), "exact_f": f32(exact),
             "logscale": f32(1 / np.log(max_dist / exact)), "span": f32(half - exact),
             "maxb": _i64(half - 1), "hs": _i64([heads, dkv]), "inner": _i64([heads * dkv])}
    nodes = []

    def n(op, ins, outs, **attrs):
        nodes.append(helper.make_node(op, ins, outs, name=f"/{outs[0]}", **attrs))

    def rms_norm(x, p):  # T5LayerNorm: x * rsqrt(mean(x^2) + eps) * weight, no mean, no bias
        inits[f"{p}_g"] = (1 + _w(rng, d)).astype("float32")
        for op, ins, out, attrs in (
                ("Pow", [x, "two"], "sq", {}), ("ReduceMean", [f"{p}_sq"], "v", {"axes": [-1]}),
                ("Add", [f"{p}_v", "eps"], "ve", {}), ("Sqrt", [f"{p}_ve"], "s", {}),
                ("Reciprocal", [f"{p}_s"], "r", {}), ("Mul", [x, f"{p}_r"], "n", {}),
                ("Mul", [f"{p}_g", f"{p}_n"], "o", {})):
            n(op, ins, [f"{p}_{out}"], **attrs)
        return f"{p}_o"

    def linear(x, p, i, o):  # T5's projections have no bias
        inits[f"{p}_w"] = _w(rng, i, o)
        n("MatMul", [x, f"{p}_w"], [f"{p}_o"])
        return f"{p}_o"

    n("Shape", ["input_ids"], ["shp"])
    n("Gather", ["shp", "i1"], ["L"], axis=0)
    n("Gather", ["shp", "i0"], ["B"], axis=0)
    n("Unsqueeze", ["L", "ax0"], ["L1"])
    n("Unsqueeze", ["B", "ax0"], ["B1"])
    n("Gather", ["emb", "input_ids"], ["h0"], axis=0)
    # bidirectional relative-position buckets of (query, key) over the run-time length
    for op, ins, out, attrs in (
            ("Range", ["zero", "L", "i1"], "ctx0", {}), ("Unsqueeze", ["ctx0", "ax1"], "ctx", {}),
            ("Range", ["zero", "L", "i1"], "mem0", {}), ("Unsqueeze", ["mem0", "ax0"], "mem", {}),
            ("Sub", ["mem", "ctx"], "rel", {}), ("Greater", ["rel", "zero"], "pos", {}),
            ("Cast", ["pos"], "posl", {"to": TP.INT64}), ("Mul", ["posl", "half"], "b0", {}),
            ("Abs", ["rel"], "ar", {}), ("Less", ["ar", "exact"], "small", {}),
            ("Cast", ["ar"], "arf", {"to": TP.FLOAT}), ("Div", ["arf", "exact_f"], "q0", {}),
            ("Log", ["q0"], "q1", {}), ("Mul", ["q1", "logscale"], "q2", {}),
            ("Mul", ["q2", "span"], "q3", {}), ("Cast", ["q3"], "q4", {"to": TP.INT64}),
            ("Add", ["exact", "q4"], "large0", {}), ("Min", ["large0", "maxb"], "large", {}),
            ("Where", ["small", "ar", "large"], "b1", {}), ("Add", ["b0", "b1"], "bucket", {}),
            ("Gather", ["relb", "bucket"], "bias0", {"axis": 0}),
            ("Transpose", ["bias0"], "bias1", {"perm": [2, 0, 1]}),
            ("Unsqueeze", ["bias1", "ax0"], "pbias", {}),
            ("Unsqueeze", ["attention_mask", "ax12"], "m4", {}),
            ("Cast", ["m4"], "m4f", {"to": TP.FLOAT}), ("Sub", ["onef", "m4f"], "minv", {}),
            ("Mul", ["minv", "fmin"], "mb", {}), ("Add", ["pbias", "mb"], "abias", {}),
            ("Concat", ["B1", "L1", "hs"], "hshape", {"axis": 0}),
            ("Concat", ["B1", "L1", "inner"], "oshape", {"axis": 0})):
        n(op, ins, [out], **attrs)
    h = "h0"
    for layer in range(layers):
        p = f"l{layer}"
        a = rms_norm(h, f"{p}_n1")
        for t in "qkv":
            n("Reshape", [linear(a, f"{p}_{t}", d, heads * dkv), "hshape"], [f"{p}_{t}r"])
        n("Transpose", [f"{p}_qr"], [f"{p}_qt"], perm=[0, 2, 1, 3])
        n("Transpose", [f"{p}_kr"], [f"{p}_kt"], perm=[0, 2, 3, 1])
        n("Transpose", [f"{p}_vr"], [f"{p}_vt"], perm=[0, 2, 1, 3])
        n("MatMul", [f"{p}_qt", f"{p}_kt"], [f"{p}_s0"])
        n("Add", [f"{p}_s0", "abias"], [f"{p}_s1"])
        n("Softmax", [f"{p}_s1"], [f"{p}_pr"], axis=-1)
        n("MatMul", [f"{p}_pr", f"{p}_vt"], [f"{p}_c0"])
        n("Transpose", [f"{p}_c0"], [f"{p}_c1"], perm=[0, 2, 1, 3])
        n("Reshape", [f"{p}_c1", "oshape"], [f"{p}_c2"])
        n("Add", [h, linear(f"{p}_c2", f"{p}_o", heads * dkv, d)], [f"{p}_r1"])
        n("Relu", [linear(rms_norm(f"{p}_r1", f"{p}_n2"), f"{p}_wi", d, ff)], [f"{p}_relu"])
        n("Add", [f"{p}_r1", linear(f"{p}_relu", f"{p}_wo", ff, d)], [f"{p}_r2"])
        h = f"{p}_r2"
    n("Identity", [rms_norm(h, "final")], ["y"])
    ins = [helper.make_tensor_value_info(name, TP.INT64, ["batch", "sequence"])
           for name in ("input_ids", "attention_mask")]
    graph = helper.make_graph(nodes, "t5", ins, [helper.make_tensor_value_info("y", TP.FLOAT,
                                                                             None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return _model(graph, 14)


def token_feeds(batch: int, seq: int, seed: int = 0, vocab: int = 1000
                ) -> dict[str, np.ndarray]:
    """Token ids, a padding mask (each row padded from a random point on) and token types."""
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, seq), "int64")
    for b in range(batch):
        mask[b, rng.integers(seq // 2, seq + 1):] = 0
    return {"input_ids": rng.integers(0, vocab, (batch, seq)).astype("int64"),
            "attention_mask": mask,
            "token_type_ids": (rng.random((batch, seq)) < 0.3).astype("int64")}


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
        return _layer_norm(n, inits, rng, x, p, hidden)

    def lin(x, p, i, o):  # GPT-2's Conv1D: x @ W + b
        return _linear(n, inits, rng, x, p, i, o)

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

"""A GPT-2 decoder step with a KV cache, written as optimum / transformers' torch.onnx export
writes it (opset 14): inputs ``input_ids`` [batch, seq], ``attention_mask`` [batch, past + seq]
and ``past_key_values.<l>.key/value`` [batch, heads, past, head_dim]; outputs the logits and
``present.<l>.key/value``. Positions are a Range from the past length (Shape of the cache), the
causal mask is sliced from a constant tril buffer at run-time starts and ends, the padding mask
becomes ``(1 - mask) * finfo.min``, LayerNorm and tanh-GELU are spelled out. In generation every
step is a new signature (the past grows by one): compiled once with no shapes, it must run the
prefill (past 0), each decode step and a batch with padding against onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import SUMS, compare, run_ort
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import ember
from ember.contrib import cc


def gpt2kv(hidden=256, heads=4, layers=2, vocab=1000, max_pos=256, seed=0):
    """(model, heads, head_dim, layers)."""
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
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model, heads, hd, layers


def _w(rng, *shape):
    return (rng.standard_normal(shape) * 0.05).astype("float32")


def _i64(v):
    return np.array(v, "int64")


SMALL = {"hidden": 32, "heads": 2, "layers": 2, "vocab": 50, "max_pos": 64}


def _feeds(rng, model_cfg, batch, seq, past, heads, hd, layers, pad=0):
    fd = {"input_ids": rng.integers(0, model_cfg["vocab"], (batch, seq)).astype("int64"),
          "attention_mask": np.ones((batch, past + seq), "int64")}
    fd["attention_mask"][1:, :pad] = 0  # left padding of the later rows
    for layer in range(layers):
        for kv in ("key", "value"):
            fd[f"past_key_values.{layer}.{kv}"] = rng.standard_normal(
                (batch, heads, past, hd)).astype("float32")
    return fd


def test_kv_cache_decoder_runs_prefill_and_every_decode_step():
    if cc.get_cc() is None:
        pytest.skip("no C compiler found")
    model, heads, hd, layers = gpt2kv(**SMALL)
    names = [i.name for i in model.graph.input]
    run = ember.compile(model)
    rng = np.random.default_rng(7)
    shapes = [(1, 8, 0, 0), (2, 5, 0, 0), (2, 1, 6, 2), (3, 4, 11, 3)]
    shapes += [(1, 1, past, 0) for past in range(8, 20)]  # a generation loop
    for batch, seq, past, pad in shapes:
        fd = _feeds(rng, SMALL, batch, seq, past, heads, hd, layers, pad)
        got = run(*[fd[k] for k in names])
        compare(f"gpt2 kv {batch}x{seq} past {past}", list(got), run_ort(model, fd), SUMS)

"""com.microsoft operators (onnxruntime's contrib domain) against onnxruntime, and the errors
for what is not supported."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import compare, rand, run_graph, run_ort
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import ember
from ember import relay
from ember.runtime.errors import OpAttributeUnImplemented, OpNotImplemented
from ember.runtime.vm import VirtualMachine

RNG = np.random.default_rng(23)
MS = "com.microsoft"
LOOSE = (1e-4, 1e-4)


def _model(op, inputs, inits=None, n_out=1, domain=MS, opset=17, **attrs):
    """One node of ``op`` over ``inputs`` (fed, by name) then ``inits`` ("" skips a slot)."""
    inits = inits or {}
    names = [*inputs, *inits]
    node = helper.make_node(op, names, [f"y{k}" for k in range(n_out)], domain=domain,
                            **attrs)
    infos = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype),
                                           list(v.shape)) for n, v in inputs.items()]
    outs = [helper.make_tensor_value_info(f"y{k}", TP.FLOAT, None) for k in range(n_out)]
    graph = helper.make_graph([node], "g", infos, outs, [
        numpy_helper.from_array(v, n) for n, v in inits.items() if n])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid(MS, 1)])
    model.ir_version = min(model.ir_version, 10)
    return model


def _check(op, inputs, inits=None, n_out=1, tol=LOOSE, **kw):
    model = _model(op, inputs, inits, n_out, **kw)
    compare(op, run_graph(model, inputs), run_ort(model, inputs), tol)


def test_gelu_family_and_bias_add():
    x, b = rand(RNG, 2, 3, 8), rand(RNG, 8)
    _check("Gelu", {"x": x})
    _check("BiasGelu", {"x": x}, {"b": b})
    _check("FastGelu", {"x": x}, {"b": b})
    _check("FastGelu", {"x": x})
    _check("QuickGelu", {"x": x}, alpha=1.5)
    skip = rand(RNG, 2, 3, 8)  # onnxruntime runs BiasAdd on CUDA only
    got = run_graph(_model("BiasAdd", {"x": x}, {"b": b, "s": skip}), {"x": x})[0]
    np.testing.assert_allclose(got, x + b + skip, rtol=1e-6)


def test_fused_matmul_gemm_and_conv():
    a, b = rand(RNG, 2, 4, 3), rand(RNG, 2, 5, 4)
    _check("FusedMatMul", {"a": a}, {"b": b}, transA=1, transB=1, alpha=0.5)
    _check("FusedMatMul", {"a": rand(RNG, 3, 4)}, {"b": rand(RNG, 4, 6)})
    _check("FusedGemm", {"a": rand(RNG, 3, 4)}, {"b": rand(RNG, 5, 4), "c": rand(RNG, 5)},
           transB=1, activation="LeakyRelu", activation_alpha=0.2)
    x, w = rand(RNG, 1, 2, 6, 6), rand(RNG, 4, 2, 3, 3)
    for act, extra in (("Relu", {}), ("Clip", {"activation_params": [-0.5, 0.5]}),
                       ("HardSigmoid", {"activation_params": [0.3, 0.4]}), ("Tanh", {})):
        _check("FusedConv", {"x": x}, {"w": w, "b": rand(RNG, 4)}, pads=[1, 1, 1, 1],
               activation=act, **extra)
    _check("FusedConv", {"x": x}, {"w": w, "b": rand(RNG, 4), "z": rand(RNG, 1, 4, 4, 4)},
           activation="Sigmoid")


def test_layer_norms():
    x, s = rand(RNG, 2, 3, 8), rand(RNG, 2, 3, 8)
    g, be, bi = rand(RNG, 8), rand(RNG, 8), rand(RNG, 8)
    _check("SkipLayerNormalization", {"x": x, "s": s}, {"g": g, "be": be, "bi": bi}, n_out=4,
           epsilon=1e-5)
    _check("SkipLayerNormalization", {"x": x, "s": s}, {"g": g})
    _check("SkipSimplifiedLayerNormalization", {"x": x, "s": s}, {"g": g, "bi": bi})
    # onnxruntime's own default-domain operators, at an opset where ONNX lacks them
    _check("LayerNormalization", {"x": x}, {"g": g, "be": be}, domain="", opset=13,
           epsilon=1e-5)
    _check("SimplifiedLayerNormalization", {"x": x}, {"g": g}, domain="", opset=13, n_out=2)


def test_attention_with_masks():
    batch, seq, hidden, heads = 2, 5, 8, 2
    x = rand(RNG, batch, seq, hidden)
    w, b = rand(RNG, hidden, 3 * hidden, lo=-0.5, hi=0.5), rand(RNG, 3 * hidden)
    raw = np.ones((batch, seq), "int32")
    raw[1, 3:] = 0
    _check("Attention", {"x": x}, {"w": w, "b": b}, num_heads=heads)
    _check("Attention", {"x": x}, {"w": w, "b": b, "m": raw}, num_heads=heads)
    _check("Attention", {"x": x}, {"w": w, "b": b, "m": np.array([5, 2], "int32")},
           num_heads=heads, unidirectional=1)
    sizes = [8, 8, 4]
    _check("Attention", {"x": x}, {"w": rand(RNG, hidden, 20), "b": rand(RNG, 20)},
           num_heads=heads, qkv_hidden_sizes=sizes, scale=0.3)


def test_multi_head_attention():
    q, k, v = rand(RNG, 2, 3, 8), rand(RNG, 2, 5, 8), rand(RNG, 2, 5, 6)
    pad = np.ones((2, 5), "int32")
    pad[0, 4:] = 0
    _check("MultiHeadAttention", {"q": q, "k": k, "v": v}, num_heads=2)
    _check("MultiHeadAttention", {"q": q, "k": k, "v": v}, {"b": rand(RNG, 22), "m": pad},
           num_heads=2)
    _check("MultiHeadAttention", {"q": q, "k": k, "v": v},
           {"": np.zeros(0, "float32"), "m": pad, "ab": rand(RNG, 1, 2, 3, 5)}, num_heads=2)


def _causal_reference(q, k, v, heads):
    """numpy: query i of S sees keys 0 .. T - S + i (the last S of T positions)."""
    (b, s, d), t, dv = q.shape, k.shape[1], v.shape[2]
    qh = q.reshape(b, s, heads, -1).transpose(0, 2, 1, 3)
    kh = k.reshape(b, t, heads, -1).transpose(0, 2, 1, 3)
    vh = v.reshape(b, t, heads, -1).transpose(0, 2, 1, 3)
    scores = qh @ kh.transpose(0, 1, 3, 2) / np.sqrt(d // heads)
    seen = np.arange(t)[None, :] <= np.arange(s)[:, None] + (t - s)
    scores = np.where(seen, scores, scores - 10000.0)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    return (probs @ vh).transpose(0, 2, 1, 3).reshape(b, s, dv)


def test_causal_multi_head_attention_with_more_keys_than_queries():
    """T > S: the queries are the last S positions (onnxruntime's CPU kernel disagrees for
    T != S, so the reference is numpy; the module docstring says how)."""
    q, k, v = rand(RNG, 2, 3, 8), rand(RNG, 2, 5, 8), rand(RNG, 2, 5, 6)
    model = _model("MultiHeadAttention", {"q": q, "k": k, "v": v}, num_heads=2,
                   unidirectional=1)
    got = run_graph(model, {"q": q, "k": k, "v": v})[0]
    np.testing.assert_allclose(got, _causal_reference(q, k, v, 2), rtol=1e-5, atol=1e-5)


def test_what_is_not_supported():
    x = rand(RNG, 2, 3, 4)
    with pytest.raises(OpAttributeUnImplemented, match="attribute transBatchA=1"):
        run_graph(_model("FusedMatMul", {"a": x}, {"b": rand(RNG, 2, 4, 3)}, transBatchA=1),
                  {"a": x})
    with pytest.raises(OpNotImplemented, match=r"Attention node .*input 4 \(a past key/value"):
        run_graph(_model("Attention", {"x": x}, {"w": rand(RNG, 4, 12), "b": rand(RNG, 12),
                                                 "m": np.ones((2, 3), "int32"),
                                                 "p": rand(RNG, 2, 2, 2, 1, 2)},
                         num_heads=2), {"x": x})
    with pytest.raises(OpAttributeUnImplemented, match="attribute activation='Softsign'"):
        run_graph(_model("FusedGemm", {"a": rand(RNG, 3, 4)}, {"b": rand(RNG, 4, 2)},
                         activation="Softsign"), {})


def _symbolic_attention_model(hidden, heads):
    """Attention (causal, key lengths) over x (2, S, hidden) and MultiHeadAttention (causal)
    of q (2, S, hidden) over k, v (2, T, hidden), S and T symbolic."""
    w, b = rand(RNG, hidden, 3 * hidden, lo=-0.5, hi=0.5), rand(RNG, 3 * hidden)
    nodes = [helper.make_node("Attention", ["x", "w", "b", "lens"], ["y0"], domain=MS,
                              num_heads=heads, unidirectional=1),
             helper.make_node("MultiHeadAttention", ["x", "k", "v"], ["y1"], domain=MS,
                              num_heads=heads, unidirectional=1)]
    infos = [helper.make_tensor_value_info("x", TP.FLOAT, [2, "S", hidden]),
             helper.make_tensor_value_info("lens", TP.INT32, [2]),
             helper.make_tensor_value_info("k", TP.FLOAT, [2, "T", hidden]),
             helper.make_tensor_value_info("v", TP.FLOAT, [2, "T", hidden])]
    outs = [helper.make_tensor_value_info(f"y{i}", TP.FLOAT, None) for i in range(2)]
    graph = helper.make_graph(nodes, "g", infos, outs, [numpy_helper.from_array(w, "w"),
                                                        numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(MS, 1)])
    model.ir_version = min(model.ir_version, 10)
    return model


def test_causal_attention_at_run_time_sequence_lengths():
    """S and T symbolic: the causal and key-length masks take the lengths of each run (a
    mask sized from the declared shapes fit one length only). MultiHeadAttention runs with
    T == S: onnxruntime's causal mask for T != S follows neither ember's (the last S of T
    positions) nor a mask from position 0."""
    hidden = 8
    model = _symbolic_attention_model(hidden, heads=2)
    mod, params = relay.frontend.from_onnx(model)
    vm = VirtualMachine(relay.vm.compile(mod, "llvm", params=params), ember.cpu(0))
    for seq, total in ((3, 3), (6, 6)):
        feeds = {"x": rand(RNG, 2, seq, hidden), "lens": np.array([seq, seq - 1], "int32"),
                 "k": rand(RNG, 2, total, hidden), "v": rand(RNG, 2, total, hidden)}
        got = [r.numpy() for r in vm.invoke("main", *feeds.values())]
        compare(f"S={seq} T={total}", got, run_ort(model, feeds), LOOSE)

"""Transformer encoders written as transformers' torch.onnx export writes them, batch and
sequence dynamic, through ``ember.compile`` with no shapes (one VM plan at any batch and
length), against onnxruntime (rtol/atol 1e-4 of float32 sums):

- BERT (opset 14: LayerNorm and the erf GELU spelled out, the padding mask scaled by
  float32's lowest value, positions sliced out of a buffer by the sequence length, head shapes
  concatenated from ``Shape``); its LayerNorm and GELU become ``nn.layer_norm`` and a GEMM
  epilogue;
- T5 (RMS norm spelled out, which becomes nn.rms_norm, no attention scale, and relative-position buckets computed from
  ``Range`` over the run-time length: Sub, Greater, Abs, Less, Log, Min, Where, a Gather of
  the bias table per head); the bucket's logs run once per (query, key), not per batch and
  head.

At batch 1 with the shapes fixed, BERT's attention runs without transpose kernels, as one
fused attention kernel per layer (its scale and mask applied to the scores in the kernel);
with batch and sequence symbolic too (strides and sizes taken at run time).

(Measured once on one core at hidden 256, 4 heads, 2 layers: BERT 0.88-0.96x onnxruntime at
1x16 to 8x64, the dynamic build 0.98-1.16x the static one; T5 0.89-1.06x onnxruntime, the
dynamic build 1.13-1.16x the static one, whose buckets are constants.)"""
from __future__ import annotations

import pytest
from _onnx_util import SUMS, compare, run_ort

import ember
from ember import relay
from ember.contrib import cc
from ember.relay.testing.exported_transformers import bert, t5
from ember.relay.testing.exported_transformers import token_feeds as feeds


SMALL = {"hidden": 16, "heads": 2, "layers": 2, "inter": 40, "vocab": 50, "max_pos": 32}


def _need_cc():
    if cc.get_cc() is None:
        pytest.skip("no C compiler found")


def test_bert_export_runs_at_any_batch_and_length():
    _need_cc()
    model = bert(**SMALL)
    run = ember.compile(model)
    for batch, seq in ((1, 1), (2, 7), (3, 32), (1, 17)):
        fd = feeds(batch, seq, seed=seq, vocab=SMALL["vocab"])
        compare(f"bert {batch}x{seq}", list(run(**fd)), run_ort(model, fd), SUMS)


def test_bert_export_fuses_layer_norm_and_gelu():
    _need_cc()
    mod, params = relay.frontend.from_onnx(bert(**SMALL))
    with ember.transform.PassContext(opt_level=3):
        opt, _ = relay.optimize(mod, "llvm", params=params)
    ops = {e.op.name for e in ember.ir.post_order(opt["main"].body)
           if isinstance(e, ember.ir.expr.Call) and hasattr(e.op, "name")}
    inner = set()
    for e in ember.ir.post_order(opt["main"].body):
        if isinstance(e, ember.ir.expr.Function):
            inner |= {c.op.name for c in ember.ir.post_order(e.body)
                      if isinstance(c, ember.ir.expr.Call) and hasattr(c.op, "name")}
    assert "nn.layer_norm" in inner | ops
    assert not {"erf", "sqrt", "power"} & inner, inner


def test_bert_with_static_shapes_runs_attention_without_copies():
    """Batch 1 with the length fixed: the heads are read and written through the GEMMs'
    strides (no transpose kernels), the scale and padding mask are the scores' epilogue."""
    _need_cc()
    model = bert(**SMALL)
    fd = feeds(1, 9, seed=9, vocab=SMALL["vocab"])
    shapes = {k: v.shape for k, v in fd.items()}
    compare("bert 1x9", list(ember.compile(model, input_shapes=shapes)(**fd)),
            run_ort(model, fd), SUMS)
    mod, params = relay.frontend.from_onnx(model, shape=shapes)
    with ember.transform.PassContext(opt_level=3):
        opt, _ = relay.optimize(mod, "llvm", params=params)
    calls = [c for c in ember.ir.post_order(opt["main"].body)
             if isinstance(c, ember.ir.expr.Call) and hasattr(c.op, "name")]
    assert not [c for c in calls if c.op.name == "transpose"]
    # scores, mask, softmax and P V in one kernel per layer (FuseAttention), the scale and
    # padding mask as its alpha and per-key bias
    fused = [c for c in calls if c.op.name == "nn.contrib_attention"]
    assert len(fused) == SMALL["layers"], [c.op.name for c in calls]
    assert all(c.attrs.has_bias and c.attrs.alpha != 1.0 for c in fused), fused
    assert not [c for c in calls if c.op.name == "nn.softmax"]


def test_bert_with_dynamic_shapes_runs_attention_without_copies():
    """Batch and length symbolic (what exporters write): the same as the static build, the
    heads through strides of run-time sizes, one attention kernel per layer, its scale and
    padding mask in the kernel (numerics: test_bert_export_runs_at_any_batch_and_length)."""
    mod, params = relay.frontend.from_onnx(bert(**SMALL))
    with ember.transform.PassContext(opt_level=3):
        opt, _ = relay.optimize(mod, "llvm", params=params)
    calls = [c for c in ember.ir.post_order(opt["main"].body)
             if isinstance(c, ember.ir.expr.Call) and hasattr(c.op, "name")]
    names = [c.op.name for c in calls]
    assert not {"transpose", "contrib_reverse_reshape", "reshape_like", "nn.softmax"} & set(
        names), names
    fused = [c for c in calls if c.op.name == "nn.contrib_attention"]
    assert len(fused) == SMALL["layers"], names
    assert all(c.attrs.view_syms and c.attrs.mask_from_shape and c.attrs.alpha != 1.0
               for c in fused), fused


T5_SMALL = {"d": 16, "heads": 2, "dkv": 8, "ff": 24, "layers": 2, "vocab": 50}


def test_t5_export_runs_at_any_batch_and_length():
    """Lengths below and beyond the buckets' exact range (8) and max distance (128)."""
    _need_cc()
    model = t5(**T5_SMALL)
    run = ember.compile(model)
    for batch, seq in ((1, 1), (2, 9), (3, 40), (1, 150)):
        fd = feeds(batch, seq, seed=seq, vocab=T5_SMALL["vocab"])
        del fd["token_type_ids"]
        compare(f"t5 {batch}x{seq}", [run(**fd)], run_ort(model, fd), SUMS)


def test_t5_rms_norms_become_one_kernel_each():
    """Pow, ReduceMean, Add, Sqrt, Reciprocal, Mul, Mul (T5's spelled-out RMS norm): one
    nn.rms_norm per norm, its weight as gamma (or, before the MLP, folded into the next
    projection's weight by FoldScaleAxis)."""
    _need_cc()
    mod, params = relay.frontend.from_onnx(t5(**T5_SMALL))
    with ember.transform.PassContext(opt_level=3):
        opt, _ = relay.optimize(mod, "llvm", params=params)
    calls = [c for c in ember.ir.post_order(opt["main"].body)
             if isinstance(c, ember.ir.expr.Call) and hasattr(c.op, "name")]
    norms = [c for c in calls if c.op.name == "nn.rms_norm"]
    assert len(norms) == 2 * T5_SMALL["layers"] + 1, norms
    assert not {"power", "sqrt"} & {c.op.name for c in calls}


def test_t5_buckets_run_once_per_query_and_key():
    """The bucket chain (its Log) is a kernel of its own over (L, L), not fused into the
    per-head gather or the (B, H, L, L) score add."""
    _need_cc()
    mod, params = relay.frontend.from_onnx(t5(**T5_SMALL))
    with ember.transform.PassContext(opt_level=3):
        opt, _ = relay.optimize(mod, "llvm", params=params)
    with_log = []
    for e in ember.ir.post_order(opt["main"].body):
        if isinstance(e, ember.ir.expr.Function) and e.attrs and e.attrs.get("Primitive"):
            ops = {c.op.name for c in ember.ir.post_order(e.body)
                   if isinstance(c, ember.ir.expr.Call) and hasattr(c.op, "name")}
            if "log" in ops:
                with_log.append((ops, e.ret_type))
    assert len(with_log) == 1, with_log
    ops, ret = with_log[0]
    assert "take" not in ops and len(ret.shape) == 2, (ops, ret)


def test_t5_with_static_shapes_fuses_attention_with_its_position_bias():
    """Batch 2 with the length fixed: the relative-position bias (plus the padding mask) that
    FuseGemmEpilogue puts in the scores' epilogue as a residual is the fused attention's mask."""
    _need_cc()
    model = t5(**T5_SMALL)
    fd = feeds(2, 7, seed=7, vocab=T5_SMALL["vocab"])
    del fd["token_type_ids"]
    shapes = {k: v.shape for k, v in fd.items()}
    compare("t5 2x7", [ember.compile(model, input_shapes=shapes)(**fd)], run_ort(model, fd),
            SUMS)
    mod, params = relay.frontend.from_onnx(model, shape=shapes)
    with ember.transform.PassContext(opt_level=3):
        opt, _ = relay.optimize(mod, "llvm", params=params)
    names = [c.op.name for f in opt.functions.values() for c in ember.ir.post_order(f)
             if isinstance(c, ember.ir.expr.Call) and hasattr(c.op, "name")]
    assert names.count("nn.contrib_attention") == T5_SMALL["layers"], names
    assert "nn.softmax" not in names

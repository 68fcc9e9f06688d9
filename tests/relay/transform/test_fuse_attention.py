"""FuseAttention: scores GEMM -> [add mask] -> softmax -> second GEMM becomes one
``nn.contrib_attention``.

- before/expected IR on the form FoldGemmViews leaves (heads read through strides of
  (batch, seq, heads * dim) rows, a per-batch additive mask), and the two on the reference
  interpreter (rtol 1e-5, atol 1e-5);
- compiled against the unfused graph (rtol 1e-5, atol 1e-6): batch 2 with a mask broadcast
  over heads and rows, batch 1 with a per-key bias, a causal mask whose all -inf row gives NaN
  in both, GPT-2's causal ``where`` (lowest float fill), T5's position bias as the scores'
  residual seen through a reshape, heads 1, 2, 3 and 12, odd lengths, head dims 5, 8, 32
  and 80;
- left alone when the probabilities or the scores have another consumer, when the softmax is
  over another axis, and past MAX_KEYS;
- the op's refusals of bad views and masks;
- ``?`` batch and sequence: one kernel (the divide as its scale, the mask's strides from its
  shape), the numpy references against the unfused graph, a one-key mask broadcast at run
  time and a widening one refused.
"""
from __future__ import annotations

from types import FunctionType
from typing import Any

import numpy as np
import pytest
from _pass_helpers import assert_main_equal, assert_same_result, run, symbolic_attention

import ember
from ember import relay
from ember.ir import IRModule
from ember.ir.expr import Call
from ember.ir.visitor import post_order
from ember.relay.op.nn.attention import contrib_attention
from ember.relay.op.nn.gemm import contrib_gemm
from ember.relay.transform import InferType
from ember.relay.transform import fuse_attention
from ember.relay.transform.fuse_attention import FuseAttention

RNG = np.random.default_rng(3)


def _views(batch: int, heads: int, seq: int, dim: int) -> tuple[tuple, tuple]:
    """The scores and P V views of heads cut from (batch, seq, heads * dim) rows."""
    hidden, b = heads * dim, batch * heads
    qk = (b, seq, seq, dim, seq * hidden, hidden, seq * hidden, 1, hidden, heads * seq * seq,
          seq, heads, dim, dim, seq * seq)
    pv = (b, seq, dim, seq, heads * seq * seq, seq, seq * hidden, hidden, 1, seq * hidden,
          hidden, heads, seq * seq, dim, dim)
    return qk, pv


def _chain(batch: int, heads: int, seq: int, dim: int, mask: Any = None,
           bias: relay.Expr | None = None, p_twice: bool = False, axis: int = -1,
           residual: relay.Expr | None = None) -> relay.Expr:
    """The scores GEMM (with ``residual``: T5's position bias in its epilogue, the scores
    (batch * heads, seq, seq) reshaped to 4-d), [mask,] softmax, P V."""
    q, k, v = (relay.var(n, shape=(batch, seq, heads * dim)) for n in "qkv")
    qk, pv = _views(batch, heads, seq, dim)
    zero = relay.const(0.0)
    s = contrib_gemm(q, k, zero if bias is None else bias, zero if residual is None else residual,
                     kind="batch_matmul", transpose_b=False, alpha=0.5,
                     has_bias=bias is not None, has_residual=residual is not None, view=qk,
                     out_shape=(batch, heads, seq, seq) if residual is None else
                     (batch * heads, seq, seq))
    if residual is not None:
        s = relay.reshape(s, (batch, heads, seq, seq))
    if isinstance(mask, FunctionType):
        s = mask(s)
    elif mask is not None:
        s = relay.add(s, mask)
    p = relay.nn.softmax(s, axis=axis)
    out = contrib_gemm(p, v, zero, zero, kind="batch_matmul", transpose_b=False, view=pv,
                       out_shape=(batch, seq, heads * dim))
    return relay.Tuple([out, p]) if p_twice else out


def _mod(expr: relay.Expr) -> IRModule:
    return InferType()(IRModule.from_expr(relay.Function(relay.analysis.free_vars(expr), expr)))


def _inputs(batch: int, heads: int, seq: int, dim: int) -> dict:
    return {n: RNG.standard_normal((batch, seq, heads * dim)).astype(np.float32) for n in "qkv"}


def test_before_expected_and_interpreted() -> None:
    mask = relay.var("mask", shape=(2, 1, 1, 7))
    before = _mod(_chain(2, 3, 7, 5, mask=mask))
    qk, pv = _views(2, 3, 7, 5)
    q, k, v = (relay.var(n, shape=(2, 7, 15)) for n in "qkv")
    body = contrib_attention(q, k, v, relay.const(0.0), mask, qk_view=qk, pv_view=pv,
                             out_shape=(2, 7, 15), alpha=0.5, mask_strides=(7, 0, 0, 1))
    want = InferType()(IRModule.from_expr(relay.Function([q, k, mask, v], body)))
    after = run(FuseAttention(), before)
    assert_main_equal(after, want)
    x = _inputs(2, 3, 7, 5)
    m = np.where(RNG.random((2, 1, 1, 7)) < 0.3, -1e4, 0).astype(np.float32)
    assert_same_result(before, after, x["q"], x["k"], m, x["v"])


def _build_run(expr: relay.Expr, inputs: dict, fuse: bool) -> np.ndarray:
    from ember.contrib import graph_executor

    mod = _mod(expr)
    with ember.transform.PassContext(opt_level=3,
                                     disabled_pass=[] if fuse else ["FuseAttention"]):
        ops = [n.op.name for n in post_order(FuseAttention()(mod)["main"].body)
               if isinstance(n, Call)] if fuse else []
        lib = relay.build(mod, "llvm")
    if fuse:
        assert ops == ["nn.contrib_attention"], ops
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    m.set_input(**inputs)
    m.run()
    return m.get_output(0).numpy()


@pytest.mark.parametrize("batch,heads,seq,dim,kind", [
    (2, 3, 7, 5, "batch_mask"), (1, 12, 9, 80, "bias"), (1, 1, 13, 32, "causal"),
    (1, 2, 11, 8, "where"), (2, 2, 6, 8, "residual"), (1, 3, 5, 8, "residual")])
def test_compiled_matches_the_unfused_graph(batch: int, heads: int, seq: int, dim: int,
                                            kind: str) -> None:
    inputs = _inputs(batch, heads, seq, dim)
    mask = bias = residual = None
    if kind == "batch_mask":
        mask = relay.var("mask", shape=(batch, 1, 1, seq))
        inputs["mask"] = np.where(RNG.random((batch, 1, 1, seq)) < 0.3, -1e4, 0)
        inputs["mask"] = inputs["mask"].astype(np.float32)
    elif kind == "bias":
        bias = relay.var("bias", shape=(seq,))
        inputs["bias"] = RNG.standard_normal(seq).astype(np.float32)
    elif kind == "residual":
        residual = relay.var("residual", shape=(batch * heads, seq, seq))
        inputs["residual"] = RNG.standard_normal((batch * heads, seq, seq)).astype(np.float32)
    elif kind == "where":  # GPT-2's causal mask: where(tril, scores, float32's lowest)
        tril = np.tril(np.ones((seq, seq), bool))
        fill = relay.const(np.float32(np.finfo(np.float32).min))
        mask = lambda s: relay.where(relay.const(tril), s, fill)  # noqa: E731
    else:
        causal = np.triu(np.full((seq, seq), -np.inf, np.float32), 1)
        causal[3] = -np.inf  # a query that sees no key: NaN, as numpy's formula gives
        mask = relay.const(causal[None, None])
    expr = _chain(batch, heads, seq, dim, mask=mask, bias=bias, residual=residual)
    fused, unfused = _build_run(expr, inputs, True), _build_run(expr, inputs, False)
    np.testing.assert_allclose(fused, unfused, rtol=1e-5, atol=1e-6)
    assert np.isnan(fused).any() == (kind == "causal")


def test_a_where_mask_drops_what_it_masks_as_where_does() -> None:
    """GPT-2's causal ``where``: a NaN in the last key's row of K makes that key's score NaN
    in every query row; where drops it from the rows that may not see it (only the last row
    sees it, and is NaN), so the fused kernel puts the fill in place of the score instead of
    adding it (an added fill kept the NaN and made every row NaN)."""
    batch, heads, seq, dim = 1, 2, 6, 4
    inputs = _inputs(batch, heads, seq, dim)
    inputs["k"][0, seq - 1, :] = np.nan
    tril = np.tril(np.ones((seq, seq), bool))
    fill = relay.const(np.float32(np.finfo(np.float32).min))
    expr = _chain(batch, heads, seq, dim, mask=lambda s: relay.where(relay.const(tril), s, fill))
    fused, unfused = _build_run(expr, inputs, True), _build_run(expr, inputs, False)
    rows = np.isnan(unfused).any(axis=-1)[0]
    assert rows.tolist() == [False] * (seq - 1) + [True]
    np.testing.assert_allclose(fused, unfused, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("variant", ["p_twice", "scores_twice", "axis", "long"])
def test_left_alone(variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if variant == "scores_twice":
        q, k = relay.var("q", shape=(1, 4, 6)), relay.var("k", shape=(1, 4, 6))
        qk, pv = _views(1, 2, 4, 3)
        zero = relay.const(0.0)
        s = contrib_gemm(q, k, zero, zero, kind="batch_matmul", transpose_b=False, view=qk,
                         out_shape=(1, 2, 4, 4))
        out = contrib_gemm(relay.nn.softmax(s), relay.var("v", shape=(1, 4, 6)), zero, zero,
                           kind="batch_matmul", transpose_b=False, view=pv, out_shape=(1, 4, 6))
        expr = relay.Tuple([out, s])
    else:
        if variant == "long":
            monkeypatch.setattr(fuse_attention, "MAX_KEYS", 6)
        expr = _chain(1, 2, 7, 3, p_twice=variant == "p_twice",
                      axis=2 if variant == "axis" else -1)
    before = _mod(expr)
    assert_main_equal(run(FuseAttention(), before), before)


def test_fusion_bounded_to_one_op_keeps_the_three_kernels() -> None:
    before = _mod(_chain(1, 2, 7, 3))
    after = run(FuseAttention(), before, **{"relay.FuseOps.max_depth": 1})
    assert_main_equal(after, before)


def test_bad_views_and_masks_are_refused() -> None:
    from ember.relay.op.nn.attention import AttentionAttrs
    from ember.runtime.errors import OpAttributeInvalid

    qk, pv = _views(1, 2, 4, 3)
    with pytest.raises(OpAttributeInvalid, match="pv_view"):
        AttentionAttrs(qk_view=qk, pv_view=(2, 5, *pv[2:]), out_shape=(1, 4, 6))
    no_keys, no_keys_pv = _views(1, 2, 4, 3)
    no_keys = (*no_keys[:2], 0, *no_keys[3:])  # N = 0: a softmax over no keys
    with pytest.raises(OpAttributeInvalid, match="at least one"):
        AttentionAttrs(qk_view=no_keys, pv_view=(*no_keys_pv[:3], 0, *no_keys_pv[4:]),
                       out_shape=(1, 4, 6))
    q, k, v = (relay.var(n, shape=(1, 4, 6)) for n in "qkv")
    mask = relay.var("mask", shape=(1, 1, 1, 4))
    with pytest.raises(Exception, match="mask strides"):
        _mod(contrib_attention(q, k, v, relay.const(0.0), mask, qk_view=qk, pv_view=pv,
                               out_shape=(1, 4, 6), mask_strides=(0, 0, 4, 1)))
    with pytest.raises(Exception, match="reads data up to"):
        _mod(contrib_attention(relay.var("q", shape=(1, 4, 5)), k, v, relay.const(0.0),
                               relay.const(0.0), qk_view=qk, pv_view=pv, out_shape=(1, 4, 6)))


def test_mask_strides_follow_the_batch_however_it_is_split() -> None:
    from ember.relay.transform.fuse_attention import mask_strides

    # (outer, head, row, key) strides; batch = outer x heads in the scores' leading dims
    assert mask_strides((1, 2, 9, 9), (1, 2, 9, 9), 2, 1) == (81, 0, 9, 1)
    assert mask_strides((1, 2, 9, 9), (1, 2, 9, 9), 2, 2) == (0, 81, 9, 1)
    assert mask_strides((2, 1, 1, 9), (2, 3, 9, 9), 6, 3) == (9, 0, 0, 1)
    assert mask_strides((9, 9), (6, 9, 9), 6, 3) == (0, 0, 9, 1)
    assert mask_strides((6, 1, 9), (6, 9, 9), 6, 3) == (27, 9, 0, 1)
    assert mask_strides((2, 9, 9), (9, 9), 1, 1) is None  # it would widen the scores
    assert mask_strides((3, 9), (6, 9, 9), 6, 3) is None  # does not broadcast


# ------------------------------------------------------------------------------ ? sizes
def _symbolic_model(heads: int = 2, dim: int = 4, score_bias: Any = None,
                    keys: Any = None) -> Any:
    expr = symbolic_attention(heads, dim, score_bias, keys)
    return IRModule.from_expr(relay.Function(relay.analysis.free_vars(expr), expr))


def test_symbolic_batch_and_sequence_fuse_into_one_kernel() -> None:
    from ember.relay.backend.pipeline import optimize_passes

    with ember.transform.PassContext(opt_level=3):
        opt = ember.transform.Sequential(optimize_passes())(_symbolic_model())
    calls = [n.op.name for n in post_order(opt["main"].body) if isinstance(n, Call)
             and hasattr(n.op, "name")]
    assert calls.count("nn.contrib_attention") == 1 and "nn.softmax" not in calls, calls
    assert "nn.contrib_gemm" not in calls and "divide" not in calls, calls
    (att,) = [n for n in post_order(opt["main"].body)
              if isinstance(n, Call) and getattr(n.op, "name", "") == "nn.contrib_attention"]
    a = att.attrs  # the divide as the scale, the (?, 1, 1, ?) mask read through its shape
    assert a.alpha == 0.25 and a.mask_from_shape and a.view_syms and a.view_eqs, a


def test_symbolic_views_interpreted_match_the_unfused_graph() -> None:
    """The numpy references of the ops with ``?`` views (what FoldConstant runs) at one size:
    the folded GEMMs, then the fused attention."""
    from ember.relay.backend.pipeline import optimize_passes

    before = InferType()(_symbolic_model())
    mods = []
    for disabled in (["FuseAttention"], []):
        with ember.transform.PassContext(opt_level=3, disabled_pass=disabled):
            mods.append(ember.transform.Sequential(optimize_passes())(before))
    folded, fused = mods
    assert "nn.contrib_attention" in str(fused["main"]) and "view_syms" in str(folded["main"])
    feeds = {n: RNG.standard_normal((2, 3, 8)).astype(np.float32) for n in "qkv"}
    feeds["mask"] = np.where(RNG.random((2, 1, 1, 3)) < 0.3, -1e4, 0).astype(np.float32)
    args = [feeds[p.name_hint] for p in before["main"].params]
    assert_same_result(before, folded, *args)
    assert_same_result(before, fused, *args)


def test_symbolic_scale_after_a_bias_scales_the_bias_too() -> None:
    """``(Q K + bias) / 4`` over 3 static keys: the kernel computes ``alpha * Q K + bias``,
    so the divide folds into alpha with the bias divided too (a constant one folded, one
    known at run time by a multiply; interpreted, rtol 1e-5)."""
    from ember.relay.backend.pipeline import optimize_passes

    bias = RNG.standard_normal(3).astype(np.float32) * 4
    for score_bias in (relay.const(bias), relay.var("bias", shape=(3,))):
        before = InferType()(_symbolic_model(score_bias=score_bias, keys=3))
        with ember.transform.PassContext(opt_level=3):
            fused = ember.transform.Sequential(optimize_passes())(before)
        assert "nn.contrib_attention" in str(fused["main"]), fused["main"]
        feeds = {n: RNG.standard_normal((2, 3, 8)).astype(np.float32) for n in "qkv"}
        feeds["mask"] = np.zeros((2, 1, 1, 3), np.float32)
        feeds["bias"] = bias
        args = [feeds[p.name_hint] for p in before["main"].params]
        assert_same_result(before, fused, *args)


def _single_head_chain() -> relay.Expr:
    """``?`` (batch, seq, 4) q, k, v as one head: 3-d (batch, M, N) scores plus a (?, 1, ?)
    mask, softmax, P V (the gemms' views over the operands' dims, as FoldGemmViews writes)."""
    q, k, v = (relay.var(n, shape=(relay.Any(), relay.Any(), 4)) for n in "qkv")
    mask = relay.var("mask", shape=(relay.Any(), 1, relay.Any()))
    zero = relay.const(0.0)
    s = contrib_gemm(q, k, zero, zero, kind="batch_matmul", transpose_b=False, alpha=0.5,
                     view=(1, 1, 1, 4, 4, 4, 4, 1, 4, 1, 1, 1, 0, 0, 0), out_shape=(1, 1, 1),
                     view_syms=(0, 0, 1, 1, 2, 4, 4, 1, 6, 4, 9, 1, 9, 4, 10, 4, 15, 0, 16, 1,
                                17, 4), view_eqs=(0, 3))
    p = relay.nn.softmax(relay.add(s, mask), axis=-1)
    return contrib_gemm(p, v, zero, zero, kind="batch_matmul", transpose_b=False,
                        view=(1, 1, 4, 1, 1, 1, 4, 4, 1, 4, 4, 1, 0, 0, 0), out_shape=(1, 1, 4),
                        view_syms=(0, 0, 1, 1, 3, 2, 4, 1, 4, 2, 5, 2, 6, 4, 9, 1, 15, 0, 16, 1),
                        view_eqs=(0, 3, 2, 4))


def test_symbolic_mask_of_single_head_scores_aligns_to_their_rank() -> None:
    """A (batch, 1, keys) mask on 3-d scores: its batch is the scores' batch, not their heads
    (compiled, against numpy: rtol 1e-5, atol 1e-5)."""
    mod = _mod(_single_head_chain())
    fused = run(FuseAttention(), mod)
    assert "nn.contrib_attention" in str(fused["main"]), fused["main"]
    model = ember.compile(fused, executor="vm")
    q, k, v = (RNG.standard_normal((2, 3, 4)).astype(np.float32) for _ in range(3))
    mask = RNG.standard_normal((2, 1, 3)).astype(np.float32)
    s = q @ k.transpose(0, 2, 1) * 0.5 + mask
    p = np.exp(s - s.max(-1, keepdims=True))
    want = p / p.sum(-1, keepdims=True) @ v
    np.testing.assert_allclose(model(q=q, k=k, v=v, mask=mask), want, rtol=1e-5, atol=1e-5)


def test_symbolic_mask_broadcasts_at_run_time_or_is_refused() -> None:
    """A mask of one key broadcasts (stride 0 chosen at run time); one that would widen the
    scores is an error naming the mask, not a read out of bounds."""
    from ember.runtime.errors import TVMError

    model = ember.compile(_symbolic_model(), executor="vm")
    q, k, v = (RNG.standard_normal((2, 5, 8)).astype(np.float32) for _ in range(3))

    def ref(mask: np.ndarray) -> np.ndarray:
        def split(t: np.ndarray) -> np.ndarray:
            return t.reshape(2, 5, 2, 4).transpose(0, 2, 1, 3)

        s = split(q) @ split(k).transpose(0, 1, 3, 2) / 4 + mask
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        return (p @ split(v)).transpose(0, 2, 1, 3).reshape(2, 5, 8)

    one = RNG.standard_normal((2, 1, 1, 1)).astype(np.float32)
    got = model(q=q, k=k, v=v, mask=one)
    np.testing.assert_allclose(got, ref(one), rtol=1e-5, atol=1e-5)
    with pytest.raises(TVMError, match="mask does not broadcast into the scores"):
        model(q=q, k=k, v=v, mask=np.zeros((2, 1, 1, 7), np.float32))

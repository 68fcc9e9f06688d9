"""FoldGemmViews: reshape/transpose chains around batched GEMMs become kernel strides.

- the view algebra against numpy (hypothesis: random reshape/transpose chains, the strided
  view must equal numpy's result, or the chain is refused exactly when numpy would copy);
- attention-shaped graphs (head split/merge, K transposed, batch 1 and 2; and as the ONNX
  importer writes rank-4 MatMuls, with reverse_reshapes, a divide and an additive mask) built
  with the pass on and off, and against numpy (rtol 1e-5, atol 1e-5): same results, no
  transpose left (at batch 2 through the kernel's two batch strides, outer and head);
- the type relation's refusals of views that read out of bounds or do not cover the output;
- ``?`` sizes: the algebra over run-time sizes against the static one (hypothesis), the
  importer's symbolic batch/sequence attention folded (no transpose, reshape, reverse_reshape
  or reshape_like left) and, with one VM build, against numpy at sequence 1 and 19 (rtol
  1e-5, atol 1e-5), the batches two chains share checked at run time, symbolic views checked
  at a generic size.
"""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember import relay
from ember.ir.visitor import post_order
from ember.relay.op.nn.gemm import contrib_gemm
from ember.relay.transform.fold_gemm_views import View
from _pass_helpers import symbolic_attention

RNG = np.random.default_rng(11)


def _ops(mod: ember.IRModule) -> Counter:
    return Counter(n.op.name for n in post_order(mod["main"].body)
                   if hasattr(n, "op") and hasattr(n.op, "name"))


# ------------------------------------------------------------------------------ view algebra
def _strided(base: np.ndarray, v: View) -> np.ndarray:
    flat = base.reshape(-1)
    return np.lib.stride_tricks.as_strided(flat, v.shape, [s * flat.itemsize for s in v.strides])


@st.composite
def chains(draw: st.DrawFn) -> tuple[tuple[int, ...], list]:
    shape = tuple(draw(st.lists(st.sampled_from([1, 2, 3, 4, 6]), min_size=1, max_size=4)))
    ops, cur = [], shape
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            axes = tuple(draw(st.permutations(range(len(cur)))))
            ops.append(("transpose", axes))
            cur = tuple(cur[a] for a in axes)
        else:
            size = int(np.prod(cur))
            dims, rest = [], size
            while rest > 1 and len(dims) < 4:
                d = draw(st.sampled_from([d for d in (1, 2, 3, 4, 6, rest) if rest % d == 0]))
                dims.append(d)
                rest //= d
            dims.append(rest)
            ops.append(("reshape", tuple(dims)))
            cur = tuple(dims)
    return shape, ops


@settings(max_examples=200, deadline=None)
@given(chains())
def test_view_algebra_matches_numpy(chain: tuple) -> None:
    shape, ops = chain
    base = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    arr, view = base, View.dense(shape)
    for kind, arg in ops:
        if kind == "transpose":
            arr, view = arr.transpose(arg), view.transpose(arg)
        else:
            no_copy = arr.reshape(arg)
            copied = not np.shares_memory(no_copy, base)
            arr, view = no_copy, view.reshape(arg)
            if view is None:
                assert copied  # refused only where numpy needs a copy too
                return
    np.testing.assert_array_equal(_strided(base, view), arr)


@st.composite
def symbolic_chains(draw: st.DrawFn) -> tuple[tuple, dict, list]:
    """A shape whose dims are ints or run-time sizes (Sym), and transposes, merges of
    adjacent dims and splits of int dims over it (what reshapes of such shapes can do)."""
    from ember.relay.transform._view_dims import Sym

    n = draw(st.integers(1, 4))
    values = {}
    shape: list = []
    for axis in range(n):
        d = draw(st.sampled_from([1, 2, 3, 4, 6]))
        if draw(st.booleans()):
            values[(0, axis)] = d
            shape.append(Sym(1, ((0, axis),)))
        else:
            shape.append(d)
    ops, cur = [], list(shape)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["transpose", "merge", "split"]))
        if kind == "transpose":
            axes = tuple(draw(st.permutations(range(len(cur)))))
            ops.append(("transpose", axes))
            cur = [cur[a] for a in axes]
            continue
        if kind == "merge" and len(cur) > 1:
            i = draw(st.integers(0, len(cur) - 2))
            cur = cur[:i] + [cur[i] * cur[i + 1]] + cur[i + 2:]
        elif kind == "split":
            ints = [i for i, d in enumerate(cur) if isinstance(d, int) and d in (4, 6)]
            if not ints:
                continue
            i = draw(st.sampled_from(ints))
            cur = cur[:i] + [2, cur[i] // 2] + cur[i + 1:]
        ops.append(("reshape", tuple(cur)))
    return tuple(shape), values, ops


@settings(max_examples=200, deadline=None)
@given(symbolic_chains())
def test_symbolic_view_algebra_agrees_with_the_static_one(chain: tuple) -> None:
    """Where the algebra over run-time sizes gives a view, it is the view the static algebra
    gives at those sizes (and numpy's result)."""
    from ember.relay.transform._view_dims import Sym

    shape, values, ops = chain

    def at(d: object) -> int:
        if not isinstance(d, Sym):
            return d
        out = d.coef
        for r in d.refs:
            out *= values[r]
        return out

    sym, view = View.dense(shape), View.dense(tuple(at(d) for d in shape))
    base = np.arange(int(np.prod(view.shape)), dtype=np.float32).reshape(view.shape)
    arr = base
    for kind, arg in ops:
        if kind == "transpose":
            sym, view, arr = sym.transpose(arg), view.transpose(arg), arr.transpose(arg)
            continue
        sym, arr = sym.reshape(arg), arr.reshape(tuple(at(d) for d in arg))
        view = view.reshape(tuple(at(d) for d in arg)) if view is not None else None
        if sym is None:
            return
    assert view is not None
    assert tuple(at(d) for d in sym.shape) == view.shape
    assert [at(s) for s, d in zip(sym.strides, view.shape) if d > 1] == [
        s for s, d in zip(view.strides, view.shape) if d > 1]
    np.testing.assert_array_equal(_strided(base, View(view.shape, view.strides)), arr)


def test_untranspose_inverts_transpose() -> None:
    v = View((2, 3, 4), (1, 8, 2))
    assert v.transpose((2, 0, 1)).untranspose((2, 0, 1)) == v


# ------------------------------------------------------------------------------ attention
def _attention(batch: int, heads: int, seq: int, dim: int) -> relay.Expr:
    hidden = heads * dim
    x = [relay.var(n, shape=(batch, seq, hidden)) for n in ("q", "k", "v")]

    def split(t: relay.Expr) -> relay.Expr:
        t = relay.transpose(relay.reshape(t, (batch, seq, heads, dim)), (0, 2, 1, 3))
        return relay.reshape(t, (batch * heads, seq, dim))

    q, k, v = (split(t) for t in x)
    kt = relay.transpose(k, (0, 2, 1))
    s = relay.nn.softmax(relay.multiply(relay.nn.batch_matmul(q, kt, transpose_b=False),
                                        relay.const(0.25)), axis=-1)
    ctx = relay.nn.batch_matmul(s, v, transpose_b=False)
    ctx = relay.transpose(relay.reshape(ctx, (batch, heads, seq, dim)), (0, 2, 1, 3))
    return relay.reshape(ctx, (batch, seq, hidden))


def _attention_ref(q: np.ndarray, k: np.ndarray, v: np.ndarray, heads: int,
                   scale: float = 0.25, mask: np.ndarray | float = 0.0) -> np.ndarray:
    b, s, h = q.shape
    d = h // heads

    def split(t: np.ndarray) -> np.ndarray:
        return t.reshape(b, s, heads, d).transpose(0, 2, 1, 3)

    sc = split(q) @ split(k).transpose(0, 1, 3, 2) * scale + mask
    p = np.exp(sc - sc.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return (p @ split(v)).transpose(0, 2, 1, 3).reshape(b, s, h)


def _build_run(expr: relay.Expr, inputs: dict, fold: bool) -> tuple[np.ndarray, Counter]:
    from ember.contrib import graph_executor
    from ember.relay.backend.pipeline import optimize_passes

    mod = ember.IRModule.from_expr(relay.Function(relay.analysis.free_vars(expr), expr))
    # FuseAttention (tests/relay/transform/test_fuse_attention.py) would take the GEMMs
    disabled = ["FuseAttention"] + ([] if fold else ["FoldGemmViews"])
    with ember.transform.PassContext(opt_level=3, disabled_pass=disabled):
        ops = _ops(ember.transform.Sequential(optimize_passes())(mod))
        lib = relay.build(mod, "llvm")
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    m.set_input(**inputs)
    m.run()
    return m.get_output(0).numpy(), ops


def _gemms(expr: relay.Expr) -> list:
    from ember.relay.backend.pipeline import optimize_passes

    mod = ember.IRModule.from_expr(relay.Function(relay.analysis.free_vars(expr), expr))
    with ember.transform.PassContext(opt_level=3, disabled_pass=["FuseAttention"]):
        opt = ember.transform.Sequential(optimize_passes())(mod)
    return [n for n in post_order(opt["main"].body)
            if getattr(getattr(n, "op", None), "name", None) == "nn.contrib_gemm"]


@pytest.mark.parametrize("batch,heads,seq,dim", [(1, 2, 16, 8), (2, 3, 7, 5)])
def test_attention_without_transposes(batch: int, heads: int, seq: int, dim: int) -> None:
    expr = _attention(batch, heads, seq, dim)
    inputs = {n: RNG.standard_normal((batch, seq, heads * dim)).astype(np.float32)
              for n in ("q", "k", "v")}
    on, ops_on = _build_run(expr, inputs, True)
    off, ops_off = _build_run(expr, inputs, False)
    want = _attention_ref(inputs["q"], inputs["k"], inputs["v"], heads)
    np.testing.assert_allclose(on, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(on, off, rtol=1e-5, atol=1e-5)
    assert ops_off["transpose"] == 5
    # at batch 2, (batch, heads) do not merge into one strided batch: two strides read them
    assert ops_on["transpose"] == 0 and ops_on["reshape"] == 0, ops_on
    heads_views = [len(g.attrs.view) == 15 for g in _gemms(expr)]
    assert heads_views == [batch > 1] * 2, heads_views


def _attention_as_imported(batch: int, heads: int, seq: int, dim: int) -> relay.Expr:
    """Attention as the ONNX importer writes rank-4 MatMuls (reverse_reshape to a batch of
    heads and back around each batch_matmul), scaled by a divide, with an additive mask of
    (batch, 1, 1, seq)."""
    x = [relay.var(n, shape=(batch, seq, heads * dim)) for n in ("q", "k", "v")]
    mask = relay.var("mask", shape=(batch, 1, 1, seq))

    def heads_of(t: relay.Expr, axes: tuple) -> relay.Expr:
        return relay.transpose(relay.reshape(t, (batch, seq, heads, dim)), axes)

    def matmul(a: relay.Expr, b: relay.Expr) -> relay.Expr:
        y = relay.nn.batch_matmul(relay.reverse_reshape(a, (-1, 0, 0)),
                                  relay.reverse_reshape(b, (-1, 0, 0)), transpose_b=False)
        return relay.reverse_reshape(y, (batch, heads, 0, 0))

    s = matmul(heads_of(x[0], (0, 2, 1, 3)), heads_of(x[1], (0, 2, 3, 1)))
    p = relay.nn.softmax(relay.add(relay.divide(s, relay.const(4.0)), mask), axis=-1)
    ctx = relay.transpose(matmul(p, heads_of(x[2], (0, 2, 1, 3))), (0, 2, 1, 3))
    return relay.reshape(ctx, (batch, seq, heads * dim))


@pytest.mark.parametrize("batch,heads,seq,dim", [(1, 2, 16, 8), (1, 3, 7, 5), (2, 3, 7, 5)])
def test_imported_attention_folds_views_scale_and_mask(batch: int, heads: int, seq: int,
                                                       dim: int) -> None:
    expr = _attention_as_imported(batch, heads, seq, dim)
    inputs = {n: RNG.standard_normal((batch, seq, heads * dim)).astype(np.float32)
              for n in ("q", "k", "v")}
    inputs["mask"] = np.where(RNG.random((batch, 1, 1, seq)) < 0.3, -1e4, 0).astype(np.float32)
    on, ops_on = _build_run(expr, inputs, True)
    off, ops_off = _build_run(expr, inputs, False)
    scores = _attention_ref(inputs["q"], inputs["k"], inputs["v"], heads, scale=1 / 4,
                            mask=inputs["mask"])
    np.testing.assert_allclose(on, scores, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(on, off, rtol=1e-5, atol=1e-5)
    assert ops_off["transpose"] == 4
    # the divide and (one per column at batch 1) the mask went into the scores' epilogue,
    # the head chains into strides
    assert ops_on["transpose"] == ops_on["contrib_reverse_reshape"] == ops_on["divide"] == 0
    assert ops_on["add"] == (batch > 1), ops_on


# ------------------------------------------------------------------------------ ? sizes
def _optimized(expr: relay.Expr) -> ember.IRModule:
    from ember.relay.backend.pipeline import optimize_passes

    mod = ember.IRModule.from_expr(relay.Function(relay.analysis.free_vars(expr), expr))
    with ember.transform.PassContext(opt_level=3, disabled_pass=["FuseAttention"]):
        return ember.transform.Sequential(optimize_passes())(mod)


def test_symbolic_batch_and_sequence_fold_into_strides() -> None:
    opt = _optimized(symbolic_attention(3, 5))
    ops = _ops(opt)
    assert ops["transpose"] == ops["contrib_reverse_reshape"] == ops["reshape_like"] == 0, ops
    assert ops["reshape"] == 0 and ops["nn.contrib_gemm"] == 2, ops
    gemms = [n for n in post_order(opt["main"].body)
             if getattr(getattr(n, "op", None), "name", None) == "nn.contrib_gemm"]
    for g in gemms:  # the heads as (outer, head) strides; batch and sequence from the operands
        assert len(g.attrs.view) == 15 and g.attrs.view[11] == 3 and g.attrs.view_syms, g.attrs
        assert g.attrs.view_eqs, g.attrs  # the batches of the two chains checked equal
    # the scores keep their (?, heads, ?, ?) type; the output its (?, ?, hidden)
    assert gemms[0].checked_type.shape[1] == 3 and gemms[1].checked_type.shape[2] == 15


@pytest.mark.parametrize("batch,seqs,fuse", [(2, (1, 19), False), (2, (1, 19), True),
                                             (1, (7,), True)])
def test_symbolic_attention_matches_numpy_at_run_time_sizes(batch: int, seqs: tuple,
                                                           fuse: bool) -> None:
    """One VM build at sequence 1 and beyond one register tile of rows (12 on AVX-512), the
    folded GEMMs and softmax or (FuseAttention) one attention kernel."""
    expr = symbolic_attention(3, 5)
    with ember.transform.PassContext(disabled_pass=[] if fuse else ["FuseAttention"]):
        model = ember.compile(ember.IRModule.from_expr(
            relay.Function(relay.analysis.free_vars(expr), expr)), executor="vm")
    for seq in seqs:
        q, k, v = (RNG.standard_normal((batch, seq, 15)).astype(np.float32) for _ in range(3))
        mask = np.where(RNG.random((batch, 1, 1, seq)) < 0.3, -1e4, 0).astype(np.float32)
        want = _attention_ref(q, k, v, 3, scale=1 / 4, mask=mask)
        got = model(q=q, k=k, v=v, mask=mask)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_symbolic_views_check_the_batches_they_share_at_run_time() -> None:
    from ember.runtime.errors import TVMError

    expr = symbolic_attention(2, 4)
    model = ember.compile(ember.IRModule.from_expr(
        relay.Function(relay.analysis.free_vars(expr), expr)), executor="vm")
    q = RNG.standard_normal((2, 3, 8)).astype(np.float32)
    k = RNG.standard_normal((1, 3, 8)).astype(np.float32)  # batch 1: (2 x 2) vs 2 heads
    mask = np.zeros((2, 1, 1, 3), np.float32)
    with pytest.raises(TVMError, match="batches (and sequences )?must be equal"):
        model(q=q, k=k, v=q, mask=mask)


# ------------------------------------------------------------------------------ refusals
def _infer(call: relay.Expr) -> None:
    mod = ember.IRModule.from_expr(relay.Function(relay.analysis.free_vars(call), call))
    relay.transform.InferType()(mod)


def test_views_out_of_bounds_or_not_covering_are_refused() -> None:
    a, b = relay.var("a", shape=(2, 4, 3)), relay.var("b", shape=(2, 3, 5))
    zero = relay.const(0.0)
    ok = (2, 4, 5, 3, 12, 3, 15, 5, 1, 20, 5)
    _infer(contrib_gemm(a, b, zero, zero, kind="batch_matmul", transpose_b=False, view=ok,
                        out_shape=(2, 4, 5)))
    far = (2, 4, 5, 3, 13, 3, 15, 5, 1, 20, 5)
    with pytest.raises(Exception, match="reads data up to element 24"):
        _infer(contrib_gemm(a, b, zero, zero, kind="batch_matmul", transpose_b=False, view=far,
                            out_shape=(2, 4, 5)))
    overlap = (2, 4, 5, 3, 12, 3, 15, 5, 1, 5, 5)
    with pytest.raises(Exception, match="does not cover out_shape"):
        _infer(contrib_gemm(a, b, zero, zero, kind="batch_matmul", transpose_b=False,
                            view=overlap, out_shape=(2, 4, 5)))
    from ember.relay.op.nn.gemm import GemmAttrs
    from ember.runtime.errors import OpAttributeInvalid

    with pytest.raises(OpAttributeInvalid, match="view"):
        GemmAttrs(kind="batch_matmul", view=ok)  # without out_shape
    with pytest.raises(OpAttributeInvalid, match="view"):
        GemmAttrs(kind="batch_matmul", view=ok[:5], out_shape=(2, 4, 5))
    with pytest.raises(OpAttributeInvalid, match="view_syms"):
        GemmAttrs(kind="batch_matmul", view=ok, out_shape=(2, 4, 5), view_syms=(14, 0))


def test_symbolic_views_check_that_sizes_fit_the_kernels_32_bit_strides() -> None:
    from ember.relay.op.nn.gemm import int32_fields
    from ember.tir import op as tir
    from ember.tir.expr import IntImm, SizeVar

    assert int32_fields((3, 2 ** 31), "op") == []  # static: the build's business
    (fits,) = int32_fields((tir.const(2 ** 31 - 1), 5), "op")
    (too_big,) = int32_fields((tir.const(2 ** 16) * tir.const(2 ** 15), 5), "op")
    assert isinstance(fits[0], IntImm) and fits[0].value
    assert isinstance(too_big[0], IntImm) and not too_big[0].value
    assert "2^31 or more" in too_big[1]
    ((cond, _),) = int32_fields((SizeVar("n") * 4096, 1), "op")
    assert not isinstance(cond, IntImm)  # checked at each call


def test_symbolic_views_are_checked_at_a_generic_size() -> None:
    a, b = relay.var("a", shape=(relay.Any(), 4, 3)), relay.var("b", shape=(relay.Any(), 3, 5))
    zero = relay.const(0.0)
    # batch ? of a (dim 0) and of b (dim 3): its strides 12 and 15 per batch item
    syms, eqs = (0, 0, 11, 0), (0, 3)
    ok = (1, 4, 5, 3, 12, 3, 15, 5, 1, 20, 5)
    _infer(contrib_gemm(a, b, zero, zero, kind="batch_matmul", transpose_b=False, view=ok,
                        out_shape=(1, 4, 5), view_syms=syms, view_eqs=eqs))
    far = (1, 4, 5, 3, 13, 3, 15, 5, 1, 20, 5)
    with pytest.raises(Exception, match="reads data up to element .* generic size"):
        _infer(contrib_gemm(a, b, zero, zero, kind="batch_matmul", transpose_b=False,
                            view=far, out_shape=(1, 4, 5), view_syms=syms, view_eqs=eqs))
    with pytest.raises(Exception, match="refers to operand dimension 6"):
        _infer(contrib_gemm(a, b, zero, zero, kind="batch_matmul", transpose_b=False, view=ok,
                            out_shape=(1, 4, 5), view_syms=(0, 6, 11, 0), view_eqs=eqs))


def test_view_with_residual_matches_numpy_folded_and_compiled() -> None:
    from ember.contrib import graph_executor
    from ember.relay.transform import FoldConstant, InferType

    q, k = (RNG.standard_normal((1, 4, 6)).astype(np.float32) for _ in range(2))
    res = RNG.standard_normal((2, 4, 4)).astype(np.float32)
    view = (2, 4, 4, 3, 3, 6, 3, 1, 6, 16, 4)  # heads of 3 out of (seq 4, 2 heads x 3)
    heads = [t.reshape(4, 2, 3).transpose(1, 0, 2) for t in (q, k)]
    want = 0.5 * heads[0] @ heads[1].transpose(0, 2, 1) + res

    def gemm(a: relay.Expr, b: relay.Expr, r: relay.Expr) -> relay.Expr:
        return contrib_gemm(a, b, relay.const(0.0), r, kind="batch_matmul", transpose_b=False,
                            view=view, out_shape=(2, 4, 4), has_residual=True, alpha=0.5)

    folded = FoldConstant()(InferType()(ember.IRModule.from_expr(relay.Function(
        [], gemm(relay.const(q), relay.const(k), relay.const(res))))))
    np.testing.assert_allclose(folded["main"].body.data.numpy(), want, rtol=1e-5, atol=1e-6)
    a, b, r = (relay.var(n, shape=s) for n, s in (("a", q.shape), ("b", k.shape), ("r", res.shape)))
    with ember.transform.PassContext(opt_level=3):
        lib = relay.build(ember.IRModule.from_expr(relay.Function([a, b, r], gemm(a, b, r))),
                          "llvm")
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    m.set_input(a=q, b=k, r=res)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-5, atol=1e-6)

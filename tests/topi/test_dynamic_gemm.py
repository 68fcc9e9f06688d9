"""The C GEMM kernel with run-time extents: dense / matmul / batch_matmul whose rows, batch or
sequence length are ``?`` run on ``ember_sgemm`` with the packed weight and the fused epilogue,
against numpy over many shapes (1, and sizes that are no multiple of the 6-row tile or of the
panel width), and against the static build at the same shape at the same shape.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dynamic_util import (assert_same_result, build_dynamic, build_static, kernel_names, rand,
                          requires_cc)
from ember.runtime.errors import TVMError
from ember.tir.expr import IntImm, SizeVar
from ember.tir import op as tir
from ember.target.simd import LEVELS
from ember.topi.nn import gemm_kernel as G

pytestmark = requires_cc
RNG = np.random.default_rng(0)
SIZES = st.integers(1, 29)

# rows ? x 37 features -> 19 units (+ bias, relu) -> 7 units: K and N no multiple of any panel
MLP = """#[version = "0.0.5"]
def @main(%x: Tensor[({m}, 37), float32], %w1: Tensor[(19, 37), float32],
          %b1: Tensor[(19), float32], %w2: Tensor[(7, 19), float32]) {{
  %0 = nn.relu(nn.bias_add(nn.dense(%x, %w1), %b1));
  nn.dense(%0, %w2)
}}
"""
MLP_PARAMS = {"w1": rand(RNG, 19, 37), "b1": rand(RNG, 19), "w2": rand(RNG, 7, 19)}

# attention over ? sequences of ? heads: scores = q k^T, softmax, probs @ v
ATTENTION = """#[version = "0.0.5"]
def @main(%q: Tensor[({b}, {s}, 12), float32], %k: Tensor[({b}, {s}, 12), float32],
          %v: Tensor[({b}, {s}, 12), float32]) {{
  %0 = multiply(nn.batch_matmul(%q, %k), 0.25f);
  nn.batch_matmul(nn.softmax(%0, axis=-1), %v, transpose_b=False)
}}
"""

# (batch, seq, hidden) tokens through a dense with a residual: the epilogue reads a ? x ? x 24
# residual laid out like the output
RESIDUAL = """#[version = "0.0.5"]
def @main(%x: Tensor[({b}, {s}, 24), float32], %w: Tensor[(24, 24), float32]) {{
  add(nn.dense(%x, %w), %x)
}}
"""
RESIDUAL_PARAMS = {"w": rand(RNG, 24, 24)}


@pytest.fixture(scope="module")
def mlp():
    return build_dynamic(MLP, MLP_PARAMS)


@pytest.fixture(scope="module")
def attention():
    return build_dynamic(ATTENTION, {})


def _mlp_ref(x: np.ndarray) -> np.ndarray:
    h = np.maximum(x @ MLP_PARAMS["w1"].T + MLP_PARAMS["b1"], 0)
    return h @ MLP_PARAMS["w2"].T


def _attention_ref(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    s = q @ k.swapaxes(1, 2) * 0.25
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def test_dynamic_dense_chain_runs_on_the_gemm_kernel_with_packed_weights() -> None:
    names = kernel_names(MLP, MLP_PARAMS)
    assert sum("contrib_gemm" in n for n in names if not n.endswith("shape_func")) == 2, names


@settings(max_examples=25, deadline=None)
@given(m=SIZES)
def test_dynamic_dense_matches_numpy_at_any_row_count(mlp, m: int) -> None:
    x = rand(np.random.default_rng(m), m, 37)
    np.testing.assert_allclose(mlp(x), _mlp_ref(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("m", [1, 7, 13])
def test_dynamic_dense_agrees_with_the_static_build(mlp, m: int) -> None:
    x = rand(RNG, m, 37)
    assert_same_result(mlp(x), build_static(MLP, MLP_PARAMS, m=m)(x))


@settings(max_examples=20, deadline=None)
@given(b=st.integers(1, 5), s=SIZES)
def test_dynamic_attention_matches_numpy(attention, b: int, s: int) -> None:
    rng = np.random.default_rng(b * 100 + s)
    q, k, v = (rand(rng, b, s, 12) for _ in range(3))
    np.testing.assert_allclose(attention(q, k, v), _attention_ref(q, k, v), rtol=1e-5,
                               atol=1e-5)


def test_dynamic_attention_agrees_with_the_static_build(attention) -> None:
    q, k, v = (rand(RNG, 3, 11, 12) for _ in range(3))
    assert_same_result(attention(q, k, v), build_static(ATTENTION, {}, b=3, s=11)(q, k, v))


@pytest.mark.parametrize("b, s", [(1, 1), (2, 9)])
def test_dynamic_residual_epilogue_matches_numpy(b: int, s: int) -> None:
    model = build_dynamic(RESIDUAL, RESIDUAL_PARAMS)
    assert any("contrib_gemm" in n for n in kernel_names(RESIDUAL, RESIDUAL_PARAMS))
    x = rand(RNG, b, s, 24)
    np.testing.assert_allclose(model(x), x @ RESIDUAL_PARAMS["w"].T + x, rtol=1e-5, atol=1e-5)


def test_a_residual_whose_unknown_sizes_differ_at_run_time_is_an_error() -> None:
    import ember

    text = """#[version = "0.0.5"]
def @main(%x: Tensor[(?, 24), float32], %r: Tensor[(?, 24), float32],
          %w: Tensor[(24, 24), float32]) {
  add(nn.dense(%x, %w), %r)
}
"""
    model = ember.compile(text, executor="vm", params=RESIDUAL_PARAMS)
    x, r = rand(RNG, 3, 24), rand(RNG, 3, 24)
    np.testing.assert_allclose(model(x, r), x @ RESIDUAL_PARAMS["w"].T + r, rtol=1e-5,
                               atol=1e-5)
    # the types say the two ? are one size (the residual is fused and read in place); a
    # residual that would broadcast at run time is refused, not read out of bounds
    with pytest.raises(TVMError, match="residual: dimension 0 differs from the output's"):
        model(x, rand(RNG, 1, 24))


def test_a_reduction_length_that_differs_at_run_time_is_an_error() -> None:
    text = """#[version = "0.0.5"]
def @main(%x: Tensor[(?, ?), float32], %w: Tensor[(?, ?), float32]) {
  nn.dense(%x, %w)
}
"""
    import ember

    model = ember.compile(text, executor="vm")
    x, w = rand(RNG, 3, 5), rand(RNG, 4, 5)
    np.testing.assert_allclose(model(x, w), x @ w.T, rtol=1e-5, atol=1e-5)
    with pytest.raises(TVMError, match="inner .reduction. dimensions must have the same size"):
        model(x, rand(RNG, 4, 6))


def test_batches_that_do_not_broadcast_at_run_time_are_an_error() -> None:
    import ember

    text = """#[version = "0.0.5"]
def @main(%x: Tensor[(?, 4, 5), float32], %y: Tensor[(?, 5, 3), float32]) {
  nn.batch_matmul(%x, %y, transpose_b=False)
}
"""
    model = ember.compile(text, executor="vm")
    x, y = rand(RNG, 2, 4, 5), rand(RNG, 1, 5, 3)
    np.testing.assert_allclose(model(x, y), x @ y, rtol=1e-5, atol=1e-5)
    with pytest.raises(TVMError, match="do not broadcast"):
        model(x, rand(RNG, 3, 5, 3))


def test_the_tile_expressions_fold_to_the_static_model() -> None:
    for level in (LEVELS["avx2"], LEVELS["avx512"]):
        for sizes in [(1, 1, 1, 1), (1, 7, 19, 37), (4, 1000, 512, 4096), (2, 5, 3000, 64)]:
            got = G.tile_exprs(*(tir.const(v) for v in sizes), level)
            assert all(isinstance(x, IntImm) for x in got)
            model = G.model_gemm_tiles(*sizes, level)
            assert (got[0].value, got[1].value, bool(got[2].value)) == (model.mc, model.kc,
                                                                          model.parallel)
            assert model.mc % G.register_rows(level) == 0


def test_the_tile_expressions_of_run_time_rows_stay_expressions() -> None:
    m = SizeVar("m")
    mc, kc, parallel = G.tile_exprs(tir.const(1), m, tir.const(64), tir.const(64),
                                    LEVELS["avx512"])
    assert not isinstance(mc, IntImm) and not isinstance(parallel, IntImm)


def _products(checks: list) -> list:
    """The multiplications in the conditions of ``checks`` that involve a run-time size."""
    from ember.tir.expr import Mul
    from ember.tir.functor import post_order

    return [n for cond, _ in checks for n in post_order(cond) if isinstance(n, Mul)
            and any(isinstance(x, SizeVar) for x in post_order(n))]


def test_the_run_time_bounds_and_int32_checks_multiply_in_int64() -> None:
    """The checks that a ``?`` view reads in bounds and that its fields fit the kernel's int32
    are products of int32 sizes: formed in int32 they would wrap (and never fail), so each
    product is int64; the kernel gets the checked fields as int32."""
    from ember.relay.op.nn.attention import checked_views
    from ember.relay.op.nn.gemm import GemmAttrs, checked_view
    from ember.te import tensor as te

    def operands(*shapes: tuple) -> list:
        return [te.placeholder(tuple(SizeVar(f"d{i}_{j}") if d is None else d
                                     for j, d in enumerate(shape)), name=f"t{i}")
                for i, shape in enumerate(shapes)]

    gemm = GemmAttrs(kind="batch_matmul", transpose_b=False,
                     view=(1, 3, 5, 4, 0, 4, 0, 5, 1, 15, 5, 1, 0, 0, 0), out_shape=(1, 3, 5),
                     view_syms=(0, 0, 9, 0, 15, 0))
    view, _, checks = checked_view(gemm, *operands((None, 3, 4), (1, 4, 5)))
    attention = _run_time_attention()
    q, k, v, mask = operands((None, None, 8), (None, None, 8), (None, None, 8),
                             (None, 1, 1, None))
    qk, pv, strides, att_checks = checked_views(attention, q, k, v, mask)
    assert any("whole number of groups" in text for _, text in att_checks), att_checks
    for fields, conds in ((view, checks), ((*qk, *pv, *strides), att_checks)):
        products = _products(list(conds))
        assert products and all(p.dtype == "int64" for p in products), products
        assert all(x.dtype == "int32" for x in fields if not isinstance(x, int)), fields


# a ? batch read as groups of 5 heads: whole groups only when the batch is a multiple of 5
GROUPED = dict(kind="batch_matmul", transpose_b=False,
               view=(1, 3, 5, 4, 0, 4, 0, 5, 1, 75, 25, 5, 0, 0, 5), out_shape=(1, 3, 5),
               view_syms=(0, 1, 15, 1))


def test_a_batch_of_no_whole_groups_of_heads_is_refused_at_compile_time() -> None:
    """Checked at a stand-in size of the ``?`` batch, which must not divide by 5 by chance
    (1_000_005 did: the kernel then wrote past its output at a batch of 7)."""
    from ember import relay
    from ember.ir import IRModule
    from ember.relay.op.nn.gemm import contrib_gemm
    from ember.relay.transform import InferType
    from ember.runtime.errors import TypeInferenceError

    a = relay.var("a", shape=(3, relay.Any(), 4))
    b = relay.var("b", shape=(1, 4, 5))
    call = contrib_gemm(a, b, relay.const(0.0), relay.const(0.0), **GROUPED)
    with pytest.raises(TypeInferenceError, match="not a whole number of groups of 5 heads"):
        InferType()(IRModule.from_expr(relay.Function([a, b], call)))


def test_the_kernel_checks_the_batch_is_whole_groups_of_heads() -> None:
    """... and again at each call."""
    from ember.relay.op.nn.gemm import GemmAttrs, checked_view
    from ember.te import tensor as te

    a = te.placeholder((3, SizeVar("n"), 4), name="a")
    _, _, checks = checked_view(GemmAttrs(**GROUPED), a, te.placeholder((1, 4, 5), name="b"))
    assert any("whole number of groups" in text for _, text in checks), checks


def test_a_run_time_head_count_is_checked_positive_before_anything_divides_by_it() -> None:
    """A head count read from an operand's ``?`` dimension of size 0 made the batch check's
    modulo (and the views' batch / heads) trap: it is checked first."""
    from ember.relay.op.nn.gemm import whole_groups

    checks = whole_groups(SizeVar("batch"), SizeVar("heads"), "op: ")
    assert [text for _, text in checks] == [
        "op: its views' head count is less than 1",
        "op: its views' batch is not a whole number of groups of its heads"]
    assert len(whole_groups(SizeVar("batch"), 4, "")) == 1  # a static count: the type checked it


def _run_time_attention(**kw: object):
    from ember.relay.op.nn.attention import AttentionAttrs

    # q, k, v of (?, ?, 8) as 2 heads of 4 and a (?, 1, 1, ?) mask, as FuseAttention writes them
    return AttentionAttrs(
        qk_view=(2, 1, 1, 4, 8, 8, 8, 1, 8, 2, 1, 2, 4, 4, 1),
        pv_view=(2, 1, 4, 1, 2, 1, 8, 8, 1, 8, 8, 2, 1, 4, 4), out_shape=(1, 1, 8),
        view_syms=(0, 0, 1, 1, 2, 4, 4, 1, 6, 4, 9, 1, 9, 4, 10, 4, 14, 1, 14, 4, 15, 0, 16, 1,
                   18, 4, 19, 1, 19, 4, 20, 4, 21, 7, 24, 1, 27, 1, 27, 4, 30, 0, 31, 1),
        view_eqs=(0, 3, 0, 6, 4, 7), mask_from_shape=True, **kw)


def test_the_reference_refuses_a_mask_that_does_not_broadcast() -> None:
    """The kernel checks the mask's broadcast at each call; the numpy reference read past the
    mask instead (as_strided over its shape)."""
    from ember.relay.op.nn.attention import attention_ref

    attrs = _run_time_attention()
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 3, 8)).astype("float32") for _ in range(3))
    zero = np.zeros((), "float32")
    good = np.zeros((2, 1, 1, 3), "float32")
    assert attention_ref(q, k, v, zero, good, attrs).shape == (2, 3, 8)
    with pytest.raises(ValueError, match=r"mask \(2, 1, 2, 3\) does not broadcast"):
        attention_ref(q, k, v, zero, np.zeros((2, 1, 2, 3), "float32"), attrs)


def test_a_mask_from_its_shape_needs_run_time_views() -> None:
    from ember.relay.op.nn.attention import AttentionAttrs

    with pytest.raises(Exception, match="mask_from_shape.*only with view_syms"):
        AttentionAttrs(mask_from_shape=True)

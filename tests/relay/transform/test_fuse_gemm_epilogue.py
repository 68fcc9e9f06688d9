"""FuseGemmEpilogue through a reshape of the product: before/expected pairs (the importer's
rank-4 MatMul, a reverse_reshape of a batch_matmul, then scale, mask, activation and
residual), the cases it must leave alone (a reshape that changes the last axis keeps a bias
out, a product read twice), and numerics of the rewritten module against the original on the
reference interpreter (rtol 1e-5, atol 1e-5: float64 references of float32 products)."""
from __future__ import annotations

import numpy as np
from _pass_helpers import assert_main_equal, assert_same_result, parse, run

from ember.relay.transform import FuseGemmEpilogue

RNG = np.random.default_rng(3)
SIG = ("%a: Tensor[(4, 8, 5), float32], %b: Tensor[(4, 5, 8), float32], "
       "%m: Tensor[(1, 1, 1, 8), float32], %r: Tensor[(1, 4, 8, 8), float32]")
SCORES = """  %0 = nn.batch_matmul(%a, %b, transpose_b=False);
  %1 = contrib_reverse_reshape(%0, newshape=[1, 4, 0, 0]);
"""


def _inputs() -> list[np.ndarray]:
    return [RNG.standard_normal(s).astype("float32")
            for s in ((4, 8, 5), (4, 5, 8), (1, 1, 1, 8), (1, 4, 8, 8))]


def test_scale_mask_activation_and_residual_go_through_the_reshape() -> None:
    before = parse(f"""def @main({SIG}) {{
{SCORES}  %2 = divide(%1, 2f);
  %3 = add(%2, %m);
  %4 = nn.relu(%3);
  add(%4, %r)
}}""")
    after = run(FuseGemmEpilogue(), before)
    assert_main_equal(after, f"""def @main({SIG}) {{
  %0 = reshape(%m, newshape=[8]);
  %1 = reshape(%r, newshape=[4, 8, 8]);
  %2 = nn.contrib_gemm(%a, %b, %0, %1, kind="batch_matmul", transpose_b=False, alpha=0.5f,
                       has_bias=True, has_residual=True, act1="relu");
  contrib_reverse_reshape(%2, newshape=[1, 4, 0, 0])
}}""")
    assert_same_result(before, after, *_inputs())


def test_a_reshape_that_changes_the_last_axis_keeps_the_bias_out() -> None:
    sig = "%a: Tensor[(4, 8, 5), float32], %b: Tensor[(4, 5, 8), float32], %v: Tensor[(64), float32]"
    before = parse(f"""def @main({sig}) {{
  %0 = nn.batch_matmul(%a, %b, transpose_b=False);
  %1 = reshape(%0, newshape=[4, 64]);
  %2 = multiply(%1, 3f);
  add(%2, %v)
}}""")
    after = run(FuseGemmEpilogue(), before)
    assert_main_equal(after, f"""def @main({sig}) {{
  %0 = nn.contrib_gemm(%a, %b, 0f, 0f, kind="batch_matmul", transpose_b=False, alpha=3f);
  %1 = reshape(%0, newshape=[4, 64]);
  add(%1, %v)
}}""")
    a, b = (RNG.standard_normal(s).astype("float32") for s in ((4, 8, 5), (4, 5, 8)))
    assert_same_result(before, after, a, b, RNG.standard_normal(64).astype("float32"))


def test_a_product_read_twice_through_its_reshape_is_left_alone() -> None:
    text = f"""def @main({SIG}) {{
{SCORES}  %2 = divide(%1, 2f);
  add(%2, %1)
}}"""
    after = run(FuseGemmEpilogue(), text)
    assert_main_equal(after, f"""def @main({SIG}) {{
  %0 = nn.contrib_gemm(%a, %b, 0f, 0f, kind="batch_matmul", transpose_b=False);
  %1 = contrib_reverse_reshape(%0, newshape=[1, 4, 0, 0]);
  %2 = divide(%1, 2f);
  add(%2, %1)
}}""")


def test_a_product_broadcast_over_the_other_operand_stays_out() -> None:
    """A U-Net's time embedding: dense (1, 32) reshaped to (1, 32, 1, 1) and added to a
    (1, 32, 3, 4) map: the sum is the map's shape, so it is no residual of the product (the
    rewrite reshaped the map to (1, 32) and failed to type)."""
    sig = ("%x: Tensor[(1, 16), float32], %w: Tensor[(32, 16), float32], "
           "%f: Tensor[(1, 32, 3, 4), float32]")
    before = parse(f"""def @main({sig}) {{
  %0 = nn.dense(%x, %w);
  %1 = reshape(%0, newshape=[1, 32, 1, 1]);
  add(%1, %f)
}}""")
    after = run(FuseGemmEpilogue(), before)
    assert "has_residual" not in after["main"].astext()
    assert_same_result(before, after, *(RNG.standard_normal(s).astype("float32")
                                        for s in ((1, 16), (32, 16), (1, 32, 3, 4))))

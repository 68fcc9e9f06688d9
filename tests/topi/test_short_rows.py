"""Generic elementwise kernels over rows that are no multiple of the vector width, and
full or long-axis max/min/sum reductions: the injective schedule runs contiguous trailing
axes as one vector loop (``schedule._contiguous_tail``), reductions fuse their contiguous
axes and the C emitter keeps vector running maxima (``simd_reduce.row_extreme``). Against
numpy at every SIMD level the build can force: AVX-512 (the host here), AVX2, portable."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember import relay, te, topi
from ember.topi.schedule import _contiguous_reduction, _contiguous_tail, schedule_injective

TARGETS = ["llvm", "llvm -mcpu=x86-64-v3", "llvm -mcpu=x86-64"]


def _run(func: relay.Function, target: str, *args: np.ndarray) -> tuple[list[np.ndarray], str]:
    with ember.transform.PassContext(opt_level=3):
        lib = relay.build(ember.IRModule.from_expr(func), target)
    source = "\n".join(m.get_source() for m in lib.get_lib()._walk())
    runner = ember.contrib.graph_executor.GraphModule(lib["default"](ember.cpu(0)))
    for p, a in zip(func.params, args):
        runner.set_input(p.name_hint, a)
    runner.run()
    return [runner.get_output(i).numpy() for i in range(runner.get_num_outputs())], source


@pytest.mark.parametrize("target", TARGETS)
def test_every_inner_extent_1_to_70_matches_numpy(target):
    # one build, one kernel per extent: sigmoid, round and a two-input add of (3, 2, n)
    rng = np.random.default_rng(0)
    params, outs, args = [], [], []
    for n in range(1, 71):
        x, y = relay.var(f"x{n}", shape=(3, 2, n)), relay.var(f"y{n}", shape=(3, 2, n))
        params += [x, y]
        outs.append(relay.sigmoid(x) + relay.round_half_even(y * relay.const(3.0)))
        args += [rng.uniform(-4, 4, (3, 2, n)).astype("float32") for _ in range(2)]
    got, _ = _run(relay.Function(params, relay.Tuple(outs)), target, *args)
    for n in range(1, 71):
        x, y = args[2 * n - 2], args[2 * n - 1]
        want = 1 / (1 + np.exp(-x)) + np.rint(y * np.float32(3.0))
        np.testing.assert_allclose(got[n - 1], want, rtol=1e-6, atol=1e-6, err_msg=f"n={n}")


@settings(max_examples=6, deadline=None)
@given(shape=st.lists(st.integers(1, 23), min_size=2, max_size=4),
       bias_axis=st.integers(0, 3))
def test_short_rows_with_a_broadcast_operand_match_numpy(shape, bias_axis):
    # a broadcast operand (one axis kept) stops the merge where its reads stop being plain
    shape = tuple(shape)
    bshape = tuple(d if i == bias_axis % len(shape) else 1 for i, d in enumerate(shape))
    x, b = relay.var("x", shape=shape), relay.var("b", shape=bshape)
    rng = np.random.default_rng(1)
    xv, bv = rng.uniform(-3, 3, shape).astype("float32"), rng.uniform(-3, 3, bshape).astype(
        "float32")
    for target in TARGETS[1:]:
        (got,), _ = _run(relay.Function([x, b], relay.tanh(x * b)), target, xv, bv)
        np.testing.assert_allclose(got, np.tanh(xv * bv), rtol=2e-6, atol=2e-6)


def test_contiguous_axes_merge_and_broadcast_ones_do_not():
    x = te.placeholder((4, 7, 7), name="x")
    tanh = topi.tanh(x) if hasattr(topi, "tanh") else te.compute(x.shape, lambda *i: x(*i))
    assert _contiguous_tail(schedule_injective([tanh]), tanh.op, 16) == 3
    bias = te.placeholder((4, 1, 1), name="b")
    add = te.compute(x.shape, lambda i, j, k: x[i, j, k] + bias[i, 0, 0], name="add")
    assert _contiguous_tail(schedule_injective([add]), add.op, 16) == 2  # (7, 7) per channel
    row = te.placeholder((7,), name="r")
    add = te.compute(x.shape, lambda i, j, k: x[i, j, k] + row[k], name="add")
    assert _contiguous_tail(schedule_injective([add]), add.op, 16) == 1
    whole = te.placeholder((4, 7, 16), name="w")  # rows of whole vectors: left alone
    copy = te.compute(whole.shape, lambda *i: whole(*i), name="copy")
    assert _contiguous_tail(schedule_injective([copy]), copy.op, 16) == 1


def test_all_merged_stage_is_one_vector_loop():
    x = relay.var("x", shape=(1, 256, 7, 7))
    xv = np.random.default_rng(2).uniform(-3, 3, (1, 256, 7, 7)).astype("float32")
    (got,), source = _run(relay.Function([x], relay.tanh(x)), "llvm", xv)
    assert " < 12544; " in source
    np.testing.assert_allclose(got, np.tanh(xv), rtol=2e-6, atol=2e-6)


def test_contiguous_reduction_axes_fuse():
    x = te.placeholder((8, 5, 7), name="x")
    full = topi.reduction.max(x)
    assert _contiguous_reduction(schedule_injective([full]), full.op) == 3
    outer = topi.reduction.max(x, axis=(0, 2))  # strided in axis 0: only the last alone
    assert _contiguous_reduction(schedule_injective([outer]), outer.op) == 1


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape,axis", [((3, 5, 7), None), ((1, 64, 56, 56), None),
                                        ((9, 333), 1), ((4, 70, 3), (1, 2)), ((7, 31), 0)])
def test_max_min_sum_match_numpy(target, shape, axis):
    rng = np.random.default_rng(3)
    xv = rng.uniform(-5, 5, shape).astype("float32")
    x = relay.var("x", shape=shape)
    outs = relay.Tuple([relay.max(x, axis=axis), relay.min(x, axis=axis),
                        relay.sum(x, axis=axis)])
    (mx, mn, sm), _ = _run(relay.Function([x], outs), target, xv)
    np.testing.assert_array_equal(mx, xv.max(axis=axis))
    np.testing.assert_array_equal(mn, xv.min(axis=axis))
    # float sums reorder (vector partial sums): within 1e-6 of the sum of magnitudes
    scale = np.abs(xv).sum(axis=axis)
    assert np.all(np.abs(sm - xv.astype("float64").sum(axis=axis)) <= 1e-6 * scale + 1e-6)


@pytest.mark.parametrize("target", TARGETS[:2])
@pytest.mark.parametrize("where", [0, 17, 100, 332])
def test_max_min_keep_nan_anywhere_in_the_row(target, where):
    xv = np.random.default_rng(4).uniform(-5, 5, (2, 333)).astype("float32")
    xv[1, where] = np.nan
    x = relay.var("x", shape=xv.shape)
    (mx, mn), _ = _run(relay.Function([x], relay.Tuple([relay.max(x, axis=1),
                                                       relay.min(x, axis=1)])), target, xv)
    np.testing.assert_array_equal(mx, xv.max(axis=1))
    np.testing.assert_array_equal(mn, xv.min(axis=1))


@pytest.mark.parametrize("target", TARGETS[:2])
def test_long_full_reductions_split_over_threads_match_numpy(target):
    # 320000 elements: 16 partial results (``_split_over_threads``), NaN kept by max/min
    xv = np.random.default_rng(5).uniform(-5, 5, (2, 400, 400)).astype("float32")
    nan = xv.copy()
    nan[1, 399, 7] = np.nan
    x, y = relay.var("x", shape=xv.shape), relay.var("y", shape=xv.shape)
    outs = relay.Tuple([relay.max(x), relay.min(x), relay.sum(x), relay.max(y),
                        relay.min(y, axis=(1, 2), keepdims=True)])
    (mx, mn, sm, nmx, nmn), source = _run(relay.Function([x, y], outs), target, xv, nan)
    assert "T_max_rf[" in source and "T_sum_rf[" in source
    assert mx == xv.max() and mn == xv.min() and np.isnan(nmx)
    np.testing.assert_array_equal(nmn, nan.min(axis=(1, 2), keepdims=True))
    assert abs(sm - xv.astype("float64").sum()) <= 1e-6 * np.abs(xv).sum()

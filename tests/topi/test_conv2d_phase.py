"""The phase-by-phase transposed conv on small maps (topi/nn/conv2d_phase.py, conv_phase.h,
nn.contrib_conv2d_transpose_phased) through relay.build, for the host (AVX-512 here: blocks
of 16) and a haswell build (AVX2: blocks of 8), against a float64 numpy reference (rtol and
atol 1e-4): 1x1 to 8x8 maps, odd sizes, strides 2, 3 and 4 and unequal ones, paddings 0 to
k - 1, output padding, dilation, one to three output blocks, a batch norm's scale and shift
with relu folded in (DCGAN's layers); every register tile on edge maps; the cases the kernel
leaves to the blocked conv (input channels no multiple of the block, one tap per phase,
groups) must match too. hypothesis draws sizes for the numpy reference of the op and the
phase ranges."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember import relay
from ember.ir.expr import Call
from ember.ir.visitor import post_order
from ember.relay.op.nn.conv import conv2d_transpose_nchw
from ember.relay.op.nn.conv_transpose_nchwc import PhasedAttrs, _phased_ref
from ember.relay.transform import AlterOpLayout, InferType
from ember.target.simd import host_level
from cpu_targets import runs_vector_target
from graph_runs import graph_outputs
from ember.testing import find_c_compiler
from ember.topi.nn.conv2d_nchwc import from_blocked, to_blocked
from ember.topi.nn.conv2d_phase import (
    TILES,
    choose_tile,
    pack_phase_bias,
    pack_phase_weight,
    phase_ranges,
)
from ember.topi.nn.conv2d_transpose import phase_plan, phase_weights

needs_cc = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")
AVX2 = "llvm -mcpu=x86-64-v3"  # AVX2 + FMA: the flags of the AVX2 kernel tests (shared objects)
TARGETS = ["llvm", AVX2]
PHASED = "nn.contrib_conv2d_transpose_phased"

# (channels, out channels, h, w, kernel, strides, padding, output padding, dilation,
#  epilogue, the lanes of the builds that take the phase kernel: phase maps up to 64 pixels
#  with 16, 16 with 8)
BOTH, AVX512 = (8, 16), (16,)
CASES = [
    (16, 16, 1, 1, 4, (2, 2), 1, 1, 1, "relu", BOTH),  # a 1x1 map, output padding
    (32, 16, 4, 4, 4, (2, 2), 1, 0, 1, "bn_relu", BOTH),  # DCGAN's layer: a 4x4 map
    (16, 32, 8, 8, 4, (2, 2), 1, 0, 1, "bn_relu", AVX512),  # 8x8
    (16, 48, 5, 5, 3, (2, 2), 1, 1, 1, "sigmoid", AVX512),  # odd map, three output blocks
    (16, 16, 3, 5, 5, (4, 4), 2, 3, 1, "", BOTH),  # stride 4: 16 phases
    (16, 16, 4, 3, 5, (3, 3), 0, 2, 1, "relu", AVX512),  # stride 3, no padding
    (48, 16, 5, 4, 4, (2, 3), 0, 1, 1, "", AVX512),  # unequal strides, 3 input blocks
    (16, 16, 2, 3, 3, (2, 2), 2, 1, 2, "relu", BOTH),  # dilated
    (16, 16, 2, 2, 2, (2, 2), 0, 0, 1, "relu", ()),  # one tap per phase: blocked conv
    (12, 16, 3, 3, 4, (2, 2), 1, 0, 1, "relu", ()),  # 12 channels: no whole block
    (16, 16, 4, 4, 4, (2, 2), 1, 0, 1, "tanh", BOTH),  # a generator's last layer, wider
]


def _epilogue(y, oc: int, act: str, rng):
    """y's epilogue in relay, and the same on a float64 array."""
    bias = rng.uniform(-1, 1, oc).astype("float32")
    scale = rng.uniform(0.5, 1.5, (1, oc, 1, 1)).astype("float32")
    if act == "bn_relu":  # a batch norm without scale, as SimplifyInference leaves it
        y = relay.nn.relu(relay.add(relay.multiply(y, relay.const(scale)),
                                    relay.const(bias.reshape(1, oc, 1, 1))))
        return y, lambda v: np.maximum(v * scale + bias.reshape(1, -1, 1, 1), 0)
    y = relay.add(y, relay.const(bias.reshape(oc, 1, 1)))
    ref = {"": lambda v: v, "relu": lambda v: np.maximum(v, 0),
           "sigmoid": lambda v: 1 / (1 + np.exp(-v)), "tanh": np.tanh}[act]
    y = {"": y, "relu": relay.nn.relu(y), "sigmoid": relay.sigmoid(y), "tanh": relay.tanh(y)}[act]
    return y, lambda v: ref(v + bias.reshape(1, -1, 1, 1))


def _case(i: int, case: tuple, rng):
    c, oc, h, w, k, s, p, op, d, act, _ = case
    x = relay.var(f"x{i}", shape=(1, c, h, w))
    wt = rng.uniform(-1, 1, (c, oc, k, k)).astype("float32")
    y = relay.nn.conv2d_transpose(x, relay.const(wt), strides=s, padding=(p, p),
                                  output_padding=(op, op), channels=oc, kernel_size=(k, k),
                                  dilation=(d, d))
    y, ref = _epilogue(y, oc, act, rng)
    data = rng.uniform(-1, 1, (1, c, h, w)).astype("float32")
    want = conv2d_transpose_nchw(data.astype("float64"), wt.astype("float64"), s, (p,) * 4,
                                 (op, op), (d, d), 1)
    return x, y, data, ref(want)


def _model():
    rng = np.random.default_rng(0)
    parts = [_case(i, c, rng) for i, c in enumerate(CASES)]
    func = relay.Function([p[0] for p in parts], relay.Tuple([p[1] for p in parts]))
    return ember.IRModule.from_expr(func), [p[2] for p in parts], [p[3] for p in parts]


@pytest.mark.parametrize("target,lanes", [("llvm -mcpu=x86-64-v4", 16), (AVX2, 8)])
def test_planning_runs_small_maps_phase_by_phase(target, lanes):
    with ember.transform.PassContext(opt_level=3), ember.target.Target(target):
        mod = AlterOpLayout()(InferType()(_model()[0]))
    calls = [n for n in post_order(mod["main"].body) if isinstance(n, Call)]
    phased = [c for c in calls if c.op.name == PHASED]
    assert len(phased) == sum(lanes in c[-1] for c in CASES)
    # the batch norm's scale, its shift and the relu are the phase kernel's epilogue; after
    # the blocked phase conv, the scale and the relu join the interleave's loop
    names = [c.op.name for c in calls]
    assert names.count("multiply") == sum(c[9] == "bn_relu" and lanes not in c[-1]
                                          for c in CASES)
    assert names.count("add") == names.count("multiply")  # the shift after the scale
    assert {c.attrs.activation for c in phased} == ({"relu", "sigmoid", "tanh", "none"}
                                                    if lanes == 16 else {"relu", "tanh", "none"})


@needs_cc
@pytest.mark.parametrize("target", TARGETS)
def test_phased_transposed_convs_match_numpy(target):
    if not runs_vector_target(target):
        pytest.skip("the host runs neither AVX-512 nor AVX2")
    mod, inputs, wants = _model()
    for i, (got, want) in enumerate(zip(graph_outputs(mod, inputs, target), wants, strict=True)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4,
                                   err_msg=f"{target}: case {CASES[i]}")


def _op_inputs(c, oc, h, w, k, s, p, op, lanes, tile, rng, n=1):
    """The op's blocked data, packed weight and bias, its attrs, and the float64 result."""
    plan = phase_plan(h, w, (k, k), s, (p,) * 4, (op, op))
    wt = rng.uniform(-1, 1, (c, oc, k, k)).astype("float32")
    bias = rng.uniform(-1, 1, oc).astype("float32")
    data = rng.uniform(-1, 1, (n, c, h, w)).astype("float32")
    rb = TILES[tile][2]
    weight = pack_phase_weight(phase_weights(wt, 1, plan), lanes, rb)
    attrs = dict(padding=plan.padding, rows=plan.rows, strides=s, offset=plan.offset,
                 out_size=plan.out, channels=oc, tile=tile, activation="relu")
    want = conv2d_transpose_nchw(data.astype("float64"), wt.astype("float64"), s, (p,) * 4,
                                 (op, op), (1, 1), 1) + bias.reshape(1, -1, 1, 1)
    return (to_blocked(data, lanes), weight, pack_phase_bias(np.tile(bias, plan.phases),
                                                              plan.phases, lanes, rb),
            attrs, np.maximum(want, 0))


@needs_cc
@pytest.mark.parametrize("target,lanes", [("llvm", 16), (AVX2, 8)])
@pytest.mark.parametrize("tile", range(len(TILES)))
def test_every_register_tile_matches_numpy(target, lanes, tile):
    """Each tile on maps it overhangs (3x5 and 1x1 phase maps, the second a batch of 2) and
    on a block count that is no multiple of its blocks."""
    if not runs_vector_target(target) or (lanes == 16 and host_level().name != "avx512"):
        pytest.skip("the host cannot run this build")
    rng = np.random.default_rng(tile)
    shapes = [(2 * lanes, 5 * lanes, 3, 5, 4, (2, 2), 1, 1), (lanes, 2 * lanes, 1, 1, 3, (2, 2),
                                                              1, 0)]
    xs, ys, wants = [], [], []
    for i, shape in enumerate(shapes):
        data, weight, bias, attrs, want = _op_inputs(*shape, lanes, tile, rng, n=1 + i)
        x = relay.var(f"x{i}", shape=data.shape)
        ys.append(relay.nn.contrib_conv2d_transpose_phased(x, relay.const(weight),
                                                           relay.const(bias), **attrs))
        xs.append((x, data))
        wants.append(want)
    mod = ember.IRModule.from_expr(relay.Function([x for x, _ in xs], relay.Tuple(ys)))
    outs = graph_outputs(mod, [data for _, data in xs], target)
    for i, (got, want) in enumerate(zip(outs, wants, strict=True)):
        np.testing.assert_allclose(from_blocked(got), want, rtol=1e-4, atol=1e-4,
                                   err_msg=f"tile {TILES[tile]}, {shapes[i]}")


@st.composite
def _transposed(draw):
    k = draw(st.integers(2, 5))
    s = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    return (draw(st.sampled_from([4, 8])), draw(st.sampled_from([4, 8])), draw(st.integers(1, 5)),
            draw(st.integers(1, 5)), k, s, draw(st.integers(0, k - 1)),
            draw(st.integers(0, min(s) - 1)))


@settings(max_examples=30, deadline=None)
@given(_transposed(), st.integers(0, len(TILES) - 1))
def test_reference_is_the_transposed_conv(case, tile):
    """The op's numpy reference (each phase's conv, interleaved) is the transposed conv."""
    c, oc, h, w, k, s, p, op = case
    if phase_plan(h, w, (k, k), s, (p,) * 4, (op, op)) is None:
        return
    data, weight, bias, attrs, want = _op_inputs(c, oc, h, w, k, s, p, op, 4, tile,
                                                 np.random.default_rng(0))
    got = _phased_ref(data, weight, bias, PhasedAttrs(**attrs))
    np.testing.assert_allclose(from_blocked(got), want, rtol=1e-5, atol=1e-5)


@given(st.integers(1, 40), st.integers(1, 4), st.integers(0, 3))
def test_phase_ranges_cover_the_output_once(out, stride, offset):
    offset %= stride
    rows = sorted(q * stride + r - offset for r, (first, count) in
                  enumerate(phase_ranges(out, stride, offset))
                  for q in range(first, first + count))
    assert rows == list(range(out))


def test_tile_choice_fits_the_map_and_the_registers():
    assert TILES[choose_tile([(4, 4)] * 4, 32)] == (4, 4, 1)  # DCGAN's 4x4: the whole map
    assert TILES[choose_tile([(1, 1)] * 4, 3)][:2] != (4, 4)  # 1x1: not a 16-pixel tile
    for lanes, accumulators in ((16, 24), (8, 16)):  # of 32 and 16 vector registers
        for maps, ocb in (([(1, 1)], 3), ([(4, 4)], 32), ([(5, 3)] * 4, 7), ([(8, 8)], 16)):
            r, c, rb = TILES[choose_tile(maps, ocb, lanes)]
            assert r * c * rb <= accumulators

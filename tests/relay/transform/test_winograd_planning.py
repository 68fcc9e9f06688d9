"""The layout planner's Winograd convs (``nn.contrib_conv2d_winograd_NCHWc_fused``): which 3x3
convs take them, the ``relay.backend.use_winograd`` switch, and a small net's numerics
against the unplanned graph (rtol 1e-4, atol 1e-4: F(4x4, 3x3)'s rounding, see
tests/topi/test_conv2d_winograd.py)."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import relay
from ember.ir.expr import Call, Constant
from ember.ir.visitor import post_order
from ember.relay.transform import AlterOpLayout, InferType
from ember.runtime.errors import OpAttributeInvalid
from ember.testing import find_c_compiler

WINO = "nn.contrib_conv2d_winograd_NCHWc_fused"
needs_cc = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")


def _const(shape, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return relay.const((rng.uniform(-1, 1, shape) * scale).astype("float32"))


def _net(h=16):
    """3x3 convs that take Winograd (64->64 on a 16x16 map: F(4, 3); the last, on an 8x8 or
    12x12 map: F(2, 3)) and ones that do not (stride 2, 1x1, grouped, dilated, 16 channels)."""
    x = relay.var("x", shape=(1, 64, h, h))
    w = 1 / 24  # keeps the activations near 1 through the chain
    y = relay.nn.relu(relay.nn.conv2d(x, _const((64, 64, 3, 3), 1, w), padding=(1, 1)))
    y = relay.add(relay.nn.conv2d(y, _const((64, 64, 3, 3), 2, w), padding=(1, 1)), x)
    y = relay.nn.conv2d(y, _const((64, 32, 3, 3), 3, w), padding=(1, 1), groups=2)
    y = relay.nn.conv2d(y, _const((64, 64, 3, 3), 4, w), padding=(2, 2), dilation=(2, 2))
    y = relay.nn.conv2d(y, _const((16, 64, 1, 1), 5, 0.1))
    y = relay.nn.conv2d(y, _const((16, 16, 3, 3), 6, 0.2), padding=(1, 1))
    y = relay.nn.conv2d(y, _const((64, 16, 3, 3), 7, 0.2), strides=(2, 2), padding=(1, 1))
    y = relay.nn.relu(relay.nn.conv2d(y, _const((64, 64, 3, 3), 8, w), padding=(1, 1)))
    return ember.IRModule.from_expr(relay.Function([x], y))


def _plan(mod, config=None, target="llvm -mcpu=skylake-avx512"):
    with ember.transform.PassContext(opt_level=3, config=config), ember.target.Target(target):
        return AlterOpLayout()(InferType()(mod))


def _convs(mod) -> list[Call]:
    return [n for n in post_order(mod["main"].body)
            if isinstance(n, Call) and "conv2d" in n.op.name]


def test_which_convs_take_winograd():
    convs = _convs(_plan(_net(h=24)))
    kinds = [(c.op.name.replace("nn.contrib_conv2d_", ""), getattr(c.attrs, "tile_size", 0))
             for c in convs]
    assert kinds == [("winograd_NCHWc_fused", 4), ("winograd_NCHWc_fused_add", 4),
                     ("NCHWc_fused", 0), ("NCHWc_fused", 0), ("NCHWc_fused", 0),
                     ("NCHWc_fused", 0), ("NCHWc_fused", 0), ("winograd_NCHWc_fused", 2)]
    first = convs[0]
    assert isinstance(first.args[1], Constant)
    assert first.args[1].data.shape == (36, 4, 64, 16)  # U[a*a, OC/L, IC, L]
    assert first.attrs.activation == "relu" and convs[1].attrs.activation == "none"


def test_switch_keeps_every_conv_direct():
    names = {c.op.name for c in _convs(_plan(_net(), {"relay.backend.use_winograd": False}))}
    assert not any("winograd" in n for n in names)
    with pytest.raises(OpAttributeInvalid, match="use_winograd"):
        _plan(_net(), {"relay.backend.use_winograd": "yes"})


def test_eight_lane_target_and_symbolic_map():
    convs = _convs(_plan(_net(), target="llvm -mcpu=haswell"))
    assert convs[0].op.name == WINO and convs[0].args[1].data.shape == (36, 8, 64, 8)
    x = relay.var("x", shape=(1, 64, relay.Any(), relay.Any()))
    y = relay.nn.conv2d(x, _const((64, 64, 3, 3)), padding=(1, 1))
    dyn = _convs(_plan(ember.IRModule.from_expr(relay.Function([x], y))))
    assert dyn[0].op.name == WINO and dyn[0].attrs.tile_size == 4


@needs_cc
def test_planned_net_matches_the_unplanned_one():
    from ember.contrib import graph_executor

    mod = _net()
    assert any(WINO in c.op.name for c in _convs(_plan(mod, target="llvm")))  # on this host
    x = np.random.default_rng(0).uniform(-1, 1, (1, 64, 16, 16)).astype("float32")
    outs = []
    for disabled in ([], ["AlterOpLayout"]):
        with ember.transform.PassContext(opt_level=3, disabled_pass=disabled):
            lib = relay.build(mod, "llvm")
        m = graph_executor.GraphModule(lib["default"](ember.cpu()))
        m.set_input(0, x)
        m.run()
        outs.append(m.get_output(0).numpy())
    assert np.abs(outs[1]).max() > 0.1
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-4, atol=1e-4)


@needs_cc
def test_run_time_map_sizes():
    """One build of a conv over a ``?`` x ``?`` map (F(4, 3)) runs at two sizes."""
    from ember.relay.op.nn.conv import conv2d_nchw

    x = relay.var("x", shape=(1, 32, relay.Any(), relay.Any()))
    wt = np.random.default_rng(2).uniform(-1, 1, (32, 32, 3, 3)).astype("float32") / 17
    y = relay.nn.relu(relay.nn.conv2d(x, relay.const(wt), padding=(1, 1)))
    mod = ember.IRModule.from_expr(relay.Function([x], y))
    assert _convs(_plan(mod))[0].op.name == WINO
    with ember.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, "llvm")
    vm = ember.runtime.vm.VirtualMachine(exe, ember.cpu())
    for h, w in ((5, 7), (10, 3)):
        xd = np.random.default_rng(h).uniform(-1, 1, (1, 32, h, w)).astype("float32")
        want = np.maximum(conv2d_nchw(xd.astype("float64"), wt.astype("float64"), (1, 1),
                                      (1, 1, 1, 1), (1, 1), 1), 0)
        np.testing.assert_allclose(vm.run(xd).numpy(), want, rtol=1e-4, atol=1e-4)


def test_a_scalar_build_keeps_direct_convs_unless_asked():
    """Portable-C builds (microcontrollers) default to the direct kernel: the transformed
    weights would take 1.8x-4x the flash; the switch still turns Winograd on there."""
    names = {c.op.name for c in _convs(_plan(_net(), target="c"))}
    assert not any("winograd" in n for n in names), names
    asked = _plan(_net(), {"relay.backend.use_winograd": True}, target="c")
    assert any("winograd" in c.op.name for c in _convs(asked))


@pytest.mark.parametrize("op", ["nn.contrib_conv2d_NCHWc_fused", WINO])
def test_fused_convs_refuse_operands_that_are_not_float32(op):
    """The C kernels read and write float32: a float16 weight is a type error naming it (it
    was accepted, and the kernel read past the weight's end)."""
    from ember.relay.op._reg import call as op_call
    from ember.relay.op.nn.conv_nchwc import Conv2DNCHWcFusedAttrs
    from ember.relay.op.nn.conv_winograd import Conv2DWinogradNCHWcFusedAttrs

    x = relay.var("x", shape=(1, 1, 8, 8, 16))
    if op == WINO:
        w, attrs = (36, 1, 16, 16), Conv2DWinogradNCHWcFusedAttrs(
            padding=(1, 1, 1, 1), lanes=16, in_block=16, tile_size=4)
    else:
        w, attrs = (1, 1, 3, 3, 16, 16), Conv2DNCHWcFusedAttrs(
            padding=(1, 1, 1, 1), lanes=16, in_block=16)
    weight = relay.const(np.zeros(w, "float16"))
    expr = op_call(op, x, weight, relay.const(np.zeros(16, "float32")), attrs=attrs)
    with pytest.raises(Exception, match="float32 operands only; got weight float16"):
        InferType()(ember.IRModule.from_expr(relay.Function([x], expr)))


def test_run_time_maps_take_winograd_only_where_the_model_predicts_a_gain():
    """A map of run-time width but 1 static row (a CRNN's last convs) stays direct: F(2, 3)
    would compute 2 rows for 1; a run-time square map takes F(4, 3), but at 512 channels,
    where F(4, 3) would lose on small maps, F(2, 3)."""
    from ember.tir.expr import Var
    from ember.topi.nn.conv2d_winograd import plan_tile

    w = Var("w", "int32")
    args = ((256, 256, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, 16, 16)
    assert plan_tile(*args, (1, w)) == 0
    assert plan_tile(*args, (w, w)) == 4
    assert plan_tile((512, 512, 3, 3), *args[1:], (w, w)) == 2
    assert plan_tile(*args, (3, 80)) == 4


def test_winograd_refuses_a_run_time_channel_block_count():
    """A hand-built call over data whose channel blocks are ``?``: a type error naming them
    (the relation multiplied the unknown count and raised a bare TypeError)."""
    from ember.relay.op._reg import call as op_call
    from ember.relay.op.nn.conv_winograd import Conv2DWinogradNCHWcFusedAttrs

    x = relay.var("x", shape=(1, relay.Any(), 8, 8, 16))
    attrs = Conv2DWinogradNCHWcFusedAttrs(padding=(1, 1, 1, 1), lanes=16, in_block=16,
                                          tile_size=4)
    expr = op_call(WINO, x, relay.const(np.zeros((36, 1, 16, 16), "float32")),
                   relay.const(np.zeros(16, "float32")), attrs=attrs)
    with pytest.raises(Exception, match="channel and lane dimensions must be static"):
        InferType()(ember.IRModule.from_expr(relay.Function([x], expr)))

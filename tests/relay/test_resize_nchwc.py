"""image.resize2d and nn.upsampling in the blocked NCHW[L]c layout: AlterOpLayout keeps an
FPN's upsampling between blocked convs blocked (no layout_transform around it), the blocked
ops agree with their NCHW selves, and bad layouts are refused with the shapes named.

One model holds every resize kind (nearest/asymmetric, linear/half_pixel,
linear/align_corners, upsampling nearest and bilinear); it is built with planning on and off
(rtol 1e-5, atol 1e-5: the same arithmetic, per lane).
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import relay
from ember.contrib import graph_executor
from ember.ir.expr import Call
from ember.ir.visitor import post_order
from ember.relay.transform import AlterOpLayout, InferType
from ember.runtime.errors import OpAttributeInvalid, TypeInferenceError
from ember.testing import find_c_compiler
from ember.topi.nn.conv2d_nchwc import from_blocked, to_blocked

needs_cc = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")


def _const(shape, seed):
    return relay.const(np.random.default_rng(seed).uniform(-1, 1, shape).astype("float32"))


def _resizes(x):
    """Each resize kind applied to ``x`` (1, C, 3, 5)."""
    return [
        relay.image.resize2d(x, size=(6, 10), method="nearest_neighbor",
                             coordinate_transformation_mode="asymmetric",
                             rounding_method="floor"),
        relay.image.resize2d(x, size=(6, 10), method="linear",
                             coordinate_transformation_mode="half_pixel"),
        relay.image.resize2d(x, size=(7, 4), method="linear",
                             coordinate_transformation_mode="align_corners"),
        relay.nn.upsampling(x, 2, 2, method="nearest_neighbor"),
        relay.nn.upsampling(x, 2, 2, method="bilinear", align_corners=True),
    ]


def _fpn() -> ember.IRModule:
    """A stride-2 conv, each resize of it back to full size, added to a full-size conv (an FPN
    level), then another conv."""
    x = relay.var("x", shape=(1, 8, 6, 10))
    full = relay.nn.relu(relay.nn.conv2d(x, _const((16, 8, 1, 1), 0)))
    half = relay.nn.relu(relay.nn.conv2d(x, _const((16, 8, 3, 3), 1), strides=(2, 2),
                                         padding=(1, 1)))
    outs = []
    for i, up in enumerate(_resizes(half)):
        if i == 2:  # a 7x4 result: on its own, not added
            outs.append(up)
            continue
        y = relay.add(full, up)
        outs.append(relay.nn.conv2d(y, _const((16, 16, 3, 3), 2 + i), padding=(1, 1)))
    return ember.IRModule.from_expr(relay.Function([x], relay.Tuple(outs)))


def test_fpn_upsampling_stays_blocked():
    with ember.transform.PassContext(opt_level=3), ember.target.Target("llvm -mcpu=haswell"):
        mod = AlterOpLayout()(InferType()(_fpn()))
    x = mod["main"].params[0]
    calls = [n for n in post_order(mod["main"].body) if isinstance(n, Call)]
    resizes = [c for c in calls if c.op.name in ("image.resize2d", "nn.upsampling")]
    assert len(resizes) == 5 and all(c.attrs.layout == "NCHW8c" for c in resizes)
    transforms = [c for c in calls if c.op.name == "layout_transform"]
    # the input (8 channels: one whole block) goes to NCHW8c once, shared by both convs;
    # then only the five results go back to NCHW
    assert len(transforms) == 6 and sum(t.args[0] is x for t in transforms) == 1
    assert sum(t.args[0] is resizes[2] for t in transforms) == 1  # the un-added one, a result


def _run(mod, disabled=()):
    x = np.random.default_rng(7).uniform(-1, 1, (1, 8, 6, 10)).astype("float32")
    with ember.transform.PassContext(opt_level=3, disabled_pass=list(disabled)):
        lib = relay.build(mod, "llvm")
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    m.set_input(0, x)
    m.run()
    return [m.get_output(i).numpy() for i in range(m.get_num_outputs())]


@needs_cc
def test_blocked_resizes_match_nchw():
    mod = _fpn()
    for got, want in zip(_run(mod), _run(mod, ["AlterOpLayout"])):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_blocked_references_equal_nchw_references():
    data = np.random.default_rng(0).uniform(-1, 1, (1, 8, 3, 5)).astype("float32")
    x = relay.var("x", shape=data.shape)
    xb = relay.var("xb", shape=(1, 2, 3, 5, 4))
    for plain in _resizes(x):
        blocked = Call(plain.op, (xb,), _with_layout(plain.attrs, "NCHW4c"))
        want = relay.create_executor("debug", mod=ember.IRModule.from_expr(
            relay.Function([x], plain))).evaluate()(data).numpy()
        got = relay.create_executor("debug", mod=ember.IRModule.from_expr(
            relay.Function([xb], blocked))).evaluate()(to_blocked(data, 4)).numpy()
        np.testing.assert_array_equal(from_blocked(got), want)


def _with_layout(attrs, layout):
    from dataclasses import replace

    return replace(attrs, layout=layout)


def test_blocked_layout_errors_name_the_shape():
    x = relay.var("x", shape=(1, 2, 3, 5, 8))
    bad = [relay.image.resize2d(x, size=(6, 10), layout="NCHW4c", method="nearest_neighbor"),
           relay.nn.upsampling(x, 2, 2, layout="NCHW4c")]
    for call in bad:
        with pytest.raises(TypeInferenceError, match=r"must .*NCHW4c.*\(1, 2, 3, 5, 8\)"):
            InferType()(ember.IRModule.from_expr(relay.Function([x], call)))
    with pytest.raises(OpAttributeInvalid, match="layout"):
        relay.image.resize2d(x, size=(6, 10), layout="NCHWc")
    with pytest.raises(OpAttributeInvalid, match="layout"):
        relay.nn.upsampling(x, 2, 2, layout="NCHW0c")


def _dynamic_fpn() -> ember.IRModule:
    """An FPN level of a ? image as exporters write it: the stride-2 branch resized (nearest
    and linear) to the full-size branch's sizes read with shape_of, added, then a conv."""
    x = relay.var("x", shape=(1, 8, relay.Any(), relay.Any()))
    full = relay.nn.relu(relay.nn.conv2d(x, _const((16, 8, 1, 1), 0)))
    half = relay.nn.relu(relay.nn.conv2d(x, _const((16, 8, 3, 3), 1), strides=(2, 2),
                                         padding=(1, 1)))
    size = relay.strided_slice(relay.shape_of(full), begin=[2], end=[4])
    outs = []
    for i, method in enumerate(("nearest_neighbor", "linear")):
        up = relay.image.resize2d(half, size=size, method=method)
        outs.append(relay.nn.conv2d(relay.add(full, up), _const((16, 16, 3, 3), 2 + i),
                                    padding=(1, 1)))
    return ember.IRModule.from_expr(relay.Function([x], relay.Tuple(outs)))


def test_fpn_upsampling_of_a_run_time_size_stays_blocked():
    # dyn.image.resize2d runs blocked, and the sizes it reads come from the blocked map's
    # shape: nothing goes back to NCHW but the two results
    with ember.transform.PassContext(opt_level=3), ember.target.Target("llvm -mcpu=haswell"):
        mod = AlterOpLayout()(InferType()(_dynamic_fpn()))
    calls = [n for n in post_order(mod["main"].body) if isinstance(n, Call)]
    resizes = [c for c in calls if c.op.name == "dyn.image.resize2d"]
    assert len(resizes) == 2 and all(c.attrs.layout == "NCHW8c" for c in resizes)
    transforms = [c for c in calls if c.op.name == "layout_transform"]
    assert len(transforms) == 3, transforms  # the input to NCHW8c, the two results back
    assert all(c.args[0].checked_type.ndim == 5 for c in calls if c.op.name == "shape_of")


@needs_cc
def test_blocked_resizes_of_a_run_time_size_match_nchw():
    mod = _dynamic_fpn()
    runs = []
    for disabled in ((), ("AlterOpLayout",)):
        with ember.transform.PassContext(opt_level=3, disabled_pass=list(disabled)):
            runs.append(relay.create_executor("vm", mod=mod, target="llvm").evaluate())
    for h, w in ((1, 1), (6, 10), (9, 7)):
        x = np.random.default_rng(h).uniform(-1, 1, (1, 8, h, w)).astype("float32")
        for got, want in zip(*(run(x) for run in runs)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)

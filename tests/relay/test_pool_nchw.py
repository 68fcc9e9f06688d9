"""Pools of plain NCHW float32 values through ember's C kernels (pool_nchw.h) against Relay's
numpy reference (the debug interpreter): every channel count 1-21, 1x1 maps, odd sizes,
ceil_mode, padding, asymmetric windows and strides, dilation, count_include_pad both ways,
global and adaptive pools; ONNX pools against onnxruntime; and which plan AlterOpLayout takes
for a pool whose channels split into blocks. Exact for max; rtol 1e-5 / atol 1e-6 for
averages. Every level of the kernel runs in tests/topi/test_pool_nchw_kernel.py."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import relay
from ember.ir import post_order
from ember.ir.expr import Call
from ember.relay.transform import InferType
from ember.relay.transform.alter_op_layout import AlterOpLayout
from ember.testing import find_c_compiler

pytestmark = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")

# (channels, h, w, kind, kernel, strides, padding, dilation, ceil_mode, count_include_pad)
CASES = [
    (3, 23, 37, "max", (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), True, False),
    (6, 9, 70, "avg", (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), False, True),
    (21, 9, 70, "avg", (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), False, False),
    (1, 1, 1, "max", (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), False, False),  # all padding
    (5, 1, 1, "avg", (2, 2), (2, 2), (0, 0, 1, 1), (1, 1), True, True),
    (7, 11, 40, "max", (2, 3), (1, 2), (0, 1, 1, 0), (1, 1), True, False),  # asymmetric
    (2, 13, 41, "avg", (3, 2), (3, 3), (1, 0, 2, 1), (1, 1), True, True),  # stride 3
    (9, 12, 50, "max", (3, 3), (1, 1), (2, 2, 2, 2), (2, 2), False, False),  # dilated
    (11, 17, 33, "avg", (5, 5), (1, 1), (2, 2, 2, 2), (1, 1), False, False),  # SPPF-like
    (13, 7, 7, "avg", (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), True, True),  # short rows
] + [(c, 10, 19, "max" if c % 2 else "avg", (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), c % 3 == 0,
      c % 4 == 0) for c in (1, 2, 4, 8, 10, 12, 14, 15, 16, 17, 18, 19, 20)]


def _pool(x: relay.Expr, kind: str, kernel, strides, padding, dilation, ceil, inc):
    kw = {"pool_size": kernel, "strides": strides, "padding": padding, "dilation": dilation,
          "ceil_mode": ceil}
    return relay.nn.avg_pool2d(x, count_include_pad=inc, **kw) if kind == "avg" else \
        relay.nn.max_pool2d(x, **kw)


def _check(outputs: list[relay.Expr], xs: list[relay.Var], data: list[np.ndarray],
           kernels: tuple[str, ...]) -> None:
    mod = ember.IRModule.from_expr(relay.Function(xs, relay.Tuple(outputs)))
    with ember.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm")
    source = lib.get_lib().get_source()
    for kernel in kernels:
        assert f"{kernel}(" in source, kernel
    want = relay.create_executor("debug", mod=mod).evaluate()(*data)
    got = relay.create_executor("graph", mod=mod, target="llvm").evaluate()(*data)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=f"case {CASES[i] if i < len(CASES) else i}")


def test_plain_pools_match_the_reference_at_every_channel_count():
    rng = np.random.default_rng(0)
    xs, outs, data = [], [], []
    for i, (c, h, w, kind, *attrs) in enumerate(CASES):
        xs.append(relay.var(f"x{i}", shape=(2, c, h, w)))
        outs.append(_pool(xs[-1], kind, *attrs))
        data.append(rng.standard_normal((2, c, h, w)).astype("float32"))
    _check(outs, xs, data, ("ember_pool2d_nchw",))


def test_global_and_evenly_binned_adaptive_pools_match_the_reference():
    rng = np.random.default_rng(1)
    shapes = [(1, 3, 1, 1), (2, 21, 7, 9), (1, 6, 57, 33)]
    xs = [relay.var(f"x{i}", shape=s) for i, s in enumerate(shapes)]
    outs = []
    for x in xs:
        outs += [relay.nn.global_avg_pool2d(x), relay.nn.global_max_pool2d(x),
                 relay.nn.adaptive_avg_pool2d(x, (1, 1))]
    y = relay.var("y", shape=(1, 5, 12, 18))  # bins of 4 x 6 (the pool kernel), and uneven
    outs += [relay.nn.adaptive_avg_pool2d(y, (3, 3)), relay.nn.adaptive_max_pool2d(y, (2, 6)),
             relay.nn.adaptive_avg_pool2d(y, (5, 7))]
    data = [rng.standard_normal(s).astype("float32") for s in shapes]
    data.append(rng.standard_normal((1, 5, 12, 18)).astype("float32"))
    _check(outs, [*xs, y], data, ("ember_global_pool_nchw", "ember_pool2d_nchw"))


def _ceil_pools_onnx(channels: int, h: int, w: int):
    from onnx import TensorProto, helper

    pool = {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}
    nodes = [helper.make_node("MaxPool", ["x"], ["y0"], **pool),
             helper.make_node("AveragePool", ["x"], ["y1"], pads=[1, 1, 1, 1],
                              count_include_pad=1, **pool),
             helper.make_node("AveragePool", ["x"], ["y2"], pads=[0, 1, 1, 0], **pool),
             helper.make_node("MaxPool", ["x"], ["y3"], kernel_shape=[2, 2], strides=[3, 3],
                              ceil_mode=1),
             helper.make_node("GlobalAveragePool", ["x"], ["y4"])]
    outs = [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, None) for i in range(5)]
    graph = helper.make_graph(nodes, "ceil_pools", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, (1, channels, h, w))], outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("channels, h, w", [(3, 10, 13), (6, 57, 57), (21, 7, 7)])
def test_onnx_ceil_mode_pools_of_an_image_match_onnxruntime(channels, h, w):
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from ember.contrib import graph_executor

    model = _ceil_pools_onnx(channels, h, w)
    x = np.random.default_rng(4).standard_normal((1, channels, h, w)).astype("float32")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    wants = sess.run(None, {"x": x})
    mod, params = relay.frontend.from_onnx(model, {"x": x.shape})
    with ember.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    m.set_input("x", x)
    m.run()
    for i, want in enumerate(wants):
        np.testing.assert_allclose(m.get_output(i).numpy(), want, rtol=1e-5, atol=1e-6,
                                   err_msg=f"output {i}")


def _planned_pool_layouts(shape: tuple[int, ...], target: str) -> list[str]:
    x = relay.var("x", shape=shape)
    y = relay.nn.max_pool2d(relay.exp(x), (3, 3), (2, 2), padding=(1, 1))
    mod = ember.IRModule.from_expr(relay.Function([x], y))
    with ember.transform.PassContext(opt_level=3), ember.target.Target(target):
        planned = AlterOpLayout()(InferType()(mod))
    return [n.attrs.layout for n in post_order(planned["main"].body)
            if isinstance(n, Call) and n.op.name == "nn.max_pool2d"]


@pytest.mark.parametrize("target, lanes", [("llvm -mcpu=sapphirerapids", 16),
                                           ("llvm -mcpu=haswell", 8)])
def test_a_pool_of_a_plain_value_runs_blocked_only_on_narrow_images(target, lanes):
    # channels that split into blocks: blocked (a transform each way) for images under 48
    # columns, where the NCHW kernel's rows are short; NCHW for wider ones
    assert _planned_pool_layouts((1, 64, 14, 47), target) == [f"NCHW{lanes}c"]
    assert _planned_pool_layouts((1, 64, 14, 48), target) == ["NCHW"]
    assert _planned_pool_layouts((1, 21, 7, 7), target) == ["NCHW"]  # no block


def test_an_adaptive_pool_of_a_blocked_layout_keeps_the_generic_reduction():
    # the evenly-binned rule is for plain NCHW only; a 5-D NCHW4c value must not reach it
    x = relay.var("x", shape=(1, 2, 4, 6, 4))
    y = relay.nn.adaptive_max_pool2d(x, (1, 1), layout="NCHW4c")
    data = np.random.default_rng(2).standard_normal((1, 2, 4, 6, 4)).astype("float32")
    mod = ember.IRModule.from_expr(relay.Function([x], y))
    want = relay.create_executor("debug", mod=mod).evaluate()(data).numpy()
    got = relay.create_executor("graph", mod=mod, target="llvm").evaluate()(data).numpy()
    np.testing.assert_array_equal(got, want)

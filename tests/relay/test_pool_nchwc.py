"""Pools in NCHW[L]c through ember's C kernel (pool_nchwc.h) against Relay's numpy reference
(the debug interpreter), over padding, dilation, ceil_mode, count_include_pad, lanes 4/8/16.
Exact for max; rtol 1e-5 / atol 1e-6 for averages."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import relay
from ember.testing import find_c_compiler

pytestmark = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")

CASES = [  # (h, w, kernel, stride, padding, dilation, ceil_mode, count_include_pad, lanes)
    (9, 11, 3, 2, (1, 1, 1, 1), 1, False, False, 8),
    (7, 7, 3, 2, (1, 0, 2, 1), 2, True, True, 8),
    (5, 4, 2, 3, (0, 0, 0, 0), 1, True, False, 4),
    (4, 4, 3, 1, (1, 1, 1, 1), 1, False, True, 16),
    (1, 1, 3, 1, (1, 1, 1, 1), 1, False, False, 8),  # every window mostly padding
    (6, 13, 5, 1, (2, 2, 2, 2), 1, False, False, 8),  # SPPF: interior columns four at a time
    (5, 18, 3, 1, (0, 2, 1, 0), 2, True, True, 16),  # dilated; 4-column blocks and a tail
]


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_blocked_pools_match_the_reference(kind, case):
    h, w, k, s, pad, d, ceil, inc, lanes = case
    x = np.random.default_rng(0).standard_normal((2, 2, h, w, lanes)).astype("float32")
    xv = relay.var("x", shape=x.shape)
    kwargs = {"pool_size": (k, k), "strides": (s, s), "padding": pad, "dilation": (d, d),
              "ceil_mode": ceil, "layout": f"NCHW{lanes}c"}
    if kind == "avg":
        y = relay.nn.avg_pool2d(xv, count_include_pad=inc, **kwargs)
    else:
        y = relay.nn.max_pool2d(xv, **kwargs)
    mod = ember.IRModule.from_expr(relay.Function([xv], y))
    ref = relay.create_executor("debug", mod=mod).evaluate()(x).numpy()
    got = relay.create_executor("graph", mod=mod, target="llvm").evaluate()(x).numpy()
    lowered = relay.build(mod, "llvm").get_lib().get_source()
    assert f"ember_pool2d_nchwc_x{lanes}(" in lowered
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def _ceil_pool_model():
    """A conv (so that the pools run blocked) then ceil_mode pools as ONNX writes them: a max
    pool whose last window overhangs the input, an average pool with count_include_pad whose
    edge windows are cut by the padding, one without, and a stride above the kernel."""
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(3).uniform(-1, 1, (16, 3, 3, 3)).astype("float32")
    pool = {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["c"], ["y0"], **pool),
             helper.make_node("AveragePool", ["c"], ["y1"], pads=[1, 1, 1, 1],
                              count_include_pad=1, **pool),
             helper.make_node("AveragePool", ["c"], ["y2"], pads=[0, 1, 1, 0], **pool),
             helper.make_node("MaxPool", ["c"], ["y3"], kernel_shape=[2, 2], strides=[3, 3],
                              ceil_mode=1)]
    outs = [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, None) for i in range(4)]
    graph = helper.make_graph(nodes, "ceil_pools",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                             (1, 3, 10, 13))],
                              outs, [numpy_helper.from_array(w, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_onnx_ceil_mode_pools_match_onnxruntime_in_the_blocked_layout():
    # the host's SIMD; every level runs in tests/topi/test_pool_nchwc_kernel.py
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from ember.contrib import graph_executor

    model = _ceil_pool_model()
    x = np.random.default_rng(4).standard_normal((1, 3, 10, 13)).astype("float32")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    wants = sess.run(None, {"x": x})
    mod, params = relay.frontend.from_onnx(model, {"x": x.shape})
    with ember.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    assert lib.get_lib().get_source().count("ember_pool2d_nchwc_x") >= 4
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    m.set_input("x", x)
    m.run()
    for i, want in enumerate(wants):
        np.testing.assert_allclose(m.get_output(i).numpy(), want, rtol=1e-5, atol=1e-5,
                                   err_msg=f"output y{i}")

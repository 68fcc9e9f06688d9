"""nn.conv2d_transpose planned by AlterOpLayout as blocked phase convs plus
nn.contrib_conv2d_transpose_interleave, and its NCHW compute (phase convs on topi's template)
when the planning is off, against numpy and onnxruntime.

One model holds every case (one build per SIMD level: the host's, and the portable C of a
``c`` build with 4 lanes; and one without AlterOpLayout): 1x1 maps, odd sizes, channels that do not split into the lanes,
stride above the kernel, output padding, depthwise and grouped, and the cases left to the
direct kernel (a padding beyond the kernel's reach, channels that split into no block).
Tolerance rtol 1e-4, atol 1e-4 against a float64 reference.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import relay
from ember.contrib import graph_executor
from ember.ir.expr import Call
from ember.ir.visitor import post_order
from ember.relay.op.nn.conv import conv2d_transpose_nchw
from ember.relay.transform import AlterOpLayout, InferType
from ember.runtime.errors import OpAttributeInvalid, TypeInferenceError
from ember.testing import find_c_compiler

needs_cc = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")

# (channels, out channels, h, w, kernel, stride, padding, output padding, groups, epilogue
#  [, dilation])
CASES = [
    (16, 16, 5, 6, 2, 2, 0, 0, 1, "relu"),  # DBNet's head: 1x1 phase convs
    (16, 1, 4, 4, 2, 2, 0, 0, 1, "sigmoid"),  # one output channel: the phases make a block
    (8, 16, 1, 1, 4, 2, 1, 1, 1, ""),  # a 1x1 map, output padding
    (12, 8, 3, 5, 3, 2, 1, 1, 1, ""),  # input channels not a multiple of the lanes
    (16, 16, 5, 5, 3, 1, 1, 0, 1, "relu"),  # stride 1: one conv, no interleave
    (8, 8, 3, 3, 1, 4, 0, 2, 1, ""),  # stride 4 above the kernel
    (16, 16, 4, 3, 3, 2, 1, 1, 16, ""),  # depthwise
    (16, 32, 3, 4, 4, 2, 1, 0, 2, "relu"),  # grouped
    (16, 16, 5, 5, 3, 2, 2, 1, 1, "relu", 2),  # dilation sharing the stride's factor
    (8, 16, 4, 3, 3, 1, 2, 0, 1, "", 3),  # dilated, stride 1: one conv of 7x7 taps
    (16, 16, 3, 4, 2, 3, 1, 0, 16, "", 2),  # dilated depthwise, stride 3 above the kernel
    (3, 5, 4, 4, 3, 3, 0, 2, 1, ""),  # 5 * 9 phase channels: no block, the direct kernel
    (8, 8, 6, 6, 2, 2, 2, 0, 1, ""),  # padding beyond the kernel's reach: the direct kernel
]
DIRECT = 2  # the last two cases keep nn.conv2d_transpose


def _case(i: int, case: tuple) -> tuple:
    c, oc, h, w, k, s, p, op, g, epi, *dil = case
    d = dil[0] if dil else 1
    rng = np.random.default_rng(i)
    x = relay.var(f"x{i}", shape=(1, c, h, w))
    wt = rng.uniform(-1, 1, (c, oc // g, k, k)).astype("float32")
    bias = rng.uniform(-1, 1, oc).astype("float32")
    y = relay.nn.conv2d_transpose(x, relay.const(wt), strides=(s, s), padding=(p, p),
                                  output_padding=(op, op), groups=g, channels=oc,
                                  kernel_size=(k, k), dilation=(d, d))
    y = relay.nn.bias_add(y, relay.const(bias))
    if epi:
        y = getattr(relay.nn, epi)(y) if epi == "relu" else relay.sigmoid(y)
    data = rng.uniform(-1, 1, (1, c, h, w)).astype("float32")
    want = conv2d_transpose_nchw(data.astype("float64"), wt.astype("float64"), (s, s),
                                 (p,) * 4, (op, op), (d, d), g) + bias.reshape(1, -1, 1, 1)
    if epi == "relu":
        want = np.maximum(want, 0)
    elif epi == "sigmoid":
        want = 1 / (1 + np.exp(-want))
    return x, y, data, want


def _model() -> tuple[ember.IRModule, list[np.ndarray], list[np.ndarray]]:
    parts = [_case(i, c) for i, c in enumerate(CASES)]
    func = relay.Function([p[0] for p in parts], relay.Tuple([p[1] for p in parts]))
    return ember.IRModule.from_expr(func), [p[2] for p in parts], [p[3] for p in parts]


def _plan(mod: ember.IRModule, target: str) -> ember.IRModule:
    with ember.transform.PassContext(opt_level=3), ember.target.Target(target):
        return AlterOpLayout()(InferType()(mod))


def test_planning_turns_transposed_convs_into_phase_convs():
    mod, _, _ = _model()
    names = [n.op.name for n in post_order(_plan(mod, "llvm -mcpu=haswell")["main"].body)
             if isinstance(n, Call)]
    assert names.count("nn.conv2d_transpose") == DIRECT
    # stride 1 needs no interleave (twice); the depthwise and grouped ones one conv per phase
    # (4, 4 and 9 phases); the one to one channel (4 phase channels over input blocks of 8)
    # writes its output interleaved itself; the one of more than one tap per phase on a map
    # of at most 16 pixels per phase (AVX2's limit) whose blocked input and output have the
    # same lanes runs phase by phase (the 1x1 map)
    assert names.count("nn.contrib_conv2d_transpose_interleave") == len(CASES) - DIRECT - 3 - 1
    assert names.count("nn.contrib_conv2d_transpose_fewoc") == 1
    assert names.count("nn.contrib_conv2d_transpose_phased") == 1
    assert names.count("nn.contrib_conv2d_NCHWc_fused") == len(CASES) - DIRECT - 4 + 2 * 4 + 9 - 1
    assert names.count("concatenate") == 3


@pytest.mark.parametrize("oc", [1, 16])
def test_bias_and_activation_join_the_phase_conv_epilogue(oc):
    x = relay.var("x", shape=(1, 16, 5, 5))
    w = relay.const(np.ones((16, oc, 2, 2), "float32"))
    y = relay.nn.conv2d_transpose(x, w, strides=(2, 2), channels=oc, kernel_size=(2, 2))
    bias = np.arange(oc, dtype="float32").reshape(oc, 1, 1)
    y = relay.sigmoid(relay.add(y, relay.const(bias)))
    mod = _plan(ember.IRModule.from_expr(relay.Function([x], y)), "llvm -mcpu=haswell")
    calls = [n for n in post_order(mod["main"].body) if isinstance(n, Call)]
    names = [c.op.name for c in calls]
    assert "add" not in names and "sigmoid" not in names
    # one channel: 4 phase channels, the conv that writes its output interleaved
    conv = next(c for c in calls if c.op.name in ("nn.contrib_conv2d_NCHWc_fused",
                                                  "nn.contrib_conv2d_transpose_fewoc"))
    assert conv.attrs.activation == "sigmoid"
    np.testing.assert_array_equal(conv.args[2].data.numpy(), np.tile(bias.reshape(-1), 4))
    assert calls[-1].op.name == ("nn.contrib_conv2d_transpose_fewoc" if oc == 1
                                 else "layout_transform")


@needs_cc
@pytest.mark.parametrize("target,disabled", [("llvm", []), ("c", []),
                                             ("llvm", ["AlterOpLayout"])])
def test_phase_convs_match_numpy(target, disabled):
    """Planned (host SIMD, portable C) and unplanned (the phased NCHW compute)."""
    mod, inputs, wants = _model()
    with ember.transform.PassContext(opt_level=3, disabled_pass=disabled):
        lib = relay.build(mod, target)
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    for i, x in enumerate(inputs):
        m.set_input(i, x)
    m.run()
    for i, want in enumerate(wants):
        np.testing.assert_allclose(m.get_output(i).numpy(), want, rtol=1e-4, atol=1e-4,
                                   err_msg=f"case {CASES[i]}")


@needs_cc
def test_onnx_conv_transpose_matches_onnxruntime():
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w1 = rng.uniform(-1, 1, (8, 16, 4, 4)).astype("float32")
    w2 = rng.uniform(-1, 1, (16, 4, 3, 3)).astype("float32")
    nodes = [helper.make_node("ConvTranspose", ["x", "w1"], ["t"], strides=[2, 2],
                              pads=[1, 1, 1, 1], output_padding=[1, 0]),
             helper.make_node("Relu", ["t"], ["r"]),
             helper.make_node("ConvTranspose", ["r", "w2"], ["y"], strides=[2, 2], group=4,
                              pads=[0, 1, 1, 0])]
    graph = helper.make_graph(
        nodes, "convt", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 8, 5, 7))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 16, 22, 28))],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    x = rng.uniform(-1, 1, (1, 8, 5, 7)).astype("float32")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})[0]
    mod, params = relay.frontend.from_onnx(model, {"x": x.shape})
    with ember.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    m.set_input("x", x)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-4, atol=1e-4)


@needs_cc
def test_onnx_dilated_conv_transpose_matches_onnxruntime():
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = rng.uniform(-1, 1, (16, 8, 3, 3)).astype("float32")
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2],
                            dilations=[2, 3], pads=[2, 1, 1, 2])
    graph = helper.make_graph(
        [node], "convt_dilated",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 16, 6, 5))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = rng.uniform(-1, 1, (1, 16, 6, 5)).astype("float32")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})[0]
    mod, params = relay.frontend.from_onnx(model, {"x": x.shape})
    with ember.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    m.set_input("x", x)
    m.run()
    names = [n.op.name for n in post_order(_plan(mod, "llvm")["main"].body)
             if isinstance(n, Call)]
    assert "nn.conv2d_transpose" not in names  # the blocked phase convs
    np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-4, atol=1e-4)


@needs_cc
@pytest.mark.slow
def test_dbnet_matches_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    from ember.relay.testing import onnx_twin

    model, _, _ = onnx_twin("dbnet", image_shape=(3, 64, 96))
    name = model.graph.input[0].name
    x = np.random.default_rng(1).uniform(-1, 1, (1, 3, 64, 96)).astype("float32")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {name: x})[0]
    mod, params = relay.frontend.from_onnx(model, {name: x.shape})
    with ember.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    m.set_input(name, x)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- the interleave op
def _interleave(shape, **attrs):
    x = relay.var("x", shape=shape)
    call = relay.nn.contrib_conv2d_transpose_interleave(x, **attrs)
    return InferType()(ember.IRModule.from_expr(relay.Function([x], call)))


def test_interleave_types_and_reference():
    mod = _interleave((2, 2, 3, 4, 8), strides=(2, 2), offset=(1, 0), out_size=(5, 7),
                      data_layout="NCHW8c", out_layout="NCHW4c")
    assert tuple(mod["main"].checked_type.ret_type.shape) == (2, 1, 5, 7, 4)
    mod = _interleave((1, 12, 2, 2), strides=(3, 1), offset=(2, 0), out_size=(4, 2))
    x = np.random.default_rng(0).standard_normal((1, 12, 2, 2)).astype("float32")
    got = relay.create_executor("debug", mod=mod).evaluate()(x).numpy()
    # out[c, y, x] = x[phase(y) * 4 + c, (y + 2) // 3, x]
    want = np.stack([x[0, ((y + 2) % 3) * 4: ((y + 2) % 3) * 4 + 4, (y + 2) // 3]
                     for y in range(4)], axis=1)[None]
    np.testing.assert_array_equal(got, want)


@needs_cc
def test_interleave_kernel_matches_its_reference():
    mod = _interleave((1, 12, 2, 3), strides=(1, 3), offset=(0, 1), out_size=(2, 8),
                      out_layout="NCHW4c")
    x = np.random.default_rng(0).standard_normal((1, 12, 2, 3)).astype("float32")
    want = relay.create_executor("debug", mod=mod).evaluate()(x).numpy()
    got = relay.create_executor("graph", mod=mod, target="llvm").evaluate()(x).numpy()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("attrs,match", [
    ({"strides": (2, 2), "offset": (2, 0), "out_size": (4, 4)}, "offset"),
    ({"strides": (0, 2), "offset": (0, 0), "out_size": (4, 4)}, "strides"),
    ({"strides": (2, 2), "offset": (0, 0), "out_size": (4, 4), "out_layout": "NHWC"},
     "out_layout"),
    ({"strides": (2, 2), "offset": (0, 0), "out_size": (4, 4), "data_layout": "NCHW0c"},
     "data_layout"),
])
def test_interleave_bad_attrs_name_the_attribute(attrs, match):
    with pytest.raises(OpAttributeInvalid, match=match):
        relay.nn.contrib_conv2d_transpose_interleave(relay.var("x", shape=(1, 4, 2, 2)), **attrs)


@pytest.mark.parametrize("shape,attrs,match", [
    ((1, 6, 2, 2), {}, "6 channels, not a multiple of the 4 phases"),
    ((1, 8, 2, 2), {"out_size": (5, 4)}, "data has 2 phase rows"),
    ((1, 8, 2, 2), {"out_layout": "NCHW4c"}, "2 output channels do not split"),
    ((1, 8, 2, 2), {"data_layout": "NCHW8c"}, "data must be NCHW8c"),
])
def test_interleave_type_errors_name_the_shapes(shape, attrs, match):
    attrs = {"strides": (2, 2), "offset": (0, 0), "out_size": (4, 4), **attrs}
    with pytest.raises(TypeInferenceError, match=match):
        _interleave(shape, **attrs)


@needs_cc
@pytest.mark.parametrize("k,s,p,op", [(2, 2, 0, 0), (3, 2, 1, 1), (4, 2, 1, 0)])
def test_one_channel_of_run_time_size_writes_its_output_interleaved(k, s, p, op):
    """A transposed conv to one channel of a ``?`` height and width plans as the static
    build's: the few-output-channel phase conv writing the interleaved output (out_size 0:
    phase rows * stride - trim), one VM build matching numpy at sizes of no vector width,
    1 included, and cropped (padding) or not."""
    rng = np.random.default_rng(k)
    x = relay.var("x", shape=(relay.Any(), 16, relay.Any(), relay.Any()))
    wt = rng.uniform(-1, 1, (16, 1, k, k)).astype("float32")
    y = relay.sigmoid(relay.nn.conv2d_transpose(
        x, relay.const(wt), strides=(s, s), padding=(p, p), output_padding=(op, op),
        channels=1, kernel_size=(k, k)))
    mod = ember.IRModule.from_expr(relay.Function([x], y))
    fewoc = [n for n in post_order(_plan(mod, "llvm -mcpu=haswell")["main"].body)
             if isinstance(n, Call) and n.op.name == "nn.contrib_conv2d_transpose_fewoc"]
    assert len(fewoc) == 1 and fewoc[0].attrs.out_size == (0, 0)
    with ember.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, "llvm")
    vm = ember.runtime.vm.VirtualMachine(exe, ember.cpu())
    for shape in ((1, 16, 5, 7), (2, 16, 1, 1), (1, 16, 13, 4)):
        data = rng.uniform(-1, 1, shape).astype("float32")
        want = conv2d_transpose_nchw(data.astype("float64"), wt.astype("float64"), (s, s),
                                     (p,) * 4, (op, op), (1, 1), 1)
        got = vm.invoke("main", ember.nd.array(data)).numpy()
        np.testing.assert_allclose(got, 1 / (1 + np.exp(-want)), rtol=1e-4, atol=1e-4,
                                   err_msg=str(shape))

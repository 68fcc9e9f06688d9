"""AlterOpLayout / ConvertLayout: NCHW[L]c layout planning with fused conv epilogues.

Checks the rewritten graphs (convs fused with their bias/residual/activation, weights packed
as constants, layout transforms only at the boundary) and that planning on and off give the
same results (rtol 1e-4, atol 1e-5) on the zoo's conv models, for the graph, AOT and VM
executors, and against onnxruntime on their ONNX twins.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import relay
from ember.ir.expr import Call, Constant
from ember.ir.visitor import post_order
from ember.relay.transform import AlterOpLayout, ConvertLayout, InferType, RecogniseActivations
from ember.runtime.errors import OpAttributeInvalid, TypeInferenceError
from ember.testing import find_c_compiler

needs_cc = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")
OFF = ["AlterOpLayout"]


def _ops(mod) -> list[Call]:
    return [n for n in post_order(mod["main"].body) if isinstance(n, Call)]


def _names(mod) -> list[str]:
    return [c.op.name for c in _ops(mod)]


def _plan(mod, params=None, target="llvm -mcpu=haswell"):
    with ember.transform.PassContext(opt_level=3), ember.target.Target(target):
        if params:
            from ember.relay.build_module import bind_params_by_name

            mod = ember.IRModule.from_expr(bind_params_by_name(mod["main"], params))
        return AlterOpLayout()(InferType()(mod))


def _const(shape, seed=0):
    return relay.const(np.random.default_rng(seed).uniform(-1, 1, shape).astype("float32"))


def _block(c=16, residual=True):
    """conv -> +bias -> (+x) -> relu -> max_pool -> global_avg_pool."""
    x = relay.var("x", shape=(1, c, 9, 9))
    y = relay.nn.conv2d(x, _const((c, c, 3, 3)), padding=(1, 1))
    y = relay.add(y, _const((c, 1, 1), 1))
    if residual:
        y = relay.add(y, x)
    y = relay.nn.relu(y)
    y = relay.nn.max_pool2d(y, pool_size=(3, 3), strides=(2, 2), padding=(1, 1))
    y = relay.nn.global_avg_pool2d(y)
    return ember.IRModule.from_expr(relay.Function([x], y))


def test_conv_bias_residual_relu_become_one_op_and_pools_stay_blocked():
    mod = _plan(_block())
    names = _names(mod)
    assert "nn.conv2d" not in names and names.count("nn.contrib_conv2d_NCHWc_fused_add") == 1
    assert "nn.relu" not in names and "add" not in names
    fused = next(c for c in _ops(mod) if c.op.name.startswith("nn.contrib_conv2d"))
    assert fused.attrs.activation == "relu" and fused.attrs.act_after_add
    # x is plain but its 16 channels fill blocks: one transform, shared with the residual
    assert fused.attrs.lanes == 8 and fused.attrs.in_block == 8
    assert isinstance(fused.args[1], Constant) and fused.args[1].data.shape == (2, 2, 3, 3, 8, 8)
    pools = [c for c in _ops(mod) if "pool" in c.op.name]
    assert all(p.attrs.layout == "NCHW8c" for p in pools)
    transforms = [c for c in _ops(mod) if c.op.name == "layout_transform"]
    # one for x (the conv's input and the epilogue's residual), one for the result
    assert len(transforms) == 2
    assert not any(isinstance(t.args[0], Constant) for t in transforms)


def test_first_conv_reads_nchw_directly_and_result_returns_to_nchw():
    x = relay.var("x", shape=(1, 3, 16, 16))
    y = relay.clip(relay.nn.conv2d(x, _const((16, 3, 3, 3)), strides=(2, 2), padding=(1, 1)),
                   0.0, 6.0)
    mod = _plan(ember.IRModule.from_expr(relay.Function([x], y)))
    conv = next(c for c in _ops(mod) if c.op.name.startswith("nn.contrib_conv2d"))
    assert conv.attrs.in_block == 1 and conv.args[0].name_hint == "x"
    assert (conv.attrs.activation, conv.attrs.clip_min, conv.attrs.clip_max) == ("clip", 0, 6)
    assert mod["main"].checked_type.ret_type.shape == (1, 16, 8, 8)
    assert _names(mod)[-1] == "layout_transform"


@needs_cc
def test_plain_input_whose_channels_fill_blocks_is_blocked_once():
    """A graph input of 32 channels (a multiple of the lanes) feeding a 3x3 and a strided 1x1
    conv: one transform to NCHW8c serves both (the kernel then reads a block per tap, not a
    channel per tap); a 12-channel input (no whole blocks) is read as one block of its 12
    channels (as an RGB stem: YOLOv5's Focus)."""
    x = relay.var("x", shape=(1, 32, 10, 10))
    a = relay.nn.relu(relay.nn.conv2d(x, _const((16, 32, 3, 3)), padding=(1, 1)))
    b = relay.nn.conv2d(x, _const((16, 32, 1, 1), 1), strides=(2, 2))
    both = relay.add(relay.nn.max_pool2d(a, pool_size=(2, 2), strides=(2, 2)),
                     relay.nn.relu(b))
    mod = ember.IRModule.from_expr(relay.Function([x], both))
    planned = _plan(mod)
    convs = [c for c in _ops(planned) if c.op.name.startswith("nn.contrib_conv2d")]
    assert [c.attrs.in_block for c in convs] == [8, 8]
    into_blocks = [c for c in _ops(planned) if c.op.name == "layout_transform"
                   and c.attrs.dst_layout == "NCHW8c"]
    assert len(into_blocks) == 1
    xv = np.random.default_rng(3).uniform(-1, 1, (1, 32, 10, 10)).astype("float32")
    np.testing.assert_allclose(_outputs(mod, {}, xv), _outputs(mod, {}, xv, disabled=OFF),
                               rtol=1e-4, atol=1e-5)
    y = relay.var("y", shape=(1, 12, 6, 6))
    odd = ember.IRModule.from_expr(relay.Function(
        [y], relay.nn.conv2d(y, _const((16, 12, 3, 3)), padding=(1, 1))))
    conv = next(c for c in _ops(_plan(odd)) if c.op.name.startswith("nn.contrib_conv2d"))
    assert conv.attrs.in_block == 12


def _haswell_source(mod, monkeypatch) -> str:
    """The C that a haswell build compiles, lowered only: relay.build compiles at once (and
    the kernel objects for haswell are 17 s of GCC that no other test shares)."""
    from ember.relay.backend.te_compiler import lower_module

    target = "llvm -mcpu=haswell"
    with ember.transform.PassContext(opt_level=3), monkeypatch.context() as env:
        env.setenv("EMBER_PREFETCH", "0")  # nor the background compile of its kernel objects
        opt, _ = relay.optimize(mod, target)
        return lower_module(opt, ember.target.Target(target))[1].get_source()


@needs_cc
def test_first_convs_of_few_channels_read_the_plain_input(monkeypatch):
    """First convs on 1-8 channels (3x3/1, 7x7/2, 3x3/2, dscnn's 10x4/2 on one channel, 8
    channels) read the image as plain NCHW (in_block 1, no transform into blocks; the only
    transform is the result's back to NCHW) and lower to ember_conv2d_nchw_input; a 3-channel
    1x1 conv keeps one input block of all channels, and so do 12 channels at 3x3 (after one
    transform into that block)."""
    cases = [((1, 3, 15, 13), 3, 1, 1), ((1, 3, 15, 13), 7, 2, 3), ((1, 3, 15, 13), 3, 2, 1),
             ((1, 1, 49, 10), (10, 4), 2, (4, 1, 5, 1)), ((1, 8, 9, 9), 3, 1, 1),
             ((1, 3, 9, 9), 1, 1, 0), ((1, 12, 9, 9), 3, 1, 1)]
    for shape, kernel, stride, pad in cases:
        x = relay.var("x", shape=shape)
        k = kernel if isinstance(kernel, tuple) else (kernel, kernel)
        y = relay.nn.relu(relay.nn.conv2d(x, _const((16, shape[1], *k)), strides=stride,
                                          padding=pad))
        mod = ember.IRModule.from_expr(relay.Function([x], y))
        planned = _plan(mod)
        conv = next(c for c in _ops(planned) if c.op.name.startswith("nn.contrib_conv2d"))
        own = shape[1] <= 8 and k != (1, 1)
        whole = k == (1, 1) or shape[1] > 8  # one block of all the input's channels
        assert conv.attrs.in_block == (shape[1] if whole else 1)
        assert _names(planned).count("layout_transform") == (2 if whole else 1)
        assert ("ember_conv2d_nchw_input_x8" in _haswell_source(mod, monkeypatch)) == own
        xv = np.random.default_rng(shape[1]).uniform(-1, 1, shape).astype("float32")
        np.testing.assert_allclose(_outputs(mod, {}, xv), _outputs(mod, {}, xv, disabled=OFF),
                                   rtol=1e-4, atol=1e-5)


def test_activation_before_residual_and_shared_values():
    x = relay.var("x", shape=(1, 8, 6, 6))
    conv = relay.nn.conv2d(x, _const((8, 8, 1, 1)))
    y = relay.add(relay.nn.relu(conv), x)  # act(conv) + x
    mod = _plan(ember.IRModule.from_expr(relay.Function([x], y)))
    fused = next(c for c in _ops(mod) if c.op.name.startswith("nn.contrib_conv2d"))
    assert fused.op.name.endswith("_add") and not fused.attrs.act_after_add
    # a conv result used twice keeps its own value: relu is not absorbed
    shared = relay.nn.conv2d(x, _const((8, 8, 1, 1)))
    two = relay.Tuple([relay.nn.relu(shared), shared])
    names = _names(_plan(ember.IRModule.from_expr(relay.Function([x], two))))
    assert "nn.relu" in names and names.count("nn.contrib_conv2d_NCHWc_fused") == 1


def test_unplannable_convs_are_left_alone():
    x = relay.var("x", shape=(1, 8, 6, 6))
    w = relay.var("w", shape=(10, 8, 3, 3))  # weight not a constant
    a = relay.nn.conv2d(x, w)
    # 1 output channel of a 1x1 conv: padding it to a block costs more than it gains
    b = relay.nn.conv2d(x, _const((1, 8, 1, 1)))
    mod = _plan(ember.IRModule.from_expr(relay.Function([x, w], relay.Tuple([a, b]))))
    assert _names(mod).count("nn.conv2d") == 2 and "layout_transform" not in _names(mod)


def test_scalar_target_plans_four_lanes():
    mod = _plan(_block(c=8, residual=False), target="c")
    fused = next(c for c in _ops(mod) if c.op.name.startswith("nn.contrib_conv2d"))
    assert fused.attrs.lanes == 4


def test_convert_layout_names_and_errors():
    mod = InferType()(_block())
    with ember.transform.PassContext(opt_level=3):
        planned = ConvertLayout({"nn.conv2d": ["NCHW4c", "default"]})(mod)
        assert ConvertLayout({"nn.conv2d": ["NCHW", "default"]})(mod) is mod
    fused = next(c for c in _ops(planned) if c.op.name.startswith("nn.contrib_conv2d"))
    assert fused.attrs.lanes == 4
    with pytest.raises(OpAttributeInvalid, match="NHWC"):
        ConvertLayout({"nn.conv2d": ["NHWC", "default"]})
    with pytest.raises(OpAttributeInvalid, match="only nn.conv2d"):
        ConvertLayout({"nn.dense": ["NC"]})
    with pytest.raises(OpAttributeInvalid, match="dict"):
        ConvertLayout(["NCHW8c"])
    assert relay.transform.get_pass("AlterOpLayout").name == "AlterOpLayout"


def test_fused_op_type_errors_and_attrs():
    from ember.relay.op.nn.conv_nchwc import contrib_conv2d_nchwc_fused

    x = relay.var("x", shape=(1, 2, 5, 5, 8))
    w = relay.var("w", shape=(2, 2, 3, 3, 8, 8))
    b = relay.var("b", shape=(16,))
    ok = contrib_conv2d_nchwc_fused(x, w, b, lanes=8, in_block=8, padding=(1, 1))
    assert InferType()(ember.IRModule.from_expr(relay.Function([x, w, b], ok)))[
        "main"].checked_type.ret_type.shape == (1, 2, 5, 5, 8)
    bad_bias = contrib_conv2d_nchwc_fused(x, w, relay.var("c", shape=(8,)), lanes=8, in_block=8)
    with pytest.raises(TypeInferenceError, match="channels do not match"):
        InferType()(ember.IRModule.from_expr(relay.Function(relay.analysis.free_vars(bad_bias),
                                                            bad_bias)))
    bad_block = contrib_conv2d_nchwc_fused(x, w, b, lanes=4, in_block=8)
    with pytest.raises(TypeInferenceError, match="do not match"):
        InferType()(ember.IRModule.from_expr(relay.Function([x, w, b], bad_block)))
    res = relay.var("r", shape=(1, 2, 4, 4, 8))
    bad_res = contrib_conv2d_nchwc_fused(x, w, b, res, lanes=8, in_block=8)
    with pytest.raises(TypeInferenceError, match="residual"):
        InferType()(ember.IRModule.from_expr(relay.Function([x, w, b, res], bad_res)))
    with pytest.raises(OpAttributeInvalid, match="activation"):
        contrib_conv2d_nchwc_fused(x, w, b, activation="gelu")


def _outputs(mod, params, x, executor="graph", disabled=(), config=None):
    from ember.contrib import graph_executor
    from ember.relay.backend import Executor

    with ember.transform.PassContext(opt_level=3, disabled_pass=list(disabled), config=config):
        if executor == "vm":
            exe = relay.vm.compile(mod, "llvm", params=params)
            return ember.runtime.vm.VirtualMachine(exe, ember.cpu()).run(x).numpy()
        lib = relay.build(mod, "llvm", params=params, executor=Executor(executor))
    if executor == "aot":
        from ember.runtime.aot_executor import AotModule

        m = AotModule(lib["default"](ember.cpu()))
    else:
        m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    m.set_input(0, x)
    m.run()
    return m.get_output(0).numpy()


def _zoo(name: str, **kwargs):
    from ember.relay import testing

    mod, params = getattr(testing, name).get_workload(**kwargs)
    shape = [int(d) for d in mod["main"].params[0].type_annotation.shape]
    x = np.random.default_rng(0).uniform(-1, 1, shape).astype("float32")
    return mod, params, x


ZOO_DEFAULT = {"dscnn": {}, "resnet8": {},
               "mobilenet_v2": {"image_shape": (3, 64, 64), "num_classes": 10},
               "resnet": {"num_layers": 18, "image_shape": (3, 32, 32), "num_classes": 10}}
ZOO_FULL = {"mobilenet_v2": {}, "resnet": {"num_layers": 18}}


def _pre_softmax(mod):
    """The module without its final softmax, so that differences are not squashed."""
    body = mod["main"].body
    if isinstance(body, Call) and body.op.name == "nn.softmax":
        body = body.args[0]
    return ember.IRModule.from_expr(relay.Function(mod["main"].params, body))


@needs_cc
@pytest.mark.parametrize("name", list(ZOO_DEFAULT))
def test_planning_on_and_off_agree_on_zoo_models(name):
    mod, params, x = _zoo(name, **ZOO_DEFAULT[name])
    mod = _pre_softmax(mod)
    want = _outputs(mod, params, x, disabled=OFF)
    got = _outputs(mod, params, x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@needs_cc
@pytest.mark.slow
@pytest.mark.parametrize("name", list(ZOO_FULL))
def test_planning_on_and_off_agree_on_full_size_models(name):
    mod, params, x = _zoo(name, **ZOO_FULL[name])
    mod = _pre_softmax(mod)
    np.testing.assert_allclose(_outputs(mod, params, x), _outputs(mod, params, x, disabled=OFF),
                               rtol=1e-4, atol=1e-5)


@needs_cc
@pytest.mark.parametrize("executor", ["aot", "vm"])
def test_planned_model_runs_on_every_executor(executor):
    mod, params, x = _zoo("resnet8")
    mod = _pre_softmax(mod)
    want = _outputs(mod, params, x, disabled=OFF)
    np.testing.assert_allclose(_outputs(mod, params, x, executor), want, rtol=1e-4, atol=1e-5)


def _onnx_check(name: str, **kwargs) -> None:
    onnx = pytest.importorskip("onnx")  # noqa: F841
    ort = pytest.importorskip("onnxruntime")
    from ember.relay.testing import onnx_twin

    model = onnx_twin(name, **kwargs)[0]
    inp = model.graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    x = np.random.default_rng(1).uniform(-1, 1, shape).astype("float32")
    mod, params = relay.frontend.from_onnx(model, {inp.name: shape})
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {inp.name: x})[0]
    np.testing.assert_allclose(_outputs(mod, params, x), want, rtol=1e-4, atol=1e-5)


@needs_cc
@pytest.mark.parametrize("name", ["dscnn", "resnet8"])
def test_onnx_twins_match_onnxruntime(name):
    _onnx_check(name)


@needs_cc
@pytest.mark.slow
@pytest.mark.parametrize("name,kwargs", [("mobilenet_v2", {}),
                                         ("resnet", {"num_layers": 18, "batch_size": 1})])
def test_full_size_onnx_twins_match_onnxruntime(name, kwargs):
    _onnx_check(name, **kwargs)


def _hardswish_block(x, w, divide=True):
    y = relay.add(relay.nn.conv2d(x, w, padding=(1, 1)), _const((8, 1, 1), 3))
    gate = relay.clip(relay.add(y, relay.const(3.0)), 0.0, 6.0)
    prod = relay.multiply(y, gate)
    return relay.divide(prod, relay.const(6.0)) if divide else relay.multiply(
        prod, relay.const(1 / 6, "float32"))


@pytest.mark.parametrize("divide", [True, False])
def test_hardswish_is_recognised_as_the_epilogue(divide):
    x = relay.var("x", shape=(1, 8, 5, 5))
    mod = ember.IRModule.from_expr(relay.Function([x], _hardswish_block(x, _const((8, 8, 3, 3)),
                                                                         divide)))
    planned = _plan(RecogniseActivations()(mod))  # the pipeline recognises it first
    names = _names(planned)
    assert names.count("nn.contrib_conv2d_NCHWc_fused") == 1 and "clip" not in names
    fused = next(c for c in _ops(planned) if c.op.name.startswith("nn.contrib_conv2d"))
    assert fused.attrs.activation == "hardswish"
    if find_c_compiler() is not None:
        xv = np.random.default_rng(3).uniform(-4, 4, (1, 8, 5, 5)).astype("float32")
        np.testing.assert_allclose(_outputs(mod, {}, xv), _outputs(mod, {}, xv, disabled=OFF),
                                   rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("desired,lanes", [("NCHW", None), ("NCHW4c", 4), ("NCHW16c", 16),
                                           ("NCHWc", 8)])
def test_desired_layout_option(desired, lanes):
    """relay.AlterOpLayout.desired_layout (ember compile --desired-layout) picks the block."""
    mod = InferType()(_block())
    with ember.transform.PassContext(
            opt_level=3, config={"relay.AlterOpLayout.desired_layout": desired}), \
            ember.target.Target("llvm -mcpu=haswell"):
        planned = AlterOpLayout()(mod)
    fused = [c for c in _ops(planned) if c.op.name.startswith("nn.contrib_conv2d")]
    assert [c.attrs.lanes for c in fused][:1] == ([] if lanes is None else [lanes])
    with pytest.raises(OpAttributeInvalid, match="NHWC"), ember.transform.PassContext(
            opt_level=3, config={"relay.AlterOpLayout.desired_layout": "NHWC"}):
        AlterOpLayout()(mod)


def _narrow_stage(c_in: int = 16, c_mid: int = 24, c_out: int = 32):
    """c_in -> c_mid (1x1) -> depthwise c_mid (+ residual) -> c_out (1x1): with the defaults,
    MobileNetV2's 24-channel stage, which 16-lane blocks cannot hold."""
    x = relay.var("x", shape=(1, c_in, 7, 9))
    y = relay.nn.relu(relay.nn.conv2d(x, _const((c_mid, c_in, 1, 1), 1)))
    z = relay.nn.conv2d(y, _const((c_mid, 1, 3, 3), 2), padding=(1, 1), groups=c_mid)
    z = relay.add(relay.add(z, _const((c_mid, 1, 1), 3)), y)
    out = relay.nn.conv2d(z, _const((c_out, c_mid, 1, 1), 4))
    return ember.IRModule.from_expr(relay.Function([x], out))


# (desired layout, channels, lanes): in the default run, 8-lane blocks and a 12-channel stage
# (the 4- and 8-lane kernels); the 16-lane case builds the 16-lane conv kernel, whose object
# alone takes ~20 s to compile on an AVX2 host, so it runs in the slow run.
NARROW_CASES = [
    pytest.param("NCHW8c", (8, 12, 16), 8, id="8c"),
    pytest.param("NCHW16c", (16, 24, 32), 16, id="16c", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("desired, channels, lanes", NARROW_CASES)
def test_channels_that_do_not_split_into_the_lanes_take_half_of_them(desired, channels, lanes):
    cfg = {"relay.AlterOpLayout.desired_layout": desired}
    with ember.transform.PassContext(opt_level=3, config=cfg), \
            ember.target.Target("llvm -mcpu=haswell"):
        planned = AlterOpLayout()(InferType()(_narrow_stage(*channels)))
    fused = [c for c in _ops(planned) if c.op.name.startswith("nn.contrib_conv2d")]
    # (in_block, lanes): the input in one block of the desired lanes, the stage that does not
    # split into them in blocks of half the lanes, the result back in the desired lanes
    half = lanes // 2
    assert [(c.attrs.in_block, c.attrs.lanes) for c in fused] == [(lanes, half), (half, half),
                                                                   (half, lanes)]
    assert _names(planned).count("layout_transform") == 2  # the input, and the result
    xv = np.random.default_rng(0).uniform(-1, 1, (1, channels[0], 7, 9)).astype("float32")
    np.testing.assert_allclose(_outputs(_narrow_stage(*channels), {}, xv, config=cfg),
                               _outputs(_narrow_stage(*channels), {}, xv, disabled=OFF),
                               rtol=1e-4, atol=1e-5)


def _pools_of_plain(channels, pool, **attrs):
    """relu -> pool of a plain NCHW value (no conv anywhere) -> + 1."""
    x = relay.var("x", shape=(1, channels, 11, 13))
    y = getattr(relay.nn, pool)(relay.nn.relu(x), **attrs)
    return ember.IRModule.from_expr(relay.Function([x], relay.add(y, relay.const(1.0))))


@pytest.mark.parametrize("channels, lanes", [(32, 8), (24, 8), (20, 4), (6, 0)])
def test_a_pool_of_a_plain_value_runs_blocked_where_its_channels_split(channels, lanes):
    """On AVX2 (8 lanes): a pool after a non-conv op converts to NCHW[L]c in the block its
    channels split into (8, else 4); 6 channels split into none and stay plain."""
    mod = _plan(_pools_of_plain(channels, "max_pool2d", pool_size=(3, 3), strides=(2, 2),
                                padding=(1, 1)))
    pool = next(c for c in _ops(mod) if c.op.name == "nn.max_pool2d")
    assert pool.attrs.layout == (f"NCHW{lanes}c" if lanes else "NCHW")


@needs_cc
@pytest.mark.parametrize("pool, attrs", [
    ("max_pool2d", {"pool_size": (2, 2), "strides": (2, 2)}),
    ("max_pool2d", {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1),
                    "ceil_mode": True}),
    ("avg_pool2d", {"pool_size": (3, 3), "strides": (1, 1), "padding": (1, 1),
                    "count_include_pad": False}),
    ("avg_pool2d", {"pool_size": (2, 3), "strides": (2, 1)})])
@pytest.mark.parametrize("channels", [16, 20])
def test_pools_of_plain_values_planned_or_not_agree(pool, attrs, channels):
    mod = _pools_of_plain(channels, pool, **attrs)
    x = np.random.default_rng(3).uniform(-1, 1, (1, channels, 11, 13)).astype("float32")
    np.testing.assert_allclose(_outputs(mod, {}, x), _outputs(mod, {}, x, disabled=OFF),
                               rtol=1e-6, atol=1e-6)

"""FuseNormEpilogue: before/expected pairs (plain and NCHW[L]c norms, per-row affines,
activations), the graphs it must leave alone (a second reader of the norm, float16, vectors
that are not one per row), the text format, and numerics of built models against the unfused
build and the reference interpreter (rtol 1e-4, atol 1e-4 times the output's scale: the
vector exp/erf are within ~2e-7 relative of libm's, the rest as nn.layer_norm's kernel),
static and run-time sizes, and wav2vec2's ONNX twin against onnxruntime (rtol 1e-4,
atol 1e-5 times the output's scale, as the other zoo twins).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from _pass_helpers import assert_main_equal, parse, run
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember import relay
from ember.ir.visitor import post_order
from ember.relay.transform import FuseNormEpilogue, InferType
from ember.relay.transform._helpers import op_call
from ember.testing import find_c_compiler

needs_cc = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")
RNG = np.random.default_rng(7)
GELU = (0.5, 1 / math.sqrt(2))


def _c(*shape: int, offset: float = 0.0) -> relay.Constant:
    return relay.const((RNG.standard_normal(shape) + offset).astype("float32"))


def _mod(body_of, shape, dtype="float32") -> ember.IRModule:
    x = relay.var("x", shape=shape, dtype=dtype)
    return InferType()(ember.IRModule.from_expr(relay.Function([x], body_of(x))))


def _ln(x: relay.Expr, n: int, axis: int, dtype: str = "float32") -> relay.Expr:
    return relay.nn.layer_norm(x, relay.const(np.ones(n, dtype)), relay.const(np.zeros(n, dtype)),
                               axis=axis, center=False, scale=False)


def _fused(x: relay.Expr, n: int, axis: int, scale=None, shift=None, div=1, act="none",
           params=(0.0, 0.0)) -> relay.Expr:
    rows = scale if scale is not None else shift
    zero = relay.const(0.0, "float32")
    return op_call("nn.contrib_layer_norm_act", x, relay.const(np.ones(n, "float32")),
                   relay.const(np.zeros(n, "float32")),
                   zero if scale is None else relay.const(scale.astype("float32")),
                   zero if shift is None else relay.const(shift.astype("float32")),
                   axis=axis, center=False, scale=False, has_row_scale=scale is not None,
                   has_row_shift=shift is not None, row_count=1 if rows is None else rows.size,
                   row_div=div, activation=act, params=params)


S4 = RNG.uniform(0.5, 1.5, 4).astype("float32")
T4 = RNG.standard_normal(4).astype("float32")
S16 = RNG.uniform(0.5, 1.5, 16).astype("float32")
T16 = RNG.standard_normal(16).astype("float32")
GROUP = (1, 4, 1, 9)  # (N, C, 1, T): a GroupNorm of one channel per group over T
BLOCKED = (1, 2, 1, 9, 8)  # the same in NCHW8c, C = 16

CASES = {
    "relu_after_last_axis": (
        (2, 6), lambda x: relay.nn.relu(_ln(x, 6, -1)),
        lambda x: _fused(x, 6, -1, act="relu")),
    # wav2vec2's first norm: per-channel gamma/beta across the rows, then an exact GELU
    "group_norm_affine_gelu": (
        GROUP, lambda x: relay.nn.gelu(
            _ln(x, 9, 3) * relay.const(S4.reshape(4, 1, 1)) + relay.const(T4.reshape(4, 1, 1))),
        lambda x: _fused(x, 9, 3, S4, T4, act="gelu_erf", params=GELU)),
    # the same in NCHW8c: the constants blocked [1, C/8, 1, 1, 8], rows in blocked order
    "blocked_affine_silu": (
        BLOCKED, lambda x: relay.nn.silu(
            relay.const(S16.reshape(1, 2, 1, 1, 8)) * _ln(x, 9, 3)
            + relay.const(T16.reshape(1, 2, 1, 1, 8))),
        lambda x: _fused(x, 9, 3, S16, T16, act="silu")),
    # a shift then a scale: both scale; a scalar takes the vector's pattern
    "scalar_shift_then_scale": (
        GROUP, lambda x: (_ln(x, 9, 3) + relay.const(np.float32(0.5)))
        * relay.const(S4.reshape(1, 4, 1, 1)),
        lambda x: _fused(x, 9, 3, S4, np.float32(0.5) * S4)),
    # H > 1 after the channels: each channel's value covers H rows
    "rows_of_height_three": (
        (2, 4, 3, 9), lambda x: relay.nn.hardswish(_ln(x, 9, 3) * relay.const(
            S4.reshape(4, 1, 1))),
        lambda x: _fused(x, 9, 3, S4, div=3, act="hardswish", params=(1 / 6, 0.0))),
    # normalised over the channels of (N, C, L): a per-position affine runs across rows
    "over_the_middle_axis": (
        (2, 5, 7), lambda x: relay.clip(_ln(x, 5, 1) + relay.const(T16[:7].reshape(1, 1, 7)),
                                        -1.0, 2.0),
        lambda x: _fused(x, 5, 1, shift=T16[:7], act="clip", params=(-1.0, 2.0))),
    # the activation ends the epilogue: the multiply after it stays
    "after_the_activation": (
        GROUP, lambda x: relay.nn.relu(_ln(x, 9, 3)) * relay.const(S4.reshape(4, 1, 1)),
        lambda x: _fused(x, 9, 3, act="relu") * relay.const(S4.reshape(4, 1, 1))),
}


@pytest.mark.parametrize("case", list(CASES))
def test_rewrites(case):
    shape, before, expected = CASES[case]
    assert_main_equal(run(FuseNormEpilogue(), _mod(before, shape)), _mod(expected, shape))


def test_the_fused_op_prints_and_parses():
    shape, before, _ = CASES["group_norm_affine_gelu"]
    mod = run(FuseNormEpilogue(), _mod(before, shape))
    text = mod.astext()
    assert 'activation="gelu_erf"' in text and "row_count=4" in text
    assert_main_equal(ember.parser.fromtext(text), mod)


def test_text_with_the_fused_op_type_checks():
    mod = parse("""
    def @main(%x: Tensor[(1, 4, 1, 9), float32], %g: Tensor[(9), float32],
              %b: Tensor[(9), float32], %s: Tensor[(4), float32]) {
      nn.contrib_layer_norm_act(%x, %g, %b, %s, 0f, axis=3, has_row_scale=True,
                                row_count=4, activation="silu")
    }""")
    assert tuple(mod["main"].body.checked_type.shape) == (1, 4, 1, 9)


def _read_twice(x):
    y = _ln(x, 9, 3)  # one norm with two readers
    return relay.Tuple([y, relay.nn.relu(y)])


LEFT_ALONE = {
    "norm_read_twice": (GROUP, _read_twice, "float32"),
    "float16": (GROUP, lambda x: relay.nn.relu(_ln(x, 9, 3, "float16")), "float16"),
    # varies along the normalised axis: not one value per row
    "along_the_axis": (GROUP, lambda x: _ln(x, 9, 3) * _c(9), "float32"),
    # varies over every position: not a constant of the rows
    "a_tensor": (GROUP, lambda x: _ln(x, 9, 3) * x, "float32"),
    # per channel in NCHW8c with H = 3 between the channel blocks and the lanes: not one run
    "blocked_height_three": ((1, 2, 3, 9, 8), lambda x: _ln(x, 9, 3) * relay.const(
        S16.reshape(1, 2, 1, 1, 8)), "float32"),
    "not_an_activation": (GROUP, lambda x: relay.exp(_ln(x, 9, 3)), "float32"),
}


@pytest.mark.parametrize("case", list(LEFT_ALONE))
def test_leaves_alone(case):
    shape, body, dtype = LEFT_ALONE[case]
    mod = _mod(body, shape, dtype)
    assert_main_equal(run(FuseNormEpilogue(), mod), mod)


def test_fusion_depth_one_folds_nothing():
    shape, before, _ = CASES["group_norm_affine_gelu"]
    mod = _mod(before, shape)
    assert_main_equal(run(FuseNormEpilogue(), mod, **{"relay.FuseOps.max_depth": 1}), mod)


def test_two_row_patterns_do_not_combine():
    """Per channel, then per batch entry: the second stays outside."""
    per_batch = relay.const(RNG.standard_normal((2, 1, 1, 1)).astype("float32"))
    mod = _mod(lambda x: _ln(x, 9, 3) * relay.const(S4.reshape(4, 1, 1)) + per_batch,
               (2, 4, 1, 9))
    want = _mod(lambda x: _fused(x, 9, 3, S4) + per_batch, (2, 4, 1, 9))
    assert_main_equal(run(FuseNormEpilogue(), mod), want)


def test_type_errors():
    from ember.runtime.errors import TypeInferenceError

    x = relay.var("x", shape=GROUP)
    bad = _fused(x, 9, 3, S16)  # 16 row values; fine by itself
    with pytest.raises(TypeInferenceError, match="row_scale"):
        InferType()(ember.IRModule.from_expr(relay.Function([x], op_call(
            "nn.contrib_layer_norm_act", *bad.args[:3], relay.const(np.ones(3, "float32")),
            bad.args[4], **{**_attrs_dict(bad.attrs), "row_count": 4}))))
    h = relay.var("h", shape=GROUP, dtype="float16")
    with pytest.raises(TypeInferenceError, match="float32"):
        InferType()(ember.IRModule.from_expr(relay.Function([h], op_call(
            "nn.contrib_layer_norm_act", h, relay.const(np.ones(9, "float16")),
            relay.const(np.zeros(9, "float16")), relay.const(0.0, "float16"),
            relay.const(0.0, "float16"), axis=3, activation="relu"))))


def _attrs_dict(attrs) -> dict:
    return {f: getattr(attrs, f) for f in attrs.field_names()}


# ---------------------------------------------------------------------------- numerics
def _ops(mod: ember.IRModule) -> list[str]:
    return [n.op.name for n in post_order(mod["main"].body)
            if hasattr(n, "op") and hasattr(n.op, "name")]


def _build(mod: ember.IRModule, disabled: tuple[str, ...] = ()):
    from ember.contrib import graph_executor

    with ember.transform.PassContext(opt_level=3, disabled_pass=list(disabled)):
        lib = relay.build(mod, "llvm")
    return graph_executor.GraphModule(lib["default"](ember.cpu()))


def _assert_close(got: np.ndarray, want: np.ndarray) -> None:
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale)


ACTS = {"relu": relay.nn.relu, "gelu": relay.nn.gelu,
        "gelu_tanh": lambda y: relay.nn.gelu(y, approximate="tanh"), "sigmoid": relay.sigmoid,
        "silu": relay.nn.silu, "tanh": relay.tanh, "hardswish": relay.nn.hardswish,
        "leaky_relu": lambda y: relay.nn.leaky_relu(y, 0.1),
        "clip": lambda y: relay.clip(y, -0.5, 1.5), "mish": relay.nn.mish,
        "hardsigmoid": relay.nn.hardsigmoid}


@needs_cc
@settings(max_examples=12, deadline=None)
@given(shape=st.sampled_from([(3, 37), (2, 4, 1, 33), (1, 3, 5, 17), (2, 5, 16), (1, 2, 9)]),
       axis=st.integers(-1, 3), act=st.sampled_from(list(ACTS)),
       affine=st.sampled_from(["none", "scale", "shift", "both"]), seed=st.integers(0, 2**16))
def test_built_matches_the_interpreter(shape, axis, act, affine, seed):
    """A norm over any axis, a per-row affine along the axis before it (the channels), an
    activation: the fused build against the reference interpreter of the unfused graph."""
    rank = len(shape)
    axis = axis % rank
    rng = np.random.default_rng(seed)
    n = shape[axis]
    row_axis = (axis - 1) % rank if rank > 1 else axis
    vec_shape = [1] * rank
    if row_axis != axis:
        vec_shape[row_axis] = shape[row_axis]

    def body(x):
        y = _ln(x, n, axis)
        if affine in ("scale", "both"):
            y = y * relay.const(rng.uniform(0.5, 1.5, vec_shape).astype("float32"))
        if affine in ("shift", "both"):
            y = y + relay.const(rng.standard_normal(vec_shape).astype("float32"))
        return ACTS[act](y)

    mod = _mod(body, shape)
    x = (rng.standard_normal(shape) * 2 + 1).astype("float32")
    want = relay.create_executor("debug", mod=mod).evaluate()(x).numpy()
    m = _build(mod)
    m.set_input("x", x)
    m.run()
    _assert_close(m.get_output(0).numpy(), want)


@needs_cc
def test_the_pipeline_fuses_a_group_norm_gelu_and_agrees_with_the_unfused_build():
    shape = (2, 4, 1, 1000)  # rows longer than the kernel's activation chunk
    mod = _mod(lambda x: relay.nn.gelu(_ln(x, 1000, 3) * relay.const(S4.reshape(4, 1, 1))
                                       + relay.const(T4.reshape(4, 1, 1))), shape)
    with ember.transform.PassContext(opt_level=3):
        optimized, _ = relay.optimize(mod, "llvm")
    text = optimized.astext()
    assert "nn.contrib_layer_norm_act" in text and "nn.gelu" not in text
    x = (np.random.default_rng(1).standard_normal(shape) * 3).astype("float32")
    outs = []
    for disabled in ((), ("FuseNormEpilogue",)):
        m = _build(mod, disabled)
        m.set_input("x", x)
        m.run()
        outs.append(m.get_output(0).numpy())
    _assert_close(outs[0], outs[1])


@needs_cc
def test_run_time_frames():
    """A GroupNorm over a 1-D conv's ``?`` frames (wav2vec2 with any audio length), on the
    VM: the kernel takes the row length at run time; the per-channel rows are static."""
    x = relay.var("x", shape=(1, 4, 1, relay.Any()))
    y = relay.nn.gelu(_ln(x, 1, 3) * relay.const(S4.reshape(4, 1, 1))
                      + relay.const(T4.reshape(4, 1, 1)))
    mod = InferType()(ember.IRModule.from_expr(relay.Function([x], y)))
    fused = run(FuseNormEpilogue(), mod)
    assert "nn.contrib_layer_norm_act" in _ops(fused) and "nn.gelu" not in _ops(fused)
    want = relay.create_executor("debug", mod=mod).evaluate()
    with ember.transform.PassContext(opt_level=3):
        got = relay.create_executor("vm", mod=mod, target="llvm").evaluate()
    for frames in (1, 7, 600):
        xv = np.random.default_rng(frames).standard_normal((1, 4, 1, frames)).astype("float32")
        _assert_close(got(xv).numpy(), want(xv).numpy())


@needs_cc
def test_wav2vec2_twin_matches_onnxruntime():
    """Random gamma/beta, so the first norm's per-channel affine is not the identity."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from ember.contrib import graph_executor
    from ember.relay.testing import wav2vec2
    from ember.relay.testing.onnx_export import export_onnx

    mod, params = wav2vec2.get_workload(samples=800, hidden=32, num_heads=2, num_layers=1,
                                        ffn=64, convs=((16, 10, 5), (16, 3, 2), (16, 2, 2)))
    rng = np.random.default_rng(2)
    weights = {k: (v.numpy() if "weight" in k else rng.uniform(0.5, 1.5, v.shape) if "gamma" in k
                   else rng.uniform(-0.5, 0.5, v.shape)).astype("float32")
               for k, v in params.items()}
    model = export_onnx(mod, weights, graph_name="wav2vec2")
    onnx.checker.check_model(model)
    imported, iparams = relay.frontend.from_onnx(model)
    with ember.transform.PassContext(opt_level=3):
        optimized, _ = relay.optimize(imported, "llvm", params=iparams)
        lib = relay.build(imported, "llvm", params=iparams)
    fused = [n for n in post_order(optimized["main"].body) if getattr(n, "op", None) is not None
             and getattr(n.op, "name", "") == "nn.contrib_layer_norm_act"]
    assert any(n.attrs.activation == "gelu_erf" and n.attrs.has_row_scale for n in fused)
    x = np.random.default_rng(0).uniform(-1, 1, (1, 800)).astype("float32")
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    m.set_input("data", x)
    m.run()
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    want = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"]).run(None, {"data": x})[0]
    got = m.get_output(0).numpy()
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * scale)


@needs_cc
def test_onnx_instance_norm_over_a_sequence_then_silu_matches_onnxruntime():
    """InstanceNormalization of (N, C, L) imports as a norm over L with a per-channel scale
    and bias across the rows: all of it and the SiLU (Sigmoid, Mul) run in one kernel."""
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    from ember.contrib import graph_executor

    shape = [2, 8, 50]
    rng = np.random.default_rng(4)
    inits = {"s": rng.uniform(0.5, 1.5, 8).astype("float32"),
             "b": rng.uniform(-0.5, 0.5, 8).astype("float32")}
    nodes = [helper.make_node("InstanceNormalization", ["x", "s", "b"], ["n"]),
             helper.make_node("Sigmoid", ["n"], ["g"]), helper.make_node("Mul", ["n", "g"], ["y"])]
    graph = helper.make_graph(
        nodes, "instance_norm_silu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = min(model.ir_version, 10)  # what older onnxruntimes read
    mod, params = relay.frontend.from_onnx(model)
    with ember.transform.PassContext(opt_level=3):
        optimized, _ = relay.optimize(mod, "llvm", params=params)
        lib = relay.build(mod, "llvm", params=params)
    text = optimized.astext()
    assert 'activation="silu"' in text and "has_row_shift=True" in text
    x = (rng.standard_normal(shape) * 2 + 1).astype("float32")
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    m.set_input("x", x)
    m.run()
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    _assert_close(m.get_output(0).numpy(), want)

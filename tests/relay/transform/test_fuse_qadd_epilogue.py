"""FuseQAddEpilogue: before/expected pairs, the graphs it must leave alone, and numerics of
built QLinearConv + QLinearAdd models against onnxruntime, the unfused build and the fused
op's numpy reference, at the SIMD levels the int8 tests force.

Tolerance: the fused kernel runs the qadd kernel's own float32 arithmetic on the conv's
requantized output, so it equals the unfused build and the reference exactly; onnxruntime's
QLinearAdd orders the same float32 terms differently (topi/nn/qadd.py), so one unit is
allowed there, as in the qadd tests.
"""
from __future__ import annotations

import numpy as np
import pytest
from _pass_helpers import assert_main_equal, run
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import ember
from ember import relay
from ember.relay.op.nn.qadd import contrib_qadd
from ember.relay.op.nn.qconv import contrib_qconv2d, contrib_qconv2d_add
from ember.relay.transform import FuseQAddEpilogue, InferType

RNG = np.random.default_rng(3)
CONV = dict(channels=6, kernel_size=(3, 3), strides=(2, 1), padding=(1, 1, 1, 1), x_zp=7,
            has_w_zp=True, y_zp=3)
CONSTS = [RNG.integers(-128, 128, (1, 2, 18, 4, 4)).astype("int8"),
          RNG.integers(-999, 999, 6).astype("int32"), RNG.integers(-3, 3, 6).astype("int32"),
          RNG.uniform(1e-4, 1e-3, 6).astype("float32")]
ADD = dict(ra=0.6, rb=0.3, y_zp=2, out_dtype="int8", y_min=-20)


def _mod(body_of):
    x = relay.var("x", shape=(1, 5, 7, 6), dtype="uint8")
    r = relay.var("r", shape=(1, 6, 4, 6), dtype="int8")
    return InferType()(ember.IRModule.from_expr(relay.Function([x, r], body_of(x, r))))


def _conv(x, **attrs):
    return contrib_qconv2d(x, *map(relay.const, CONSTS), **{**CONV, **attrs})


def _fused(x, r, **attrs):
    return contrib_qconv2d_add(x, *map(relay.const, CONSTS), r, **CONV, r_zp=-4, s_zp=2,
                               s_dtype="int8", s_min=-20, **attrs)


CASES = {
    "conv_first": (lambda x, r: contrib_qadd(_conv(x), r, a_zp=3, b_zp=-4, **ADD),
                   lambda x, r: _fused(x, r, ra=0.6, rb=0.3)),
    # the conv as the second operand: its ratio becomes the first
    "conv_second": (lambda x, r: contrib_qadd(r, _conv(x), a_zp=-4, b_zp=3, **ADD),
                    lambda x, r: _fused(x, r, ra=0.3, rb=0.6)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_rewrites(case):
    before, expected = CASES[case]
    assert_main_equal(run(FuseQAddEpilogue(), _mod(before)), _mod(expected))


def _read_twice(x, r):
    c = _conv(x)  # one conv node with two readers
    return relay.Tuple([contrib_qadd(c, r, a_zp=3, b_zp=-4, **ADD), c])


LEFT_ALONE = {
    "conv_read_twice": _read_twice,
    # the add reads the conv with another zero point than the conv's output has
    "other_zero_point": lambda x, r: contrib_qadd(_conv(x), r, a_zp=4, b_zp=-4, **ADD),
    "no_conv": lambda x, r: contrib_qadd(r, r, a_zp=1, b_zp=1, **ADD),
}


@pytest.mark.parametrize("case", list(LEFT_ALONE))
def test_leaves_alone(case):
    mod = _mod(LEFT_ALONE[case])
    assert_main_equal(run(FuseQAddEpilogue(), mod), mod)


def test_nothing_fused_when_fusion_is_bounded_to_one_op():
    mod = _mod(CASES["conv_first"][0])
    assert_main_equal(run(FuseQAddEpilogue(), mod, **{"relay.FuseOps.max_depth": 1}), mod)


def test_residual_of_another_shape_is_a_type_error():
    from ember.runtime.errors import TypeInferenceError

    x = relay.var("x", shape=(1, 5, 7, 6), dtype="uint8")
    r = relay.var("r", shape=(1, 6, 4, 5), dtype="int8")
    body = contrib_qconv2d_add(x, *map(relay.const, CONSTS), r, **CONV)
    with pytest.raises(TypeInferenceError, match="residual must be uint8 or int8"):
        InferType()(ember.IRModule.from_expr(relay.Function([x, r], body)))


@pytest.mark.parametrize("fields, message", [
    ({"s_zp": 300}, "s_zp"), ({"s_dtype": "int8", "s_min": -200}, "s_min"),
    ({"ra": float("inf")}, "ra")])
def test_bad_sum_attributes_name_the_field(fields, message):
    from ember.relay.op.nn.qconv import QConv2DAddAttrs
    from ember.runtime.errors import OpAttributeInvalid

    with pytest.raises(OpAttributeInvalid, match=f"nn.contrib_qconv2d_add: attribute {message}"):
        QConv2DAddAttrs(channels=4, **fields)


ONNX_TYPE = {"uint8": TP.UINT8, "int8": TP.INT8}
ZP = {"uint8": 121, "int8": -6}


def _model(c, o, h, stride, groups, types, conv_first):
    """QLinearConv (3x3, padding 1) -> QLinearAdd with a residual input r; types: (x, conv
    output, residual, sum)."""
    xd, yd, rd, sd = types
    rng = np.random.default_rng(c * o + h)
    oh = (h - 1) // stride + 1
    inits = {"xs": np.array(0.02, "float32"), "xz": np.array(ZP[xd] // 3, xd),
             "w": rng.integers(-127, 128, (o, c // groups, 3, 3)).astype("int8"),
             "ws": rng.uniform(0.001, 0.01, o).astype("float32"), "wz": np.zeros(o, "int8"),
             "ys": np.array(0.3, "float32"), "yz": np.array(ZP[yd], yd),
             "bias": rng.integers(-1000, 1000, o).astype("int32"),
             "rs": np.array(0.05, "float32"), "rz": np.array(ZP[rd] // 2, rd),
             "ss": np.array(0.2, "float32"), "sz": np.array(ZP[sd] + 5, sd)}
    conv = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "bias"],
                            ["y"], pads=[1] * 4, strides=[stride] * 2, group=groups)
    a, b = ["y", "ys", "yz"], ["r", "rs", "rz"]
    add = helper.make_node("QLinearAdd", (a + b if conv_first else b + a) + ["ss", "sz"], ["s"],
                           domain="com.microsoft")
    graph = helper.make_graph(
        [conv, add], "q", [helper.make_tensor_value_info("x", ONNX_TYPE[xd], [1, c, h, h]),
                           helper.make_tensor_value_info("r", ONNX_TYPE[rd], [1, o, oh, oh])],
        [helper.make_tensor_value_info("s", ONNX_TYPE[sd], None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    feeds = {"x": rng.integers(0, 256, (1, c, h, h)).astype("uint8").view(xd),
             "r": rng.integers(0, 256, (1, o, oh, oh)).astype("uint8").view(rd)}
    return model, feeds


def _built(model, feeds, target, disabled=()):
    mod, params = relay.frontend.from_onnx(model)
    with ember.transform.PassContext(opt_level=3, disabled_pass=list(disabled)):
        lib = relay.build(mod, target, params=params)
        optimized, _ = relay.optimize(mod, target, params=params)
    m = lib["default"](ember.cpu())
    m.set_input(**feeds)
    m.run()
    return m.get_output(0).numpy(), optimized


U8 = ("uint8",) * 4
S8 = ("int8",) * 4
SHAPES = {  # c, o, h, stride, groups, types, conv_first
    # two blocks of 169 output pixels over the threads, odd channels
    "dense": (16, 21, 13, 1, 1, U8, True),
    "dense_s8_stride2_second": (8, 12, 11, 2, 1, S8, False),
    "depthwise_stride2": (6, 6, 20, 2, 6, U8, True),
    "depthwise_lanes": (40, 40, 10, 1, 40, S8, True),
}


# every case on the host's paths; the dense one also at the levels below
LEVELS = [pytest.param("native", shape, id=f"host-{shape}") for shape in SHAPES] + [
    # AVX-512 without VBMI: depthwise channels in vector lanes (blocks of 16 items)
    pytest.param("cascadelake", "depthwise_lanes", id="avx512-no-vbmi-lanes",
                 marks=pytest.mark.slow),
    # AVX-512F without VNNI: the residual add's 16 float lanes over the AVX2 int8 lanes
    pytest.param("skylake-avx512", "dense", id="avx512-no-vnni-dense", marks=pytest.mark.slow),
    pytest.param("haswell", "dense", id="avx2-dense"),
    pytest.param("x86-64-v2", "dense", id="sse2-dense", marks=pytest.mark.slow),
    pytest.param("c", "dense", id="portable-dense")]


@pytest.mark.parametrize("level, shape", LEVELS)
def test_fused_model_matches_onnxruntime_and_the_unfused_build(level, shape, monkeypatch):
    if level not in ("native", "c"):
        monkeypatch.setenv("EMBER_MARCH", level)
    ort = pytest.importorskip("onnxruntime")
    model, feeds = _model(*SHAPES[shape])
    target = "c" if level == "c" else "llvm"
    got, fused = _built(model, feeds, target)
    assert "nn.contrib_qconv2d_add" in fused.astext() and "nn.contrib_qadd" not in fused.astext()
    want, unfused = _built(model, feeds, target, disabled=["FuseQAddEpilogue"])
    assert "nn.contrib_qconv2d_add" not in unfused.astext()
    np.testing.assert_array_equal(got, want)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    theirs = ort.InferenceSession(model.SerializeToString(), so,
                                  providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert got.dtype == theirs.dtype
    assert np.abs(got.astype(np.int64) - theirs.astype(np.int64)).max() <= 1


def test_mixed_types_match_the_unfused_build_and_the_reference():
    # an s8 residual with a u8 conv output and sum (onnxruntime's QLinearAdd wants one type)
    model, feeds = _model(5, 7, 9, 1, 1, ("uint8", "uint8", "int8", "uint8"), True)
    got, fused = _built(model, feeds, "llvm")
    want, _ = _built(model, feeds, "llvm", disabled=["FuseQAddEpilogue"])
    np.testing.assert_array_equal(got, want)
    mod, params = relay.frontend.from_onnx(model)
    call = run(FuseQAddEpilogue(), mod)["main"].body
    assert call.op.name == "nn.contrib_qconv2d_add"
    consts = [a.data.numpy() if hasattr(a, "data") else params[a.name_hint].numpy()
              for a in call.args[1:5]]
    ref = call.op.op_def.reference(feeds["x"], *consts, feeds["r"], attrs=call.attrs)
    np.testing.assert_array_equal(got, ref)

"""float16 and bfloat16 models against onnxruntime.

ember computes narrow floats in float32 and keeps the model's interface (float16 inputs and
outputs stay float16; bfloat16 ones are float32, numpy having no bfloat16). onnxruntime
computes float16 operators in float16 where it has a kernel (each result rounded to float16,
a relative error up to 2**-11 = 4.9e-4 per operator) and in float32 elsewhere. So the two
differ by the roundings onnxruntime makes along the way, which add up over a network's
depth: a few float16 ulps after a dozen operators. Tolerances: ``HALF`` (rtol 1e-2, atol
1e-2, about 20 ulps near 1) for the small networks here, checked against the float32 result
too (ember must be at least as close to it as onnxruntime's float16 run is, within an ulp).
bfloat16 weights are widened exactly, so a model that casts them to float32 matches to float32
precision.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from _onnx_util import compare, run_graph, run_ort, run_vm
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from ember import relay
from ember.runtime.errors import FrontendError

HALF = (1e-2, 1e-2)


def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 9)
    return model


def _vi(name, elem=TP.FLOAT16, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def _weights(rng, shapes, dtype="float16", scale=0.3):
    return [numpy_helper.from_array((scale * rng.standard_normal(s)).astype(dtype), name)
            for name, s in shapes.items()]


def _to_float32(model):
    """The same model with every float16 tensor, input and output float32 (the reference a
    float16 run approximates)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for t in copy.graph.initializer:
        if t.data_type == TP.FLOAT16:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype("float32"),
                                               t.name))
    for vi in [*copy.graph.input, *copy.graph.output]:
        if vi.type.tensor_type.elem_type == TP.FLOAT16:
            vi.type.tensor_type.elem_type = TP.FLOAT
    return copy


def _check_half(label, model, feeds, got):
    """``got`` (ember) is within HALF of onnxruntime's float16 run, and about as close to the
    float32 result as that run is."""
    want = run_ort(model, feeds)
    compare(label, got, want, HALF)
    exact = run_ort(_to_float32(model), {k: v.astype("float32") if v.dtype == np.float16
                                        else v for k, v in feeds.items()})
    for k, (g, w, e) in enumerate(zip(got, want, exact)):
        ulp = np.spacing(np.abs(e).astype("float16")).astype("float32")
        ours = np.abs(g.astype("float32") - e)
        theirs = np.abs(w.astype("float32") - e)
        assert np.all(ours <= theirs + ulp), f"{label} output {k}: further from float32"


# ---------------------------------------------------------------- float16 networks
def _half_cnn():
    """A ResNet-like block as torch exports a ``.half()`` model: float16 input, weights and
    output."""
    rng = np.random.default_rng(0)
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["c1", "g", "beta", "mean", "var"], ["bn"]),
        n("Relu", ["bn"], ["r1"]),
        n("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        n("Add", ["c2", "r1"], ["res"]),
        n("Relu", ["res"], ["r2"]),
        n("MaxPool", ["r2"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        n("GlobalAveragePool", ["p"], ["gap"]),
        n("Flatten", ["gap"], ["f"]),
        n("Gemm", ["f", "wf", "bf"], ["logits"], transB=1),
        n("Softmax", ["logits"], ["y"], axis=-1),
    ]
    inits = _weights(rng, {"w1": (8, 3, 3, 3), "b1": (8,), "w2": (8, 8, 3, 3),
                           "wf": (10, 8), "bf": (10,), "beta": (8,), "mean": (8,)})
    inits += [numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype("float16"), "g"),
              numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype("float16"), "var")]
    return _model(nodes, [_vi("x", shape=["n", 3, 16, 16])], [_vi("y", shape=["n", 10]),
                                                              _vi("logits", shape=["n", 10])],
                  inits)


@pytest.mark.parametrize("batch,seed", [(1, 0), (3, 1)])
def test_float16_cnn(batch, seed):
    model = _half_cnn()
    x = np.random.default_rng(seed).standard_normal((batch, 3, 16, 16)).astype("float16")
    got = run_graph(model, {"x": x}, shape={"x": x.shape})
    assert all(g.dtype == np.float16 for g in got)
    _check_half(f"cnn batch {batch}", model, {"x": x}, got)


def test_float16_model_keeps_its_interface_and_computes_in_float32():
    mod, params = relay.frontend.from_onnx(_half_cnn(), shape={"x": (1, 3, 16, 16)})
    main = mod["main"]
    assert main.params[0].type_annotation.dtype == "float16"
    assert [f.dtype for f in main.checked_type.ret_type.fields] == ["float16", "float16"]
    convs = [line for line in mod.astext().splitlines() if "nn.conv2d(" in line]
    assert convs and all("float32]" in line.split("/* ty=")[-1] for line in convs)


def _half_transformer_block():
    """A pre-norm transformer block (2 heads of 4, GELU through Erf) in float16, with a
    symbolic sequence length."""
    rng = np.random.default_rng(1)
    n = helper.make_node
    d, heads = 8, 2
    nodes = [
        n("LayerNormalization", ["x", "ln1_g", "ln1_b"], ["h"], axis=-1),
        n("MatMul", ["h", "wqkv"], ["qkv"]),
        n("Split", ["qkv", "three"], ["q", "k", "v"], axis=-1),
        *[n("Reshape", [t, "heads_shape"], [f"{t}4"]) for t in "qkv"],
        n("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
        n("Transpose", ["k4"], ["kh"], perm=[0, 2, 3, 1]),
        n("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3]),
        n("MatMul", ["qh", "kh"], ["scores"]),
        n("Div", ["scores", "sqrt_d"], ["scaled"]),
        n("Softmax", ["scaled"], ["att"], axis=-1),
        n("MatMul", ["att", "vh"], ["ctx"]),
        n("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
        n("Reshape", ["ctx_t", "model_shape"], ["ctx_m"]),
        n("MatMul", ["ctx_m", "wo"], ["attn_out"]),
        n("Add", ["x", "attn_out"], ["x1"]),
        n("LayerNormalization", ["x1", "ln2_g", "ln2_b"], ["h2"], axis=-1),
        n("MatMul", ["h2", "w1"], ["f1"]),
        n("Div", ["f1", "sqrt2"], ["f1s"]),
        n("Erf", ["f1s"], ["erf"]),
        n("Add", ["erf", "one"], ["erf1"]),
        n("Mul", ["f1", "erf1"], ["g0"]),
        n("Mul", ["g0", "half"], ["gelu"]),
        n("MatMul", ["gelu", "w2"], ["f2"]),
        n("Add", ["x1", "f2"], ["y"]),
    ]
    inits = _weights(rng, {"wqkv": (d, 3 * d), "wo": (d, d), "w1": (d, 4 * d), "w2": (4 * d, d),
                           "ln1_b": (d,), "ln2_b": (d,)})
    consts = {"ln1_g": np.ones(d), "ln2_g": np.ones(d), "sqrt_d": np.sqrt(d // heads),
              "sqrt2": np.sqrt(2.0), "one": 1.0, "half": 0.5}
    inits += [numpy_helper.from_array(np.asarray(v, "float16"), k) for k, v in consts.items()]
    inits += [numpy_helper.from_array(np.array(v, "int64"), k) for k, v in {
        "three": [d, d, d], "heads_shape": [0, 0, heads, d // heads],
        "model_shape": [0, 0, d]}.items()]
    return _model(nodes, [_vi("x", shape=[1, "seq", d])], [_vi("y", shape=[1, "seq", d])],
                  inits)


@pytest.mark.parametrize("seq,seed", [(3, 0), (7, 1)])
def test_float16_transformer_block_with_a_symbolic_length(seq, seed):
    model = _half_transformer_block()
    x = np.random.default_rng(seed).standard_normal((1, seq, 8)).astype("float16")
    got = run_vm(model, [x])
    assert got[0].dtype == np.float16
    _check_half(f"transformer seq {seq}", model, {"x": x}, got)


def test_autocast_style_casts_at_input_and_output():
    """torch.autocast exports float32 inputs and outputs with Casts to and from float16 around
    the float16 part: the Cast to float16 rounds as onnxruntime does."""
    rng = np.random.default_rng(2)
    nodes = [helper.make_node("Cast", ["x"], ["xh"], to=TP.FLOAT16),
             helper.make_node("MatMul", ["xh", "w"], ["m"]),
             helper.make_node("Relu", ["m"], ["r"]),
             helper.make_node("Cast", ["r"], ["y"], to=TP.FLOAT),
             helper.make_node("Cast", ["x"], ["rounded_h"], to=TP.FLOAT16),
             helper.make_node("Cast", ["rounded_h"], ["rounded"], to=TP.FLOAT)]
    model = _model(nodes, [_vi("x", TP.FLOAT, [4, 8])],
                   [_vi("y", TP.FLOAT), _vi("rounded", TP.FLOAT)],
                   _weights(rng, {"w": (8, 5)}))
    x = np.random.default_rng(3).standard_normal((4, 8)).astype("float32") * 1000
    got = run_graph(model, {"x": x})
    want = run_ort(model, {"x": x})
    np.testing.assert_array_equal(got[1], want[1])  # the rounding itself: exact
    compare("autocast", got[:1], want[:1], (1e-2, 1.0))  # |y| ~ 1e3: 1 is an ulp or two


def test_float16_output_without_a_declared_type():
    """An output whose type the model leaves out is found float16 by ONNX's shape
    inference, and given back as float16."""
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    model = _model(nodes, [_vi("x", shape=[3])], [helper.ValueInfoProto(name="y")])
    x = np.array([-1.5, 0.25, 3.0], "float16")
    (got,) = run_graph(model, {"x": x})
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, np.maximum(x, 0))


def test_float16_output_without_a_declared_type_made_in_a_subgraph():
    """The Cast to float16 that makes the output float16 may sit in an If branch."""
    def branch(name):
        cast = helper.make_node("Cast", ["x"], [name], to=TP.FLOAT16)
        return helper.make_graph([cast], name, [], [_vi(name, shape=[3])])

    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=branch("t"),
                              else_branch=branch("e"))]
    model = _model(nodes, [_vi("x", TP.FLOAT, [3]), _vi("c", TP.BOOL, [])],
                   [helper.ValueInfoProto(name="y")])
    mod, _ = relay.frontend.from_onnx(model)
    assert mod["main"].checked_type.ret_type.dtype == "float16"


# ---------------------------------------------------------------- bfloat16
def _bf16_tensor(name, values, raw=True):
    values = np.asarray(values, "float32")
    words = (values.view(np.uint32) >> 16).astype(np.uint16)  # exact for these values
    tensor = onnx.TensorProto(name=name, data_type=TP.BFLOAT16, dims=values.shape)
    if raw:
        tensor.raw_data = words.tobytes()
    else:
        tensor.int32_data.extend(int(w) for w in words.reshape(-1))
    return tensor


def _bf16_values(rng, shape):
    """Values a bfloat16 holds exactly (float32s with the low 16 bits zero)."""
    x = rng.standard_normal(shape).astype("float32")
    return (x.view(np.uint32) & 0xFFFF0000).view(np.float32)


@pytest.mark.parametrize("raw", [True, False])
def test_bfloat16_weights_cast_to_float32(raw):
    """Weights stored as bfloat16 (raw_data or int32_data), cast to float32 by the model."""
    rng = np.random.default_rng(4)
    w, b = _bf16_values(rng, (6, 4)), _bf16_values(rng, (4,))
    nodes = [helper.make_node("Cast", ["w_bf"], ["w"], to=TP.FLOAT),
             helper.make_node("Cast", ["b_bf"], ["b"], to=TP.FLOAT),
             helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["y"])]
    model = _model(nodes, [_vi("x", TP.FLOAT, [2, 6])], [_vi("y", TP.FLOAT)],
                   [_bf16_tensor("w_bf", w, raw), _bf16_tensor("b_bf", b, raw)])
    for seed in (0, 1):
        x = np.random.default_rng(seed).standard_normal((2, 6)).astype("float32")
        compare(f"bfloat16 weights raw={raw}", run_graph(model, {"x": x}),
                run_ort(model, {"x": x}), (1e-5, 1e-5))
        np.testing.assert_allclose(run_graph(model, {"x": x})[0], x @ w + b, rtol=1e-5)


def test_bfloat16_inputs_and_outputs_are_float32():
    nodes = [helper.make_node("Mul", ["x", "w_bf"], ["y"])]
    w = np.array([1.5, -2.0, 0.375], "float32")
    model = _model(nodes, [_vi("x", TP.BFLOAT16, [3])], [_vi("y", TP.BFLOAT16)],
                   [_bf16_tensor("w_bf", w)])
    mod, _ = relay.frontend.from_onnx(model)
    assert mod["main"].params[0].type_annotation.dtype == "float32"
    x = np.array([2.0, 0.5, -4.0], "float32")
    np.testing.assert_array_equal(run_graph(model, {"x": x})[0], x * w)


def test_bfloat16_data_of_the_wrong_size_is_named():
    bad = onnx.TensorProto(name="w_bf", data_type=TP.BFLOAT16, dims=[3],
                           raw_data=b"\x80\x3f\x00\x40")  # two values, not three
    nodes = [helper.make_node("Mul", ["x", "w_bf"], ["y"])]
    model = _model(nodes, [_vi("x", TP.FLOAT, [3])], [_vi("y", TP.FLOAT)], [bad])
    with pytest.raises(FrontendError, match=r"initializer 'w_bf': dims \[3\] need 3 "
                                            r"element\(s\) of bfloat16, but the tensor holds 2"):
        relay.frontend.from_onnx(model)

"""The Relay-to-ONNX exporter (``ember.relay.testing.onnx_export``), op by op: every exported
graph passes ``onnx.checker`` and onnxruntime's result matches ember's reference interpreter
(rtol 1e-5, atol 1e-5: single ops, one rounding apart). Hypothesis draws the window
attributes of convolutions and pools; errors name the op or construct that cannot be exported.
"""
from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import ember
from ember import relay
from ember.relay.testing.onnx_export import export_onnx
from ember.runtime.errors import OpNotImplemented


def check(out: Any, inputs: dict[str, np.ndarray], params: dict[str, np.ndarray] | None = None,
          opset: int = 17, rtol: float = 1e-5) -> Any:
    """Export ``out`` (over its free variables), run both, compare; return the model."""
    params = params or {}
    func = relay.Function(relay.analysis.free_vars(out), out)
    mod = ember.IRModule.from_expr(func)
    model = export_onnx(mod, params, opset=opset)
    onnx.checker.check_model(model, full_check=True)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    got = sess.run(None, inputs)
    ref = relay.create_executor("debug", mod=mod).evaluate()(**inputs, **params)
    refs = [r.numpy() for r in ref.fields] if hasattr(ref, "fields") else [ref.numpy()]
    assert len(got) == len(refs)
    for g, r in zip(got, refs):
        assert g.shape == r.shape and g.dtype == r.dtype
        np.testing.assert_allclose(g, r, rtol=rtol, atol=1e-5)
    return model


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, size=shape).astype("float32")


def var(name: str, arr: np.ndarray) -> Any:
    return relay.var(name, shape=arr.shape, dtype=str(arr.dtype))


# ---------------------------------------------------------------- windows (hypothesis)
@settings(max_examples=20, deadline=None)
@given(layout=st.sampled_from(["NCHW", "NHWC"]), groups=st.sampled_from([1, 2, 4]),
       stride=st.tuples(st.integers(1, 2), st.integers(1, 3)),
       dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)),
       pad=st.tuples(*[st.integers(0, 2)] * 4), kernel=st.tuples(st.integers(1, 3),
                                                                 st.integers(1, 3)))
def test_conv2d(layout: str, groups: int, stride: tuple[int, int], dilation: tuple[int, int],
                pad: tuple[int, ...], kernel: tuple[int, int]) -> None:
    cin, cout, h, w = 4, 8, 9, 8
    kernel_layout = {"NCHW": "OIHW", "NHWC": "HWIO"}[layout]
    x = rand(*[{"N": 1, "C": cin, "H": h, "W": w}[a] for a in layout])
    dims = {"O": cout, "I": cin // groups, "H": kernel[0], "W": kernel[1]}
    wt = rand(*[dims[a] for a in kernel_layout], seed=1)
    out = relay.nn.conv2d(var("x", x), var("w", wt), strides=stride, padding=pad,
                          dilation=dilation, groups=groups, data_layout=layout,
                          kernel_layout=kernel_layout)
    check(out, {"x": x}, {"w": wt})


@settings(max_examples=12, deadline=None)
@given(groups=st.sampled_from([1, 2]), stride=st.integers(1, 3), pad=st.integers(0, 1),
       output_padding=st.integers(0, 1), kernel=st.integers(2, 4))
def test_conv2d_transpose(groups: int, stride: int, pad: int, output_padding: int,
                          kernel: int) -> None:
    output_padding = min(output_padding, stride - 1)
    x, wt = rand(1, 4, 5, 6), rand(4, 6 // groups, kernel, kernel, seed=1)
    out = relay.nn.conv2d_transpose(var("x", x), var("w", wt), strides=(stride, stride),
                                    padding=(pad, pad), output_padding=(output_padding,) * 2,
                                    groups=groups, channels=6, kernel_size=(kernel, kernel))
    check(out, {"x": x}, {"w": wt})


@settings(max_examples=20, deadline=None)
@given(op=st.sampled_from(["max", "avg"]), layout=st.sampled_from(["NCHW", "NHWC"]),
       size=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       stride=st.tuples(st.integers(1, 2), st.integers(1, 3)),
       pad=st.tuples(*[st.integers(0, 1)] * 4), include_pad=st.booleans())
def test_pool2d(op: str, layout: str, size: tuple[int, int], stride: tuple[int, int],
                pad: tuple[int, ...], include_pad: bool) -> None:
    x = rand(*[{"N": 2, "C": 3, "H": 7, "W": 6}[a] for a in layout])
    pad = tuple(min(p, s - 1) for p, s in zip(pad, size + size))  # padding below the window
    kwargs: dict[str, Any] = {"pool_size": size, "strides": stride, "padding": pad,
                              "layout": layout}
    if op == "avg":
        out = relay.nn.avg_pool2d(var("x", x), count_include_pad=include_pad, **kwargs)
    else:
        out = relay.nn.max_pool2d(var("x", x), **kwargs)
    check(out, {"x": x})


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_global_pools(layout: str) -> None:
    x = rand(*[{"N": 2, "C": 3, "H": 5, "W": 4}[a] for a in layout])
    a = var("x", x)
    out = relay.Tuple([relay.nn.global_avg_pool2d(a, layout=layout),
                       relay.nn.global_max_pool2d(a, layout=layout)])
    model = check(out, {"x": x})
    assert len(model.graph.output) == 2


def test_avg_pool_dilation_needs_opset_19() -> None:
    x = rand(1, 2, 7, 7)
    out = relay.nn.avg_pool2d(var("x", x), pool_size=(2, 2), dilation=(2, 2))
    check(out, {"x": x}, opset=19)
    with pytest.raises(OpNotImplemented, match=r"nn\.avg_pool2d: dilation \(2, 2\) below "
                                               r"opset 19 is not supported"):
        check(out, {"x": x}, opset=17)


# ---------------------------------------------------------------- dense, matmul, norms
def test_dense_bias_add_on_2d_and_3d() -> None:
    x2, x3, wt, b = rand(3, 5), rand(2, 3, 5, seed=1), rand(4, 5, seed=2), rand(4, seed=3)
    w, bias = var("w", wt), var("b", b)
    out = relay.Tuple([relay.nn.bias_add(relay.nn.dense(var("x2", x2), w), bias),
                       relay.nn.bias_add(relay.nn.dense(var("x3", x3), w), bias, axis=-1)])
    check(out, {"x2": x2, "x3": x3}, {"w": wt, "b": b})


def test_bias_add_on_the_channel_axis() -> None:
    x, b = rand(2, 3, 4, 5), rand(3, seed=1)
    check(relay.nn.bias_add(var("x", x), var("b", b), axis=1), {"x": x, "b": b})


@pytest.mark.parametrize("ta, tb", [(False, False), (False, True), (True, False), (True, True)])
def test_batch_matmul_and_matmul(ta: bool, tb: bool) -> None:
    x = rand(2, 4, 3) if ta else rand(2, 3, 4)
    y = rand(2, 5, 4, seed=1) if tb else rand(2, 4, 5, seed=1)
    m = rand(4, 3) if ta else rand(3, 4)
    n = rand(5, 4, seed=2) if tb else rand(4, 5, seed=2)
    out = relay.Tuple([relay.nn.batch_matmul(var("x", x), var("y", y), transpose_a=ta,
                                             transpose_b=tb),
                       relay.nn.matmul(var("m", m), var("n", n), transpose_a=ta,
                                       transpose_b=tb)])
    check(out, {"x": x, "y": y, "m": m, "n": n})


@pytest.mark.parametrize("axis, center, scale", [(1, True, True), (3, False, True),
                                                 (-1, True, False)])
def test_batch_norm(axis: int, center: bool, scale: bool) -> None:
    x = rand(2, 3, 4, 5)
    c = x.shape[axis]
    gamma, beta, mean = rand(c, seed=1) + 1.5, rand(c, seed=2), rand(c, seed=3)
    variance = rand(c, seed=4) + 1.5
    bn = relay.nn.batch_norm(var("x", x), var("gamma", gamma), var("beta", beta),
                             var("mean", mean), var("var", variance), axis=axis, epsilon=1e-3,
                             center=center, scale=scale)[0]
    check(bn, {"x": x}, {"gamma": gamma, "beta": beta, "mean": mean, "var": variance})


@pytest.mark.parametrize("opset", [13, 17])
@pytest.mark.parametrize("axis", [-1, 1])
def test_layer_norm(opset: int, axis: int) -> None:
    x = rand(2, 3, 6)
    c = x.shape[axis]
    gamma, beta = rand(c, seed=1) + 1.5, rand(c, seed=2)
    out = relay.nn.layer_norm(var("x", x), var("gamma", gamma), var("beta", beta), axis=axis)
    model = check(out, {"x": x}, {"gamma": gamma, "beta": beta}, opset=opset)
    ops = {n.op_type for n in model.graph.node}
    assert ("LayerNormalization" in ops) == (opset >= 17)


# ---------------------------------------------------------------- elementwise and shapes
def test_elementwise_and_activations() -> None:
    x, y = rand(2, 3), rand(2, 3, seed=1) + 2.0
    a, b = var("x", x), var("y", y)
    half = relay.const(0.5)
    out = relay.Tuple([
        relay.add(a, b), relay.subtract(a, b), relay.multiply(a, half), relay.divide(a, b),
        relay.maximum(a, b), relay.minimum(a, b), relay.power(b, half),
        relay.nn.relu(a), relay.clip(a, -0.25, 0.5), relay.tanh(a), relay.sigmoid(a),
        relay.exp(a), relay.erf(a), relay.sqrt(b), relay.rsqrt(b), relay.log(b),
        relay.abs(a), relay.negative(a), relay.nn.leaky_relu(a, 0.2),
        relay.nn.softmax(a, axis=0), relay.nn.log_softmax(a),
        relay.cast(a, "float64"), relay.nn.dropout(a, 0.3)])
    check(out, {"x": x, "y": y})


def test_shapes_and_indexing() -> None:
    x, table = rand(2, 3, 4), rand(10, 3, seed=1)
    ids = np.array([[0, 9, 3], [4, 4, 1]], dtype="int32")
    a, t = var("x", x), var("t", table)
    out = relay.Tuple([
        relay.reshape(a, (0, -1)), relay.reshape(a, (-1, 2, 0)), relay.transpose(a),
        relay.transpose(a, (1, 0, 2)), relay.nn.batch_flatten(a),
        relay.concatenate([a, a], axis=1), relay.expand_dims(a, 1), relay.squeeze(
            relay.reshape(a, (2, 1, 12))),
        relay.take(t, var("ids", ids), axis=0), relay.take(t, relay.const(ids))])
    check(out, {"x": x, "ids": ids}, {"t": table})


def test_broadcast_to_and_broadcast_to_like() -> None:
    x, like = rand(1, 1, 4), rand(3, 5, 4, seed=1)
    a, b = var("x", x), var("like", like)
    check(relay.Tuple([relay.broadcast_to(a, (2, 6, 4)), relay.broadcast_to_like(a, b)]),
          {"x": x, "like": like})


@pytest.mark.parametrize("method, coord, rounding, size, scales", [
    ("linear", "pytorch_half_pixel", "", (7, 12), None),   # torch's bilinear, align_corners=0
    ("linear", "align_corners", "", (1, 5), None),
    ("linear", "half_pixel", "", (6, 8), (2.0, 2.0)),      # the scales drive the transform
    ("nearest_neighbor", "asymmetric", "floor", (6, 8), None),
    ("nearest_neighbor", "half_pixel", "round_prefer_ceil", (5, 3), None),
    ("cubic", "half_pixel", "", (5, 9), None),
])
def test_resize2d(method: str, coord: str, rounding: str, size: tuple[int, int],
                  scales: Any) -> None:
    x = rand(1, 2, 3, 4)
    out = relay.image.resize2d(var("x", x), size=size, method=method, scales=scales,
                               coordinate_transformation_mode=coord, rounding_method=rounding)
    model = check(out, {"x": x})
    (node,) = model.graph.node
    assert node.op_type == "Resize" and len(node.input) == (3 if scales else 4)


def test_result_that_is_an_input_gets_its_own_name() -> None:
    x = rand(2)
    a = var("x", x)
    model = check(relay.Tuple([a, relay.nn.relu(a), a]), {"x": x})
    names = [o.name for o in model.graph.output]
    assert len(set(names)) == 3 and "x" not in names


def test_deep_chain_exports_without_recursion() -> None:
    x = rand(4)
    out = var("x", x)
    for _ in range(1500):  # deeper than Python's default recursion limit
        out = relay.nn.relu(out)
    model = check(out, {"x": x})
    assert len(model.graph.node) == 1500


# ---------------------------------------------------------------- errors
def _mod(body: Any) -> ember.IRModule:
    return ember.IRModule.from_expr(relay.Function(relay.analysis.free_vars(body), body))


def test_op_without_translation_is_named() -> None:
    x = relay.var("x", shape=(1, 2, 3, 3))
    body = relay.nn.relu(relay.nn.space_to_depth(relay.nn.relu(x), 1))
    with pytest.raises(OpNotImplemented, match=r"operator 'nn\.space_to_depth' \(call 2 of "
                                               r"main\) has no ONNX translation"):
        export_onnx(_mod(body))


@pytest.mark.parametrize("make, match", [
    (lambda x: relay.Let(relay.var("y"), x, relay.nn.relu(x)), "Let in main"),
    (lambda x: relay.If(relay.const(True), x, x), "If in main"),
    (lambda x: relay.nn.batch_norm(x, *[relay.var(n, shape=(2,)) for n in "gbmv"])[1],
     "tuple field 1 has no ONNX counterpart"),
    (lambda x: relay.nn.conv2d(x, relay.var("w", shape=(2, 2, 1, 1)), out_dtype="float64"),
     r"nn\.conv2d: out_dtype 'float64' different from the input's"),
])
def test_unsupported_constructs_raise(make: Any, match: str) -> None:
    with pytest.raises(OpNotImplemented, match=match):
        export_onnx(_mod(make(relay.var("x", shape=(1, 2, 2, 2)))))


def test_resize2d_modes_onnx_lacks_are_refused() -> None:
    x = relay.var("x", shape=(1, 2, 3, 3))
    rounded = relay.image.resize2d(x, size=(6, 6), method="nearest_neighbor",
                                   rounding_method="round")  # ties away from zero
    with pytest.raises(OpNotImplemented, match="image.resize2d: rounding_method 'round'"):
        export_onnx(_mod(rounded))
    blocked = relay.image.resize2d(relay.var("y", shape=(1, 1, 3, 3, 4)), size=(6, 6),
                                   layout="NCHW4c")
    with pytest.raises(OpNotImplemented, match="image.resize2d: layout 'NCHW4c'"):
        export_onnx(_mod(blocked))


def test_dynamic_shapes_are_refused() -> None:
    x = relay.var("x", shape=(relay.Any(), 4))
    with pytest.raises(OpNotImplemented, match="dynamic shape"):
        export_onnx(_mod(relay.reshape(x, (-1,))))


@pytest.mark.parametrize("opset", [12, 10_000, "17"])
def test_bad_opset(opset: Any) -> None:
    with pytest.raises(ValueError, match="opset must be an int from 13"):
        export_onnx(_mod(relay.nn.relu(relay.var("x", shape=(2,)))), opset=opset)


def test_not_a_module() -> None:
    with pytest.raises(TypeError, match="expected an IRModule with a main function"):
        export_onnx(relay.nn.relu(relay.var("x", shape=(2,))))


def test_twin_names() -> None:
    from ember.relay.testing import onnx_twin

    with pytest.raises(ValueError, match="the LSTM's cell is a local function"):
        onnx_twin("lstm", iterations=2, num_hidden=4)
    with pytest.raises(ValueError, match="no exportable zoo model 'alexnet'; choose one of mlp"):
        onnx_twin("alexnet")


# ---------------------------------------------------------------- onnx stays optional
def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)


def test_importing_the_zoo_does_not_import_onnx() -> None:
    res = _python("import sys, ember.relay.testing as t; t.onnx_twin;"
                  "print('onnx' in sys.modules)")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "False"


def test_missing_onnx_gives_the_install_hint() -> None:
    res = _python("import sys; sys.modules['onnx'] = None\n"
                  "from ember.relay.testing import onnx_twin\n"
                  "try:\n    onnx_twin('mlp')\n"
                  "except ImportError as err:\n    print(err)\n")
    assert res.returncode == 0, res.stderr
    assert "pip install 'ember[onnx]'" in res.stdout

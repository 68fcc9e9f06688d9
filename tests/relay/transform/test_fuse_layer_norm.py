"""FuseLayerNorm: decomposed layer norms (SimplifyInference's form, the ONNX exporters' forms)
become one nn.layer_norm, spelled-out RMS norms (T5's) one nn.rms_norm; builds with the pass on and off agree (rtol 1e-4, atol 1e-5), on
small expressions, on the transformer of the zoo and on its ONNX twin against onnxruntime
(opset 13: decomposed by the exporter; opset 17: LayerNormalization).
"""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import ember
from ember import relay
from ember.ir.visitor import post_order
from ember.relay.backend.pipeline import optimize_passes
from ember.relay.transform import FuseLayerNorm, InferType, SimplifyInference
from ember.relay.transform._helpers import op_call

RNG = np.random.default_rng(3)


def _ops(mod: ember.IRModule) -> Counter:
    return Counter(n.op.name for n in post_order(mod["main"].body)
                   if hasattr(n, "op") and hasattr(n.op, "name"))


def _fused(expr: relay.Expr) -> ember.IRModule:
    mod = ember.IRModule.from_expr(relay.Function(relay.analysis.free_vars(expr), expr))
    return FuseLayerNorm()(InferType()(mod))


def _c(shape: tuple[int, ...], offset: float = 0.0) -> relay.Constant:
    return relay.const((RNG.standard_normal(shape) + offset).astype(np.float32))


def _decomposed(x: relay.Expr, axis: int, eps: float, square: str = "multiply",
                root: str = "divide") -> relay.Expr:
    mu = relay.mean(x, axis=[axis], keepdims=True)
    c = relay.subtract(x, mu)
    sq = relay.multiply(c, c) if square == "multiply" else relay.power(c, relay.const(2.0))
    var = relay.mean(sq, axis=[axis], keepdims=True)
    shifted = relay.add(relay.const(eps), var)  # eps first: either order is recognised
    if root == "divide":
        return relay.divide(c, relay.sqrt(shifted))
    return relay.multiply(relay.rsqrt(shifted), c)


def _run(expr: relay.Expr, inputs: dict[str, np.ndarray], fuse: bool) -> list[np.ndarray]:
    from ember.contrib import graph_executor

    func = relay.Function(relay.analysis.free_vars(expr), expr)
    disabled = [] if fuse else ["FuseLayerNorm"]
    with ember.transform.PassContext(opt_level=3, disabled_pass=disabled):
        lib = relay.build(ember.IRModule.from_expr(func), "llvm")
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    m.set_input(**inputs)
    m.run()
    return [m.get_output(i).numpy() for i in range(m.get_num_outputs())]


# ------------------------------------------------------------------------------ rewrites
def test_simplify_inference_form_is_put_back_together() -> None:
    x = relay.var("x", shape=(2, 8, 16))
    y = relay.nn.layer_norm(x, _c((16,)), _c((16,)), axis=-1, epsilon=1e-3)
    mod = ember.IRModule.from_expr(relay.Function([x], y))
    with ember.transform.PassContext(opt_level=3):
        mod = ember.transform.Sequential(optimize_passes())(mod)
    ops = _ops(mod)
    assert ops == Counter({"nn.layer_norm": 1}), ops  # gamma and beta reshapes folded
    ln = next(n for n in post_order(mod["main"].body) if getattr(n, "op", None) is not None
          and getattr(n.op, "name", "") == "nn.layer_norm")
    assert ln.attrs.scale and ln.attrs.center and ln.attrs.axis == 2
    assert ln.attrs.epsilon == pytest.approx(1e-3)


@pytest.mark.parametrize("square,root", [("multiply", "divide"), ("power", "rsqrt")])
def test_onnx_forms_with_gamma_and_beta(square: str, root: str) -> None:
    x = relay.var("x", shape=(3, 10, 6))
    gamma, beta = _c((1, 10, 1)), _c((10, 1))  # along axis 1, broadcasting shapes
    y = relay.add(beta, relay.multiply(gamma, _decomposed(x, 1, 1e-5, square, root)))
    mod = _fused(y)
    assert _ops(mod) == Counter({"nn.layer_norm": 1, "reshape": 2})
    xv = RNG.standard_normal((3, 10, 6)).astype(np.float32) * 4 + 2
    on, off = _run(y, {"x": xv}, True), _run(y, {"x": xv}, False)
    np.testing.assert_allclose(on[0], off[0], rtol=1e-4, atol=1e-5)
    mean, var = xv.mean(1, keepdims=True), xv.var(1, keepdims=True)
    want = (xv - mean) / np.sqrt(var + 1e-5) * gamma.data.numpy() + beta.data.numpy()
    np.testing.assert_allclose(on[0], want, rtol=1e-4, atol=1e-5)


def test_negative_axis_and_variance_op() -> None:
    x = relay.var("x", shape=(4, 7))
    mu = relay.mean(x, axis=[-1], keepdims=True)
    var = op_call("variance", x, mu, axis=[-1], keepdims=True)
    y = relay.divide(relay.subtract(x, mu), relay.sqrt(relay.add(var, relay.const(1e-6))))
    assert _ops(_fused(y)) == Counter({"nn.layer_norm": 1})


def _rms(x: relay.Expr, axis: int, eps: float, square: str, root: str) -> relay.Expr:
    """x / sqrt(mean(x^2) + eps) in the spellings FuseLayerNorm knows (T5's ONNX export:
    Pow, ReduceMean, Add, Sqrt, Reciprocal, Mul)."""
    sq = relay.multiply(x, x) if square == "multiply" else relay.power(x, relay.const(2.0))
    shifted = relay.add(relay.mean(sq, axis=[axis], keepdims=True), relay.const(eps))
    if root == "divide":
        return relay.divide(x, relay.sqrt(shifted))
    if root == "rsqrt":
        return relay.multiply(relay.rsqrt(shifted), x)
    return relay.multiply(x, relay.divide(relay.const(1.0), relay.sqrt(shifted)))


@pytest.mark.parametrize("square,root", [("power", "reciprocal"), ("multiply", "divide"),
                                         ("power", "rsqrt")])
def test_rms_norm_forms_with_gamma(square: str, root: str) -> None:
    x = relay.var("x", shape=(2, 9, 20))
    gamma = _c((20,), offset=1.0)
    y = relay.multiply(gamma, _rms(x, -1, 1e-6, square, root))
    mod = _fused(y)
    assert _ops(mod) == Counter({"nn.rms_norm": 1, "reshape": 1}), _ops(mod)
    rms = next(n for n in post_order(mod["main"].body)
               if getattr(getattr(n, "op", None), "name", "") == "nn.rms_norm")
    assert rms.attrs.scale and rms.attrs.axis == 2 and rms.attrs.epsilon == pytest.approx(1e-6)
    xv = RNG.standard_normal((2, 9, 20)).astype(np.float32) + 1.5
    on, off = _run(y, {"x": xv}, True), _run(y, {"x": xv}, False)
    np.testing.assert_allclose(on[0], off[0], rtol=1e-5, atol=1e-6)
    want = xv / np.sqrt((xv * xv).mean(-1, keepdims=True) + 1e-6) * gamma.data.numpy()
    np.testing.assert_allclose(on[0], want, rtol=1e-5, atol=1e-6)


def test_rms_statistics_used_elsewhere_or_centred_are_not_an_rms_norm() -> None:
    x = relay.var("x", shape=(3, 8))
    sq = relay.power(x, relay.const(2.0))
    ms = relay.mean(sq, axis=[-1], keepdims=True)
    y = relay.divide(x, relay.sqrt(relay.add(ms, relay.const(1e-6))))
    assert "nn.rms_norm" not in _ops(_fused(relay.Tuple([y, ms])))  # ms read twice
    cube = relay.mean(relay.power(x, relay.const(3.0)), axis=[-1], keepdims=True)
    z = relay.divide(x, relay.sqrt(relay.add(cube, relay.const(1e-6))))
    assert "nn.rms_norm" not in _ops(_fused(z))


# ------------------------------------------------------------------------------ refusals
def test_statistics_used_elsewhere_are_left_alone() -> None:
    x = relay.var("x", shape=(4, 7))
    mu = relay.mean(x, axis=[1], keepdims=True)
    c = relay.subtract(x, mu)
    var = relay.mean(relay.multiply(c, c), axis=[1], keepdims=True)
    y = relay.divide(c, relay.sqrt(relay.add(var, relay.const(1e-5))))
    assert "nn.layer_norm" not in _ops(_fused(relay.Tuple([y, mu])))
    assert "nn.layer_norm" in _ops(_fused(relay.Tuple([y, x])))


@pytest.mark.parametrize("case", ["unbiased", "two_axes", "tensor_eps", "other_mean",
                                  "wrong_root"])
def test_near_misses_are_left_alone(case: str) -> None:
    x = relay.var("x", shape=(4, 6, 5))
    axes = [1, 2] if case == "two_axes" else [2]
    mu = relay.mean(x, axis=axes, keepdims=True)
    other = relay.mean(x, axis=[1], keepdims=True) if case == "other_mean" else mu
    var = op_call("variance", x, other, axis=axes, keepdims=True, unbiased=case == "unbiased")
    eps = _c((4, 1, 1)) if case == "tensor_eps" else relay.const(1e-5)
    den = relay.sqrt(relay.add(var, eps))
    c = relay.subtract(x, mu)
    y = relay.multiply(c, den) if case == "wrong_root" else relay.divide(c, den)
    assert "nn.layer_norm" not in _ops(_fused(y))


def test_gamma_not_per_axis_stays_a_multiply() -> None:
    x = relay.var("x", shape=(4, 6))
    full = _c((4, 6))
    y = relay.add(relay.multiply(_decomposed(x, 1, 1e-5), full), _c((6,)))
    ops = _ops(_fused(y))
    assert ops["nn.layer_norm"] == 1 and ops["multiply"] == 1 and ops["add"] == 1


# ------------------------------------------------------------------------------ the zoo
def _transformer_outputs(fuse: bool, **kwargs) -> tuple[np.ndarray, np.ndarray]:
    from ember.contrib import graph_executor

    mod, params = relay.testing.transformer.get_workload(**kwargs)
    disabled = [] if fuse else ["FuseLayerNorm"]
    with ember.transform.PassContext(opt_level=3, disabled_pass=disabled):
        lib = relay.build(mod, "llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    shape = [int(d) for d in mod["main"].params[0].checked_type.shape]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    m.set_input(mod["main"].params[0].name_hint, x)
    m.run()
    return x, m.get_output(0).numpy()


def test_transformer_same_with_and_without_the_pass() -> None:
    kwargs = {"seq_len": 16, "hidden": 32, "ffn": 64}
    _, on = _transformer_outputs(True, **kwargs)
    _, off = _transformer_outputs(False, **kwargs)
    np.testing.assert_allclose(on, off, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opset", [13, 17])
def test_transformer_onnx_twin_matches_onnxruntime(opset: int) -> None:
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from ember.contrib import graph_executor
    from ember.relay.frontend import from_onnx
    from ember.relay.testing import onnx_twin
    from ember.relay.transform.bind_params import bind_params_by_name

    model, _, _ = onnx_twin("transformer", opset=opset, seq_len=16, hidden=32, ffn=64)
    inp = model.graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {inp.name: x})[0]
    mod, params = from_onnx(model, {inp.name: shape})
    bound = mod.copy()
    bound["main"] = bind_params_by_name(mod["main"], params)
    with ember.transform.PassContext(opt_level=3):
        fused = ember.transform.Sequential(optimize_passes())(bound)
        lib = relay.build(mod, "llvm", params=params)
    assert _ops(fused)["nn.layer_norm"] == 4  # embedding + 2 per layer, all put back together
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    m.set_input(inp.name, x)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-4, atol=1e-4)


def test_simplify_inference_still_decomposes() -> None:
    x = relay.var("x", shape=(2, 5))
    y = relay.nn.layer_norm(x, _c((5,)), _c((5,)))
    mod = SimplifyInference()(InferType()(ember.IRModule.from_expr(relay.Function([x], y))))
    assert "nn.layer_norm" not in _ops(mod)


# ------------------------------------------------------------------- a ? normalised axis
def _group_norm_of_frames() -> relay.Expr:
    """wav2vec2's GroupNorm (one channel per group) over a 1-D conv's ``?`` frames, its
    per-channel affine after."""
    x = relay.var("x", shape=(1, 4, 1, relay.Any()))
    return relay.add(relay.multiply(_decomposed(x, 3, 1e-5), _c((4, 1, 1))), _c((4, 1, 1)))


def test_a_symbolic_axis_is_normalised_by_the_kernel() -> None:
    mod = _fused(_group_norm_of_frames())
    ops = _ops(mod)
    assert ops["nn.layer_norm"] == 1 and "mean" not in ops, ops
    ln = next(n for n in post_order(mod["main"].body) if getattr(n, "op", None) is not None
              and getattr(n.op, "name", "") == "nn.layer_norm")
    # gamma and beta run along the channels, not the ? axis: they stay outside
    assert ln.attrs.axis == 3 and not ln.attrs.scale and not ln.attrs.center
    assert ops["multiply"] == 1 and ops["add"] == 1


def test_a_symbolic_axis_matches_the_decomposed_form() -> None:
    expr = _group_norm_of_frames()
    mod = ember.IRModule.from_expr(relay.Function(relay.analysis.free_vars(expr), expr))
    want = relay.create_executor("debug", mod=mod).evaluate()
    with ember.transform.PassContext(opt_level=3):
        got = relay.create_executor("vm", mod=mod, target="llvm").evaluate()
    for frames in (1, 7, 33):
        x = RNG.standard_normal((1, 4, 1, frames)).astype("float32")
        np.testing.assert_allclose(got(x).numpy(), want(x).numpy(), rtol=1e-4, atol=1e-4)

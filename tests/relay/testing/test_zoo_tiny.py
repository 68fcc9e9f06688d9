"""The MLPerf Tiny networks (DS-CNN, ResNet-8, the autoencoder), MobileNetV2 and the
transformer encoder: architecture facts, numpy references for the encoder and the
autoencoder, and every model through the graph executor, AOT and the VM against the reference
interpreter. Reduced sizes run by default; the full-size models are ``slow``.

(Signatures, weight coverage, the interpreter and the text round trip are in test_zoo.py.)
"""
from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import pytest

import ember
from ember import relay
from ember.relay import testing
from ember.relay.backend import Executor
from ember.relay.testing import autoencoder, dscnn, mobilenet_v2, resnet8, transformer
from ember.testing import find_c_compiler

needs_cc = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")
STATS = ("moving_mean", "moving_var")

SMALL: dict[str, tuple[Any, dict[str, Any]]] = {
    "dscnn-narrow": (dscnn, {"filters": 16, "num_blocks": 2}),
    "resnet8-16px": (resnet8, {"image_size": 16}),
    "mobilenet_v2-32px": (mobilenet_v2, {"image_shape": (3, 32, 32), "alpha": 0.35,
                                         "num_classes": 10}),
    "autoencoder-narrow": (autoencoder, {"batch_size": 2, "input_dim": 64, "hidden": 32}),
    "transformer-16": (transformer, {"seq_len": 16, "hidden": 32, "ffn": 64}),
    "transformer-tokens": (transformer, {"seq_len": 8, "hidden": 16, "ffn": 32,
                                         "num_layers": 1, "vocab_size": 20}),
}
FULL: dict[str, tuple[Any, dict[str, Any]]] = {
    "dscnn": (dscnn, {}), "resnet8": (resnet8, {}), "mobilenet_v2": (mobilenet_v2, {}),
    "autoencoder": (autoencoder, {}), "transformer": (transformer, {}),
    "transformer-tokens-full": (transformer, {"vocab_size": 1000}),
}
CASES = [pytest.param(n, id=n) for n in SMALL] + [
    pytest.param(n, id=n, marks=pytest.mark.slow) for n in FULL]


def _count(params: dict[str, Any], drop: tuple[str, ...] = ()) -> int:
    return sum(int(np.prod(v.shape)) for k, v in params.items() if not k.endswith(drop))


def make_input(mod: ember.IRModule, seed: int = 0) -> np.ndarray:
    """A random ``data``: uniform [-1, 1) floats, or token ids below the vocabulary size."""
    ty = mod["main"].params[0].checked_type
    shape = tuple(int(d) for d in ty.shape)
    rng = np.random.default_rng(seed)
    if ty.dtype == "int32":
        vocab = int(mod["main"].params[1].checked_type.shape[0])  # embed_weight
        return rng.integers(0, vocab, size=shape).astype("int32")
    return rng.uniform(-1, 1, size=shape).astype(ty.dtype)


@functools.cache
def case(name: str) -> tuple[ember.IRModule, dict[str, Any], np.ndarray, np.ndarray]:
    module, kwargs = {**SMALL, **FULL}[name]
    mod, params = module.get_workload(**kwargs)
    x = make_input(mod)
    ref = relay.create_executor("debug", mod=mod).evaluate()(x, **params).numpy()
    return mod, params, x, ref


@needs_cc
def _executor_cases() -> list[Any]:
    """Every model on every executor; the default run takes each small model on one executor
    (rotating, so each executor runs two of them), the rest are slow."""
    executors = ["graph", "aot", "vm"]
    out = []
    for k, p in enumerate(CASES):
        name = p.values[0]
        for j, executor in enumerate(executors):
            slow = name in FULL or j != k % len(executors)
            out.append(pytest.param(name, executor, id=f"{name}-{executor}",
                                    marks=pytest.mark.slow if slow else ()))
    return out


@pytest.mark.parametrize("name,executor", _executor_cases())
def test_executors_match_the_interpreter(name: str, executor: str) -> None:
    mod, params, x, ref = case(name)
    with ember.transform.PassContext(opt_level=3):
        factory = relay.build(mod, "llvm", params=params, executor=Executor(executor))
    m = factory["default"](ember.cpu())
    m.set_input("data", x)
    m.run()
    out = m.get_output(0).numpy()
    assert out.shape == ref.shape and out.dtype == ref.dtype
    assert_close(out, ref)


def assert_close(out: np.ndarray, ref: np.ndarray) -> None:
    """rtol 1e-4, atol 1e-5 times the output's scale (at least 1).

    The interpreter computes in numpy, in other summation orders; the rounding differences
    grow with the activations, not with each output: full-size MobileNetV2's logits reach 4.5
    and one logit near -0.02 differs by 1.6e-5 after 52 convolutions."""
    scale = max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * scale)


# ------------------------------------------------------------------ architecture facts
def test_full_size_weight_counts() -> None:
    # torchvision's mobilenet_v2 (parameters only: it keeps the statistics as buffers)
    assert _count(mobilenet_v2.get_workload()[1], STATS) == 3_504_872
    # per layer: q, k, v, out 4 * (128 * 128 + 128), ffn 2 * 128 * 512 + 512 + 128, 2 norms
    per_layer = 4 * (128 * 128 + 128) + 2 * 128 * 512 + 512 + 128 + 2 * 2 * 128
    assert _count(transformer.get_workload()[1]) == 2 * per_layer
    tokens = _count(transformer.get_workload(vocab_size=1000)[1])
    assert tokens == 2 * per_layer + 1000 * 128 + 128 * 128 + 2 * 128


def test_full_size_signatures() -> None:
    shapes = {dscnn: ((1, 1, 49, 10), (1, 12)), resnet8: ((1, 3, 32, 32), (1, 10)),
              mobilenet_v2: ((1, 3, 224, 224), (1, 1000)), autoencoder: ((1, 640), (1, 640)),
              transformer: ((1, 128, 128), (1, 128, 128))}
    for module, (in_shape, out_shape) in shapes.items():
        main = module.get_workload()[0]["main"]
        assert main.params[0].checked_type == relay.TensorType(in_shape, "float32"), module
        assert main.body.checked_type == relay.TensorType(out_shape, "float32"), module


def test_mobilenet_v2_blocks() -> None:
    ops = testing.count_ops(mobilenet_v2.get_net())
    # stem + 17 blocks (16 with an expansion: 3 convs; the first: 2) + the 1280 conv
    assert ops["nn.conv2d"] == 1 + 16 * 3 + 2 + 1 == ops["nn.batch_norm"]
    assert ops["clip"] == 1 + 16 * 2 + 1 + 1  # ReLU6 everywhere but the linear projections
    assert ops["add"] == 10  # residuals: stride 1 and equal widths (1 + 2 + 3 + 2 + 2)
    names = {p.name_hint for p in mobilenet_v2.get_net().params}
    assert "block1_expand_weight" not in names and "block2_expand_weight" in names
    assert [mobilenet_v2.make_divisible(c * 0.35) for c in (32, 16, 24, 96, 320)] == [
        16, 8, 8, 32, 112]


def test_same_padding_is_tensorflows() -> None:
    assert dscnn.same_padding(49, 10, 2) == (4, 5) and dscnn.same_padding(10, 4, 2) == (1, 1)
    assert dscnn.same_padding(32, 3, 2) == (0, 1) and dscnn.same_padding(32, 1, 2) == (0, 0)
    conv = next(n for n in ember.ir.post_order(resnet8.get_net().body)
                if isinstance(n, relay.Call) and getattr(n.op, "name", "") == "nn.conv2d"
                and tuple(n.attrs.strides) == (2, 2) and tuple(n.attrs.kernel_size) == (3, 3))
    assert tuple(conv.attrs.padding) == (0, 0, 1, 1)


# ------------------------------------------------------------------ numpy references
def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * gamma + beta


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _encoder_numpy(x: np.ndarray, p: dict[str, np.ndarray], layers: int,
                   heads: int) -> np.ndarray:
    def dense(h: np.ndarray, name: str) -> np.ndarray:
        return h @ p[f"{name}_weight"].T + p[f"{name}_bias"]

    batch, seq, hidden = x.shape
    for i in range(1, layers + 1):
        a = f"layer{i}_attn"
        q, k, v = (dense(x, f"{a}_{n}").reshape(batch, seq, heads, -1).transpose(0, 2, 1, 3)
                   for n in "qkv")
        probs = _softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(hidden // heads))
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, hidden)
        x = _layer_norm(x + dense(ctx, f"{a}_out"), p[f"layer{i}_ln1_gamma"],
                        p[f"layer{i}_ln1_beta"])
        h = dense(_gelu(dense(x, f"layer{i}_ffn1")), f"layer{i}_ffn2")
        x = _layer_norm(x + h, p[f"layer{i}_ln2_gamma"], p[f"layer{i}_ln2_beta"])
    return x


def _perturbed(params: dict[str, Any], seed: int) -> dict[str, np.ndarray]:
    """The params plus noise, so zero biases and unit norms do not hide a mix-up."""
    rng = np.random.default_rng(seed)
    return {k: (v.numpy() + 0.1 * rng.standard_normal(v.shape)).astype("float32")
            for k, v in params.items()}


def test_transformer_matches_numpy() -> None:
    mod, params = transformer.get_workload(batch_size=2, seq_len=6, hidden=8, num_heads=2,
                                           ffn=16)
    p = _perturbed(params, 1)
    x = make_input(mod, 3)
    out = relay.create_executor("debug", mod=mod).evaluate()(x, **p).numpy()
    np.testing.assert_allclose(out, _encoder_numpy(x, p, 2, 2), rtol=1e-4, atol=1e-5)


def test_transformer_tokens_match_numpy() -> None:
    mod, params = transformer.get_workload(seq_len=5, hidden=8, num_heads=4, ffn=8,
                                           num_layers=1, vocab_size=11)
    p = _perturbed(params, 2)
    ids = make_input(mod, 4)
    embedded = _layer_norm(p["embed_weight"][ids] + p["pos_embed_weight"],
                           p["embed_ln_gamma"], p["embed_ln_beta"])
    out = relay.create_executor("debug", mod=mod).evaluate()(ids, **p).numpy()
    np.testing.assert_allclose(out, _encoder_numpy(embedded, p, 1, 4), rtol=1e-4, atol=1e-5)


def test_autoencoder_matches_numpy() -> None:
    mod, params = autoencoder.get_workload(batch_size=3, input_dim=12, hidden=6, bottleneck=2,
                                           depth=2)
    p = _perturbed(params, 5)
    p = {k: np.abs(v) + 0.5 if k.endswith("moving_var") else v for k, v in p.items()}
    x = make_input(mod, 6)
    h = x
    for name in ("enc1", "enc2", "bottleneck", "dec1", "dec2"):
        h = h @ p[f"{name}_weight"].T + p[f"{name}_bias"]
        bn = f"{name}_bn"
        h = ((h - p[f"{bn}_moving_mean"]) / np.sqrt(p[f"{bn}_moving_var"] + 1e-3)
             * p[f"{bn}_gamma"] + p[f"{bn}_beta"])
        h = np.maximum(h, 0)
    expected = h @ p["out_weight"].T + p["out_bias"]
    out = relay.create_executor("debug", mod=mod).evaluate()(x, **p).numpy()
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("call,match", [
    (lambda: dscnn.get_workload(input_shape=(49,)), "input_shape must be"),
    (lambda: resnet8.get_workload(image_size=4), "image_size must be at least 8"),
    (lambda: mobilenet_v2.get_workload(image_shape=(3, 16, 16)), "H, W >= 32"),
    (lambda: mobilenet_v2.get_workload(alpha=0), "alpha must be positive"),
    (lambda: autoencoder.get_workload(bottleneck=0), "must be positive"),
    (lambda: transformer.get_workload(hidden=30, num_heads=4), "multiple of num_heads"),
    (lambda: transformer.get_workload(vocab_size=0), "must be positive"),
])
def test_bad_arguments_raise_clear_errors(call: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()

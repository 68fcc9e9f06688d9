"""ONNX twins of the zoo (``ember.relay.testing.onnx_twin``): each passes
``onnx.checker.check_model`` and, run by onnxruntime, matches ember's graph executor on the
Relay model with the same input. By default every small configuration is checked against the
reference interpreter (no compilation) and a representative subset against the graph executor;
with ``-m slow`` every configuration, small and full-size, runs through the graph executor.

Tolerance: rtol 1e-4 and atol 1e-5 times the output's scale (at least 1): two runtimes sum in
different orders, and those rounding differences grow with the activations (see
test_zoo_tiny.assert_close).
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import ember
from ember import relay
from ember.relay.testing import onnx_twin
from ember.relay.testing.twins import ZOO
from ember.testing import find_c_compiler

needs_cc = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")
IMG32 = {"image_shape": (3, 32, 32), "num_classes": 10}
# id -> (zoo name, get_workload kwargs)
SMALL: dict[str, tuple[str, dict[str, Any]]] = {
    "mlp": ("mlp", {"batch_size": 2}),
    "synthetic": ("synthetic", {}),
    "dqn-nhwc": ("dqn", {"image_shape": (84, 84, 4), "layout": "NHWC"}),
    "dcgan": ("dcgan", {"ngf": 8}),
    "dcgan-nhwc": ("dcgan", {"ngf": 4, "random_len": 16, "oshape": (64, 64, 1),
                             "layout": "NHWC"}),
    "resnet18-32px": ("resnet", {"num_layers": 18, **IMG32}),
    "resnet8-nhwc": ("resnet", {"num_layers": 8, "image_shape": (28, 28, 3), "layout": "NHWC",
                                "num_classes": 10}),
    "mobilenet-32px": ("mobilenet", {"alpha": 0.25, **IMG32}),
    "squeezenet1.1": ("squeezenet", {"version": "1.1", "image_shape": (3, 64, 64),
                                     "num_classes": 10}),
    "vgg11-bn": ("vgg", {"batch_norm": True, **IMG32}),
    "inception_v3": ("inception_v3", {"image_shape": (3, 75, 75), "num_classes": 10,
                                      "global_pool": True}),
    "densenet121": ("densenet", {"batch_size": 1, "image_shape": (3, 32, 32), "classes": 10}),
    "dscnn": ("dscnn", {}),
    "resnet8": ("resnet8", {}),
    "mobilenet_v2": ("mobilenet_v2", {"alpha": 0.35, **IMG32}),
    "autoencoder": ("autoencoder", {}),
    "transformer": ("transformer", {"seq_len": 16, "hidden": 32, "ffn": 64}),
    "transformer-tokens": ("transformer", {"seq_len": 8, "hidden": 16, "ffn": 32,
                                           "vocab_size": 20}),
}
FULL = {name: (name, kwargs) for name, kwargs in ZOO.items()}
# compiled in the default run: one of each kind of layer (conv NCHW and NHWC, transposed conv,
# depthwise, pools, batch/layer norm, attention, take)
COMPILED = ("mlp", "dcgan-nhwc", "mobilenet-32px", "dscnn", "resnet8", "autoencoder",
            "transformer-tokens")
CASES = [pytest.param(n, SMALL[n], id=n, marks=() if n in COMPILED else pytest.mark.slow)
         for n in SMALL] + [
    pytest.param(n, FULL[n], id=f"{n}-full", marks=pytest.mark.slow) for n in FULL]


def make_input(mod: ember.IRModule, seed: int = 0) -> np.ndarray:
    ty = mod["main"].params[0].checked_type
    shape = tuple(int(d) for d in ty.shape)
    rng = np.random.default_rng(seed)
    if ty.dtype == "int32":  # token ids below the vocabulary size (embed_weight's rows)
        return rng.integers(0, int(mod["main"].params[1].checked_type.shape[0]), shape,
                            dtype="int32")
    return rng.uniform(-1, 1, size=shape).astype(ty.dtype)


def run_onnxruntime(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def assert_close(out: np.ndarray, ref: np.ndarray) -> None:
    assert out.shape == ref.shape and out.dtype == ref.dtype
    scale = max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * scale)


@functools.cache
def graph_output(key: str, name: str, kwargs_items: tuple) -> tuple[Any, np.ndarray, np.ndarray]:
    model, mod, params = onnx_twin(name, **dict(kwargs_items))
    x = make_input(mod)
    with ember.transform.PassContext(opt_level=3):
        factory = relay.build(mod, "llvm", params=params)
    m = factory["default"](ember.cpu())
    m.set_input("data", x)
    m.run()
    return model, x, m.get_output(0).numpy()


@needs_cc
@pytest.mark.parametrize("key, case", CASES)
def test_twin_matches_the_graph_executor(key: str, case: tuple[str, dict[str, Any]]) -> None:
    name, kwargs = case
    model, x, expected = graph_output(key, name, tuple(sorted(kwargs.items())))
    onnx.checker.check_model(model, full_check=True)
    assert [i.name for i in model.graph.input] == ["data"]
    (out,) = run_onnxruntime(model, {"data": x})
    assert_close(out, expected)


@pytest.mark.parametrize("key", [pytest.param(k, marks=pytest.mark.slow) if k == "vgg11-bn"
                                 else k for k in SMALL])  # VGG's 4096-wide layers: seconds
def test_twin_matches_the_interpreter(key: str) -> None:
    name, kwargs = SMALL[key]
    model, mod, params = onnx_twin(name, **kwargs)
    onnx.checker.check_model(model, full_check=True)
    x = make_input(mod, seed=1)
    expected = relay.create_executor("debug", mod=mod).evaluate()(x, **params).numpy()
    (out,) = run_onnxruntime(model, {"data": x})
    assert_close(out, expected)


def test_zoo_lists_every_exportable_workload() -> None:
    from ember.relay import testing

    workloads = {n for n in dir(testing) if hasattr(getattr(testing, n), "get_workload")}
    assert workloads - set(ZOO) == {"lstm"}


def test_twin_has_the_same_weights() -> None:
    model, _, params = onnx_twin("mlp", batch_size=1, num_classes=3, image_shape=(1, 4, 4))
    weights = {w.name: onnx.numpy_helper.to_array(w) for w in model.graph.initializer}
    assert set(weights) == set(params)
    for name, value in params.items():
        np.testing.assert_array_equal(weights[name], value.numpy())
    assert model.opset_import[0].version == 17
    assert onnx_twin("mlp", opset=13)[0].opset_import[0].version == 13


def test_benchmark_helper_yields_every_zoo_model() -> None:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "benchmarks" / "_models.py"
    spec = importlib.util.spec_from_file_location("bench_models", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert list(bench.SMALL) == list(ZOO)
    cases = list(bench.zoo_models(["dscnn", "transformer"], small=True))
    assert [c.name for c in cases] == ["dscnn", "transformer"]
    for case in cases:
        assert list(case.inputs) == [i.name for i in case.onnx_model.graph.input] == ["data"]
        (out,) = run_onnxruntime(case.onnx_model, case.inputs)
        assert np.isfinite(out).all()
    with pytest.raises(ValueError, match="unknown model 'alexnet'"):
        next(bench.zoo_models(["alexnet"]))

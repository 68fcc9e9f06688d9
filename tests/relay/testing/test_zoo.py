"""The model zoo: every workload builds, type-checks, has its documented signature, its params
cover exactly the weights, it runs in the reference interpreter with a finite output that
depends on the input, and its weight count matches the published architecture.

Small configurations run by default (each well under a second in the interpreter); the
full-size ImageNet networks are ``@pytest.mark.slow``.
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember import relay
from ember.ir import assert_structural_equal
from ember.relay import testing
from ember.relay.testing import (
    autoencoder,
    dcgan,
    densenet,
    dqn,
    dscnn,
    inception_v3,
    lstm,
    mlp,
    mobilenet,
    mobilenet_v2,
    resnet,
    resnet8,
    squeezenet,
    synthetic,
    transformer,
    vgg,
)
from ember.runtime.ndarray import NDArray

# id -> (module, get_workload kwargs, input shape, output shape, ends in softmax)
SMALL: dict[str, tuple[Any, dict[str, Any], tuple[int, ...], tuple[int, ...], bool]] = {
    "mlp": (mlp, {"batch_size": 2}, (2, 1, 28, 28), (2, 10), True),
    "synthetic": (synthetic, {}, (1, 3, 24, 12), (1, 3, 24, 12), False),
    "dqn": (dqn, {"batch_size": 1}, (1, 4, 84, 84), (1, 18), False),
    "dqn-nhwc": (dqn, {"batch_size": 2, "image_shape": (84, 84, 4), "layout": "NHWC"},
                 (2, 84, 84, 4), (2, 18), False),
    "resnet8-cifar": (resnet, {"num_layers": 8, "image_shape": (3, 28, 28), "num_classes": 10},
                      (1, 3, 28, 28), (1, 10), True),
    "resnet18-32px": (resnet, {"num_layers": 18, "image_shape": (3, 32, 32)},
                      (1, 3, 32, 32), (1, 1000), True),
    "resnet8-nhwc": (resnet, {"batch_size": 2, "num_layers": 8, "image_shape": (28, 28, 3),
                              "layout": "NHWC"},
                     (2, 28, 28, 3), (2, 1000), True),
    "mobilenet-32px": (mobilenet, {"image_shape": (3, 32, 32)},
                       (1, 3, 32, 32), (1, 1000), True),
    "mobilenet-nhwc": (mobilenet, {"image_shape": (32, 32, 3), "layout": "NHWC",
                                   "alpha": 0.25, "num_classes": 10},
                       (1, 32, 32, 3), (1, 10), True),
    "squeezenet1.0": (squeezenet, {"image_shape": (3, 64, 64)},
                      (1, 3, 64, 64), (1, 1000), True),
    "squeezenet1.1": (squeezenet, {"version": "1.1", "image_shape": (3, 64, 64),
                                   "num_classes": 10},
                      (1, 3, 64, 64), (1, 10), True),
    "dcgan": (dcgan, {"batch_size": 1, "ngf": 8}, (1, 100), (1, 3, 64, 64), False),
    "dcgan-nhwc": (dcgan, {"batch_size": 2, "ngf": 4, "random_len": 16,
                           "oshape": (64, 64, 1), "layout": "NHWC"},
                   (2, 16), (2, 64, 64, 1), False),
    "densenet121": (densenet, {"batch_size": 1, "image_shape": (3, 32, 32), "classes": 10},
                    (1, 3, 32, 32), (1, 10), False),
    "inception_v3": (inception_v3, {"image_shape": (3, 75, 75), "num_classes": 10,
                                    "global_pool": True},
                     (1, 3, 75, 75), (1, 10), True),
    "lstm": (lstm, {"iterations": 3, "num_hidden": 8, "batch_size": 2}, (2, 8), (2, 8), False),
    "dscnn": (dscnn, {}, (1, 1, 49, 10), (1, 12), True),
    "resnet8": (resnet8, {"batch_size": 2}, (2, 3, 32, 32), (2, 10), True),
    "mobilenet_v2-32px": (mobilenet_v2, {"image_shape": (3, 32, 32), "alpha": 0.35,
                                         "num_classes": 10},
                          (1, 3, 32, 32), (1, 10), False),
    "autoencoder": (autoencoder, {"batch_size": 2}, (2, 640), (2, 640), False),
    "transformer-16": (transformer, {"seq_len": 16, "hidden": 32, "ffn": 64},
                       (1, 16, 32), (1, 16, 32), False),
}


@functools.cache
def workload(case: str) -> tuple[ember.IRModule, dict[str, NDArray]]:
    module, kwargs, *_ = SMALL[case]
    return module.get_workload(**kwargs)


def run(mod: ember.IRModule, params: dict[str, NDArray], data: np.ndarray) -> np.ndarray:
    return relay.create_executor("debug", mod=mod).evaluate()(data, **params).numpy()


def random_input(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, size=shape).astype("float32")


@pytest.mark.parametrize("case", SMALL)
def test_signature(case: str) -> None:
    _, _, in_shape, out_shape, _ = SMALL[case]
    mod, _ = workload(case)
    main = mod["main"]
    data = main.params[0]
    assert data.name_hint == "data"
    assert data.checked_type == relay.TensorType(in_shape, "float32")
    assert main.body.checked_type == relay.TensorType(out_shape, "float32")
    assert all(p.type_annotation == p.checked_type for p in main.params)  # annotated
    names = [p.name_hint for p in main.params]
    assert len(set(names)) == len(names), "parameter names must be unique"


@pytest.mark.parametrize("case", SMALL)
def test_params_cover_exactly_the_weights(case: str) -> None:
    mod, params = workload(case)
    weights = [p for p in mod["main"].params if p.name_hint != "data"]
    assert list(params) == [p.name_hint for p in weights]
    for p in weights:
        arr = params[p.name_hint]
        assert isinstance(arr, NDArray)
        assert (tuple(arr.shape), arr.dtype) == (tuple(p.checked_type.shape), "float32"), p
        assert np.isfinite(arr.numpy()).all()


@pytest.mark.parametrize("case", SMALL)
def test_runs_in_the_interpreter(case: str) -> None:
    _, _, in_shape, out_shape, softmax = SMALL[case]
    mod, params = workload(case)
    out = run(mod, params, random_input(in_shape, 1))
    other = run(mod, params, random_input(in_shape, 2))
    assert out.shape == out_shape and out.dtype == np.float32
    assert np.isfinite(out).all()
    if softmax:
        np.testing.assert_allclose(out.sum(axis=-1), 1.0, rtol=1e-5)
        assert (out > 0).all() and (out < 1).all()
    # The weights keep activations alive: another input gives a visibly different output,
    # so comparing a compiled model against this one means something.
    assert np.abs(out - other).max() > 1e-3 * np.abs(out).max()


@pytest.mark.parametrize("case", SMALL)
def test_text_round_trip(case: str) -> None:
    mod, _ = workload(case)
    assert_structural_equal(ember.parser.fromtext(mod.astext()), mod)


def _count(params: dict[str, NDArray], drop: tuple[str, ...] = ()) -> int:
    return sum(int(np.prod(v.shape)) for k, v in params.items() if not k.endswith(drop))


# Published weight counts. The small cases have 10 classes where noted, so the classifier's
# 990 missing outputs are subtracted; suffixes in `drop` are left out of the count.
@pytest.mark.parametrize("case,drop,expected", [
    ("mlp", (), 784 * 128 + 128 + 128 * 64 + 64 + 64 * 10 + 10),
    # Nature DQN: convs 8224 + 32832 + 36928, dense 3136 * 512 + 512 and 512 * 18 + 18
    ("dqn", (), 1_693_362),
    ("mobilenet-32px", (), 4_253_864),  # Keras MobileNet (alpha 1.0), total params
    ("squeezenet1.0", (), 1_248_424),  # torchvision squeezenet1_0
    # torchvision densenet121 (which does not count the batch-norm running statistics)
    ("densenet121", ("moving_mean", "moving_var"), 7_978_856 - 1025 * 990),
    # Keras InceptionV3: its batch norms have no scale; the zoo keeps the unused gammas
    ("inception_v3", ("_bn_gamma",), 23_851_784 - 2049 * 990),
    # MLPerf Tiny's Keras models: DS-CNN's 23,756 trainable weights, ResNet-8's and the
    # autoencoder's totals as Keras's summary() counts them (batch-norm statistics included)
    ("dscnn", ("moving_mean", "moving_var"), 23_756),
    ("resnet8", (), 78_666),
    ("autoencoder", (), 269_992),
])
def test_published_weight_counts(case: str, drop: tuple[str, ...], expected: int) -> None:
    assert _count(workload(case)[1], drop) == expected


@pytest.mark.parametrize("num_layers,height,convs,bottleneck", [
    (8, 28, 1 + 2 * 3 + 3, False), (20, 28, 1 + 2 * 9 + 3, False),
    (164, 28, 1 + 3 * 54 + 3, True), (18, 224, 1 + 2 * 8 + 4, False),
    (34, 224, 1 + 2 * 16 + 4, False), (50, 224, 1 + 3 * 16 + 4, True),
    (101, 224, 1 + 3 * 33 + 4, True), (152, 224, 1 + 3 * 50 + 4, True),
])
def test_resnet_depths(num_layers: int, height: int, convs: int, bottleneck: bool) -> None:
    # One stem conv, two or three per block, one projection per stage; +1 for the dense layer.
    net = resnet.get_net(1, 10, num_layers, (3, height, height))
    ops = testing.count_ops(net)
    assert ops["nn.conv2d"] == convs
    assert ops["nn.dense"] == 1 and ops["nn.max_pool2d"] == (height > 32)
    names = {p.name_hint for p in net.params}
    assert ("stage1_unit1_conv3_weight" in names) == bottleneck


def test_vgg_types_without_weights() -> None:
    for num_layers, convs in ((11, 8), (13, 10), (16, 13), (19, 16)):
        net = testing.run_infer_type(vgg.get_net(1, (3, 32, 32), 10, "float32", num_layers,
                                                 batch_norm=True))
        assert net.body.checked_type == relay.TensorType((1, 10), "float32")
        assert testing.count_ops(net)["nn.conv2d"] == convs
        assert testing.count_ops(net)["nn.batch_norm"] == convs


def test_same_seed_same_workload() -> None:
    mod_a, params_a = mlp.get_workload(1)
    mod_b, params_b = mlp.get_workload(1)
    assert_structural_equal(mod_a, mod_b, map_free_vars=True)
    for name in params_a:
        np.testing.assert_array_equal(params_a[name].numpy(), params_b[name].numpy())
    net = mlp.get_net(1)
    _, params_c = testing.create_workload(net, seed=1)
    assert not np.array_equal(params_a["fc1_weight"].numpy(), params_c["fc1_weight"].numpy())
    np.testing.assert_array_equal(params_c["fc1_bias"].numpy(), 0)


def _mlp_numpy(x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    h = x.reshape(x.shape[0], -1)
    for i in (1, 2, 3):
        h = h @ p[f"fc{i}_weight"].T + p[f"fc{i}_bias"]
        h = np.maximum(h, 0) if i < 3 else h
    e = np.exp(h - h.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@settings(max_examples=6, deadline=None)
@given(batch=st.integers(1, 3), classes=st.integers(2, 12),
       image=st.sampled_from([(1, 28, 28), (3, 8, 8), (2, 5, 7)]), seed=st.integers(0, 2**16))
def test_mlp_matches_numpy(batch: int, classes: int, image: tuple[int, ...], seed: int) -> None:
    mod, params = mlp.get_workload(batch, classes, image)
    x = random_input((batch, *image), seed)
    expected = _mlp_numpy(x, {k: v.numpy() for k, v in params.items()})
    np.testing.assert_allclose(run(mod, params, x), expected, rtol=1e-5, atol=1e-6)


def _lstm_numpy(x: np.ndarray, p: dict[str, np.ndarray], steps: int) -> np.ndarray:
    sigmoid = lambda v: 1 / (1 + np.exp(-v))
    h = c = np.zeros_like(x)
    for i in range(steps):
        gates = (x @ p[f"i2h_{i}_weight"].T + p[f"i2h_{i}_bias"]
                 + h @ p[f"h2h_{i}_weight"].T + p[f"h2h_{i}_bias"])
        i_g, f_g, g, o_g = np.split(gates, 4, axis=1)
        c = sigmoid(f_g) * c + sigmoid(i_g) * np.tanh(g)
        h = sigmoid(o_g) * np.tanh(c)
    return h


def test_lstm_matches_numpy() -> None:
    mod, params = workload("lstm")
    # Non-zero biases, so every gate's bias is checked too.
    params = {k: ember.nd.array(v.numpy() + 0.1 * (k.endswith("bias")))
              for k, v in params.items()}
    x = random_input((2, 8), 3)
    expected = _lstm_numpy(x, {k: v.numpy() for k, v in params.items()}, 3)
    np.testing.assert_allclose(run(mod, params, x), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call,match", [
    (lambda: resnet.get_workload(num_layers=19), "no 19-layer network"),
    (lambda: resnet.get_workload(num_layers=9, image_shape=(3, 28, 28)), "6n\\+2"),
    (lambda: resnet.get_workload(layout="NCWH"), "layout must be"),
    (lambda: mobilenet.get_workload(layout="HWCN"), "layout must be"),
    (lambda: squeezenet.get_workload(version="2.0"), "unsupported version '2.0'"),
    (lambda: densenet.get_workload(densenet_size=100), "no DenseNet-100"),
    (lambda: vgg.get_workload(1, num_layers=12), "no 12-layer network"),
    (lambda: dcgan.get_workload(1, oshape=(3, 32, 32)), "only 64x64"),
    (lambda: lstm.get_workload(0, 4), "iterations must be at least 1"),
    (lambda: synthetic.get_workload(input_shape=(1, 3, 24)), "input_shape must be"),
    (lambda: testing.layers.conv2d(relay.var("x"), channels=1), "give name="),
    (lambda: testing.layers.conv_kernel_layout("NCWH"), "unknown data layout 'NCWH'"),
])
def test_bad_arguments_raise_clear_errors(call: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()


def test_helpers() -> None:
    mod, params = workload("mlp")
    text = testing.summary(mod, params)
    assert text.startswith("main(data: float32[2, 1, 28, 28]) -> float32[2, 10]; 6 weights")
    assert "nn.dense x3" in text
    assert testing.count_ops(mod)["nn.relu"] == 2
    typed = testing.run_infer_type(relay.add(relay.var("x", shape=(2,)), relay.const(1.0)))
    assert typed.checked_type == relay.TensorType((2,), "float32")
    arr = testing.rand("float32", 2, 3)
    assert arr.shape == (2, 3) and ((arr.numpy() >= 0) & (arr.numpy() < 1)).all()
    assert all(isinstance(t, str) for t, _ in testing.enabled_targets())


# ------------------------------------------------------------------ full size (slow)
FULL = {
    "resnet18": (resnet, {}, (1, 3, 224, 224), (1, 1000)),
    "resnet50-nhwc": (resnet, {"num_layers": 50, "image_shape": (224, 224, 3), "layout": "NHWC"},
                      (1, 224, 224, 3), (1, 1000)),
    "mobilenet": (mobilenet, {}, (1, 3, 224, 224), (1, 1000)),
    "squeezenet1.1": (squeezenet, {"version": "1.1"}, (1, 3, 224, 224), (1, 1000)),
    "inception_v3": (inception_v3, {}, (1, 3, 299, 299), (1, 1000)),
    "densenet121": (densenet, {"batch_size": 1}, (1, 3, 224, 224), (1, 1000)),
    "dcgan": (dcgan, {"batch_size": 1}, (1, 100), (1, 3, 64, 64)),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", FULL)
def test_full_size_runs(case: str) -> None:
    module, kwargs, in_shape, out_shape = FULL[case]
    mod, params = module.get_workload(**kwargs)
    assert mod["main"].params[0].checked_type == relay.TensorType(in_shape, "float32")
    out = run(mod, params, random_input(in_shape, 1))
    assert out.shape == out_shape and np.isfinite(out).all()


@pytest.mark.slow
def test_full_size_weight_counts() -> None:
    assert _count(vgg.get_workload(1, num_layers=16)[1]) == 138_357_544  # torchvision vgg16
    assert _count(squeezenet.get_workload(version="1.1")[1]) == 1_235_496  # torchvision
    stats = ("moving_mean", "moving_var")
    for size, count in ((161, 28_681_000), (169, 14_149_480), (201, 20_013_928)):
        _, params = densenet.get_workload(size, batch_size=1, image_shape=(3, 32, 32))
        assert _count(params, stats) == count  # torchvision densenet161/169/201

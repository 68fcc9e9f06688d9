"""relay.testing.init: initializers, fans taken from how main uses each weight, and
create_workload's contract (params for every non-data parameter, annotated, deterministic)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember import relay
from ember.relay.testing import dcgan, init, mobilenet, resnet
from ember.relay.testing.init import Constant, InitDesc, Initializer, Normal, Uniform, Xavier


def _small_net() -> relay.Function:
    data = relay.var("data", shape=(2, 3, 8, 8))
    net = relay.nn.conv2d(data, relay.var("c_weight"), channels=4, kernel_size=(3, 3))
    net = relay.nn.batch_norm(net, *(relay.var(f"bn_{n}") for n in
                                     ("gamma", "beta", "moving_mean", "moving_var")))[0]
    net = relay.nn.dense(relay.nn.batch_flatten(net), relay.var("fc_weight"), units=5)
    net = relay.nn.bias_add(net, relay.var("fc_bias"))
    return relay.Function(relay.analysis.free_vars(net), net)


def test_constant_and_the_name_rules() -> None:
    mod, params = init.create_workload(_small_net(), Constant(0.25))
    p = {k: v.numpy() for k, v in params.items()}
    assert list(p) == ["c_weight", "bn_gamma", "bn_beta", "bn_moving_mean", "bn_moving_var",
                       "fc_weight", "fc_bias"]
    assert (p["c_weight"] == 0.25).all() and p["c_weight"].shape == (4, 3, 3, 3)
    assert (p["fc_weight"] == 0.25).all() and p["fc_weight"].shape == (5, 144)
    for name, value in (("bn_gamma", 1), ("bn_beta", 0), ("bn_moving_mean", 0),
                        ("bn_moving_var", 1), ("fc_bias", 0)):
        np.testing.assert_array_equal(p[name], value)
    assert "data" not in params
    text = mod.astext()
    assert "%c_weight: Tensor[(4, 3, 3, 3), float32]" in text  # params are annotated


def test_create_workload_takes_a_module() -> None:
    mod = ember.IRModule.from_expr(_small_net())
    typed, params = init.create_workload(mod, seed=3)
    assert set(params) == {p.name_hint for p in typed["main"].params[1:]}


@settings(max_examples=20, deadline=None)
@given(shape=st.lists(st.integers(1, 6), min_size=2, max_size=4).map(tuple),
       factor=st.sampled_from(["avg", "in", "out"]), magnitude=st.floats(0.5, 8),
       seed=st.integers(0, 2**16))
def test_xavier_bound(shape: tuple[int, ...], factor: str, magnitude: float, seed: int) -> None:
    # Law: every weight lies in [-s, s] with s = sqrt(magnitude / fan), fans from the shape.
    arr = np.zeros(shape, "float32")
    Xavier(factor_type=factor, magnitude=magnitude)("w_weight", arr, np.random.default_rng(seed))
    window = float(np.prod(shape[2:]))
    fan_in, fan_out = shape[1] * window, shape[0] * window
    fan = {"avg": (fan_in + fan_out) / 2, "in": fan_in, "out": fan_out}[factor]
    assert np.abs(arr).max() <= np.float32(np.sqrt(magnitude / fan)) * (1 + 1e-6)


def test_xavier_reads_fans_from_the_use() -> None:
    # Depthwise 3x3: each output sums 9 inputs, in NCHW (OIHW) and NHWC (HWOI) alike.
    for shape, layout in (((3, 32, 32), "NCHW"), ((32, 32, 3), "NHWC")):
        _, params = mobilenet.get_workload(image_shape=shape, layout=layout, alpha=0.25)
        w = params["separable_conv_block_1_weight"].numpy()
        assert 0.7 < np.abs(w).max() <= np.sqrt(6 / 9)
        # A 1x1 pointwise conv in HWIO: fan_in is the input channels (8 at alpha 0.25).
        w2 = params["separable_conv_block_1_conv2_weight"].numpy()
        assert 0.6 < np.abs(w2).max() <= np.sqrt(6 / 8)
    # conv2d_transpose 4x4/2 (IOHW): each output sees 16 / 4 taps of each input channel.
    _, params = dcgan.get_workload(1, ngf=4)
    w = params["g2_deconv_weight"].numpy()
    assert w.shape == (32, 16, 4, 4)
    assert 0.9 * np.sqrt(6 / (32 * 4)) < np.abs(w).max() <= np.sqrt(6 / (32 * 4))


def test_resnet_initializer_shrinks_with_depth() -> None:
    assert resnet.initializer(3, False).magnitude == 3.0
    deep = resnet.initializer(89, True)
    assert deep.factor_type == "in" and deep.magnitude == pytest.approx(6 / 89 ** (1 / 3))


def test_uniform_normal_and_desc() -> None:
    rng = np.random.default_rng(0)
    arr = np.zeros((64, 64), "float32")
    Uniform(0.5)("x_weight", arr, rng)
    assert 0.45 < np.abs(arr).max() <= 0.5
    Normal(0.1)("x_weight", arr, rng)
    assert 0.09 < arr.std() < 0.11
    desc = InitDesc("conv_weight", 9.0, 18.0)
    assert desc == "conv_weight" and desc.endswith("weight") and desc.fan_in == 9.0
    assert Xavier().dumps() == "xavier(rnd_type='uniform', factor_type='avg', magnitude=3)"


def test_custom_initializer_sees_names_as_strings() -> None:
    seen: list[str] = []

    class Record(Initializer):
        def _init_weight(self, name: str, arr: np.ndarray) -> None:
            seen.append(str(name))
            arr[...] = 0.5

    _, params = init.create_workload(_small_net(), Record())
    assert seen == ["c_weight", "fc_weight"]
    assert (params["fc_weight"].numpy() == 0.5).all()


def test_initializer_errors() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="weight 'v_weight' has shape \\(4,\\); Xavier needs"):
        Xavier()("v_weight", np.zeros(4, "float32"), rng)
    with pytest.raises(ValueError, match="parameter 'scale_factor' has no initialisation rule"):
        Xavier()("scale_factor", np.zeros(4, "float32"), rng)
    with pytest.raises(ValueError, match="rnd_type must be 'uniform' or 'gaussian'"):
        Xavier(rnd_type="normal")
    with pytest.raises(ValueError, match="factor_type must be"):
        Xavier(factor_type="mean")
    with pytest.raises(NotImplementedError, match="Initializer: no rule for weight 'w_weight'"):
        Initializer()("w_weight", np.zeros((2, 2)), rng)


def test_dynamic_weight_shape_is_refused() -> None:
    data = relay.var("data", shape=(2, 4))
    w = relay.var("w_weight", shape=(relay.Any(), 4))
    net = relay.Function([data, w], relay.nn.dense(data, w))
    with pytest.raises(ValueError, match="parameter 'w_weight' has type .*static shape"):
        init.create_workload(net)

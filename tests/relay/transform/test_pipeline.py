"""The passes together, as the build runs them: small CNNs (conv2d + batch_norm + relu chains,
residual adds, depthwise and NHWC convs, concatenated branches) and an MLP keep the
interpreter's results, and fold/fuse into the expected kernels."""
from __future__ import annotations

import numpy as np
import pytest
from _pass_helpers import primitive_names

import ember
from ember import relay
from ember.ir import IRModule
from ember.relay.transform import (BindParams, CanonicalizeOps, EliminateCommonSubexpr,
                                   FoldConstant, FoldScaleAxis, FuseOps, InferType,
                                   SimplifyExpr, SimplifyInference)


def optimize(mod: IRModule, params: dict | None = None, opt_level: int = 3) -> IRModule:
    """The optimisation pipeline of a build, in TVM's order."""
    seq = ember.transform.Sequential([
        BindParams(params or {}), SimplifyInference(), EliminateCommonSubexpr(),
        FoldConstant(), FoldScaleAxis(), SimplifyExpr(), CanonicalizeOps(), FoldConstant(),
        FuseOps()])
    with ember.transform.PassContext(opt_level=opt_level, config={"ember.verify": True}):
        return seq(mod)


class Net:
    """Builds a network and its params with named, random weights."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.params: dict[str, np.ndarray] = {}
        self.vars: list[relay.Var] = []

    def weight(self, name: str, *shape: int, low: float = -0.5, high: float = 0.5) -> relay.Var:
        self.params[name] = self.rng.uniform(low, high, shape).astype("float32")
        v = relay.var(name, shape=shape)
        self.vars.append(v)
        return v

    def conv_bn_relu(self, x, name: str, cin: int, cout: int, groups: int = 1,
                     layout: str = "NCHW"):
        kshape = (cout, cin // groups, 3, 3) if layout == "NCHW" else (3, 3, cin // groups, cout)
        if layout == "NHWC" and groups > 1:
            kshape = (3, 3, cout, 1)
        kl = "OIHW" if layout == "NCHW" else ("HWOI" if groups > 1 else "HWIO")
        y = relay.nn.conv2d(x, self.weight(f"{name}_w", *kshape), padding=(1, 1),
                            groups=groups, data_layout=layout, kernel_layout=kl)
        stats = [self.weight(f"{name}_{s}", cout, low=0.5, high=1.5)
                 for s in ("gamma", "beta", "mean", "var")]
        axis = layout.index("C")
        return relay.nn.relu(relay.nn.batch_norm(y, *stats, axis=axis)[0])

    def module(self, x: relay.Var, body) -> IRModule:
        return InferType()(IRModule.from_expr(relay.Function([x, *self.vars], body)))


def _run(net: Net, mod: IRModule, x_shape, rtol=1e-4, atol=1e-4) -> IRModule:
    out = optimize(mod, net.params)
    xv = net.rng.normal(size=x_shape).astype("float32")
    ref = ember.relay.create_executor("debug", mod=mod).evaluate()(xv, *net.params.values())
    got = ember.relay.create_executor("debug", mod=out).evaluate()(xv)
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=rtol, atol=atol)
    return out


def test_resnet_like_block_folds_and_fuses():
    net = Net(0)
    x = relay.var("data", shape=(1, 4, 8, 8))
    stem = net.conv_bn_relu(x, "stem", 4, 8)
    y = net.conv_bn_relu(stem, "b1", 8, 8)
    y = relay.nn.conv2d(y, net.weight("b2_w", 8, 8, 3, 3), padding=(1, 1))
    y = relay.nn.relu(relay.add(y, stem))  # the residual shares the stem's output
    y = relay.nn.batch_flatten(relay.nn.global_avg_pool2d(y))
    y = relay.nn.bias_add(relay.nn.dense(y, net.weight("fc_w", 10, 8)), net.weight("fc_b", 10))
    mod = net.module(x, relay.nn.softmax(y))
    out = _run(net, mod, (1, 4, 8, 8))
    assert primitive_names(out) == [
        "fused_nn_conv2d_add_nn_relu", "fused_nn_conv2d_add_nn_relu",
        "fused_nn_conv2d_add_nn_relu", "fused_nn_global_avg_pool2d",
        "fused_nn_batch_flatten", "fused_nn_dense_add", "fused_nn_softmax"]
    assert [p.name_hint for p in out["main"].params] == ["data"]


def test_mobilenet_like_depthwise_nhwc():
    net = Net(1)
    x = relay.var("data", shape=(1, 6, 6, 4))
    y = net.conv_bn_relu(x, "c1", 4, 4, layout="NHWC")
    y = net.conv_bn_relu(y, "dw", 4, 4, groups=4, layout="NHWC")
    y = net.conv_bn_relu(y, "pw", 4, 8, layout="NHWC")
    out = _run(net, net.module(x, y), (1, 6, 6, 4))
    assert primitive_names(out) == ["fused_nn_conv2d_add_nn_relu"] * 3


def test_inception_like_branches_and_concatenate():
    net = Net(2)
    x = relay.var("data", shape=(1, 4, 6, 6))
    a = net.conv_bn_relu(x, "a", 4, 4)
    b = net.conv_bn_relu(x, "b", 4, 6)
    pool = relay.nn.max_pool2d(x, pool_size=(3, 3), padding=(1, 1), strides=(1, 1))
    y = relay.concatenate([a, b, pool], axis=1)
    out = _run(net, net.module(x, y), (1, 4, 6, 6))
    names = primitive_names(out)
    assert names.count("fused_nn_conv2d_add_nn_relu") == 2 and len(names) == 4


def test_mlp_and_opt_level_zero_keeps_every_op_apart():
    net = Net(3)
    x = relay.var("data", shape=(2, 8))
    h = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, net.weight("w1", 16, 8)),
                                        net.weight("b1", 16)))
    h = relay.nn.dropout(h)
    y = relay.nn.softmax(relay.nn.bias_add(relay.nn.dense(h, net.weight("w2", 4, 16)),
                                           net.weight("b2", 4)))
    mod = net.module(x, y)
    out = _run(net, mod, (2, 8))
    assert primitive_names(out) == ["fused_nn_dense_add_nn_relu", "fused_nn_dense_add",
                                    "fused_nn_softmax"]
    low = optimize(mod, net.params, opt_level=0)
    assert "nn.dropout" not in low.astext()  # SimplifyInference runs at every level
    assert len(primitive_names(low)) == 6  # dense, bias_add, relu, dense, bias_add, softmax


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet", "mobilenet"])
def test_zoo_workloads(name):
    zoo = pytest.importorskip(f"ember.relay.testing.{name}")
    mod, params = zoo.get_workload(batch_size=1, num_classes=10, image_shape=(3, 32, 32))
    out = optimize(mod, params)
    text = out.astext(show_meta_data=False)
    assert "nn.batch_norm" not in text
    x = np.random.default_rng(0).normal(size=(1, 3, 32, 32)).astype("float32")
    bound = ember.relay.create_executor("debug", mod=mod, params=params)
    ref = bound.evaluate()(x)
    got = ember.relay.create_executor("debug", mod=out).evaluate()(x)
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-3, atol=1e-4)

"""Small models and build helpers shared by the AOT tests.

``CONFIGS`` names the executor/runtime combinations the tests run every model through;
``build`` compiles (C is cached by content hash, so rebuilding the same model is cheap);
``reference`` gives the interpreter's outputs, ``graph_outputs`` the graph executor's.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember as tvm
from ember import relay
from ember.relay.backend import Executor, Runtime
from ember.testing import find_c_compiler

RTOL = ATOL = 1e-5
needs_cc = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")

# id -> (executor options, runtime, PassContext config)
CONFIGS: dict[str, tuple[dict[str, Any], Runtime, dict[str, Any]]] = {
    "cpp-cpacked": ({}, Runtime("cpp"), {}),
    "cpp-packed": ({}, Runtime("cpp"), {"ember.aot.operator_calling_convention": "packed"}),
    "cpp-linked": ({"link-params": True}, Runtime("cpp"), {}),
    "crt-packed-unpacked": ({"unpacked-api": True}, Runtime("crt"), {}),
    "crt-c": ({"interface-api": "c", "unpacked-api": True}, Runtime("crt"), {}),
    "crt-c-linked": ({"interface-api": "c", "unpacked-api": True, "link-params": True},
                     Runtime("crt", {"system-lib": True}), {}),
}


def mlp(batch: int = 2, features: int = 16, hidden: tuple[int, ...] = (32, 16),
        classes: int = 10) -> tuple[tvm.IRModule, dict[str, np.ndarray]]:
    """dense + bias + relu layers, then softmax; weights as params."""
    rng = np.random.default_rng(1)
    data = relay.var("data", shape=(batch, features))
    y, params, prev = data, {}, features
    for i, units in enumerate(hidden + (classes,)):
        w = relay.var(f"fc{i}_weight", shape=(units, prev))
        b = relay.var(f"fc{i}_bias", shape=(units,))
        y = relay.nn.bias_add(relay.nn.dense(y, w), b)
        if i < len(hidden):
            y = relay.nn.relu(y)
        params[w.name_hint] = (rng.standard_normal((units, prev)) * 0.3).astype("float32")
        params[b.name_hint] = (rng.standard_normal(units) * 0.1).astype("float32")
        prev = units
    y = relay.nn.softmax(y)
    return tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(y), y)), params


def cnn(channels: int = 4, size: int = 8, classes: int = 10
        ) -> tuple[tvm.IRModule, dict[str, np.ndarray]]:
    """conv2d + batch_norm + relu + max_pool, a residual add, flatten, dense, softmax."""
    rng = np.random.default_rng(2)
    data = relay.var("data", shape=(1, 3, size, size))
    w = relay.var("conv_weight", shape=(channels, 3, 3, 3))
    w2 = relay.var("conv2_weight", shape=(channels, channels, 3, 3))
    bn = [relay.var(f"bn_{n}", shape=(channels,)) for n in ("gamma", "beta", "mean", "var")]
    y = relay.nn.conv2d(data, w, padding=(1, 1), channels=channels, kernel_size=(3, 3))
    y = relay.nn.relu(relay.nn.batch_norm(y, *bn)[0])
    z = relay.nn.conv2d(y, w2, padding=(1, 1), channels=channels, kernel_size=(3, 3))
    y = relay.add(y, relay.nn.relu(z))
    y = relay.nn.max_pool2d(y, pool_size=(2, 2), strides=(2, 2))
    y = relay.nn.batch_flatten(y)
    wd = relay.var("fc_weight", shape=(classes, channels * (size // 2) ** 2))
    y = relay.nn.softmax(relay.nn.dense(y, wd))
    params = {"conv_weight": (rng.standard_normal((channels, 3, 3, 3)) * 0.3).astype("float32"),
              "conv2_weight": (rng.standard_normal((channels, channels, 3, 3)) * 0.2
                               ).astype("float32"),
              "bn_gamma": (rng.random(channels) + 0.5).astype("float32"),
              "bn_beta": (rng.standard_normal(channels) * 0.1).astype("float32"),
              "bn_mean": (rng.standard_normal(channels) * 0.1).astype("float32"),
              "bn_var": (rng.random(channels) + 0.5).astype("float32"),
              "fc_weight": (rng.standard_normal((classes, channels * (size // 2) ** 2)) * 0.1
                            ).astype("float32")}
    return tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(y), y)), params


def inputs_for(mod: tvm.IRModule, params: dict[str, Any], seed: int = 0) -> dict[str, np.ndarray]:
    """Random values for the parameters of main that are not params."""
    rng = np.random.default_rng(seed)
    out = {}
    for p in mod["main"].params:
        if p.name_hint not in params:
            ty = p.type_annotation
            out[p.name_hint] = rng.standard_normal([int(d) for d in ty.shape]).astype(ty.dtype)
    return out


def build(mod: tvm.IRModule, config: str = "cpp-cpacked", params: dict[str, Any] | None = None,
          mod_name: str = "default", target: str = "llvm") -> Any:
    """``relay.build`` with the AOT executor configured as ``CONFIGS[config]``."""
    options, runtime, pass_config = CONFIGS[config]
    with tvm.transform.PassContext(opt_level=3, config=pass_config):
        return relay.build(mod, target, executor=Executor("aot", options), runtime=runtime,
                           params=params, mod_name=mod_name)


def run(factory: Any, inputs: dict[str, Any], mod_name: str = "default") -> list[np.ndarray]:
    """Create the executor, set ``inputs``, run, and return every output."""
    m = factory[mod_name](tvm.cpu(0))
    m.set_input(**inputs)
    m.run()
    return [m.get_output(i).numpy() for i in range(m.get_num_outputs())]


def flatten(value: Any) -> list[np.ndarray]:
    if hasattr(value, "fields"):
        return [x for f in value.fields for x in flatten(f)]
    if isinstance(value, (list, tuple)):
        return [x for f in value for x in flatten(f)]
    return [value.numpy() if hasattr(value, "numpy") else np.asarray(value)]


def reference(mod: tvm.IRModule, inputs: dict[str, Any], params: dict[str, Any] | None = None
              ) -> list[np.ndarray]:
    """The reference interpreter's outputs (flattened)."""
    func = relay.create_executor("debug", mod=mod).evaluate()
    return flatten(func(**inputs, **(params or {})))


def graph_outputs(mod: tvm.IRModule, inputs: dict[str, Any], params: dict[str, Any] | None = None
                  ) -> list[np.ndarray]:
    """The graph executor's outputs for the same build."""
    with tvm.transform.PassContext(opt_level=3):
        factory = relay.build(mod, "llvm", params=params)
    return run(factory, inputs)


def assert_outputs(actual: list[np.ndarray], expected: list[np.ndarray]) -> None:
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape and a.dtype == e.dtype
        np.testing.assert_allclose(a, e, rtol=RTOL, atol=ATOL)
